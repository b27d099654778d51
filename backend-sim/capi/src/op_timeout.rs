//! Operator execution timeouts: `aclrtSetOpExecuteTimeOut` (seconds),
//! `aclrtSetOpExecuteTimeOutWithMs`, `aclrtSetOpExecuteTimeOutV2` (microseconds, answering the
//! time the hardware will use), `aclrtGetOpExecuteTimeout` (milliseconds) and
//! `aclrtGetOpTimeOutInterval` (the hardware's step, microseconds).
//!
//! As hicann/runtime `src/acl/aclrt_impl/event.cpp` and `device.cpp` (NULL out-parameters:
//! 100000), `src/runtime/api/impl/api_impl.cc` (`SetOpExecuteTimeOut`: a millisecond value is
//! capped at 1,000 s, `RT_MAX_OP_TIMEOUT_FOR_MS`; `SetOpExecuteTimeOutV2` and
//! `GetOpTimeOutInterval` need a current device), `src/runtime/core/src/runtime.cc`
//! (`ConvertTimeoutToUs`, one value for the process) and `src/runtime/core/src/kernel/
//! kernel_utils.cc` / `task/task_execute_time.cc` (the hardware counts a timeout in kernel
//! credits: a value is rounded up to whole credits, 0 or one beyond 254 credits is 254 credits,
//! and no value set means the default, 254 credits).
//!
//! The simulated device's credit is that of Ascend910B's task scheduler (STARS): 2^32 ns
//! (`src/runtime/config/910_B_93/dev_info_reg.cc`: 254 credits are 1,090,921,693.184 µs),
//! without the millisecond mode some firmware has; so the interval reads 4,294,967 µs and
//! the default timeout 1,090,922 ms, on every simulated SoC.
//!
//! What the simulator enforces: nothing. These timeouts bound AI Core operator (kernel) tasks,
//! and the simulator runs none; its waits time out by `aclrtSetOpWaitTimeout` and their own
//! timeouts. The values are kept, checked and read back, process-wide as CANN's.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::errmsg::null_arg;
use crate::ffi::{Out, aclError, api};
use crate::session::runtime;

/// One kernel credit of the simulated scheduler, in nanoseconds.
const CREDIT_NS: u128 = 1 << 32;
/// `RT_STARS_MAX_KERNEL_CREDIT_UINT32` / `RT_STARS_DEFAULT_KERNEL_CREDIT_UINT32`.
const MAX_CREDITS: u128 = 254;
/// `RT_MAX_OP_TIMEOUT_FOR_MS`.
const MAX_MS: u32 = 1_000_000;

/// Whether a timeout was set, and the one set (µs).
static SET: AtomicBool = AtomicBool::new(false);
static TIMEOUT_US: AtomicU64 = AtomicU64::new(0);

/// Keeps `us` as the process's timeout (CANN's `ConvertTimeoutToUs`: the largest value means
/// one less, never "never").
fn keep(us: u64) {
    TIMEOUT_US.store(us.min(u64::MAX - 1), Ordering::Relaxed);
    SET.store(true, Ordering::Release);
}

/// The credits the hardware uses for a timeout of `us`.
fn credits(us: u64) -> u128 {
    let ns = u128::from(us) * 1000;
    if us == 0 || ns > CREDIT_NS * MAX_CREDITS {
        MAX_CREDITS
    } else {
        ns.div_ceil(CREDIT_NS)
    }
}

/// `aclError aclrtSetOpExecuteTimeOut(uint32_t timeout)`: `timeout` seconds.
///
/// Codes: none.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSetOpExecuteTimeOut(timeout: u32) -> aclError {
    api("aclrtSetOpExecuteTimeOut", || {
        keep(u64::from(timeout) * 1_000_000);
        Ok(())
    })
}

/// `aclError aclrtSetOpExecuteTimeOutWithMs(uint32_t timeout)`: `timeout` milliseconds, at
/// most 1,000,000 (more is that).
///
/// Codes: none.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSetOpExecuteTimeOutWithMs(timeout: u32) -> aclError {
    api("aclrtSetOpExecuteTimeOutWithMs", || {
        keep(u64::from(timeout.min(MAX_MS)) * 1000);
        Ok(())
    })
}

/// `aclError aclrtSetOpExecuteTimeOutV2(uint64_t timeout, uint64_t *actualTimeout)`: `timeout`
/// microseconds; writes the time the hardware will use (whole credits, µs).
///
/// Codes: 100000 NULL `actualTimeout`; 107002 no current device.
///
/// # Safety
///
/// `actual_timeout` is NULL or valid for writing a `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtSetOpExecuteTimeOutV2(
    timeout: u64,
    actual_timeout: *mut u64,
) -> aclError {
    api("aclrtSetOpExecuteTimeOutV2", || {
        // SAFETY: `actual_timeout` is NULL or writable, by the caller's contract.
        unsafe { Out::new(actual_timeout) }.write(
            || null_arg("actualTimeout"),
            || {
                runtime()?.current_device()?;
                keep(timeout);
                let actual = (credits(timeout) * CREDIT_NS / 1000) as u64;
                Ok(actual)
            },
        )
    })
}

/// `aclError aclrtGetOpExecuteTimeout(uint32_t *const timeoutMs)`: the timeout the hardware
/// uses, in milliseconds rounded up (the default, 254 credits, when none was set).
///
/// Codes: 100000 NULL `timeoutMs`.
///
/// # Safety
///
/// `timeout_ms` is NULL or valid for writing a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetOpExecuteTimeout(timeout_ms: *mut u32) -> aclError {
    api("aclrtGetOpExecuteTimeout", || {
        // SAFETY: `timeout_ms` is NULL or writable, by the caller's contract.
        unsafe { Out::new(timeout_ms) }.write(
            || null_arg("timeoutMs"),
            || {
                let c = if SET.load(Ordering::Acquire) {
                    credits(TIMEOUT_US.load(Ordering::Relaxed))
                } else {
                    MAX_CREDITS
                };
                let ms = (c * CREDIT_NS).div_ceil(1_000_000) as u32;
                Ok(ms)
            },
        )
    })
}

/// `aclError aclrtGetOpTimeOutInterval(uint64_t *interval)`: the hardware's step for these
/// timeouts, in whole microseconds.
///
/// Codes: 100000 NULL `interval`; 107002 no current device.
///
/// # Safety
///
/// `interval` is NULL or valid for writing a `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetOpTimeOutInterval(interval: *mut u64) -> aclError {
    api("aclrtGetOpTimeOutInterval", || {
        // SAFETY: `interval` is NULL or writable, by the caller's contract.
        unsafe { Out::new(interval) }.write(
            || null_arg("interval"),
            || {
                runtime()?.current_device()?;
                Ok((CREDIT_NS / 1000) as u64)
            },
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_round_up_to_whole_credits_of_the_default_scheduler() {
        // 254 credits are CANN's documented 1,090,921,693.184 µs (in ns here).
        assert_eq!(MAX_CREDITS * CREDIT_NS, 1_090_921_693_184);
        assert_eq!(credits(1), 1);
        assert_eq!(credits(4_294_967), 1);
        assert_eq!(credits(4_294_968), 2);
        assert_eq!(credits(0), 254);
        assert_eq!(credits(u64::MAX - 1), 254);
    }
}
