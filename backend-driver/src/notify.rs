//! Notifies ([`NotifyResources`], and the host-side waits of [`HostOps`]) over the library's
//! `aclrt*Notify*` functions and the `aclnsim*` extensions: the notify table's entries, the
//! checks a C function makes before its handle check ([`Before`]), create, destroy, record,
//! wait, export, import and whitelists.

use std::ffi::{CString, c_char, c_void};
use std::time::Duration;

use acl_notify_core::{
    CreateFlags, Error, ExportFlags, ExportKey, Feature, HostOps, ImportFlags, Lifecycle,
    NotifyInfo, NotifyResources, Op, RawNotify, ServerPid, key::KEY_BUF_LEN,
};
use acl_notify_handles::Guard;

use crate::ffi;
use crate::{CPtr, Driver, DriverError, Inner, NotifyEntry, device_arg, enter};

/// Checks a C function runs before its handle check (SPEC §3), which this driver must answer
/// itself for a handle it never passes to C.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Before {
    Nothing,
    /// `aclrtNotifySetImportPid`: "SoC without IPC → 207000" precedes "107017".
    IpcSupport,
    /// `aclrtNotifyBatchReset`, per element: "SoC without batch reset → 207000" precedes
    /// "107017".
    BatchReset,
    /// `aclrtNotifySetImportPidInterServer`: "num == 0 → 107000" precedes "107017".
    NonEmpty(usize),
}

/// What a SoC without [`Feature::Ipc`] lacks, in its 207000.
const NOTIFY_IPC: &str = "notify IPC (export, import, whitelists)";

impl Inner {
    pub(crate) fn notify(&self, n: RawNotify) -> Result<Guard<'_, NotifyEntry>, DriverError> {
        self.notify_for(n, Before::Nothing)
    }

    /// A use of a notify handle. For a handle that is not live the answer is the one the
    /// runtime's check order (SPEC §3) gives for an invalid handle: a SoC without notifies
    /// (IPV350) answers 207000 to every notify call, and `before` names the checks the
    /// function runs ahead of its handle check; only then 107017.
    pub(crate) fn notify_for(
        &self,
        n: RawNotify,
        before: Before,
    ) -> Result<Guard<'_, NotifyEntry>, DriverError> {
        self.notifies
            .acquire(n.0)
            .map_err(|_| self.invalid_notify(n, before))
    }

    pub(crate) fn invalid_notify(&self, n: RawNotify, before: Before) -> DriverError {
        if !self.soc.has(Feature::Notify) {
            return self.lacks("notifies");
        }
        match before {
            Before::IpcSupport if !self.soc.has(Feature::Ipc) => self.lacks(NOTIFY_IPC),
            Before::BatchReset if !self.soc.has(Feature::BatchReset) => {
                self.lacks("aclrtNotifyBatchReset")
            }
            Before::NonEmpty(0) => {
                DriverError::local(Error::ParamInvalid, "the entry list is empty")
            }
            _ => DriverError::stale("notify", n.0),
        }
    }

    pub(crate) fn insert_notify(&self, e: NotifyEntry) -> Result<RawNotify, DriverError> {
        enter(&self.notifies, e, "notify", || {
            // SAFETY: `e.ptr` was just returned by the library and is not in any table, so
            // this is its one destruction.
            let _ = unsafe { (self.api.aclrtDestroyNotify)(e.ptr.0) };
        })
        .map(RawNotify)
    }
}

impl NotifyResources for Driver {
    fn create_notify(&self, device: u32, flags: CreateFlags) -> Result<RawNotify, DriverError> {
        let i = &*self.inner;
        i.ensure_device(device)?;
        let mut p: *mut c_void = core::ptr::null_mut();
        // SAFETY: valid out-pointer; the flag word is passed through for the runtime to check.
        let code = unsafe { (i.api.aclrtCreateNotify)(&mut p, flags.bits()) };
        i.check("aclrtCreateNotify", code)
            .map_err(|e| e.context(format!("creating a notify on device {device}")))?;
        if p.is_null() {
            return Err(DriverError::local(
                Error::DrvInternalError,
                "aclrtCreateNotify reported success but returned a NULL notify",
            ));
        }
        i.insert_notify(NotifyEntry {
            ptr: CPtr(p),
            device,
            owner_device: device,
            owner_server: i.server_id,
            state: Lifecycle::Created,
            flags,
            id: None,
        })
    }

    fn destroy_notify(&self, notify: RawNotify) -> Result<(), DriverError> {
        let i = &*self.inner;
        let e = i
            .notifies
            .begin_close(notify.0, |_| true)
            .map_err(|_| i.invalid_notify(notify, Before::Nothing))?;
        let result = i.ensure_device(e.device).and_then(|()| {
            // SAFETY: the handle is closing and no call is using it; the pointer is live.
            let code = unsafe { (i.api.aclrtDestroyNotify)(e.ptr.0) };
            i.check("aclrtDestroyNotify", code)
        });
        i.notifies.finish_close(notify.0, result.is_ok());
        result.map_err(|e| e.context(format!("notify handle {:#x}", notify.0)))
    }

    fn notify_info(&self, notify: RawNotify) -> Result<NotifyInfo, DriverError> {
        let i = &*self.inner;
        let g = i.notify(notify)?;
        let e = g.get();
        let id = match e.id {
            Some(id) => id,
            None => {
                i.ensure_device(e.device)?;
                let mut id = 0u32;
                // SAFETY: live pointer (guarded), valid out-pointer.
                let code = unsafe { (i.api.aclrtGetNotifyId)(e.ptr.0, &mut id) };
                i.check("aclrtGetNotifyId", code)
                    .map_err(|err| err.context(format!("notify handle {:#x}", notify.0)))?;
                let _ = i.notifies.update(notify.0, |v| v.id = Some(id));
                id
            }
        };
        // Read the state again: it may have changed while the id was fetched.
        let state = i
            .notifies
            .update(notify.0, |_| {})
            .map(|v| v.state)
            .unwrap_or(e.state);
        Ok(NotifyInfo {
            id,
            device: e.device,
            owner_device: e.owner_device,
            owner_server: e.owner_server,
            state,
            flags: e.flags,
        })
    }

    fn export_key(&self, notify: RawNotify, flags: ExportFlags) -> Result<ExportKey, DriverError> {
        let i = &*self.inner;
        let g = i.notify(notify)?;
        let e = g.get();
        i.ensure_device(e.device)?;
        let mut buf = [0u8; KEY_BUF_LEN];
        // SAFETY: live pointer; `buf` is writable for exactly the `len` passed.
        let code = unsafe {
            (i.api.aclrtNotifyGetExportKey)(
                e.ptr.0,
                buf.as_mut_ptr().cast::<c_char>(),
                buf.len(),
                flags.bits(),
            )
        };
        i.check("aclrtNotifyGetExportKey", code)
            .map_err(|err| err.context(format!("notify handle {:#x}", notify.0)))?;
        let _ = i.notifies.update(notify.0, |v| {
            v.state = match v.state.apply(Op::Export(flags.pid_validation())) {
                Ok(s) => s,
                // The runtime exported it although our record disagrees: trust the runtime.
                Err(_) if flags.pid_validation() == acl_notify_core::PidValidation::Disabled => {
                    Lifecycle::ExportedOpen
                }
                Err(_) => Lifecycle::Exported,
            }
        });
        // A real runtime writes its own key format: carry it opaquely (`from_runtime_c`
        // keeps our own keys native, so their fields stay readable).
        ExportKey::from_runtime_c(&buf).map_err(|_| {
            let terminated = buf.contains(&0);
            DriverError::local(
                Error::DrvInternalError,
                format!(
                    "aclrtNotifyGetExportKey succeeded for notify handle {:#x}, but the key it \
                     wrote is {}. The notify is exported on the C side; destroy it if the key \
                     cannot be used",
                    notify.0,
                    if terminated {
                        "empty or has characters outside printable ASCII"
                    } else {
                        "not NUL-terminated within the 65-byte buffer"
                    }
                ),
            )
        })
    }

    fn set_import_pids(&self, notify: RawNotify, pids: &[i32]) -> Result<(), DriverError> {
        let i = &*self.inner;
        let g = i.notify_for(notify, Before::IpcSupport)?;
        let e = g.get();
        i.ensure_device(e.device)?;
        // The C prototype takes `int32_t *`; give it memory of our own rather than casting away
        // the slice's constness. An empty list still gets a valid pointer (num = 0).
        let mut owned: Vec<i32> = if pids.is_empty() {
            vec![0]
        } else {
            pids.to_vec()
        };
        // SAFETY: live pointer; `owned` holds at least `pids.len()` elements.
        let code =
            unsafe { (i.api.aclrtNotifySetImportPid)(e.ptr.0, owned.as_mut_ptr(), pids.len()) };
        i.check("aclrtNotifySetImportPid", code)
            .map_err(|err| err.context(format!("notify handle {:#x}", notify.0)))?;
        let _ = i.notifies.update(notify.0, |v| {
            v.state = v
                .state
                .apply(Op::SetImportPid)
                .unwrap_or(Lifecycle::Whitelisted);
        });
        Ok(())
    }

    fn set_import_server_pids(
        &self,
        notify: RawNotify,
        entries: &[ServerPid],
    ) -> Result<(), DriverError> {
        let i = &*self.inner;
        let g = i.notify_for(notify, Before::NonEmpty(entries.len()))?;
        let e = g.get();
        i.ensure_device(e.device)?;
        let (pids, mut c_entries) = ffi::server_pid_array(entries);
        // SAFETY: live pointer; `c_entries` has `entries.len()` (+1 spare) elements whose `pid`
        // pointers each point at one element of `pids`, which is neither moved nor resized
        // until after the call.
        let code = unsafe {
            (i.api.aclrtNotifySetImportPidInterServer)(
                e.ptr.0,
                c_entries.as_mut_ptr(),
                entries.len(),
            )
        };
        drop(c_entries);
        drop(pids);
        let result = i.check("aclrtNotifySetImportPidInterServer", code);
        // The runtime applies entries in order and keeps those applied before a failure. The
        // only failure that can follow applied entries is 207012 (the checks before it are the
        // same for every entry, so they fail on the first): from Exported (an empty list) that
        // means 64 entries went in, so the handle is Whitelisted either way.
        let applied = match &result {
            Ok(()) => true,
            Err(err) => err.kind() == Error::OverLimit && e.state == Lifecycle::Exported,
        };
        if applied {
            let _ = i.notifies.update(notify.0, |v| {
                v.state = v
                    .state
                    .apply(Op::SetImportPid)
                    .unwrap_or(Lifecycle::Whitelisted);
            });
        }
        result.map_err(|err| err.context(format!("notify handle {:#x}", notify.0)))
    }

    /// The runtime takes the key's text: a parsed key is handed on as it reads.
    fn import_key(
        &self,
        device: u32,
        key: &ExportKey,
        flags: ImportFlags,
    ) -> Result<RawNotify, DriverError> {
        self.import_by_key(device, key.as_str(), flags)
    }

    /// Text goes to the runtime as it is (not parsed here): malformed keys are the runtime's
    /// 107000 to give, after its own earlier checks.
    fn import_by_key(
        &self,
        device: u32,
        key: &str,
        flags: ImportFlags,
    ) -> Result<RawNotify, DriverError> {
        let i = &*self.inner;
        // A C string cannot carry an interior NUL; anything else goes to the runtime, which
        // decides (malformed keys are its 107000 to give, after its own earlier checks).
        let c_key = CString::new(key).map_err(|_| {
            // The runtime's order: "SoC without IPC → 207000" precedes the key checks.
            if i.soc.has(Feature::Ipc) {
                DriverError::local(Error::ParamInvalid, "the key contains a NUL byte")
            } else {
                i.lacks(NOTIFY_IPC)
            }
        })?;
        i.ensure_device(device)?;
        let mut p: *mut c_void = core::ptr::null_mut();
        // SAFETY: valid out-pointer; `c_key` is NUL-terminated and outlives the call.
        let code = unsafe {
            (i.api.aclrtNotifyImportByKey)(&mut p, c_key.as_ptr(), u64::from(flags.bits()))
        };
        i.check("aclrtNotifyImportByKey", code)
            .map_err(|e| e.context(format!("importing a key onto device {device}")))?;
        if p.is_null() {
            return Err(DriverError::local(
                Error::DrvInternalError,
                "aclrtNotifyImportByKey reported success but returned a NULL notify",
            ));
        }
        // The owner's device and server come from the key. A key this binding cannot parse (a
        // runtime with its own key format) leaves them unknown: they are reported as this
        // handle's device and this process's server.
        let (owner_device, owner_server) = match ExportKey::parse(key.as_bytes())
            .ok()
            .and_then(|k| k.fields())
        {
            Some(f) => (u32::from(f.device), u32::from(f.server)),
            None => (device, i.server_id),
        };
        i.insert_notify(NotifyEntry {
            ptr: CPtr(p),
            device,
            owner_device,
            owner_server,
            state: Lifecycle::Imported,
            flags: CreateFlags::empty(),
            id: None,
        })
    }

    fn can_access_peer(&self, device: u32, peer: u32) -> Result<bool, DriverError> {
        let i = &*self.inner;
        let (d, p) = (device_arg(device)?, device_arg(peer)?);
        let mut can = 0i32;
        // SAFETY: valid out-pointer; integer arguments.
        let code = unsafe { (i.api.aclrtDeviceCanAccessPeer)(&mut can, d, p) };
        i.check("aclrtDeviceCanAccessPeer", code)
            .map_err(|e| e.context(format!("devices {device} → {peer}")))?;
        Ok(can != 0)
    }

    fn enable_peer_access(&self, device: u32, peer: u32) -> Result<(), DriverError> {
        let i = &*self.inner;
        let p = device_arg(peer)?;
        // aclrtDeviceEnablePeerAccess enables access from the *current* device.
        i.ensure_device(device)?;
        // SAFETY: integer arguments; flags must be 0.
        let code = unsafe { (i.api.aclrtDeviceEnablePeerAccess)(p, 0) };
        i.check("aclrtDeviceEnablePeerAccess", code)
            .map_err(|e| e.context(format!("devices {device} → {peer}")))
    }
}

impl HostOps for Driver {
    fn host_wait(&self, notify: RawNotify, timeout: Duration) -> Result<(), DriverError> {
        let i = &*self.inner;
        let Some(f) = i.api.aclnsimNotifyHostWait else {
            return Err(i.unsupported("aclnsimNotifyHostWait", "a host-side wait on a notify"));
        };
        let g = i.notify(notify)?;
        let e = g.get();
        i.ensure_device(e.device)?;
        // u64::MAX means forever to the extension; a Duration is always finite.
        let us = timeout.as_micros().min(u128::from(u64::MAX - 1)) as u64;
        // SAFETY: live pointer (guarded); integer argument.
        let code = unsafe { f(e.ptr.0, us) };
        i.check("aclnsimNotifyHostWait", code)
            .map_err(|err| err.context(format!("notify handle {:#x}", notify.0)))
    }

    fn try_consume(&self, notify: RawNotify) -> Result<bool, DriverError> {
        let i = &*self.inner;
        let Some(f) = i.api.aclnsimNotifyTryConsume else {
            return Err(i.unsupported(
                "aclnsimNotifyTryConsume",
                "consuming a record from the host",
            ));
        };
        let g = i.notify(notify)?;
        let e = g.get();
        i.ensure_device(e.device)?;
        let mut consumed = 0i32;
        // SAFETY: live pointer (guarded); valid out-pointer.
        let code = unsafe { f(e.ptr.0, &mut consumed) };
        i.check("aclnsimNotifyTryConsume", code)
            .map_err(|err| err.context(format!("notify handle {:#x}", notify.0)))?;
        Ok(consumed != 0)
    }

    fn notifies_free(&self, device: u32) -> Result<u32, DriverError> {
        let i = &*self.inner;
        let Some(f) = i.api.aclnsimGetNotifyFreeCount else {
            return Err(i.unsupported(
                "aclnsimGetNotifyFreeCount",
                "counting a device's free notify ids",
            ));
        };
        let d = device_arg(device)?;
        let mut n = 0u32;
        // SAFETY: integer argument, valid out-pointer.
        let code = unsafe { f(d, &mut n) };
        i.check("aclnsimGetNotifyFreeCount", code)
            .map_err(|e| e.context(format!("device {device}")))?;
        Ok(n)
    }
}
