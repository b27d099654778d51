//! Replays inputs through a target's `check` without libFuzzer: the checked-in seeds under
//! `fuzz/seeds/<target>/`, then inputs made by a seeded generator (the same on every run, so a
//! failure is reproducible by its number). A panic anywhere in the process during an input —
//! one the C library catches at its boundary included, as libFuzzer's hook would see it —
//! fails the run and names the input.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use arbitrary::{Arbitrary, Unstructured};

/// Generated inputs per target unless `ACL_NOTIFY_FUZZ_REPLAY_RUNS` says otherwise.
pub const GENERATED: usize = 3000;

/// Longest generated input, in bytes (enough for 64 operations of the C ABI target).
const MAX_LEN: usize = 2048;

static PANICKED: AtomicBool = AtomicBool::new(false);

/// Where the checked-in seeds of `target` live.
pub fn seed_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/seeds")
        .join(target)
}

/// One input of a replay run.
struct Case {
    name: String,
    bytes: Vec<u8>,
    /// Made by the generator (a structured target builds it with its `generate`), not a seed.
    generated: bool,
}

/// xorshift64*: small, deterministic, good enough to spread bytes.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn bytes(&mut self) -> Vec<u8> {
        let len = match self.next() % 4 {
            0 => (self.next() % 64) as usize,
            1 => (self.next() % 512) as usize,
            _ => (self.next() % MAX_LEN as u64) as usize,
        };
        (0..len).map(|_| self.next() as u8).collect()
    }
}

fn cases(target: &str) -> Result<Vec<Case>, String> {
    let dir = seed_dir(target);
    let mut seeds: Vec<Case> = Vec::new();
    let rd = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for e in rd {
        let e = e.map_err(|e| format!("{}: {e}", dir.display()))?;
        let bytes = std::fs::read(e.path()).map_err(|x| format!("{}: {x}", e.path().display()))?;
        seeds.push(Case {
            name: format!("seed {}", e.path().display()),
            bytes,
            generated: false,
        });
    }
    if seeds.is_empty() {
        return Err(format!("no seeds in {}", dir.display()));
    }
    seeds.sort_by(|a, b| a.name.cmp(&b.name));
    let runs = match std::env::var("ACL_NOTIFY_FUZZ_REPLAY_RUNS") {
        Ok(v) => v
            .parse()
            .map_err(|_| format!("ACL_NOTIFY_FUZZ_REPLAY_RUNS={v:?} is not a count"))?,
        Err(_) => GENERATED,
    };
    // One fixed seed per target name, so the targets see different streams.
    let mut g = Gen(target.bytes().fold(0x9e37_79b9_7f4a_7c15, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    }));
    seeds.extend((0..runs).map(|i| Case {
        name: format!("generated input #{i}"),
        bytes: g.bytes(),
        generated: true,
    }));
    Ok(seeds)
}

/// What a replay ran.
#[derive(Debug, Clone, Copy)]
pub struct Ran {
    /// Inputs run through `check`.
    pub checked: usize,
    /// Inputs `arbitrary` could not decode (libFuzzer skips them the same way).
    pub undecodable: usize,
}

/// Runs every seed and generated input of `target` through `check`, which takes the raw
/// bytes and says whether it ran the input (`false`: not decodable). Returns what ran, or
/// what failed.
pub fn replay_bytes(target: &str, check: impl Fn(&[u8], bool) -> bool) -> Result<Ran, String> {
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICKED.store(true, Ordering::SeqCst);
        prev(info);
    }));
    let cases = cases(target)?;
    let mut ran = Ran {
        checked: 0,
        undecodable: 0,
    };
    for c in &cases {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            check(&c.bytes, c.generated)
        }));
        match r {
            Ok(true) => ran.checked += 1,
            Ok(false) => ran.undecodable += 1,
            Err(_) => {}
        }
        if r.is_err() || PANICKED.load(Ordering::SeqCst) {
            return Err(format!(
                "{target}: {} ({} bytes) broke a property (the panic above says which): {:02x?}",
                c.name,
                c.bytes.len(),
                c.bytes
            ));
        }
    }
    Ok(ran)
}

/// [`replay_bytes`] for a target whose input is built with `arbitrary`: a seed is decoded as
/// libFuzzer's `fuzz_target!(|input: T| ..)` decodes it (`arbitrary_take_rest`); a generated
/// input by the target's `generate`, which chooses the sizes of its collections itself
/// (`arbitrary`'s own collection lengths give one or two elements for random bytes).
pub fn replay<T: for<'a> Arbitrary<'a>>(
    target: &str,
    generate: impl Fn(&mut Unstructured) -> arbitrary::Result<T>,
    check: impl Fn(T),
) -> Result<Ran, String> {
    replay_bytes(target, |bytes, generated| {
        let input = if generated {
            generate(&mut Unstructured::new(bytes))
        } else {
            T::arbitrary_take_rest(Unstructured::new(bytes))
        };
        match input {
            Ok(input) => {
                check(input);
                true
            }
            Err(_) => false,
        }
    })
}

/// Fewest inputs a replay must really run (decoded and checked): a generator or a decoder
/// change that made nearly every input undecodable would otherwise pass while testing nothing.
pub const MIN_CHECKED: usize = GENERATED / 2;

/// The one test of a replay test binary, named after the target: runs the replay in a
/// namespace of its own, prints one line, and fails on a broken property or when too few
/// inputs could be decoded. The binary hands it to `libtest_mimic` with one test thread, so
/// that `cargo test`'s and cargo-nextest's arguments (`--list`, filters, `--exact`) work as for
/// any test and the replay runs on the main thread (see the `set_var` below).
pub fn run_target(target: &str, run: impl FnOnce() -> Result<Ran, String>) -> Result<(), String> {
    // A namespace of the run's own, removed at its end (the targets read these variables).
    let ns = format!("fuzz-replay-{target}-{}", std::process::id());
    // SAFETY: on the main thread of a test binary whose harness runs its one test there
    // (one test thread, no other thread started), before the replay starts any.
    unsafe {
        std::env::set_var("ACL_NOTIFY_FUZZ_NAMESPACE", &ns);
        std::env::set_var("ACL_NOTIFY_SIM_NAMESPACE", &ns);
    }
    let start = std::time::Instant::now();
    let result = run();
    let _ = acl_notify_sim::Sim::remove_namespace(&ns);
    let want = if std::env::var_os("ACL_NOTIFY_FUZZ_REPLAY_RUNS").is_some() {
        1
    } else {
        MIN_CHECKED
    };
    match result {
        Ok(r) if r.checked >= want => {
            println!(
                "replay {target}: {} inputs checked, {} not decodable, in {:.1} s",
                r.checked,
                r.undecodable,
                start.elapsed().as_secs_f64()
            );
            Ok(())
        }
        Ok(r) => Err(format!(
            "replay {target}: only {} inputs decoded ({} not decodable; want {want})",
            r.checked, r.undecodable
        )),
        Err(e) => Err(format!("replay {target}: {e}")),
    }
}
