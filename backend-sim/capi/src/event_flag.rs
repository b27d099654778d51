//! The event calls with an operation flag (`acl/acl_rt.h`): `aclrtRecordEventWithFlag` and
//! `aclrtStreamWaitEventWithFlag`. As hicann/runtime `src/acl/aclrt_impl/event.cpp` and
//! `stream.cpp`: NULL event first (100000), then the flag (100000, `ACL_ERROR_INVALID_PARAM`, as
//! `ACL_CHECK_INVALID_VALUE_WITH_EXPECT_RET` returns it there, for anything but DEFAULT or
//! EXTERNAL), then for an external wait the timeout (100000 unless 0); the DEFAULT flag is a
//! plain `aclrtRecordEvent` / `aclrtStreamWaitEventWithTimeout`
//! (`src/runtime/api/api_c_stream.cc`, `rtStreamWaitEventWithFlag`); the EXTERNAL flag is a
//! record or wait of the caller's event inside a capture (`runtime::event`,
//! `external_event_task`), 107029 outside one.

use acl_notify_core::Timeout;

use crate::errmsg::{acl_param, null_arg};
use crate::ffi::{aclError, aclrtStream, api, handle};
use crate::ffi_event::aclrtEvent;
use crate::session::runtime;

/// `ACL_EVENT_RECORD_DEFAULT` / `ACL_EVENT_WAIT_DEFAULT`.
const DEFAULT: u32 = 0;
/// `ACL_EVENT_RECORD_EXTERNAL` / `ACL_EVENT_WAIT_EXTERNAL`.
const EXTERNAL: u32 = 1;

/// `aclError aclrtRecordEventWithFlag(aclrtEvent event, aclrtStream stream, uint32_t flag)`.
///
/// Codes: 100000 NULL event, or a flag other than `ACL_EVENT_RECORD_DEFAULT` (0) or
/// `ACL_EVENT_RECORD_EXTERNAL` (1); 107029 EXTERNAL on a stream that is not capturing; then
/// as `aclrtRecordEvent`.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtRecordEventWithFlag(
    event: aclrtEvent,
    stream: aclrtStream,
    flag: u32,
) -> aclError {
    api("aclrtRecordEventWithFlag", || {
        if event.is_null() {
            return Err(null_arg("event"));
        }
        let rt = runtime()?;
        match flag {
            DEFAULT => rt.record_event(handle(event), handle(stream)),
            EXTERNAL => rt.external_event_task(handle(event), handle(stream), true),
            _ => Err(acl_param(format!(
                "flag {flag:#x}: ACL_EVENT_RECORD_DEFAULT (0) or ACL_EVENT_RECORD_EXTERNAL (1)"
            ))),
        }
    })
}

/// `aclError aclrtStreamWaitEventWithFlag(aclrtStream stream, aclrtEvent event, uint32_t
/// timeout, uint32_t flag)`: DEFAULT waits as `aclrtStreamWaitEventWithTimeout` (`timeout` in
/// seconds, 0 for ever); EXTERNAL (only with `timeout` 0) captures a wait for a record made
/// outside the model.
///
/// Codes: 100000 NULL event, a flag other than `ACL_EVENT_WAIT_DEFAULT` (0) or
/// `ACL_EVENT_WAIT_EXTERNAL` (1), or EXTERNAL with a timeout; 107029 EXTERNAL on a stream that
/// is not capturing; then as `aclrtStreamWaitEvent`.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtStreamWaitEventWithFlag(
    stream: aclrtStream,
    event: aclrtEvent,
    timeout: u32,
    flag: u32,
) -> aclError {
    api("aclrtStreamWaitEventWithFlag", || {
        if event.is_null() {
            return Err(null_arg("event"));
        }
        let rt = runtime()?;
        match flag {
            DEFAULT => {
                rt.stream_wait_event(handle(stream), handle(event), Timeout::from_c(timeout))
            }
            EXTERNAL if timeout != 0 => Err(acl_param(format!(
                "timeout {timeout}: 0 when flag is ACL_EVENT_WAIT_EXTERNAL"
            ))),
            EXTERNAL => rt.external_event_task(handle(event), handle(stream), false),
            _ => Err(acl_param(format!(
                "flag {flag:#x}: ACL_EVENT_WAIT_DEFAULT (0) or ACL_EVENT_WAIT_EXTERNAL (1)"
            ))),
        }
    })
}
