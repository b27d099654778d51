//! IPC memory of another host (cluster mode): what the memory module gives the cluster, and
//! how a copy or set that names such memory is routed to it.
//!
//! A host never maps another host's files, so an import of another host's memory
//! (`aclrtIpcMemImportByKey` of a key an owner published for an inter-server importer) cannot
//! map the bytes. What it gets is a **reservation**: [`Reservation`], a range of this
//! process's address space the size of the exported range, mapped `PROT_NONE`, as every device
//! pointer of the simulator is (host code that dereferences it faults, as on hardware). Its
//! address is the import's device pointer; copies and sets that name a range of it go through
//! the cluster to the owner's host (`crate::cluster`, its `mem` module): a write is an etcd put
//! the owner's record watch applies to the owner's memory, in the order of everything else
//! this importer sent it (a record queued after a copy lands after the copy's bytes); a read
//! is a request the owner's watch answers with the bytes. The owner's side reaches its memory
//! through [`SharedRange`].
//!
//! The rules of local IPC memory hold: ranges are checked against the exported range (107000
//! naming the import, the offset and the overrun); memory of another device takes only
//! device-to-device copies with an explicit kind (CANN's rule for memory imported onto another
//! device: hicann/runtime `docs/zh/api_ref/11-07_IPC_memory_sharing.md`); an importer's use
//! after the owner's `aclrtFree` is 107000, while physical memory the owner frees stays for
//! the importers that hold it (`cluster::mem_hold`). Unlike a local import, memory whose owner
//! died cannot be used any more: its bytes lived in the owner's process.

use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;

use acl_notify_core::key::{ExportKey, KeyFields};
use acl_notify_core::sdid::Shown;
use acl_notify_core::{Error, RawStream};

use super::file::{Importers, MemFile};
use super::reserved::{reserve_none, unreserve};
use super::{DevRange, MemcpyKind, within};
use crate::Sim;
use crate::cluster::{Cluster, MemLink, RemoteMem};
use crate::error::SimError;
use crate::job::SimJob;
use crate::stream::TaskCtx;

/// A range of this process's address space that no access may touch (`PROT_NONE`): the
/// device addresses of an import of another host's memory. Unmapped on drop.
#[derive(Debug)]
pub(crate) struct Reservation {
    addr: usize,
    len: usize,
}

impl Reservation {
    /// Reserves `len` bytes (> 0), rounded up to pages.
    pub(crate) fn new(len: u64) -> Result<Reservation, SimError> {
        let len = usize::try_from(len)
            .ok()
            .and_then(|l| l.checked_next_multiple_of(4096))
            .filter(|l| *l > 0)
            .ok_or_else(|| {
                SimError::new(Error::ParamInvalid, format!("cannot reserve {len} bytes"))
            })?;
        // SAFETY: no MAP_FIXED: no existing mapping is affected.
        let addr = unsafe { reserve_none(std::ptr::null_mut(), len, 0) }.map_err(|e| {
            SimError::new(
                Error::MemoryAllocation,
                format!("reserving {len} bytes of device addresses: {e}"),
            )
        })?;
        Ok(Reservation { addr, len })
    }

    /// The first address.
    pub(crate) fn addr(&self) -> usize {
        self.addr
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        unreserve(self.addr, self.len);
    }
}

/// The exported range of one of this process's allocations, as the owner's side of remote
/// copies reaches it (from the cluster's watch thread): reads and writes of bytes at offsets
/// in the range, each checked against the range and against the allocation still being this
/// incarnation and not freed. Offsets and lengths come from other processes: every one is
/// checked, none can touch memory outside the range.
#[derive(Clone, Debug)]
pub(crate) struct SharedRange {
    file: Arc<MemFile>,
    id: u32,
    generation: u32,
    /// The range's arena offset and length.
    off: u64,
    len: u64,
    /// The owner's identity, as its hold in the slot while the allocation is kept for
    /// importers on other hosts after its free (`cluster::mem_hold`).
    holder: (i32, u64),
}

impl SharedRange {
    /// The exported range's length.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Drops the owner's hold on the allocation, kept after its free while importers on other
    /// hosts held it: the last hold going releases it.
    pub(crate) fn let_go(&self) {
        if let Ok(l) = self.file.lock() {
            self.file.leave(&l, self.id, self.generation, self.holder);
        }
    }

    /// The arena offset of `[at, at + n)` of the range, if the range holds it and the
    /// allocation is still live (or kept for its importers after the owner's free of physical
    /// memory); else why not.
    fn at(&self, at: u64, n: u64) -> Result<u64, String> {
        if at.checked_add(n).is_none_or(|end| end > self.len) {
            return Err(format!(
                "[{at}, {at}+{n}) leaves the exported range of {} bytes",
                self.len
            ));
        }
        let live = self
            .file
            .slot(self.id)
            .is_some_and(|s| s.holds(self.generation) && s.sync.owner_freed.load(SeqCst) == 0);
        if !live {
            return Err("its owner freed it".into());
        }
        Ok(self.off + at)
    }

    /// Writes `data` at offset `at` of the range.
    pub(crate) fn write(&self, at: u64, data: &[u8]) -> Result<(), String> {
        let off = self.at(at, data.len() as u64)?;
        // SAFETY: a range of a mapped allocation, checked just now; the bytes are plain data
        // (another process may write them meanwhile, as on hardware).
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.file.bytes(off, data.len()),
                data.len(),
            )
        };
        Ok(())
    }

    /// Sets `n` bytes at offset `at` of the range to `value`.
    pub(crate) fn fill(&self, at: u64, n: u64, value: u8) -> Result<(), String> {
        let off = self.at(at, n)?;
        let n = usize::try_from(n).map_err(|_| "too long".to_owned())?;
        // SAFETY: as in `write`.
        unsafe { std::ptr::write_bytes(self.file.bytes(off, n), value, n) };
        Ok(())
    }

    /// The `n` bytes at offset `at` of the range.
    pub(crate) fn read(&self, at: u64, n: u64) -> Result<Vec<u8>, String> {
        let off = self.at(at, n)?;
        let n = usize::try_from(n).map_err(|_| "too long".to_owned())?;
        let mut v = vec![0u8; n];
        // SAFETY: as in `write`.
        unsafe { std::ptr::copy_nonoverlapping(self.file.bytes(off, n), v.as_mut_ptr(), n) };
        Ok(v)
    }
}

/// A checked range of an import of another host's memory.
#[derive(Clone, Debug)]
struct RemoteRange {
    mem: Arc<RemoteMem>,
    /// Offset in the exported range.
    at: u64,
}

/// One end of a copy that names remote memory.
#[derive(Clone, Debug)]
enum End {
    Local(DevRange),
    Remote(RemoteRange),
}

/// Bytes moved per step of a copy with a remote end (what one etcd value carries).
const STEP: usize = crate::cluster::MEM_CHUNK;

impl End {
    /// Reads `buf.len()` bytes at `done` bytes into this end.
    fn read(&self, link: &MemLink, done: usize, buf: &mut [u8]) -> Result<(), SimError> {
        match self {
            End::Local(r) => {
                r.still("source")?;
                // SAFETY: a checked range of a mapped allocation (`done + buf.len()` is within
                // the copy's count, which the range covers).
                unsafe {
                    std::ptr::copy(r.ptr().add(done), buf.as_mut_ptr(), buf.len());
                }
                r.alloc.file.intact()
            }
            End::Remote(r) => link.read(&r.mem, r.at + done as u64, buf),
        }
    }

    /// Writes `buf` at `done` bytes into this end.
    fn write(&self, link: &MemLink, done: usize, buf: &[u8]) -> Result<(), SimError> {
        match self {
            End::Local(r) => {
                r.still("destination")?;
                // SAFETY: as in `read`.
                unsafe { std::ptr::copy(buf.as_ptr(), r.ptr().add(done), buf.len()) };
                r.alloc.file.intact()
            }
            End::Remote(r) => link.write(&r.mem, r.at + done as u64, buf),
        }
    }
}

/// Copies `count` bytes from `s` to `d`, a step at a time.
fn transfer(link: &MemLink, d: &End, s: &End, count: usize) -> Result<(), SimError> {
    let mut buf = vec![0u8; count.min(STEP)];
    let mut done = 0;
    while done < count {
        let n = (count - done).min(STEP);
        s.read(link, done, &mut buf[..n])?;
        d.write(link, done, &buf[..n])?;
        done += n;
    }
    Ok(())
}

impl Sim {
    /// The range `[addr, addr + len)` if `addr` is in an import of another host's memory
    /// (checked against it: 107000 if it leaves it, or the import was closed); `None` if not.
    fn remote_range(
        &self,
        c: &Cluster,
        addr: usize,
        len: usize,
        what: &str,
    ) -> Result<Option<RemoteRange>, SimError> {
        let Some(mem) = c.mem_import_at(addr, what)? else {
            return Ok(None);
        };
        let at = (addr - mem.base()) as u64;
        if len as u64 > mem.len - at {
            return Err(SimError::new(
                Error::ParamInvalid,
                format!(
                    "{what} [{addr:#x}, {:#x}) ({len} bytes) leaves {}: it starts at offset \
                     {at} and ends {} bytes past its end",
                    addr.wrapping_add(len),
                    mem.describe(),
                    len as u64 - (mem.len - at)
                ),
            ));
        }
        Ok(Some(RemoteRange { mem, at }))
    }

    /// The other end of a copy with a remote end: a device range of this process.
    fn local_end(&self, addr: usize, len: usize, what: &str) -> Result<End, SimError> {
        match self.device_range(addr, len, what)? {
            Some(r) => Ok(End::Local(r)),
            None => Err(SimError::new(
                Error::ParamInvalid,
                format!(
                    "the {what} {addr:#x} is not a device address of this process; IPC memory \
                     of another host is copied only device to device (ACL_MEMCPY_DEVICE_TO_DEVICE)"
                ),
            )),
        }
    }

    /// `aclrtMemcpy` (`stream` `None`) or `aclrtMemcpyAsync` when a side is an import of
    /// another host's memory: `None` when neither is (the local paths go on). Only device to
    /// device with that kind (see the module doc).
    #[inline]
    pub(crate) fn remote_memcpy(
        &self,
        dst: usize,
        dest_max: usize,
        src: usize,
        count: usize,
        kind: MemcpyKind,
        stream: Option<RawStream>,
    ) -> Option<Result<(), SimError>> {
        // Not in cluster mode: no call (every local copy asks).
        let c = self.inner.cluster.as_ref()?;
        self.remote_memcpy_in(c, dst, dest_max, src, count, kind, stream)
    }

    /// [`remote_memcpy`](Self::remote_memcpy) in cluster `c`.
    #[allow(clippy::too_many_arguments)]
    fn remote_memcpy_in(
        &self,
        c: &Cluster,
        dst: usize,
        dest_max: usize,
        src: usize,
        count: usize,
        kind: MemcpyKind,
        stream: Option<RawStream>,
    ) -> Option<Result<(), SimError>> {
        let run = || -> Result<Option<()>, SimError> {
            let d = self.remote_range(c, dst, count, "destination")?;
            let s = self.remote_range(c, src, count, "source")?;
            if d.is_none() && s.is_none() {
                return Ok(None);
            }
            within(count, dest_max, "destMax")?;
            if kind != MemcpyKind::DeviceToDevice {
                let m = d.as_ref().or(s.as_ref()).map(|r| r.mem.describe());
                return Err(SimError::new(
                    Error::ParamInvalid,
                    format!(
                        "{} is IPC memory of another device: CANN copies such memory only device \
                         to device with an explicit kind (ACL_MEMCPY_DEVICE_TO_DEVICE; no \
                         ACL_MEMCPY_DEFAULT, no copy to or from the host)",
                        m.unwrap_or_default()
                    ),
                ));
            }
            let d = match d {
                Some(r) => End::Remote(r),
                None => self.local_end(dst, count, "destination")?,
            };
            let s = match s {
                Some(r) => End::Remote(r),
                None => self.local_end(src, count, "source")?,
            };
            let link = c.mem_link();
            let Some(stream) = stream else {
                return transfer(&link, &d, &s, count).map(Some);
            };
            let (st, _) = self.stream(stream)?;
            // A write of one etcd value into another host's memory may carry the record
            // queued right after it (`cluster::carry`).
            let carry = match (&d, &s) {
                (End::Remote(_), End::Local(_)) if (1..=STEP).contains(&count) => Some(c.carry()),
                _ => None,
            };
            let claimed = carry.clone();
            // The task holds the cluster's shared state, not the `Sim` (as a remote record).
            let task = Box::new(move |_: &TaskCtx| {
                let args = || serde_json::json!({"dst": dst, "src": src, "bytes": count});
                crate::trace::span("memory", "memcpy (remote)", args, || match (&carry, &d) {
                    (Some(carry), End::Remote(r)) => {
                        let mut buf = vec![0u8; count];
                        s.read(&link, 0, &mut buf)?;
                        link.write_carrying(&r.mem, r.at, &buf, carry)
                    }
                    _ => transfer(&link, &d, &s, count),
                })
            });
            self.enqueue_job_with(&st, stream, SimJob::Other(task), |j| {
                if let Some(carry) = &claimed {
                    c.copy_claimed(&st, carry);
                }
                j
            })
            .map(Some)
        };
        run().transpose()
    }

    /// `aclrtMemcpy2dAsync` when a side is an import of another host's memory: `None` when
    /// neither span (`dspan` bytes at `dst`, `sspan` at `src`) is. Both spans are checked
    /// first, then each row is one remote copy queued on `stream`, in order.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn remote_memcpy2d(
        &self,
        dst: usize,
        dspan: usize,
        src: usize,
        sspan: usize,
        shape: super::pitched::Pitched,
        kind: MemcpyKind,
        stream: RawStream,
    ) -> Option<Result<(), SimError>> {
        let c = self.inner.cluster.as_ref()?;
        let spans = || -> Result<bool, SimError> {
            let d = self.remote_range(c, dst, dspan, "destination")?;
            let s = self.remote_range(c, src, sspan, "source")?;
            Ok(d.is_some() || s.is_some())
        };
        match spans() {
            Ok(false) => return None,
            Ok(true) => {}
            Err(e) => return Some(Err(e)),
        }
        for row in 0..shape.height {
            let (d, s) = (dst + row * shape.dpitch, src + row * shape.spitch);
            let width = shape.width;
            match self.remote_memcpy_in(c, d, width, s, width, kind, Some(stream)) {
                Some(Ok(())) => {}
                Some(Err(e)) => return Some(Err(e)),
                // A row of a remote span is remote; local memory never is.
                None => {
                    return Some(Err(SimError::new(
                        Error::DrvInternalError,
                        "a row of a remote 2-D copy was not found remote",
                    )));
                }
            }
        }
        Some(Ok(()))
    }

    /// `aclrtMemset` (`stream` `None`) or `aclrtMemsetAsync` of an import of another host's
    /// memory; `None` if `dst` is not one.
    #[inline]
    pub(crate) fn remote_memset(
        &self,
        dst: usize,
        max: usize,
        value: u8,
        count: usize,
        stream: Option<RawStream>,
    ) -> Option<Result<(), SimError>> {
        // As in `remote_memcpy`.
        let c = self.inner.cluster.as_ref()?;
        self.remote_memset_in(c, dst, max, value, count, stream)
    }

    /// [`remote_memset`](Self::remote_memset) in cluster `c`.
    fn remote_memset_in(
        &self,
        c: &Cluster,
        dst: usize,
        max: usize,
        value: u8,
        count: usize,
        stream: Option<RawStream>,
    ) -> Option<Result<(), SimError>> {
        let run = || -> Result<Option<()>, SimError> {
            let Some(r) = self.remote_range(c, dst, count, "range")? else {
                return Ok(None);
            };
            within(count, max, "maxCount")?;
            let link = c.mem_link();
            let Some(stream) = stream else {
                return link.fill(&r.mem, r.at, count as u64, value).map(Some);
            };
            let (st, _) = self.stream(stream)?;
            let task = Box::new(move |_: &TaskCtx| {
                let args = || serde_json::json!({"dst": dst, "value": value, "bytes": count});
                crate::trace::span("memory", "memset (remote)", args, || {
                    link.fill(&r.mem, r.at, count as u64, value)
                })
            });
            self.enqueue_job(&st, stream, SimJob::Other(task)).map(Some)
        };
        run().transpose()
    }

    /// `aclrtIpcMemImportByKey` of memory another host exported (`k`: the key's fields): the
    /// cluster registry says whether it is published and whom it admits; the import is a
    /// reservation of device addresses (see the module doc). Codes: 107000 not published (or
    /// stale, or closed by its owner), already imported; 207006 not whitelisted; 507022
    /// cluster unreachable.
    pub(crate) fn ipc_mem_import_remote(
        &self,
        c: &Cluster,
        device: u32,
        key: &ExportKey,
        k: &KeyFields,
    ) -> Result<usize, SimError> {
        let (server, odev, id) = (u32::from(k.server), u32::from(k.device), u32::from(k.id));
        let (found, wl) = c.mem_lookup(server, odev, id, k.generation, k.nonce)?;
        if let Some(wl) = wl
            && let Some(why) = self.not_admitted(&wl, server, device)
        {
            return Err(SimError::new(
                Error::NoPermission,
                format!(
                    "import of allocation {id} on device {odev} of server {server} (another host) \
                     refused: {why}; whitelist in the cluster registry: {}",
                    wl.iter()
                        .map(|e| format!("(sdid {}, pid {})", Shown(e.sdid), e.pid))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        let res = Reservation::new(found.len)?;
        c.mem_insert(found, res, device, *key)
    }

    /// Publishes allocation `id` of `file` (generation `generation`, this process's export) to
    /// the cluster registry if this process is in cluster mode and `publish` says the export
    /// admits another host (an open export, or an inter-server whitelist entry). Code 507022.
    pub(super) fn mem_publish(
        &self,
        file: &Arc<MemFile>,
        id: u32,
        generation: u32,
        publish: bool,
    ) -> Result<(), SimError> {
        let Some(c) = &self.inner.cluster else {
            return Ok(());
        };
        if !publish {
            return Ok(());
        }
        let slot = file
            .slot(id)
            .ok_or_else(|| SimError::new(Error::DrvInternalError, "slot out of range"))?;
        let open = slot.export_state() == Some(acl_notify_core::slot::ExportState::Open);
        let wl: Vec<_> = if open {
            Vec::new()
        } else {
            file.whitelist(id)
                .and_then(|w| w.read())
                .map(|w| w.iter().copied().collect())
                .unwrap_or_default()
        };
        let range = SharedRange {
            file: Arc::clone(file),
            id,
            generation,
            off: slot.sync.off.load(SeqCst) + slot.sync.export_off.load(SeqCst),
            len: slot.sync.export_len.load(SeqCst),
            holder: self.mem_identity(),
        };
        c.mem_publish(
            file.device(),
            id,
            generation,
            slot.nonce(),
            open,
            &wl,
            range,
        )
    }

    /// The owner closed the export of allocation `id` (generation `generation`) of `file`:
    /// no new import from another host (those made stay usable).
    pub(super) fn mem_unpublish(&self, file: &MemFile, id: u32, generation: u32) {
        if let Some(c) = &self.inner.cluster {
            c.mem_unexport(file.device(), id, generation);
        }
    }

    /// The owner's free of its allocation `a`, leaving its importers what `importers` says.
    /// Physical memory it shared (`Importers::Served`) and published stays for importers on
    /// other hosts while they hold it (`cluster::mem_hold`): the owner's own hold in the slot
    /// keeps it orphaned rather than released, until the cluster drops that hold. Anything
    /// else published is withdrawn (other hosts' copies fail from now on).
    pub(super) fn free_owned_shared(
        &self,
        a: &super::Alloc,
        importers: Importers,
    ) -> Result<(), SimError> {
        let dev = a.file.device();
        let kept = importers == Importers::Served
            && self
                .inner
                .cluster
                .as_ref()
                .is_some_and(|c| c.mem_keep(dev, a.id, a.generation));
        let l = a.file.lock()?;
        let held = kept && a.file.join(&l, a.id, self.mem_identity()).is_ok();
        a.free_owned(&l, importers);
        drop(l);
        match &self.inner.cluster {
            Some(c) if held => c.mem_kept(dev, a.id),
            _ => self.mem_withdraw(&a.file, a.id, a.generation),
        }
        Ok(())
    }

    /// The owner freed allocation `id` (generation `generation`) of `file`: other hosts'
    /// copies through their imports of it fail from now on.
    pub(super) fn mem_withdraw(&self, file: &MemFile, id: u32, generation: u32) {
        if let Some(c) = &self.inner.cluster {
            c.mem_withdraw(file.device(), id, generation);
        }
    }

    /// What `addr` is if it is in an import of another host's memory (for messages).
    pub(super) fn remote_import_at(&self, addr: usize) -> Option<String> {
        let c = self.inner.cluster.as_ref()?;
        Some(c.mem_import_at(addr, "address").ok()??.describe())
    }

    /// The exported length of another host's memory imported at `addr` (its first
    /// address), if it is one (an import of a FABRIC handle, [`super::fabric`]).
    pub(super) fn remote_len_at(&self, addr: usize) -> Option<u64> {
        let c = self.inner.cluster.as_ref()?;
        Some(c.mem_import_at(addr, "address").ok()??.len)
    }

    /// The device of another host's memory imported at `addr`, if it is one
    /// ([`super::location`]).
    pub(super) fn remote_device_at(&self, addr: usize) -> Option<u32> {
        let c = self.inner.cluster.as_ref()?;
        Some(c.mem_import_at(addr, "address").ok()??.device)
    }

    /// `aclrtIpcMemClose` of `key` by an importer of another host's memory: whether it was
    /// one.
    pub(super) fn mem_close_remote(&self, key: &ExportKey) -> bool {
        self.inner
            .cluster
            .as_ref()
            .is_some_and(|c| c.mem_close(key))
    }
}
