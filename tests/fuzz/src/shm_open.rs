//! Fuzz target: the simulator's validation of its shared-memory file (header, process table,
//! id pools, notify slots, whitelists), through the public entry point `SimBuilder::open`.
//!
//! Each input: a well-formed namespace file is created by a real open (with notifies created,
//! exported, recorded and destroyed so that pools, slots and whitelists hold data), closed,
//! then damaged by the input's patches (bytes written over the header, over bytes that were
//! non-zero, or anywhere; word-sized values; truncation), as another process or a stray
//! writer could. The file is then opened again and a fixed script of calls is run on it.
//!
//! Properties: no panic, no crash (SIGSEGV/SIGBUS), no hang (libFuzzer's `-timeout`); every
//! failure is a `SimError` whose code is one of SPEC §5's and whose message is non-empty.
//! Corruption may legitimately make calls fail; it must never make them misbehave.
//!
//! The `ready` word of the header (bytes 12..16) is left alone, and the file is never made
//! empty: both mean "a creator is still initialising", and an opener legitimately waits
//! (bounded, 5 s) for it; those paths are covered by the simulator's own tests.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use acl_notify_core::{
    Backend, BackendError, CreateFlags, Error, ExportFlags, HostOps, ImportFlags, NotifyResources,
    RawNotify, Soc, StreamOps, SyncWait,
};
use acl_notify_sim::{Sim, SimError};
use arbitrary::Arbitrary;

const SOC: Soc = Soc::Ascend310P;
const DEVICES: u32 = 2;
/// The header's `ready` word, left to the creator (see the module docs).
const READY_WORD: std::ops::Range<u64> = 12..16;

#[derive(Arbitrary, Debug)]
pub enum Patch {
    /// Bytes at an offset within the first 256 bytes (the header).
    Header { off: u8, bytes: Vec<u8> },
    /// Bytes at (near) one of the offsets that were non-zero in the pristine file.
    Hot {
        pick: u16,
        delta: i8,
        bytes: Vec<u8>,
    },
    /// A little-endian 32- or 64-bit value at (near) a hot offset, aligned.
    Word { pick: u16, value: u64, wide: bool },
    /// Bytes anywhere in the file.
    Anywhere { off: u32, bytes: Vec<u8> },
    /// Truncate or extend the file.
    Resize { size: u32 },
}

#[derive(Arbitrary, Debug)]
pub struct Input {
    pub patches: Vec<Patch>,
    /// Drives the choices of the script run after a successful open.
    pub script: Vec<u8>,
}

struct Env {
    ns: String,
    path: PathBuf,
    pristine: Vec<u8>,
    hot: Vec<u64>,
}

fn env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    ENV.get_or_init(|| {
        let ns = std::env::var("ACL_NOTIFY_FUZZ_NAMESPACE")
            .unwrap_or_else(|_| format!("fuzz-shm-{}", std::process::id()));
        let _ = Sim::remove_namespace(&ns);
        let path: PathBuf = {
            let sim = open(&ns).expect("a fresh namespace opens");
            populate(&sim);
            sim.shm_path().to_owned()
        };
        let pristine = std::fs::read(&path).expect("the namespace file exists after close");
        let hot: Vec<u64> = pristine
            .iter()
            .enumerate()
            .filter(|(_, b)| **b != 0)
            .map(|(i, _)| i as u64)
            .collect();
        assert!(!hot.is_empty(), "the pristine file has data");
        Env {
            ns,
            path,
            pristine,
            hot,
        }
    })
}

fn open(ns: &str) -> Result<Sim, SimError> {
    Sim::builder()
        .soc(SOC)
        .devices(DEVICES)
        .namespace(ns)
        .open()
}

/// Leaves data in pools, slots and whitelists: ids allocated and freed (links, generations),
/// one exported notify with a whitelist, left alive until the Sim closes.
fn populate(sim: &Sim) {
    let mut keep = Vec::new();
    for dev in 0..DEVICES {
        for k in 0..5 {
            let n = sim
                .create_notify(dev, CreateFlags::empty())
                .expect("create on a fresh namespace");
            if k % 2 == 0 {
                sim.destroy_notify(n).expect("destroy");
            } else {
                keep.push(n);
            }
        }
    }
    let n = keep[0];
    let key = sim.export_key(n, ExportFlags::empty()).expect("export");
    sim.set_import_pids(n, &[sim.bare_tgid(), 12345])
        .expect("whitelist");
    let imported = sim.import_by_key(0, key.as_str(), ImportFlags::empty());
    let s = sim.default_stream(0).expect("default stream");
    sim.record(n, s).expect("record");
    sim.synchronize(s, SyncWait::AtMost(Duration::from_secs(5)))
        .expect("synchronize");
    if let Ok(i) = imported {
        let _ = sim.destroy_notify(i);
    }
    for n in keep {
        sim.destroy_notify(n).expect("destroy");
    }
}

fn check_err(e: &SimError) {
    let code = e.kind().code();
    assert!(
        Error::ALL.iter().any(|x| x.code() == code),
        "error code {code} is not a CANN code: {e}"
    );
    assert!(!e.to_string().is_empty(), "empty error message");
}

fn apply(env: &Env, patches: &[Patch]) {
    let f = OpenOptions::new()
        .write(true)
        .open(&env.path)
        .expect("namespace file opens for writing");
    let len = env.pristine.len() as u64;
    let hot = |pick: u16, delta: i64| {
        let h = env.hot[usize::from(pick) % env.hot.len()];
        h.saturating_add_signed(delta).min(len.saturating_sub(1))
    };
    let write = |off: u64, bytes: &[u8]| {
        let end = (off + bytes.len() as u64).min(len);
        for (i, b) in (off..end).zip(bytes) {
            if !READY_WORD.contains(&i) {
                let _ = f.write_at(&[*b], i);
            }
        }
    };
    for p in patches.iter().take(16) {
        match p {
            Patch::Header { off, bytes } => write(u64::from(*off), bytes),
            Patch::Hot { pick, delta, bytes } => write(hot(*pick, i64::from(*delta)), bytes),
            Patch::Word { pick, value, wide } => {
                let at = hot(*pick, 0);
                if *wide {
                    write(at & !7, &value.to_le_bytes());
                } else {
                    write(at & !3, &(*value as u32).to_le_bytes());
                }
            }
            Patch::Anywhere { off, bytes } => write(u64::from(*off) % len, bytes),
            Patch::Resize { size } => {
                // Never empty: an empty file is one whose creator has not sized it yet, and
                // openers wait (bounded, 5 s) for it — by design, not a hang. Any other size,
                // a page or less included, must be refused or used at once.
                let _ = f.set_len(1 + u64::from(*size) % (len * 2 - 1));
            }
        }
    }
}

/// Calls on a file that opened despite the damage: each must answer Ok or a CANN error.
fn script(sim: &Sim, choices: &[u8]) {
    let mut notes: Vec<RawNotify> = Vec::new();
    for dev in 0..DEVICES {
        match sim.notifies_free(dev) {
            Ok(n) => assert!(n <= SOC.max_notifies(), "{n} free ids on a 1024-id device"),
            Err(e) => check_err(&e),
        }
    }
    for (i, c) in choices.iter().take(24).enumerate() {
        let dev = u32::from(c & 1);
        let pick = notes
            .get(usize::from(*c >> 3) % notes.len().max(1))
            .copied();
        let r: Result<(), SimError> = match (c >> 1) & 3 {
            0 => sim
                .create_notify(dev, CreateFlags::empty())
                .map(|n| notes.push(n)),
            1 => match pick {
                Some(n) => sim.host_wait(n, Duration::from_millis(2)),
                None => Ok(()),
            },
            2 => match pick {
                Some(n) => sim
                    .export_key(n, ExportFlags::DISABLE_PID_VALIDATION)
                    .and_then(|k| sim.import_by_key(dev, k.as_str(), ImportFlags::empty()))
                    .map(|n| notes.push(n)),
                None => Ok(()),
            },
            _ => match pick {
                Some(n) => {
                    notes.retain(|x| *x != n);
                    sim.destroy_notify(n)
                }
                None => sim.gc().map(|_| ()),
            },
        };
        if let Err(e) = r {
            check_err(&e);
        }
        if i % 8 == 7
            && let Some(n) = pick
            && let Err(e) = sim.try_consume(n)
        {
            check_err(&e);
        }
    }
    for n in notes {
        if let Err(e) = sim.destroy_notify(n) {
            check_err(&e);
        }
    }
    if let Err(e) = sim.gc() {
        check_err(&e);
    }
}

/// One to four patches and a script of up to 24 choices (what `check` uses) for the replay.
pub fn generate(u: &mut arbitrary::Unstructured) -> arbitrary::Result<Input> {
    let n = u.int_in_range(1..=4)?;
    let patches = (0..n)
        .map(|_| Patch::arbitrary(u))
        .collect::<arbitrary::Result<_>>()?;
    let len = u.int_in_range(0..=24)?;
    let script = (0..len)
        .map(|_| u8::arbitrary(u))
        .collect::<arbitrary::Result<_>>()?;
    Ok(Input { patches, script })
}

pub fn check(input: Input) {
    let env = env();
    // Back to the pristine bytes (and size), then the damage.
    std::fs::write(&env.path, &env.pristine).expect("restore the namespace file");
    apply(env, &input.patches);
    match open(&env.ns) {
        Ok(sim) => script(&sim, &input.script),
        Err(e) => check_err(&e),
    }
}
