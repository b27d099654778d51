//! Fault injection for checking the suite itself: with `ACL_NOTIFY_TEST_FAULT=<fault>`, the
//! simulator trials run against a wrapper that breaks one rule, and the cases guarding that
//! rule must fail. Not part of a normal run; `ACL_NOTIFY_TEST_FAULT` unset means no wrapper.
//!
//! Faults: `record_lost` (records are accepted and dropped), `wait_no_reset` (a wait leaves
//! the flag set, like an event), `timeout_forever` (wait timeouts never fire),
//! `stale_destroy_ok` (destroying a stale handle succeeds), `batch_reset_noop`,
//! `export_twice_ok` (a second export returns a key again), `whitelist_open` (import ignores
//! the whitelist by exporting every notify and every device buffer openly), `ids_leak` (destroy never frees the id).
//! `record_lost` drops count-notify records too.

use std::time::Duration;

use acl_notify_core::event::{
    EventOps, EventSpec, EventWaitStatus, FailureMode, IpcEventHandle, LatestRecord, RawEvent,
    StreamControl,
};
use acl_notify_core::{
    Backend, CntNotifyOps, CntRecord, CntWait, CreateFlags, DeviceMemory, ExportFlags, ExportKey,
    HostCall, HostOps, ImportFlags, MEM_EXPORT_DISABLE_PID_VALIDATION, NotifyInfo, NotifyResources,
    RawCntNotify, RawNotify, RawStream, ServerPid, Soc, StreamDestroy, StreamOps, StreamStatus,
    SyncWait, Timeout,
};
use acl_notify_sim::{Sim, SimError};

/// Selects the fault.
pub const ENV_FAULT: &str = "ACL_NOTIFY_TEST_FAULT";

/// A simulator with one rule broken.
#[derive(Debug)]
pub struct Faulty {
    inner: Sim,
    fault: Fault,
}

/// The rule [`Faulty`] breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Records are accepted and dropped.
    RecordLost,
    /// A wait leaves the flag set.
    WaitNoReset,
    /// Wait timeouts never fire.
    TimeoutForever,
    /// Destroying a stale handle succeeds.
    StaleDestroyOk,
    /// Batch reset does nothing.
    BatchResetNoop,
    /// A second export returns a key.
    ExportTwiceOk,
    /// Every export is open (the whitelist is ignored).
    WhitelistOpen,
    /// Destroy never frees the id.
    IdsLeak,
}

impl Fault {
    /// Parses the `ACL_NOTIFY_TEST_FAULT` value.
    pub fn parse(s: &str) -> Option<Fault> {
        Some(match s {
            "record_lost" => Fault::RecordLost,
            "wait_no_reset" => Fault::WaitNoReset,
            "timeout_forever" => Fault::TimeoutForever,
            "stale_destroy_ok" => Fault::StaleDestroyOk,
            "batch_reset_noop" => Fault::BatchResetNoop,
            "export_twice_ok" => Fault::ExportTwiceOk,
            "whitelist_open" => Fault::WhitelistOpen,
            "ids_leak" => Fault::IdsLeak,
            _ => return None,
        })
    }
}

impl Faulty {
    /// Wraps `inner`.
    pub fn new(inner: Sim, fault: Fault) -> Faulty {
        Faulty { inner, fault }
    }
}

impl Backend for Faulty {
    type Error = SimError;
    fn soc(&self) -> Soc {
        self.inner.soc()
    }
    fn device_count(&self) -> u32 {
        self.inner.device_count()
    }
    fn bare_tgid(&self) -> i32 {
        self.inner.bare_tgid()
    }
    fn server_id(&self) -> u32 {
        self.inner.server_id()
    }
    fn super_pod_device_id(&self, device: u32) -> Result<u32, SimError> {
        self.inner.super_pod_device_id(device)
    }
}

impl NotifyResources for Faulty {
    fn create_notify(&self, device: u32, flags: CreateFlags) -> Result<RawNotify, SimError> {
        self.inner.create_notify(device, flags)
    }
    fn destroy_notify(&self, notify: RawNotify) -> Result<(), SimError> {
        match self.fault {
            Fault::StaleDestroyOk => {
                let _ = self.inner.destroy_notify(notify);
                Ok(())
            }
            Fault::IdsLeak => {
                // Keep the id taken: export openly and hold an import (the id stays held).
                if let Ok(key) = self
                    .inner
                    .export_key(notify, ExportFlags::DISABLE_PID_VALIDATION)
                    && let Ok(info) = self.inner.notify_info(notify)
                {
                    let _ =
                        self.inner
                            .import_by_key(info.device, key.as_str(), ImportFlags::empty());
                }
                self.inner.destroy_notify(notify)
            }
            _ => self.inner.destroy_notify(notify),
        }
    }
    fn notify_info(&self, notify: RawNotify) -> Result<NotifyInfo, SimError> {
        self.inner.notify_info(notify)
    }
    fn export_key(&self, notify: RawNotify, flags: ExportFlags) -> Result<ExportKey, SimError> {
        match self.fault {
            Fault::ExportTwiceOk => match self.inner.export_key(notify, flags) {
                Err(e)
                    if acl_notify_core::BackendError::kind(&e)
                        == acl_notify_core::Error::InternalError =>
                {
                    let info = self.inner.notify_info(notify)?;
                    Ok(ExportKey::encode(&acl_notify_core::KeyFields {
                        server: 0,
                        device: info.device as u8,
                        id: info.id as u16,
                        generation: 1,
                        nonce: [1; 16],
                    }))
                }
                r => r,
            },
            Fault::WhitelistOpen => self
                .inner
                .export_key(notify, flags | ExportFlags::DISABLE_PID_VALIDATION),
            _ => self.inner.export_key(notify, flags),
        }
    }
    fn set_import_pids(&self, notify: RawNotify, pids: &[i32]) -> Result<(), SimError> {
        if self.fault == Fault::WhitelistOpen {
            return Ok(());
        }
        self.inner.set_import_pids(notify, pids)
    }
    fn set_import_server_pids(
        &self,
        notify: RawNotify,
        entries: &[ServerPid],
    ) -> Result<(), SimError> {
        self.inner.set_import_server_pids(notify, entries)
    }
    fn import_key(
        &self,
        device: u32,
        key: &ExportKey,
        flags: ImportFlags,
    ) -> Result<RawNotify, SimError> {
        self.inner.import_key(device, key, flags)
    }
    fn can_access_peer(&self, device: u32, peer: u32) -> Result<bool, SimError> {
        self.inner.can_access_peer(device, peer)
    }
    fn enable_peer_access(&self, device: u32, peer: u32) -> Result<(), SimError> {
        self.inner.enable_peer_access(device, peer)
    }
}

impl StreamOps for Faulty {
    fn create_stream(&self, device: u32) -> Result<RawStream, SimError> {
        self.inner.create_stream(device)
    }
    fn default_stream(&self, device: u32) -> Result<RawStream, SimError> {
        self.inner.default_stream(device)
    }
    fn stream_device(&self, stream: RawStream) -> Result<u32, SimError> {
        self.inner.stream_device(stream)
    }
    fn destroy_stream(&self, stream: RawStream, mode: StreamDestroy) -> Result<(), SimError> {
        self.inner.destroy_stream(stream, mode)
    }
    fn record(&self, notify: RawNotify, stream: RawStream) -> Result<(), SimError> {
        if self.fault == Fault::RecordLost {
            self.inner.notify_info(notify)?;
            self.inner.stream_device(stream)?;
            return Ok(());
        }
        self.inner.record(notify, stream)
    }
    fn wait_and_reset(
        &self,
        notify: RawNotify,
        stream: RawStream,
        timeout: Timeout,
    ) -> Result<(), SimError> {
        match self.fault {
            Fault::TimeoutForever => self.inner.wait_and_reset(notify, stream, Timeout::Forever),
            Fault::WaitNoReset => {
                self.inner.wait_and_reset(notify, stream, timeout)?;
                self.inner.record(notify, stream)
            }
            _ => self.inner.wait_and_reset(notify, stream, timeout),
        }
    }
    fn batch_reset(&self, notifies: &[RawNotify]) -> Result<(), SimError> {
        if self.fault == Fault::BatchResetNoop {
            return Ok(());
        }
        self.inner.batch_reset(notifies)
    }
    fn synchronize(&self, stream: RawStream, wait: SyncWait) -> Result<(), SimError> {
        self.inner.synchronize(stream, wait)
    }
    fn query(&self, stream: RawStream) -> Result<StreamStatus, SimError> {
        self.inner.query(stream)
    }
    fn launch_host_func(&self, stream: RawStream, call: HostCall) -> Result<(), SimError> {
        self.inner.launch_host_func(stream, call)
    }
    fn set_op_wait_timeout(&self, seconds: u32) -> Result<(), SimError> {
        self.inner.set_op_wait_timeout(seconds)
    }
}

impl HostOps for Faulty {
    fn host_wait(&self, notify: RawNotify, timeout: Duration) -> Result<(), SimError> {
        self.inner.host_wait(notify, timeout)
    }
    fn try_consume(&self, notify: RawNotify) -> Result<bool, SimError> {
        self.inner.try_consume(notify)
    }
    fn notifies_free(&self, device: u32) -> Result<u32, SimError> {
        self.inner.notifies_free(device)
    }
}

impl CntNotifyOps for Faulty {
    fn cnt_create(&self, device: u32) -> Result<RawCntNotify, SimError> {
        self.inner.cnt_create(device)
    }
    fn cnt_destroy(&self, cnt: RawCntNotify) -> Result<(), SimError> {
        self.inner.cnt_destroy(cnt)
    }
    fn cnt_id(&self, cnt: RawCntNotify) -> Result<u32, SimError> {
        self.inner.cnt_id(cnt)
    }
    fn cnt_record(
        &self,
        cnt: RawCntNotify,
        stream: RawStream,
        record: CntRecord,
    ) -> Result<(), SimError> {
        if self.fault == Fault::RecordLost {
            self.inner.cnt_id(cnt)?;
            self.inner.stream_device(stream)?;
            return Ok(());
        }
        self.inner.cnt_record(cnt, stream, record)
    }
    fn cnt_wait(
        &self,
        cnt: RawCntNotify,
        stream: RawStream,
        wait: CntWait,
    ) -> Result<(), SimError> {
        self.inner.cnt_wait(cnt, stream, wait)
    }
    fn cnt_reset(&self, cnt: RawCntNotify, stream: RawStream) -> Result<(), SimError> {
        self.inner.cnt_reset(cnt, stream)
    }
    fn cnt_notifies_free(&self, device: u32) -> Result<u32, SimError> {
        self.inner.cnt_notifies_free(device)
    }
}

impl EventOps for Faulty {
    fn event_create(&self, device: u32, spec: EventSpec) -> Result<RawEvent, SimError> {
        self.inner.event_create(device, spec)
    }
    fn event_destroy(&self, event: RawEvent) -> Result<(), SimError> {
        self.inner.event_destroy(event)
    }
    fn event_spec(&self, event: RawEvent) -> Result<(u32, EventSpec), SimError> {
        self.inner.event_spec(event)
    }
    /// `record_lost` drops event records too (the event stays unrecorded).
    fn event_record(&self, event: RawEvent, stream: RawStream) -> Result<(), SimError> {
        if self.fault == Fault::RecordLost {
            self.inner.event_spec(event)?;
            self.inner.stream_device(stream)?;
            return Ok(());
        }
        self.inner.event_record(event, stream)
    }
    fn event_reset(&self, event: RawEvent, stream: RawStream) -> Result<(), SimError> {
        self.inner.event_reset(event, stream)
    }
    fn stream_wait_event(
        &self,
        stream: RawStream,
        event: RawEvent,
        timeout: Timeout,
    ) -> Result<(), SimError> {
        self.inner.stream_wait_event(stream, event, timeout)
    }
    fn event_latest(&self, event: RawEvent) -> Result<LatestRecord, SimError> {
        self.inner.event_latest(event)
    }
    fn event_wait_status(&self, event: RawEvent) -> Result<EventWaitStatus, SimError> {
        self.inner.event_wait_status(event)
    }
    fn event_synchronize(&self, event: RawEvent, wait: SyncWait) -> Result<(), SimError> {
        self.inner.event_synchronize(event, wait)
    }
    fn event_timestamp(&self, event: RawEvent) -> Result<Duration, SimError> {
        self.inner.event_timestamp(event)
    }
    fn event_id(&self, event: RawEvent) -> Result<u32, SimError> {
        self.inner.event_id(event)
    }
    fn events_free(&self, device: u32) -> Result<u32, SimError> {
        self.inner.events_free(device)
    }
    fn ipc_event_handle(&self, event: RawEvent) -> Result<IpcEventHandle, SimError> {
        self.inner.ipc_event_handle(event)
    }
    fn ipc_open_event(&self, device: u32, handle: &IpcEventHandle) -> Result<RawEvent, SimError> {
        self.inner.ipc_open_event(device, handle)
    }
}

impl StreamControl for Faulty {
    fn set_failure_mode(&self, stream: RawStream, mode: FailureMode) -> Result<(), SimError> {
        self.inner.set_failure_mode(stream, mode)
    }
    fn abort(&self, stream: RawStream) -> Result<(), SimError> {
        self.inner.abort(stream)
    }
}

impl DeviceMemory for Faulty {
    fn mem_alloc(&self, device: u32, size: usize) -> Result<u64, SimError> {
        self.inner.mem_alloc(device, size)
    }
    fn mem_free(&self, device: u32, ptr: u64) -> Result<(), SimError> {
        self.inner.mem_free(device, ptr)
    }
    fn mem_write(&self, device: u32, dst: u64, src: &[u8]) -> Result<(), SimError> {
        self.inner.mem_write(device, dst, src)
    }
    fn mem_read(&self, device: u32, src: u64, dst: &mut [u8]) -> Result<(), SimError> {
        self.inner.mem_read(device, src, dst)
    }
    fn mem_copy(&self, device: u32, dst: u64, src: u64, len: usize) -> Result<(), SimError> {
        self.inner.mem_copy(device, dst, src, len)
    }
    fn mem_export(
        &self,
        device: u32,
        ptr: u64,
        size: usize,
        flags: u64,
    ) -> Result<ExportKey, SimError> {
        let flags = match (self.fault, flags) {
            (Fault::WhitelistOpen, 0) => MEM_EXPORT_DISABLE_PID_VALIDATION,
            _ => flags,
        };
        self.inner.mem_export(device, ptr, size, flags)
    }
    fn mem_allow_pids(&self, device: u32, key: &ExportKey, pids: &[i32]) -> Result<(), SimError> {
        self.inner.mem_allow_pids(device, key, pids)
    }
    fn mem_allow_server_pids(
        &self,
        device: u32,
        key: &ExportKey,
        entries: &[ServerPid],
    ) -> Result<(), SimError> {
        self.inner.mem_allow_server_pids(device, key, entries)
    }
    fn mem_import(&self, device: u32, key: &ExportKey, flags: u64) -> Result<u64, SimError> {
        self.inner.mem_import(device, key, flags)
    }
    fn mem_close(&self, device: u32, key: &ExportKey) -> Result<(), SimError> {
        self.inner.mem_close(device, key)
    }
    fn mem_set_attr(
        &self,
        device: u32,
        key: &ExportKey,
        kind: u32,
        attr: u64,
    ) -> Result<(), SimError> {
        self.inner.mem_set_attr(device, key, kind, attr)
    }
}
