//! Memory-semantics synchronisation (`aclrtValueWrite`, `aclrtValueWait`): stream tasks that
//! write a 64-bit value into device memory and wait until the 64-bit value at a device address
//! meets a condition (`acl_notify_sim::mem::ValueCondition`; the simulator's side is
//! `Sim::value_write` / `Sim::value_wait`).
//!
//! CANN documents them on Ascend910_93 (A3) and Ascend910B (A2) only (its pages mark
//! Ascend950PR/DT unsupported); elsewhere 207000, after the argument checks. Codes: 100000
//! `devAddr` NULL; 107000 an unknown flag (`aclrtValueWrite` takes 0 only), an address not
//! 8-byte aligned, or one that is not 8 bytes of a live device allocation of this process; the
//! stream checks (107017, 107002, 107003).

use std::ffi::c_void;

use acl_notify_core::{Backend as _, Error, Soc};
use acl_notify_sim::mem::ValueCondition;

use crate::errmsg::{CallError, null_arg, param};
use crate::ffi::{aclError, aclrtStream, api};
use crate::runtime::capture::Captured;
use crate::session::runtime;

/// 207000 off the SoCs that have value tasks.
fn require_value_tasks(soc: Soc, call: &str) -> Result<(), CallError> {
    match soc {
        Soc::Ascend910_93 | Soc::Ascend910B => Ok(()),
        other => Err(CallError::new(
            Error::FeatureNotSupport,
            format!(
                "{call}: {} has no memory-semantics synchronisation (CANN documents it on \
                 Ascend910_93 and Ascend910B only)",
                other.name()
            ),
        )),
    }
}

/// `aclError aclrtValueWrite(void *devAddr, uint64_t value, uint32_t flag, aclrtStream
/// stream)`: queues a store of `value` into the 8 bytes at `devAddr`.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtValueWrite(
    dev_addr: *mut c_void,
    value: u64,
    flag: u32,
    stream: aclrtStream,
) -> aclError {
    api("aclrtValueWrite", || {
        if dev_addr.is_null() {
            return Err(null_arg("devAddr"));
        }
        if flag != 0 {
            return Err(param(format!(
                "flag {flag:#x}: it is reserved and must be 0"
            )));
        }
        let rt = runtime()?;
        require_value_tasks(rt.backend().soc(), "aclrtValueWrite")?;
        let task = Captured::ValueWrite {
            addr: dev_addr.addr(),
            value,
        };
        if rt.capture(stream.addr(), task)? {
            return Ok(());
        }
        let s = rt.resolve_launch(stream.addr())?;
        rt.backend()
            .value_write(dev_addr.addr(), value, s)
            .map_err(CallError::backend)
    })
}

/// `aclError aclrtValueWait(void *devAddr, uint64_t value, uint32_t flag, aclrtStream
/// stream)`: queues a wait until the 8 bytes at `devAddr` meet `flag`'s condition
/// (`ACL_STREAM_WAIT_VALUE_GEQ`, `_EQ`, `_AND`, `_NOR`) against `value`.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtValueWait(
    dev_addr: *mut c_void,
    value: u64,
    flag: u32,
    stream: aclrtStream,
) -> aclError {
    api("aclrtValueWait", || {
        if dev_addr.is_null() {
            return Err(null_arg("devAddr"));
        }
        let Some(cond) = ValueCondition::from_flag(flag) else {
            return Err(param(format!(
                "flag {flag:#x} is none of ACL_STREAM_WAIT_VALUE_GEQ (0), _EQ (1), _AND (2), \
                 _NOR (3)"
            )));
        };
        let rt = runtime()?;
        require_value_tasks(rt.backend().soc(), "aclrtValueWait")?;
        let task = Captured::ValueWait {
            addr: dev_addr.addr(),
            value,
            cond,
        };
        if rt.capture(stream.addr(), task)? {
            return Ok(());
        }
        let s = rt.resolve_launch(stream.addr())?;
        rt.backend()
            .value_wait(dev_addr.addr(), value, cond, s)
            .map_err(CallError::backend)
    })
}
