//! Size probe: a firmware-style `no_std`, `no_main` program for `aarch64-unknown-none` that uses
//! the whole of `acl-notify-core` — id pools of every SoC size (plain, spin and lock-free),
//! export keys, whitelists, the lifecycle table, flags, error codes, the SoC table, the
//! device-side notify table, and the typestate API over a small firmware backend — so that
//! `cargo xtask size` can report what the core costs in a linked image.
//!
//! It is linked, never run: `_start` has no stack set-up or vector table. Every input goes
//! through `black_box`, so the optimiser cannot fold the API away, and every result is fed
//! back into `black_box`, so nothing is dead.
#![no_std]
#![no_main]

use core::hint::black_box;
use core::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering};
use core::time::Duration;

use acl_notify_core::backend::{
    Backend, HostCall, NotifyInfo, NotifyResources, RawNotify, RawStream, ServerPid, StreamDestroy,
    StreamOps, StreamStatus,
};
use acl_notify_core::error::{Error, Result};
use acl_notify_core::flags::{CreateFlags, ExportFlags, ImportFlags};
use acl_notify_core::key::{ExportKey, KEY_BUF_LEN, KeyFields};
use acl_notify_core::lifecycle::{Lifecycle, Op};
use acl_notify_core::pool::{AtomicIdPool, IdPool, SpinIdPool, words};
use acl_notify_core::soc::{
    AnySoc, Ascend310B, Ascend310P, Ascend910, Ascend910_93, Ascend950PR, Feature, Soc, SocType,
};
use acl_notify_core::table::{
    ExportState, Leave, NotifySlot, Owner, WaitArgs, WaitOutcome, Waiter,
};
use acl_notify_core::timeout::{SyncWait, Timeout};
use acl_notify_core::typed::{AllowFailed, Device, NotifyAny};
use acl_notify_core::whitelist::{Whitelist, WhitelistEntry};

// ---------------------------------------------------------------------------------------------
// Static pools, one per SoC size: their symbol sizes are what `cargo xtask size` reports.
// ---------------------------------------------------------------------------------------------

/// Ascend950PR/DT: 65535 ids, lock-free (shared with the host through device memory).
#[unsafe(no_mangle)]
pub static FW_POOL_65535: <Ascend950PR as SocType>::AtomicNotifyPool = AtomicIdPool::new();
/// Ascend910_93/910B: 8192 ids, lock-free; the pool of the firmware backend below.
#[unsafe(no_mangle)]
pub static FW_POOL_8192: <Ascend910_93 as SocType>::AtomicNotifyPool = AtomicIdPool::new();
/// Ascend310B: 2048 ids behind a spin lock.
#[unsafe(no_mangle)]
pub static FW_POOL_2048: <Ascend310B as SocType>::SpinNotifyPool = SpinIdPool::new();
/// Ascend910/310P: 1024 ids behind a spin lock.
#[unsafe(no_mangle)]
pub static FW_POOL_1024: <Ascend910 as SocType>::SpinNotifyPool = SpinIdPool::new();

/// Notifies of the firmware backend (an Ascend910_93 device).
const IDS: usize = Ascend910_93::MAX_NOTIFIES as usize;
/// Whitelists the firmware backend can hold at once.
const WHITELISTS: usize = 8;

/// The device-side notify table of the firmware backend.
#[unsafe(no_mangle)]
pub static FW_TABLE: [NotifySlot; IDS] = [const { NotifySlot::new() }; IDS];
/// Lifecycle state of the firmware's owner handle of each id (0 = none).
static FW_OWNER_STATE: [AtomicU8; IDS] = [const { AtomicU8::new(0) }; IDS];
/// Whether the firmware also holds an imported handle of each id.
static FW_IMPORTED: [AtomicU8; IDS] = [const { AtomicU8::new(0) }; IDS];
/// Whitelists, referenced by `NotifySlot::whitelist_index` (1-based).
static FW_WHITELISTS: spin::Mutex<[Whitelist; WHITELISTS]> =
    spin::Mutex::new([const { Whitelist::new() }; WHITELISTS]);
/// Sticky task error of the default stream (an `aclError`, 0 = none).
static FW_STREAM_ERR: AtomicU32 = AtomicU32::new(0);
/// Process default wait timeout in seconds.
static FW_OP_WAIT: AtomicU32 = AtomicU32::new(0);
/// Nonce counter (a real firmware draws export nonces from its TRNG).
static FW_NONCE: AtomicU64 = AtomicU64::new(0x6a09_e667_f3bc_c908);

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    loop {
        core::hint::spin_loop();
    }
}

#[cfg(feature = "defmt")]
mod log {
    //! A no-op defmt logger: enough to link the core's `defmt` logging.
    #[defmt::global_logger]
    struct Nop;

    // SAFETY: the logger does nothing, so acquire/release/write/flush have no state to
    // protect and are trivially re-entrant.
    unsafe impl defmt::Logger for Nop {
        fn acquire() {}
        unsafe fn flush() {}
        unsafe fn release() {}
        unsafe fn write(_bytes: &[u8]) {}
    }

    #[defmt::panic_handler]
    fn defmt_panic() -> ! {
        loop {
            core::hint::spin_loop();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Platform: time and waiting on AArch64
// ---------------------------------------------------------------------------------------------

fn now_ns() -> u64 {
    let (cnt, frq): (u64, u64);
    // SAFETY: reading the generic timer's virtual count and frequency registers has no side
    // effects and is permitted at EL1 (and at EL0 when CNTKCTL_EL1 allows it).
    unsafe {
        core::arch::asm!("mrs {}, cntvct_el0", out(reg) cnt, options(nomem, nostack));
        core::arch::asm!("mrs {}, cntfrq_el0", out(reg) frq, options(nomem, nostack));
    }
    let frq = frq.max(1);
    ((u128::from(cnt) * 1_000_000_000) / u128::from(frq)) as u64
}

/// Waits by spinning with `wfe`-style hints; wakes are implicit (callers re-check).
struct SpinWaiter;

impl Waiter for SpinWaiter {
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        let end = timeout.map(|t| now_ns().saturating_add(t.as_nanos() as u64));
        while word.load(Ordering::Acquire) == expected {
            if end.is_some_and(|e| now_ns() >= e) {
                return;
            }
            core::hint::spin_loop();
        }
    }

    fn wake(&self, _word: &AtomicU32, _n: u32) {
        // Spinning waiters see the store; a WFE-based waiter would need `sev` here.
    }

    fn now_ns(&self) -> u64 {
        now_ns()
    }
}

// ---------------------------------------------------------------------------------------------
// A firmware backend: one Ascend910_93 device, the default stream executed in place
// ---------------------------------------------------------------------------------------------

/// Handle layout: generation (high 32 bits) | imported (bit 16) | id + 1 (low 16 bits).
const IMPORTED_BIT: u64 = 1 << 16;
const FW_PID: i32 = 1;
const DEFAULT_STREAM: RawStream = RawStream(1);

struct Fw;

struct Handle {
    id: usize,
    imported: bool,
}

impl Fw {
    fn handle(id: usize, generation: u32, imported: bool) -> RawNotify {
        let imp = if imported { IMPORTED_BIT } else { 0 };
        RawNotify((u64::from(generation) << 32) | imp | (id as u64 + 1))
    }

    fn decode(raw: RawNotify) -> Result<(Handle, &'static NotifySlot)> {
        let id1 = (raw.0 & 0xffff) as usize;
        let id = id1.checked_sub(1).ok_or(Error::InvalidHandle)?;
        let slot = FW_TABLE.get(id).ok_or(Error::InvalidHandle)?;
        if slot.generation() != (raw.0 >> 32) as u32 {
            return Err(Error::InvalidHandle);
        }
        let imported = raw.0 & IMPORTED_BIT != 0;
        let held = if imported {
            FW_IMPORTED[id].load(Ordering::Acquire) != 0
        } else {
            FW_OWNER_STATE[id].load(Ordering::Acquire) != 0
        };
        if !held || raw.0 & !(0xffff_ffff_0000_0000 | IMPORTED_BIT | 0xffff) != 0 {
            return Err(Error::InvalidHandle);
        }
        Ok((Handle { id, imported }, slot))
    }

    fn state(h: &Handle) -> Result<Lifecycle> {
        if h.imported {
            return Ok(Lifecycle::Imported);
        }
        Lifecycle::from_u8(FW_OWNER_STATE[h.id].load(Ordering::Acquire)).ok_or(Error::InvalidHandle)
    }

    fn apply(h: &Handle, op: Op) -> Result<Lifecycle> {
        let next = Self::state(h)?.apply(op)?;
        if !h.imported {
            FW_OWNER_STATE[h.id].store(next as u8, Ordering::Release);
        }
        Ok(next)
    }

    fn add_to_whitelist(slot: &NotifySlot, entries: &[WhitelistEntry]) -> Result<()> {
        let mut lists = FW_WHITELISTS.lock();
        let mut idx = slot.whitelist_index() as usize;
        if idx == 0 {
            let free = lists
                .iter()
                .position(Whitelist::is_empty)
                .ok_or(Error::ResourceAllocFail)?;
            idx = free + 1;
            slot.set_whitelist_index(idx as u32);
        }
        lists
            .get_mut(idx - 1)
            .ok_or(Error::DrvInternalError)?
            .add_entries(entries)
    }
}

impl Backend for Fw {
    type Error = Error;
    fn soc(&self) -> Soc {
        Soc::Ascend910_93
    }
    fn device_count(&self) -> u32 {
        1
    }
    fn bare_tgid(&self) -> i32 {
        FW_PID
    }
    fn server_id(&self) -> u32 {
        0
    }
}

impl NotifyResources for Fw {
    fn create_notify(&self, device: u32, flags: CreateFlags) -> Result<RawNotify> {
        if device != 0 {
            return Err(Error::InvalidDeviceId);
        }
        let id = FW_POOL_8192.alloc()? as usize;
        let owner = Owner {
            pid: FW_PID,
            start_time: 0,
            server: 0,
            device,
            proc: 0,
        };
        let Some(slot) = FW_TABLE.get(id) else {
            return Err(Error::DrvInternalError);
        };
        match slot.claim(owner, flags) {
            Ok(generation) => {
                FW_OWNER_STATE[id].store(Lifecycle::Created as u8, Ordering::Release);
                Ok(Self::handle(id, generation, false))
            }
            Err(_) => {
                let _ = FW_POOL_8192.free(id as u32);
                Err(Error::DrvInternalError)
            }
        }
    }

    fn destroy_notify(&self, raw: RawNotify) -> Result<()> {
        let (h, slot) = Self::decode(raw)?;
        let proc = u32::from(h.imported);
        if h.imported {
            FW_IMPORTED[h.id].store(0, Ordering::Release);
        } else {
            FW_OWNER_STATE[h.id].store(0, Ordering::Release);
        }
        let wl = slot.whitelist_index() as usize;
        if slot.leave(proc) == Leave::Last {
            if let Some(list) = wl
                .checked_sub(1)
                .and_then(|i| FW_WHITELISTS.lock().get_mut(i).map(|l| l.clear()))
            {
                black_box(list);
            }
            FW_POOL_8192.free(h.id as u32)?;
        }
        Ok(())
    }

    fn notify_info(&self, raw: RawNotify) -> Result<NotifyInfo> {
        let (h, slot) = Self::decode(raw)?;
        let owner = slot.owner();
        Ok(NotifyInfo {
            id: h.id as u32,
            device: 0,
            owner_device: owner.device,
            owner_server: owner.server,
            state: Self::state(&h)?,
            flags: slot.create_flags(),
        })
    }

    fn export_key(&self, raw: RawNotify, flags: ExportFlags) -> Result<ExportKey> {
        let (h, slot) = Self::decode(raw)?;
        let validation = flags.pid_validation();
        Self::state(&h)?.apply(Op::Export(validation))?;
        let n = FW_NONCE.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed) ^ now_ns();
        let mut nonce = [0u8; 16];
        nonce[..8].copy_from_slice(&n.to_le_bytes());
        nonce[8..].copy_from_slice(&n.rotate_left(29).to_le_bytes());
        let how = match validation {
            acl_notify_core::flags::PidValidation::Enforced => ExportState::Enforced,
            acl_notify_core::flags::PidValidation::Disabled => ExportState::Open,
        };
        if !slot.export(nonce, how) {
            return Err(Error::InternalError);
        }
        Self::apply(&h, Op::Export(validation))?;
        Ok(ExportKey::encode(&KeyFields {
            server: 0,
            device: 0,
            id: h.id as u16,
            generation: slot.generation(),
            nonce,
        }))
    }

    fn set_import_pids(&self, raw: RawNotify, pids: &[i32]) -> Result<()> {
        let (h, slot) = Self::decode(raw)?;
        if pids.is_empty() {
            return Err(Error::ParamInvalid);
        }
        Self::state(&h)?.apply(Op::SetImportPid)?;
        let mut buf = [WhitelistEntry::default(); 64];
        for chunk in pids.chunks(buf.len()) {
            for (e, &pid) in buf.iter_mut().zip(chunk) {
                *e = WhitelistEntry::new(0, pid);
            }
            Self::add_to_whitelist(slot, &buf[..chunk.len()])?;
        }
        Self::apply(&h, Op::SetImportPid).map(drop)
    }

    fn set_import_server_pids(&self, raw: RawNotify, entries: &[ServerPid]) -> Result<()> {
        if entries.is_empty() {
            return Err(Error::ParamInvalid);
        }
        let (h, slot) = Self::decode(raw)?;
        for e in entries {
            Self::state(&h)?.apply(Op::SetImportPid)?;
            Self::add_to_whitelist(slot, &[WhitelistEntry::from(*e)])?;
            Self::apply(&h, Op::SetImportPid)?;
        }
        Ok(())
    }

    fn import_key(&self, device: u32, key: &ExportKey, flags: ImportFlags) -> Result<RawNotify> {
        black_box(flags);
        if device != 0 {
            return Err(Error::InvalidDeviceId);
        }
        let f = key.fields().ok_or(Error::ParamInvalid)?;
        let id = usize::from(f.id);
        let slot = FW_TABLE.get(id).ok_or(Error::InvalidHandle)?;
        if slot.nonce() != f.nonce || slot.generation() != f.generation {
            return Err(Error::InvalidHandle);
        }
        match slot.export_state() {
            Some(ExportState::Open) => {}
            Some(ExportState::Enforced) => {
                let lists = FW_WHITELISTS.lock();
                let ok = (slot.whitelist_index() as usize)
                    .checked_sub(1)
                    .and_then(|i| lists.get(i))
                    .is_some_and(|l| l.matches(0, FW_PID, 0, 0));
                if !ok {
                    return Err(Error::NoPermission);
                }
            }
            _ => return Err(Error::InvalidHandle),
        }
        match slot.join(1, f.generation) {
            Ok(_) => {
                FW_IMPORTED[id].store(1, Ordering::Release);
                Ok(Self::handle(id, f.generation, true))
            }
            Err(Some(Leave::Last)) => {
                let _ = FW_POOL_8192.free(id as u32);
                Err(Error::InvalidHandle)
            }
            Err(_) => Err(Error::InvalidHandle),
        }
    }

    fn can_access_peer(&self, device: u32, peer: u32) -> Result<bool> {
        if device != 0 || peer != 0 {
            return Err(Error::InvalidDeviceId);
        }
        Ok(false)
    }

    fn enable_peer_access(&self, device: u32, peer: u32) -> Result<()> {
        self.can_access_peer(device, peer)?;
        Err(Error::ParamInvalid)
    }
}

impl StreamOps for Fw {
    fn create_stream(&self, device: u32) -> Result<RawStream> {
        if device != 0 {
            return Err(Error::InvalidDeviceId);
        }
        Err(Error::ResourceAllocFail)
    }

    fn default_stream(&self, device: u32) -> Result<RawStream> {
        if device != 0 {
            return Err(Error::InvalidDeviceId);
        }
        Ok(DEFAULT_STREAM)
    }

    fn stream_device(&self, stream: RawStream) -> Result<u32> {
        if stream != DEFAULT_STREAM {
            return Err(Error::InvalidHandle);
        }
        Ok(0)
    }

    fn destroy_stream(&self, stream: RawStream, mode: StreamDestroy) -> Result<()> {
        black_box(mode);
        self.stream_device(stream)?;
        Err(Error::InvalidHandle)
    }

    fn record(&self, notify: RawNotify, stream: RawStream) -> Result<()> {
        self.stream_device(stream)?;
        let (h, slot) = Self::decode(notify)?;
        Self::state(&h)?.apply(Op::Record)?;
        slot.record(&SpinWaiter, FW_PID);
        Ok(())
    }

    fn wait_and_reset(&self, notify: RawNotify, stream: RawStream, timeout: Timeout) -> Result<()> {
        let device = self.stream_device(stream)?;
        let (h, slot) = Self::decode(notify)?;
        Self::state(&h)?.apply(Op::WaitAndReset)?;
        if slot.owner().device != device {
            return Err(Error::ParamInvalid);
        }
        let timeout = timeout
            .resolve(FW_OP_WAIT.load(Ordering::Relaxed))
            .duration();
        let never = || false;
        let args = WaitArgs {
            proc: 0,
            timeout,
            cancel: &never,
        };
        match slot.sync.wait_and_reset(&SpinWaiter, args) {
            Ok(WaitOutcome::Consumed) => {}
            Ok(_) => FW_STREAM_ERR.store(Error::TaskTimeout.code() as u32, Ordering::Release),
            Err(_) => return Err(Error::DrvInternalError),
        }
        Ok(())
    }

    fn batch_reset(&self, notifies: &[RawNotify]) -> Result<()> {
        if notifies.is_empty() {
            return Err(Error::ParamInvalid);
        }
        for n in notifies {
            Soc::Ascend910_93.require(Feature::BatchReset)?;
            let (h, slot) = Self::decode(*n)?;
            Self::state(&h)?.apply(Op::BatchReset(Soc::Ascend910_93.caps().ipc_batch_reset))?;
            slot.sync.reset();
        }
        Ok(())
    }

    fn synchronize(&self, stream: RawStream, wait: SyncWait) -> Result<()> {
        black_box(wait);
        self.stream_device(stream)?;
        match FW_STREAM_ERR.swap(0, Ordering::AcqRel) {
            0 => Ok(()),
            code => Err(Error::try_from(code as i32).unwrap_or(Error::DrvInternalError)),
        }
    }

    fn query(&self, stream: RawStream) -> Result<StreamStatus> {
        self.stream_device(stream)?;
        Ok(StreamStatus::Complete)
    }

    fn launch_host_func(&self, stream: RawStream, call: HostCall) -> Result<()> {
        self.stream_device(stream)?;
        call.call();
        Ok(())
    }

    fn set_op_wait_timeout(&self, seconds: u32) -> Result<()> {
        FW_OP_WAIT.store(seconds, Ordering::Relaxed);
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// The uses
// ---------------------------------------------------------------------------------------------

fn code<T>(r: Result<T>) -> u32 {
    match r {
        Ok(_) => 0,
        Err(e) => e.code() as u32,
    }
}

fn pools() -> u32 {
    let mut acc = 0;
    for _ in 0..black_box(3) {
        let a = code(FW_POOL_65535.alloc());
        let b = code(FW_POOL_2048.alloc());
        let c = code(FW_POOL_1024.alloc());
        acc ^= a ^ b ^ c;
    }
    acc ^= code(FW_POOL_65535.free(black_box(1)));
    acc ^= code(FW_POOL_2048.free(black_box(0)));
    acc ^= code(FW_POOL_1024.free(black_box(2)));
    acc ^= FW_POOL_65535.in_use() ^ FW_POOL_2048.in_use() ^ FW_POOL_1024.in_use();
    acc ^= u32::from(FW_POOL_65535.is_allocated(black_box(2)));
    acc ^= FW_POOL_2048.with(|p| p.capacity() ^ u32::from(p.is_full()));
    // A plain pool for a single owner (Ascend310P size), on the stack.
    let mut plain: <Ascend310P as SocType>::NotifyPool = IdPool::new();
    for _ in 0..black_box(4) {
        acc ^= code(plain.alloc());
    }
    acc ^= code(plain.free(black_box(3))) ^ plain.in_use() ^ u32::from(plain.is_allocated(1));
    // A pool in a zero-filled region, as the host would share it.
    type Shared = AtomicIdPool<16, { words(16) }>;
    const REGION_WORDS: usize = core::mem::size_of::<Shared>().div_ceil(8);
    static REGION: [AtomicU64; REGION_WORDS] = [const { AtomicU64::new(0) }; REGION_WORDS];
    // SAFETY: `REGION` is 8-aligned, at least `size_of::<Shared>()` bytes, zero-filled,
    // static, and accessed only through atomics.
    let shared = unsafe { Shared::from_zeroed_ptr(REGION.as_ptr() as *mut u8) };
    acc ^= code(shared.alloc()) ^ shared.capacity();
    acc
}

fn keys() -> u32 {
    let fields = KeyFields {
        server: black_box(7),
        device: black_box(3),
        id: black_box(4095),
        generation: black_box(12),
        nonce: black_box([0x5a; 16]),
    };
    let key = ExportKey::encode(&fields);
    let mut buf = [0u8; KEY_BUF_LEN];
    let mut acc = code(key.write_c(black_box(&mut buf[..])));
    acc ^= code(ExportKey::parse_c(black_box(&buf)));
    acc ^= code(ExportKey::parse(black_box(key.as_str()).as_bytes()));
    acc ^= u32::from(key.fields() == Some(fields)) ^ u32::from(key.as_bytes()[5]);
    acc
}

fn whitelist() -> u32 {
    let mut w = Whitelist::new();
    let mut acc = code(w.add_pids(black_box(0), black_box(&[10, 11, 12])));
    acc ^= code(w.add(WhitelistEntry::with_start_time(1, 13, black_box(99))));
    acc ^= code(w.add_pids_with(2, black_box(&[14]), |pid| pid as u64 * 3));
    acc ^= u32::from(w.matches(black_box(1), 13, 99, 0))
        ^ u32::from(w.contains(&WhitelistEntry::new(0, 10)));
    acc ^= w.iter().map(|e| e.pid as u32).sum::<u32>() ^ w.len() as u32;
    w.clear();
    acc ^ u32::from(w.is_empty())
}

fn lifecycle_flags_errors_soc() -> u32 {
    let mut acc = 0;
    let state = Lifecycle::from_u8(black_box(2)).unwrap_or(Lifecycle::Destroyed);
    for op in [
        Op::Record,
        Op::BatchReset(Soc::Ascend910_93.caps().ipc_batch_reset),
        Op::SetImportPid,
        Op::Destroy,
    ] {
        acc ^= match state.apply(black_box(op)) {
            Ok(s) => s as u32,
            Err(e) => e.code() as u32,
        };
    }
    acc ^= u32::from(state.is_owner());
    acc ^= code(CreateFlags::from_raw(black_box(1)).map(|f| f.bits()));
    acc ^= code(ExportFlags::from_raw(black_box(2)).map(|f| f.pid_validation() as u32));
    acc ^= code(ImportFlags::from_raw(black_box(0x1_0000_0002)));
    acc ^= code(Error::check(black_box(207009)).map_err(|_| Error::NoNotifyResource));
    acc ^= code(Error::try_from(black_box(107017)).map_err(|_| Error::ParamInvalid));
    acc ^= Error::ALL.len() as u32 ^ Error::OverLimit.name().len() as u32;
    let soc = Soc::from_name(black_box("Ascend910B3")).unwrap_or(Soc::IPV350);
    acc ^= soc.max_notifies()
        ^ u32::from(soc.has(Feature::Ipc))
        ^ code(soc.require(Feature::CntNotify));
    acc ^= soc.caps().max_notifies ^ soc.name().len() as u32 ^ soc.product().len() as u32;
    acc ^= Timeout::from_c(black_box(u32::MAX))
        .resolve(black_box(5))
        .to_c();
    acc ^= u32::from(SyncWait::from_c_ms(black_box(-1)).is_some());
    acc
}

fn typed() -> Result<u32> {
    let fw = Fw;
    let mut acc = 0;
    let dev = Device::<Ascend910_93, _>::new(&fw, black_box(0))?;
    let stream = dev.default_stream()?;
    fw.set_op_wait_timeout(black_box(1))?;

    let n = dev.create_notify()?;
    let (n, key) = n.export().map_err(|(_, e)| e)?;
    let n = n.allow_pids(black_box(&[FW_PID])).map_err(|(left, e)| {
        black_box(matches!(left, AllowFailed::Exported(_)));
        e
    })?;
    n.allow_server_pids(black_box(&[ServerPid { sdid: 1, pid: 9 }]))?;
    let imported = dev.import(&key, ImportFlags::from_raw(black_box(0))?)?;
    imported.record(&stream)?;
    n.wait_and_reset(&stream, Timeout::from_c(black_box(1)))?;
    stream.synchronize()?;
    acc ^= n.id()? ^ imported.id()?;
    imported.destroy()?;

    let a = dev.create_device_only_notify()?;
    let (b, _open_key) = dev.create_notify()?.export_open().map_err(|(_, e)| e)?;
    a.record(&stream)?;
    dev.batch_reset(&[a.reset_ref(), b.reset_ref()])?;
    b.reset()?;
    let raw = a.into_raw();
    let any = NotifyAny::from_raw(dev, raw)?;
    acc ^= any.state() as u32;
    let a = any
        .into_typed::<acl_notify_core::typed::Created>()
        .map_err(|(_, e)| e)?;
    acc ^= a.info()?.flags.bits() as u32;
    drop(a);

    // The dynamic SoC form answers 207000 at run time where the SoC lacks a feature.
    let any_dev = Device::<AnySoc, _>::new(&fw, 0)?;
    acc ^= code(any_dev.create_notify().map(|n| n.state() as u32));
    acc ^= code(stream.synchronize_within(Duration::from_millis(black_box(10))));
    acc ^= code(stream.query().map(|s| s as u32));
    Ok(acc)
}

/// Entry point (never run: see the module docs).
#[unsafe(no_mangle)]
pub extern "C" fn _start() -> ! {
    let mut acc = pools();
    acc ^= keys();
    acc ^= whitelist();
    acc ^= lifecycle_flags_errors_soc();
    acc ^= code(typed());
    black_box(acc);
    loop {
        core::hint::spin_loop();
    }
}
