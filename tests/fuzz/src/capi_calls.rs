//! Fuzz target: the C ABI (`libascendcl.so`, linked as the `acl-notify-capi` rlib) driven by
//! random sequences of SPEC §3 calls — with live, destroyed, stale (previous session), garbage
//! and wrongly-typed handles, NULLs, random flags, lengths, PID lists and keys (real, tampered
//! and made up).
//!
//! Properties:
//! - no panic (libfuzzer's panic hook aborts even on a panic the library would catch), no
//!   crash, no hang (libFuzzer `-timeout`): synchronizes are always bounded;
//! - every call returns 0 or a SPEC §5 code, and the codes the check order fixes are exact:
//!   NULL notify → 100000 (107000 for the inter-server whitelist), a non-NULL destroyed or
//!   garbage notify → 107017 whatever the other arguments;
//! - ids are unique: two live notifies owned by this process on one device never share an id;
//! - nothing leaks: after each input the session is finalised (`aclFinalize` discards every
//!   stream and destroys every handle) and, once the streams have let go, every device of the
//!   namespace has all its ids free again.
//!
//! The namespace and SoC come from `ACL_NOTIFY_SIM_NAMESPACE` / `ACL_NOTIFY_SIM_SOC` (set by
//! `cargo xtask fuzz`; default SoC here Ascend910_93, which has every notify feature).

use std::ffi::{c_char, c_int, c_void};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use acl_notify_core::{Error, HostOps};
use acl_notify_sim::Sim;
use arbitrary::Arbitrary;
use ascendcl::ffi::*;

const DEVICES: u32 = 2;

/// How a handle argument is chosen.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum H {
    /// A live handle this input created or imported (index modulo their number).
    Live(u8),
    /// A handle destroyed earlier (this input or an earlier session).
    Dead(u8),
    /// A stream handle passed as a notify or the other way round.
    OtherKind(u8),
    Null,
    /// Any pointer-sized value.
    Garbage(u64),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum KeySrc {
    /// A key this input exported.
    Real(u8),
    /// A real key with one byte changed.
    Tampered(u8, u8, u8),
    /// Made-up bytes (NUL-terminated by the harness).
    Made([u8; 16]),
    /// A 64-character well-formed key with random fields.
    WellFormed(u16, u8, u16, u32, u128),
    Null,
}

#[derive(Arbitrary, Debug)]
pub enum Op {
    SetDevice(i8),
    CreateNotify { flag: u8, null: bool },
    DestroyNotify(H),
    Record(H, H),
    Wait(H, H, u8),
    GetId(H, bool),
    BatchReset(Vec<H>, u8, bool),
    GetKey(H, u8, u8, bool),
    SetPid(H, Vec<i32>, u8, bool),
    SetPidInter(H, Vec<(u32, bool, u8)>, u8, bool),
    Import(KeySrc, u64, bool),
    CreateStream(bool),
    DestroyStream(H, bool),
    Sync(H, u8),
    Query(H, bool),
    HostFunc(H, bool),
    SetOpWaitTimeout(u8),
    GetTgid(bool),
    ResetDevice(i8, bool),
    Peer(i8, i8, u32, bool),
}

/// SPEC §5 codes (plus success).
fn is_spec_code(c: aclError) -> bool {
    c == 0 || Error::ALL.iter().any(|e| e.code() == c)
}

#[derive(Clone, Copy)]
struct Live {
    handle: usize,
    /// Created here (not imported).
    owned: bool,
    /// The device current when it was created or imported.
    device: i32,
}

#[derive(Default)]
struct State {
    notifies: Vec<Live>,
    streams: Vec<usize>,
    keys: Vec<[u8; 65]>,
}

/// Handles destroyed in earlier inputs (earlier sessions): must stay dead.
fn graveyard() -> &'static std::sync::Mutex<Vec<usize>> {
    static G: OnceLock<std::sync::Mutex<Vec<usize>>> = OnceLock::new();
    G.get_or_init(Default::default)
}

fn checker() -> &'static Sim {
    static SIM: OnceLock<Sim> = OnceLock::new();
    SIM.get_or_init(|| {
        // SAFETY: runs once, before the first aclInit, while this process has no other
        // threads that read the environment.
        unsafe {
            if std::env::var_os("ACL_NOTIFY_SIM_SOC").is_none() {
                std::env::set_var("ACL_NOTIFY_SIM_SOC", "Ascend910_93");
            }
            std::env::set_var("ACL_NOTIFY_SIM_DEVICES", DEVICES.to_string());
            if std::env::var_os("ACL_NOTIFY_SIM_NAMESPACE").is_none() {
                std::env::set_var(
                    "ACL_NOTIFY_SIM_NAMESPACE",
                    format!("fuzz-capi-{}", std::process::id()),
                );
            }
            std::env::set_var("ACL_NOTIFY_SIM_SERVER_ID", "0");
            // A reset waits this long for its device's queued tasks (a wait for ever among
            // them), then answers 507046 and releases the device anyway.
            std::env::set_var("ACL_NOTIFY_SIM_RESET_TIMEOUT", "0.05");
        }
        Sim::from_env().expect("the fuzz namespace opens")
    })
}

static HOST_CALLS: AtomicU64 = AtomicU64::new(0);

unsafe extern "C" fn host_fn(arg: *mut c_void) {
    HOST_CALLS.fetch_add(1, Ordering::Relaxed);
    let _ = arg;
}

fn pick<T: Copy>(v: &[T], i: u8) -> Option<T> {
    (!v.is_empty()).then(|| v[usize::from(i) % v.len()])
}

impl State {
    fn notify(&self, h: H) -> *mut c_void {
        let v = match h {
            H::Live(i) => pick(&self.notifies, i).map_or(0, |n| n.handle),
            H::Dead(i) => pick(&graveyard().lock().unwrap(), i).unwrap_or(0x1234),
            H::OtherKind(i) => pick(&self.streams, i).unwrap_or(0x5a00_0000_0000_0001),
            H::Null => 0,
            H::Garbage(g) => g as usize,
        };
        std::ptr::without_provenance_mut(v)
    }

    fn stream(&self, h: H) -> *mut c_void {
        let v = match h {
            H::Live(i) => pick(&self.streams, i).unwrap_or(0),
            H::Dead(i) => pick(&graveyard().lock().unwrap(), i).unwrap_or(0x4321),
            H::OtherKind(i) => pick(&self.notifies, i).map_or(0xa500_0000_0000_0001, |n| n.handle),
            H::Null => 0,
            H::Garbage(g) => g as usize,
        };
        std::ptr::without_provenance_mut(v)
    }

    /// Whether `h` names a notify handle that cannot be live.
    fn surely_bad_notify(&self, p: *mut c_void) -> bool {
        !p.is_null() && !self.notifies.iter().any(|n| n.handle == p.addr())
    }

    fn forget_notify(&mut self, p: *mut c_void) {
        if let Some(i) = self.notifies.iter().position(|n| n.handle == p.addr()) {
            self.notifies.swap_remove(i);
            graveyard().lock().unwrap().push(p.addr());
        }
    }
}

/// The code a notify argument alone decides, for functions that check it first.
fn expect_notify(st: &State, p: *mut c_void, code: aclError, what: &str) {
    if p.is_null() {
        assert_eq!(code, 100000, "{what}(NULL notify)");
    } else if st.surely_bad_notify(p) {
        assert_eq!(code, 107017, "{what}(bad notify {:#x})", p.addr());
    }
}

fn run(ops: &[Op]) {
    let mut st = State::default();
    for op in ops.iter().take(64) {
        let code: aclError = match op {
            Op::SetDevice(d) => aclrtSetDevice(i32::from(*d % 4)),
            Op::CreateNotify { flag, null } => {
                let mut out: aclrtNotify = std::ptr::null_mut();
                let p = if *null {
                    std::ptr::null_mut()
                } else {
                    &mut out
                };
                let flag = u64::from(*flag % 4);
                // SAFETY: `p` is NULL or points to a live local.
                let c = unsafe { aclrtCreateNotify(p, flag) };
                if *null {
                    assert_eq!(c, 100000);
                } else if c == 0 {
                    assert!(!out.is_null());
                    let device = current_device();
                    check_unique_id(&st, out, device);
                    st.notifies.push(Live {
                        handle: out.addr(),
                        owned: true,
                        device,
                    });
                } else if flag > 1 {
                    assert_eq!(c, 107000, "create with flag {flag}");
                }
                c
            }
            Op::DestroyNotify(h) => {
                let p = st.notify(*h);
                let c = aclrtDestroyNotify(p);
                expect_notify(&st, p, c, "aclrtDestroyNotify");
                if c == 0 {
                    st.forget_notify(p);
                }
                c
            }
            Op::Record(n, s) => {
                let p = st.notify(*n);
                let c = aclrtRecordNotify(p, st.stream(*s));
                expect_notify(&st, p, c, "aclrtRecordNotify");
                c
            }
            Op::Wait(n, s, t) => {
                let p = st.notify(*n);
                // Forever, 1 s, the process default, or a few seconds.
                let timeout = match t % 4 {
                    0 => 0,
                    1 => 1,
                    2 => u32::MAX,
                    _ => u32::from(t % 3 + 1),
                };
                let c = aclrtWaitAndResetNotify(p, st.stream(*s), timeout);
                expect_notify(&st, p, c, "aclrtWaitAndResetNotify");
                c
            }
            Op::GetId(h, null) => {
                let p = st.notify(*h);
                let mut id = u32::MAX;
                let out = if *null { std::ptr::null_mut() } else { &mut id };
                // SAFETY: `out` is NULL or a live local.
                let c = unsafe { aclrtGetNotifyId(p, out) };
                if p.is_null() || *null {
                    assert_eq!(c, 100000);
                } else {
                    expect_notify(&st, p, c, "aclrtGetNotifyId");
                }
                c
            }
            Op::BatchReset(hs, num, null) => {
                let mut arr: Vec<aclrtNotify> = hs.iter().take(8).map(|h| st.notify(*h)).collect();
                let num = usize::from(*num) % (arr.len() + 1);
                let p = if *null {
                    std::ptr::null_mut()
                } else {
                    arr.as_mut_ptr()
                };
                // SAFETY: `p` is NULL or points to `arr.len() >= num` handles.
                let c = unsafe { aclrtNotifyBatchReset(p, num) };
                if *null {
                    assert_eq!(c, 100000);
                } else if num == 0 {
                    assert_eq!(c, 107000);
                }
                c
            }
            Op::GetKey(h, len, flags, null) => {
                let p = st.notify(*h);
                let len = match len % 4 {
                    0 => usize::from(*len % 70),
                    _ => 65 + usize::from(*len % 8),
                };
                let mut buf = vec![0x5au8; len.max(1)];
                let kp = if *null {
                    std::ptr::null_mut()
                } else {
                    buf.as_mut_ptr().cast::<c_char>()
                };
                let flags = u64::from(*flags % 4);
                // SAFETY: `kp` is NULL or `buf`, at least `len` bytes long.
                let c = unsafe { aclrtNotifyGetExportKey(p, kp, len, flags) };
                if p.is_null() || *null {
                    assert_eq!(c, 100000);
                } else {
                    expect_notify(&st, p, c, "aclrtNotifyGetExportKey");
                }
                if c == 0 {
                    let end = buf
                        .iter()
                        .position(|&b| b == 0)
                        .expect("key is NUL-terminated");
                    assert_eq!(end, 64, "key length");
                    let mut k = [0u8; 65];
                    k[..64].copy_from_slice(&buf[..64]);
                    st.keys.push(k);
                } else {
                    // A failed call leaves the buffer alone.
                    assert!(
                        buf[..len].iter().all(|&b| b == 0x5a),
                        "buffer written on error"
                    );
                }
                c
            }
            Op::SetPid(h, pids, num, null) => {
                let p = st.notify(*h);
                let mut pids: Vec<i32> = pids.iter().take(80).copied().collect();
                if pids.is_empty() {
                    pids.push(std::process::id() as i32);
                }
                let num = usize::from(*num) % (pids.len() + 1);
                let pp = if *null {
                    std::ptr::null_mut()
                } else {
                    pids.as_mut_ptr()
                };
                // SAFETY: `pp` is NULL or points to at least `num` PIDs.
                let c = unsafe { aclrtNotifySetImportPid(p, pp, num) };
                if p.is_null() || *null {
                    assert_eq!(c, 100000);
                }
                c
            }
            Op::SetPidInter(h, entries, num, null) => {
                let p = st.notify(*h);
                let mut pid_store: Vec<i32> =
                    entries.iter().map(|_| std::process::id() as i32).collect();
                let base = pid_store.as_mut_ptr();
                let mut arr: Vec<aclrtServerPid> = entries
                    .iter()
                    .take(8)
                    .enumerate()
                    .map(|(i, (sdid, nullpid, n))| aclrtServerPid {
                        // Device 0 of server 0, 1 or 2 (its sdid), or, one time in four, a
                        // number that is mostly no sdid (refused with 107000).
                        sdid: if *sdid % 4 == 3 {
                            *sdid
                        } else {
                            acl_notify_core::sdid::PodDevice::new(*sdid % 3, 0)
                                .map_or(0, acl_notify_core::sdid::PodDevice::sdid)
                        },
                        pid: if *nullpid {
                            std::ptr::null_mut()
                        } else {
                            // `i < pid_store.len()`: in bounds (wrapping_add needs no unsafe).
                            base.wrapping_add(i)
                        },
                        // Only entries with num == 1 are read past the check (one PID each).
                        num: usize::from(*n % 3),
                    })
                    .collect();
                let num = usize::from(*num) % (arr.len() + 1);
                let ap = if *null {
                    std::ptr::null_mut()
                } else {
                    arr.as_mut_ptr()
                };
                // SAFETY: `ap` is NULL or `num` entries whose `pid` is NULL or points to one
                // PID (and entries with num != 1 are rejected before their PIDs are read).
                let c = unsafe { aclrtNotifySetImportPidInterServer(p, ap, num) };
                if p.is_null() || *null || num == 0 {
                    assert_eq!(c, 107000, "inter-server whitelist: no 100000 here");
                }
                c
            }
            Op::Import(src, flags, null) => {
                let mut key = [0u8; 80];
                let has_key = match *src {
                    KeySrc::Real(i) => match pick(&st.keys, i) {
                        Some(k) => {
                            key[..65].copy_from_slice(&k);
                            true
                        }
                        None => false,
                    },
                    KeySrc::Tampered(i, pos, val) => match pick(&st.keys, i) {
                        Some(k) => {
                            key[..65].copy_from_slice(&k);
                            let pos = usize::from(pos) % 64;
                            if key[pos] == val {
                                key[pos] ^= 1;
                            } else {
                                key[pos] = val;
                            }
                            true
                        }
                        None => false,
                    },
                    KeySrc::Made(b) => {
                        key[..16].copy_from_slice(&b);
                        true
                    }
                    KeySrc::WellFormed(server, device, id, generation, nonce) => {
                        let k = acl_notify_core::ExportKey::encode(&acl_notify_core::KeyFields {
                            server,
                            device,
                            id,
                            generation,
                            nonce: nonce.to_le_bytes(),
                        });
                        key[..64].copy_from_slice(k.as_bytes());
                        true
                    }
                    KeySrc::Null => false,
                };
                let tampered = matches!(src, KeySrc::Tampered(..)) && has_key;
                let mut out: aclrtNotify = std::ptr::null_mut();
                let op = if *null {
                    std::ptr::null_mut()
                } else {
                    &mut out
                };
                let kp = if has_key {
                    key.as_ptr().cast::<c_char>()
                } else {
                    std::ptr::null()
                };
                // SAFETY: `op` is NULL or a live local; `kp` is NULL or NUL-terminated
                // within `key` (its last bytes are always 0).
                let c = unsafe { aclrtNotifyImportByKey(op, kp, *flags) };
                if *null || !has_key {
                    assert_eq!(c, 100000);
                }
                if tampered {
                    assert_ne!(c, 0, "a tampered key opened a notify");
                }
                if matches!(src, KeySrc::WellFormed(..) | KeySrc::Made(..)) {
                    assert_ne!(c, 0, "a made-up key opened a notify");
                }
                if c == 0 {
                    assert!(!out.is_null());
                    st.notifies.push(Live {
                        handle: out.addr(),
                        owned: false,
                        device: current_device(),
                    });
                }
                c
            }
            Op::CreateStream(null) => {
                let mut s: aclrtStream = std::ptr::null_mut();
                let p = if *null { std::ptr::null_mut() } else { &mut s };
                // SAFETY: NULL or a live local.
                let c = unsafe { aclrtCreateStream(p) };
                if *null {
                    assert_eq!(c, 100000);
                } else if c == 0 {
                    st.streams.push(s.addr());
                }
                c
            }
            Op::DestroyStream(h, force) => {
                let s = st.stream(*h);
                // Draining a stream with a wait queued could block until the wait times out
                // (or forever): only force-destroy here.
                let _ = force;
                let c = aclrtDestroyStreamForce(s);
                if c == 0 {
                    st.streams.retain(|x| *x != s.addr());
                    graveyard().lock().unwrap().push(s.addr());
                }
                c
            }
            // Bounded (0 = poll, up to 19 ms): a stream may hold a wait that never ends.
            Op::Sync(h, ms) => {
                aclrtSynchronizeStreamWithTimeout(st.stream(*h), i32::from(*ms % 20))
            }
            Op::Query(h, null) => {
                let mut status: c_int = -1;
                let p = if *null {
                    std::ptr::null_mut()
                } else {
                    &mut status
                };
                // SAFETY: NULL or a live local.
                let c = unsafe { aclrtStreamQuery(st.stream(*h), p) };
                if *null {
                    assert_eq!(c, 100000);
                } else if c == 0 {
                    assert!(status == 0 || status == 1, "status {status}");
                }
                c
            }
            Op::HostFunc(h, null_fn) => {
                let f: aclrtHostFunc = if *null_fn { None } else { Some(host_fn) };
                // SAFETY: `host_fn` ignores its argument and may run on any thread.
                unsafe { aclrtLaunchHostFunc(st.stream(*h), f, std::ptr::null_mut()) }
            }
            Op::SetOpWaitTimeout(t) => aclrtSetOpWaitTimeout(u32::from(*t % 3)),
            Op::GetTgid(null) => {
                let mut pid = 0i32;
                let p = if *null {
                    std::ptr::null_mut()
                } else {
                    &mut pid
                };
                // SAFETY: NULL or a live local.
                let c = unsafe { aclrtDeviceGetBareTgid(p) };
                if *null {
                    assert_eq!(c, 100000);
                } else {
                    assert_eq!((c, pid), (0, std::process::id() as i32));
                }
                c
            }
            Op::ResetDevice(d, force) => {
                let d = i32::from(*d % 4);
                if *force {
                    aclrtResetDeviceForce(d)
                } else {
                    aclrtResetDevice(d)
                }
            }
            Op::Peer(a, b, flags, query) => {
                if *query {
                    let mut can = -1;
                    // SAFETY: a live local.
                    unsafe {
                        aclrtDeviceCanAccessPeer(&mut can, i32::from(*a % 3), i32::from(*b % 3))
                    }
                } else {
                    aclrtDeviceEnablePeerAccess(i32::from(*a % 3), *flags % 2)
                }
            }
        };
        assert!(
            is_spec_code(code),
            "{op:?} returned {code}, not a SPEC §5 code"
        );
        // A reset device drops this thread's handles on it (also when its drain expired,
        // 507046): learn which are gone.
        if matches!(op, Op::ResetDevice(..)) && (code == 0 || code == 507046) {
            refresh(&mut st);
        }
    }
}

/// Forgets handles the library no longer knows (after a device reset released them).
fn refresh(st: &mut State) {
    let mut gone = Vec::new();
    for n in &st.notifies {
        let mut id = 0u32;
        // SAFETY: a live local.
        let c = unsafe { aclrtGetNotifyId(std::ptr::without_provenance_mut(n.handle), &mut id) };
        if c == 107017 {
            gone.push(n.handle);
        }
    }
    st.notifies.retain(|n| !gone.contains(&n.handle));
    graveyard().lock().unwrap().extend(gone);
    st.streams.retain(|s| {
        let mut status = 0;
        // SAFETY: a live local.
        let c = unsafe { aclrtStreamQuery(std::ptr::without_provenance_mut(*s), &mut status) };
        c != 107017
    });
}

/// The calling thread's current device (-1 if none).
fn current_device() -> i32 {
    let mut dev = -1;
    // SAFETY: a live local.
    let _ = unsafe { aclrtGetDevice(&mut dev) };
    dev
}

/// Two live notifies owned by this process on one device never share an id.
fn check_unique_id(st: &State, new: aclrtNotify, dev: i32) {
    let mut id = 0u32;
    // SAFETY: a live local.
    assert_eq!(unsafe { aclrtGetNotifyId(new, &mut id) }, 0);
    for n in &st.notifies {
        if !n.owned || n.device != dev {
            continue;
        }
        let mut other = 0u32;
        // SAFETY: a live local.
        let c = unsafe { aclrtGetNotifyId(std::ptr::without_provenance_mut(n.handle), &mut other) };
        assert!(
            c != 0 || other != id,
            "id {id} handed out twice on device {dev} while both notifies are alive"
        );
    }
}

/// A call sequence of 1 to 64 operations (what `check` runs at most) for the replay.
pub fn generate(u: &mut arbitrary::Unstructured) -> arbitrary::Result<Vec<Op>> {
    let n = u.int_in_range(1..=64)?;
    (0..n).map(|_| Op::arbitrary(u)).collect()
}

pub fn check(ops: Vec<Op>) {
    let sim = checker();
    // SAFETY: NULL is no configuration file.
    let c = unsafe { aclInit(std::ptr::null()) };
    assert!(c == 0, "aclInit: {c}");
    let c = aclrtSetDevice(0);
    assert_eq!(c, 0);
    run(&ops);
    // Every input ends the session: every stream is discarded and every handle destroyed.
    // aclFinalize first lets the queued tasks run, for at most the session's drain bound (the
    // 0.05 s set above, at least 0.25 s): a wait with a longer timeout still queued ends it
    // with 507046, the streams released anyway.
    let c = aclFinalize();
    assert!(c == 0 || c == 507046, "aclFinalize: {c}");
    assert_eq!(aclFinalize(), 100037, "second aclFinalize");
    // Streams let go of their notifies asynchronously: allow a bounded settling time.
    let end = Instant::now() + Duration::from_secs(10);
    for dev in 0..DEVICES {
        loop {
            let free = sim.notifies_free(dev).expect("notifies_free");
            let max = acl_notify_core::Soc::from_name(
                &std::env::var("ACL_NOTIFY_SIM_SOC").unwrap_or_default(),
            )
            .map(|s| s.max_notifies())
            .unwrap_or(free);
            if free == max {
                break;
            }
            assert!(
                Instant::now() < end,
                "device {dev}: {free} of {max} ids free after aclFinalize (leak)"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let mut g = graveyard().lock().unwrap();
    let len = g.len();
    if len > 4096 {
        g.drain(..len - 4096);
    }
}
