//! `aclrtGetMemUsageInfo`: what this process holds of a device's memory, by component (the
//! simulator's components and where their figures come from: `acl_notify_sim::mem::usage`).
//!
//! Checks in CANN's order: `src/acl/aclrt_impl/memory.cpp` (`aclrtGetMemUsageInfoImpl`: a
//! NULL `memUsageInfo`, then a NULL `outputNum`, 100000), then
//! `src/runtime/api/impl/api_error.cc` (`ApiErrorDecorator::GetMemUsageInfo`: `*outputNum` set
//! to 0 first, then `inputNum` 0 is 107000, then the device, 107001); the driver fills at most
//! `inputNum` entries and says how many (`src/runtime/driver/npu_driver_mem.cc`,
//! `NpuDriver::GetMemUsageInfo`: name, current and peak bytes; the reserved words untouched).

use std::ffi::c_char;

use crate::errmsg::{CallError, null_arg, param};
use crate::ffi::{Out, OutArray, aclError, api, put_field};
use crate::session::with_runtime;

/// `aclrtMemUsageInfo` (`acl_rt.h`).
#[derive(Debug)]
#[repr(C)]
pub struct aclrtMemUsageInfo {
    pub name: [c_char; 32],
    pub cur_mem_size: u64,
    pub mem_peak_size: u64,
    pub reserved: [usize; 8],
}

/// `aclError aclrtGetMemUsageInfo(int32_t deviceId, aclrtMemUsageInfo *memUsageInfo, size_t
/// inputNum, size_t *outputNum)`: fills up to `inputNum` entries, the components holding
/// memory now, the largest first; `*outputNum` is how many.
///
/// Codes: 100000 NULL `memUsageInfo` or `outputNum`; 107000 `inputNum` 0; 107001 a device the
/// machine does not have.
///
/// # Safety
///
/// `mem_usage_info` is NULL or valid for writing `input_num` entries; `output_num` is NULL or
/// valid for writing a `size_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetMemUsageInfo(
    device_id: i32,
    mem_usage_info: *mut aclrtMemUsageInfo,
    input_num: usize,
    output_num: *mut usize,
) -> aclError {
    // SAFETY: NULL or writable (`inputNum` entries, a `size_t`), by the caller's contract.
    let (entries, output_num) = unsafe {
        (
            OutArray::new(mem_usage_info, input_num),
            Out::new(output_num),
        )
    };
    api("aclrtGetMemUsageInfo", || {
        let entries = entries.check(|| null_arg("memUsageInfo"))?;
        let output_num = output_num.check(|| null_arg("outputNum"))?;
        output_num.put(0);
        if input_num == 0 {
            return Err(param("inputNum is 0: room for at least one component"));
        }
        let usage = with_runtime(|rt| {
            let d = rt.device_id(device_id)?;
            rt.backend().mem_usage(d).map_err(CallError::backend)
        })?;
        let n = usage.len().min(entries.len());
        for (i, u) in usage.iter().take(n).enumerate() {
            let mut name = [0 as c_char; 32];
            for (to, b) in name.iter_mut().zip(u.component.name().bytes().take(31)) {
                *to = b as c_char;
            }
            // Fields written one by one, the reserved words left as they are.
            let e = entries.at(i).bytes();
            put_field!(e, aclrtMemUsageInfo, name, name);
            put_field!(e, aclrtMemUsageInfo, cur_mem_size, u.current);
            put_field!(e, aclrtMemUsageInfo, mem_peak_size, u.peak);
        }
        output_num.put(n);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_entry_has_cann_s_layout() {
        assert_eq!(std::mem::size_of::<aclrtMemUsageInfo>(), 112);
        assert_eq!(std::mem::offset_of!(aclrtMemUsageInfo, cur_mem_size), 32);
        assert_eq!(std::mem::offset_of!(aclrtMemUsageInfo, mem_peak_size), 40);
    }
}
