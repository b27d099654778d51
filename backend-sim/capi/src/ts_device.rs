//! `aclrtSetTsDevice`: chooses the task scheduler (AI Core or AI Vector) a device's tasks go
//! to, on a chip with two of them.
//!
//! As hicann/runtime `src/acl/aclrt_impl/device.cpp` (`aclrtSetTsDeviceImpl`: an id other than
//! `ACL_TS_ID_AICORE` or `ACL_TS_ID_AIVECTOR` is 100000) and `src/runtime/api/api_c_device.cc`
//! (`rtSetTSDevice`: on a chip with one task scheduler the call succeeds and changes nothing).
//! Every chip the simulator models has one (`tsCount = 1` in `src/runtime/config/*/
//! dev_info_reg.cc` for 950, 910_B_93, dc, cloud, mini_v3, 350; only adc, mc32dm11a and
//! mc62cm12a have two), so after the check there is nothing to choose.

use acl_notify_core::Error;

use crate::errmsg::CallError;
use crate::ffi::{aclError, api};

/// `ACL_TS_ID_AICORE`, `ACL_TS_ID_AIVECTOR`.
const TS_IDS: [i32; 2] = [0, 1];

/// 100000 unless `ts` is a task scheduler id.
fn check(ts: i32) -> Result<(), CallError> {
    if TS_IDS.contains(&ts) {
        return Ok(());
    }
    Err(CallError::new(
        Error::InvalidParam,
        format!("tsId {ts} is neither ACL_TS_ID_AICORE (0) nor ACL_TS_ID_AIVECTOR (1)"),
    ))
}

/// `aclError aclrtSetTsDevice(aclrtTsId tsId)`: succeeds for either id; the simulated chips
/// have one task scheduler, so nothing changes (see the module).
///
/// Codes: 100000 an id other than 0 or 1.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSetTsDevice(ts: i32) -> aclError {
    api("aclrtSetTsDevice", || check(ts))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_two_ids_are_accepted() {
        assert!(check(0).is_ok() && check(1).is_ok());
        for bad in [2, -1, 99] {
            assert_eq!(check(bad).unwrap_err().code(), Error::InvalidParam);
        }
    }
}
