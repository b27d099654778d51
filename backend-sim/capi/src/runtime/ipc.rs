//! The IPC notify calls of [`Runtime`]: export key, whitelists (PIDs, server PIDs), import by
//! key.

use acl_notify_core::whitelist::MAX_ENTRIES as WHITELIST_MAX;
use acl_notify_core::{
    BackendError, Error, ExportFlags, ExportKey, Feature, ImportFlags, NotifyResources, ServerPid,
};

use crate::errmsg::{CallError, param};

use super::Runtime;
use crate::ffi::aclrtServerPid;
use crate::ffi::ipc_args::ServerPids;

impl Runtime {
    /// `aclrtNotifyGetExportKey` after the NULL checks; hands the key to `write` (which puts
    /// it in the caller's buffer) where the backend returned it, not moved out first.
    #[inline]
    pub(crate) fn export_key(
        &self,
        notify: usize,
        len: usize,
        flags: u64,
        write: impl FnOnce(&ExportKey) -> Result<(), CallError>,
    ) -> Result<(), CallError> {
        let n = self.decode_notify(notify)?;
        // SPEC §3 puts the handle's check before these; when they pass, the backend's own
        // first check of the handle stands for it, so a good call looks the notify up once.
        let flags = self
            .export_args(len, flags)
            .map_err(|e| self.notify_first(n, notify, e))?;
        match self.backend.export_key(n, flags) {
            Ok(k) => write(&k),
            Err(e) => Err(self.notify_error(n, notify, e)),
        }
    }

    /// The checks of `aclrtNotifyGetExportKey` that follow the handle's: `len`, the SoC,
    /// the flags.
    #[inline]
    fn export_args(&self, len: usize, flags: u64) -> Result<ExportFlags, CallError> {
        if len < acl_notify_core::key::KEY_BUF_LEN {
            return Err(param(format!(
                "len {len} is too small: a key needs {} bytes with its NUL",
                acl_notify_core::key::KEY_BUF_LEN
            )));
        }
        self.require(Feature::Ipc)?;
        ExportFlags::from_raw(flags).map_err(|e| {
            CallError::new(
                e,
                format!(
                    "flags {flags:#x} are neither ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT nor \
                     ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION"
                ),
            )
        })
    }

    /// `aclrtNotifySetImportPid` after the NULL checks; `pids` is read only when `num > 0`.
    pub(crate) fn set_import_pids<'a>(
        &self,
        notify: usize,
        num: usize,
        pids: impl FnOnce(usize) -> &'a [i32],
    ) -> Result<(), CallError> {
        self.require(Feature::Ipc)?;
        let n = self.notify(notify)?;
        if num == 0 {
            return Err(param("num is 0"));
        }
        // The real runtime passes `num` on as an `int32_t` (hicann/runtime
        // `src/acl/aclrt_impl/notify.cpp`, `aclrtNotifySetImportPidImpl`): a count no int32
        // holds is an invalid argument there, not an over-long whitelist.
        if i32::try_from(num).is_err() {
            return Err(param(format!(
                "num {num} is more than INT32_MAX (the runtime takes the count as an int32_t)"
            )));
        }
        // More than a whitelist holds is refused whole (207012, after the notify's state
        // checks): the backend is handed one PID past the limit, never the rest of the
        // array, so a `num` larger than the caller's array is not read past the limit either.
        let take = num.min(WHITELIST_MAX + 1);
        self.backend
            .set_import_pids(n, pids(take))
            .map_err(|e| match e.kind() {
                Error::OverLimit if num > WHITELIST_MAX => CallError::new(
                    Error::OverLimit,
                    format!("num {num}: a whitelist holds at most {WHITELIST_MAX} processes"),
                ),
                _ => CallError::backend(e),
            })
    }

    /// `aclrtNotifySetImportPidInterServer` after the argument checks. Each entry's shape
    /// (`pid` non-NULL, `num` 1) is checked here; `read` reads its PID (called only once the
    /// shape is valid). Entries are read and checked in order, none after the first failing
    /// one, and applied up to it.
    pub(crate) fn set_import_server_pids(
        &self,
        notify: usize,
        entries: &ServerPids,
        mut read: impl FnMut(&aclrtServerPid) -> ServerPid,
    ) -> Result<(), CallError> {
        let n = self.notify(notify)?;
        let mut ok = Vec::new();
        let mut failure = None;
        for (i, e) in (0..entries.len()).filter_map(|i| Some((i, entries.entry(i)?))) {
            let checked = if e.pid.is_null() {
                Err(param(format!("serverPids[{i}].pid is NULL")))
            } else if e.num != 1 {
                Err(param(format!(
                    "serverPids[{i}].num is {}; each entry must carry exactly 1 PID",
                    e.num
                )))
            } else {
                self.require(Feature::InterServer).map(|()| read(&e))
            };
            match checked {
                Ok(e) => ok.push(e),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        if !ok.is_empty() {
            self.backend
                .set_import_server_pids(n, &ok)
                .map_err(CallError::backend)?;
        }
        failure.map_or(Ok(()), Err)
    }

    /// `aclrtNotifyImportByKey` after the NULL checks; `key` is the C string's bytes (at most
    /// 65 read, without the NUL) or `None` if no NUL came within 65 bytes.
    #[inline]
    pub(crate) fn import_by_key(&self, key: Option<&[u8]>, flags: u64) -> Result<usize, CallError> {
        self.require(Feature::Ipc)?;
        let flags = ImportFlags::from_raw(flags).map_err(|e| {
            CallError::new(
                e,
                format!(
                    "flags {:#x}: the low 32 bits must be at most 3",
                    flags & 0xffff_ffff
                ),
            )
        })?;
        let device = self.current_device()?;
        // The key is used where `parse` returned it (a `?` would move its 66 bytes out first).
        let parsed = key.ok_or(Error::ParamInvalid).and_then(ExportKey::parse);
        let key = parsed.as_ref().map_err(|e| {
            CallError::new(
                *e,
                "the key is malformed (not a key aclrtNotifyGetExportKey wrote)",
            )
        })?;
        let raw = self
            .backend
            .import_key(device, key, flags)
            .map_err(CallError::backend)?;
        self.add_notify(raw)
    }
}
