//! `aclrtGetDeviceUtilizationRate`: how busy a device has been, from how long its streams
//! were busy running tasks (`acl_notify_sim::Sim::streams_busy_ns`, the stream engine's one
//! utilization hook).
//!
//! As hicann/runtime `src/acl/aclrt_impl/device.cpp` (`aclrtGetDeviceUtilizationRateImpl`:
//! NULL `utilizationInfo` 100000; a non-NULL `utilizationExtend`, reserved, 100000; then each
//! of the Cube, Vector and AI CPU figures from `rtGetAllUtilizations`, and -1 for one the
//! runtime does not give — the call still succeeds; the memory figure is always -1), with
//! `src/runtime/api/impl/api_error.cc` / `api_impl.cc` (`GetAllUtilizations`: a device the
//! machine lacks, or one that is not the current context's, fails the query) and
//! `src/runtime/driver/npu_driver.cc` (the driver's `INFO_TYPE_UTILIZATION`, a percentage).
//! CANN's product list has no IPV350: there every figure is -1.
//!
//! The simulator runs no kernels, so its Cube, Vector and AI CPU figures are one and the same:
//! the share of the window during which the device's streams were busy (running a task, a
//! task that waits included; see `stream::worker::Idle`), the streams' busy times added up and
//! capped at 100 %. The window is the time since this process last asked about the device,
//! or, the first time, the lives of its streams. A figure that is -1 is explained in
//! `aclGetRecentErrMsg` although the call succeeds, and its code kept as the thread's last
//! error (`aclrtGetLastError`), as CANN's runtime keeps the code of its failed query.

use std::collections::HashMap;

use acl_notify_core::{Backend, Error};
use acl_notify_sim::{PerProcess, StreamBusy};

use crate::errmsg::{self, CallError, null_arg};
use crate::ffi::{Out, aclError, api, put_field};
use crate::session::with_runtime;

/// CANN's `DEVICE_UTILIZATION_NOT_SUPPORT`.
const NOT_GIVEN: i32 = -1;

/// `aclrtUtilizationInfo`.
#[repr(C)]
#[derive(Debug)]
pub struct AclrtUtilizationInfo {
    cube_utilization: i32,
    vector_utilization: i32,
    aicpu_utilization: i32,
    memory_utilization: i32,
    utilization_extend: *mut core::ffi::c_void,
}

/// A device's last reading: when, and each stream's busy time then.
struct Reading {
    at: u64,
    busy: HashMap<u64, u64>,
}

/// Per device, the reading of the previous query (the next one's window starts there); a
/// `PerProcess`, so that a forked child never finds the parent's lock held (and starts its
/// windows afresh).
static LAST: PerProcess<HashMap<u32, Reading>> = PerProcess::new(HashMap::new);

/// The busy percentage of a device over the window since `last` (or, without one, the
/// streams' lives), given its streams' reading `streams` at `now`; `last` becomes this one.
fn percent(last: &mut Option<Reading>, now: u64, streams: &[StreamBusy]) -> i32 {
    let (start, before) = match last.take() {
        Some(r) => (r.at, r.busy),
        None => (
            streams.iter().map(|s| s.born).min().unwrap_or(now),
            HashMap::new(),
        ),
    };
    let busy: u64 = streams
        .iter()
        .map(|s| {
            s.busy
                .saturating_sub(before.get(&s.handle).copied().unwrap_or(0))
        })
        .sum();
    *last = Some(Reading {
        at: now,
        busy: streams.iter().map(|s| (s.handle, s.busy)).collect(),
    });
    let window = now.saturating_sub(start);
    if window == 0 {
        return 0;
    }
    (busy.saturating_mul(100) / window).min(100) as i32
}

/// `aclError aclrtGetDeviceUtilizationRate(int32_t deviceId, aclrtUtilizationInfo
/// *utilizationInfo)`: the device's Cube, Vector and AI CPU utilization in percent (-1: not
/// given) and its memory utilization (-1: CANN gives none).
///
/// Codes: 100000 NULL `utilizationInfo`, or its `utilizationExtend` not NULL. A device the
/// machine lacks, one that is not the current context's, or IPV350 succeeds with -1 figures
/// (and a message).
///
/// # Safety
///
/// `utilizationInfo` is NULL or valid for reading and writing an `aclrtUtilizationInfo`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetDeviceUtilizationRate(
    device_id: i32,
    utilization_info: *mut AclrtUtilizationInfo,
) -> aclError {
    // SAFETY: NULL or readable and writable, by the caller's contract.
    let info = unsafe { Out::new(utilization_info) };
    api("aclrtGetDeviceUtilizationRate", || {
        let info = info.check(|| null_arg("utilizationInfo"))?.bytes();
        // SAFETY: the caller's contract: an in/out struct; this field is read alone.
        let extend: *mut core::ffi::c_void = unsafe {
            info.read_at(std::mem::offset_of!(
                AclrtUtilizationInfo,
                utilization_extend
            ))
        };
        if !extend.is_null() {
            return Err(CallError::new(
                Error::InvalidParam,
                "utilizationInfo->utilizationExtend is reserved and must be NULL",
            ));
        }
        let figure = with_runtime(|rt| {
            if rt.backend().soc().npu_arch().is_none() {
                return Err(CallError::new(
                    Error::FeatureNotSupport,
                    format!("{} gives no utilization", rt.backend().soc()),
                ));
            }
            let device = rt.device_id(device_id)?;
            let (current, _) = rt.current()?;
            if current != device {
                return Err(CallError::new(
                    Error::ContextNull,
                    format!(
                        "device {device} is not the current context's (device {current}): set it \
                         first"
                    ),
                ));
            }
            let (now, streams) = rt.backend().streams_busy_ns(device);
            let mut last = LAST.lock().map_err(CallError::backend)?;
            let mut entry = last.remove(&device);
            let p = percent(&mut entry, now, &streams);
            if let Some(r) = entry {
                last.insert(device, r);
            }
            Ok(p)
        })
        .unwrap_or_else(|e| {
            // CANN's runtime query failed: the runtime keeps its code as the thread's last
            // error and logs why, while the call goes on (`GetAllUtilizations`).
            errmsg::record(
                "aclrtGetDeviceUtilizationRate's utilization query (its figures are -1)",
                &e,
            );
            NOT_GIVEN
        });
        put_field!(info, AclrtUtilizationInfo, cube_utilization, figure);
        put_field!(info, AclrtUtilizationInfo, vector_utilization, figure);
        put_field!(info, AclrtUtilizationInfo, aicpu_utilization, figure);
        put_field!(info, AclrtUtilizationInfo, memory_utilization, NOT_GIVEN);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(handle: u64, born: u64, busy: u64) -> StreamBusy {
        StreamBusy { handle, born, busy }
    }

    #[test]
    fn the_window_starts_at_the_last_reading_and_busy_times_add_up_to_100() {
        let mut last = None;
        // First: the streams' lives (1,000 ns), one busy 250 of them.
        assert_eq!(percent(&mut last, 1_000, &[s(1, 0, 250), s(2, 500, 0)]), 25);
        // Next 1,000 ns: stream 1 busy 500 more, stream 2 busy 300: 80 %.
        assert_eq!(
            percent(&mut last, 2_000, &[s(1, 0, 750), s(2, 500, 300)]),
            80
        );
        // Two streams busy the whole window: capped at 100.
        assert_eq!(
            percent(&mut last, 3_000, &[s(1, 0, 1_750), s(2, 500, 1_300)]),
            100
        );
        // A stream made in the window counts from its birth; one gone counts no more.
        assert_eq!(percent(&mut last, 4_000, &[s(3, 3_500, 100)]), 10);
        // No stream: idle.
        assert_eq!(percent(&mut last, 5_000, &[]), 0);
        assert_eq!(percent(&mut None, 10, &[]), 0);
    }
}
