//! Tests of the shared-file layer: the creation protocol's interleavings (through the
//! [`Step`] hook), refusals of bad files, and the names of the files.

use super::*;
use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64};

#[repr(C)]
struct TestHeader {
    ready: AtomicU32,
    creator: AtomicI32,
    value: AtomicU64,
    pid_ns: AtomicU64,
}

// SAFETY: atomics only, 24 bytes.
unsafe impl FileHeader for TestHeader {
    fn ready(&self) -> &AtomicU32 {
        &self.ready
    }
    fn creator_pid(&self) -> &AtomicI32 {
        &self.creator
    }
    fn pid_ns(&self) -> &AtomicU64 {
        &self.pid_ns
    }
    // No magic word or version: never taken for another version's file.
    const IDENTITY: (u64, u32) = (0, 0);
    fn set_identity(&self) {}
    fn identity(&self) -> (u64, u32) {
        Self::IDENTITY
    }
}

/// A namespace's files are found by the shape of their names, whatever their kind: one of
/// a kind nobody registered goes too, and so do per-device ones; a namespace whose name
/// goes on after a dot, and names of another shape, are left alone.
#[test]
fn remove_files_finds_every_kind_by_its_name_alone() {
    let ns = format!("unit-mapfile-rm-{}", std::process::id());
    let ours = [
        file_path(&ns, "srv", format_args!("0")),
        file_path(&ns, "zzz", format_args!("17")),
        file_path(&ns, "mem", format_args!("0d3")),
    ];
    let theirs = [
        file_path(&format!("{ns}.srv0"), "srv", format_args!("1")),
        Path::new(SHM_DIR).join(format!("{FILE_PREFIX}{ns}.srv")),
        Path::new(SHM_DIR).join(format!("{FILE_PREFIX}{ns}.srv0x")),
        Path::new(SHM_DIR).join(format!("{FILE_PREFIX}{ns}.0")),
    ];
    // Each file goes when the test ends, also when it fails.
    let _guards: Vec<TempPath> = ours
        .iter()
        .chain(&theirs)
        .map(|p| {
            std::fs::write(p, b"").unwrap();
            TempPath(p.clone())
        })
        .collect();
    assert_eq!(remove_files(&ns, Some("cnt")).unwrap(), 0);
    assert_eq!(remove_files(&ns, Some("zzz")).unwrap(), 1);
    assert_eq!(remove_files(&ns, None).unwrap(), 2);
    let left: Vec<bool> = theirs.iter().map(|p| p.exists()).collect();
    assert!(ours.iter().all(|p| !p.exists()));
    assert_eq!(left, [true; 4], "{theirs:?}");
}

/// Namespaces are listed by their files' names: each once, whatever its kinds, and one
/// whose name has dots in it whole.
#[test]
fn namespaces_are_found_by_their_files_names() {
    let ns = format!("unit-mapfile-ls-{}", std::process::id());
    let dotted = format!("{ns}.x");
    let paths = [
        file_path(&ns, "srv", format_args!("0")),
        file_path(&ns, "mem", format_args!("0d1")),
        file_path(&dotted, "zzz", format_args!("3")),
        // Not a simulator file's shape: no namespace of its own.
        Path::new(SHM_DIR).join(format!("{FILE_PREFIX}{ns}-odd.srv")),
    ];
    let _guards: Vec<TempPath> = paths
        .iter()
        .map(|p| {
            std::fs::write(p, b"").unwrap();
            TempPath(p.clone())
        })
        .collect();
    let found: Vec<String> = namespaces()
        .unwrap()
        .into_iter()
        .filter(|n| n.starts_with(&ns))
        .collect();
    assert_eq!(found, [ns.clone(), dotted]);
}

struct TempPath(PathBuf);
impl TempPath {
    fn new(tag: &str) -> TempPath {
        let p = PathBuf::from(format!(
            "/dev/shm/acl-notify-sim.unit-mapfile-{tag}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&p);
        TempPath(p)
    }
    fn open(&self, create: bool, writable: bool) -> Open<'_> {
        Open {
            path: &self.0,
            kind: Kind("test file"),
            create,
            writable,
            total: 2 * PAGE,
            init_wait: Duration::from_millis(100),
            keep_fd: false,
        }
    }
    /// Plants a 0600 file with `bytes`.
    fn plant(&self, bytes: &[u8]) {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&self.0)
            .unwrap();
        f.write_all(bytes).unwrap();
        std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
}
impl Drop for TempPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn fill(h: &TestHeader) {
    h.value.store(42, SeqCst);
}

fn check(h: &TestHeader, size: u64) -> Result<(), SimError> {
    if h.value.load(SeqCst) == 42 && size == 2 * PAGE as u64 {
        Ok(())
    } else {
        Err(SimError::new(Error::DrvInternalError, "header mismatch"))
    }
}

fn err_text(r: Result<Option<Map>, SimError>) -> String {
    match r {
        Err(e) => e.to_string(),
        Ok(m) => panic!("opened: {:?}", m.is_some()),
    }
}

#[test]
fn create_then_attach_read_only_and_missing_without_create() {
    let p = TempPath::new("basic");
    assert!(p.open(false, true).open(fill, check).unwrap().is_none());
    let created = p.open(true, true).open(fill, check).unwrap().unwrap();
    let h = created.header::<TestHeader>();
    assert_eq!(h.ready.load(SeqCst), READY);
    assert_eq!(h.creator.load(SeqCst), sys::getpid());
    let ro = p.open(false, false).open(fill, check).unwrap().unwrap();
    assert_eq!(ro.header::<TestHeader>().value.load(SeqCst), 42);
    let meta = std::fs::metadata(&p.0).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o600);
    assert_eq!(meta.len(), 2 * PAGE as u64);
    // The validator's verdict is passed on.
    h.value.store(7, SeqCst);
    assert!(err_text(p.open(true, true).open(fill, check)).contains("header mismatch"));
}

/// A file created in another PID namespace is refused with a message that says so and
/// what to do; one whose creator could not read its namespace (0) is not checked.
#[test]
fn a_file_of_another_pid_namespace_is_refused() {
    let p = TempPath::new("pidns");
    let created = p.open(true, true).open(fill, check).unwrap().unwrap();
    let h = created.header::<TestHeader>();
    assert_eq!(h.pid_ns.load(SeqCst), sys::pid_namespace());
    assert_ne!(sys::pid_namespace(), 0, "this test needs /proc/self/ns/pid");
    h.pid_ns.store(sys::pid_namespace() + 1, SeqCst);
    let msg = err_text(p.open(true, true).open(fill, check));
    assert!(msg.contains("107000"), "{msg}");
    assert!(
        msg.contains("another PID namespace") && msg.contains("ACL_NOTIFY_SIM_NAMESPACE"),
        "{msg}"
    );
    h.pid_ns.store(0, SeqCst);
    assert!(p.open(false, true).open(fill, check).unwrap().is_some());
}

/// Opens the file at `path` (read-write and creating it if `create`) on a thread of its own
/// with a creator wait of an hour, so that an open that waited for a creator would not
/// return: what it answers without waiting, the header's `value` or the error's text. The
/// only bound is a hang guard (60 s for what takes microseconds), which turns such a wait
/// into a failure; a loaded machine cannot. (Until 2026-12-07 these tests read a clock: an
/// open with a 100 ms wait had to take under 1 s, which a wait passed and a starved
/// thread could fail.)
fn open_without_waiting(path: &Path, create: bool) -> Result<Option<u64>, String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let owned = path.to_owned();
    std::thread::spawn(move || {
        let o = Open {
            path: &owned,
            kind: Kind("test file"),
            create,
            writable: create,
            total: 2 * PAGE,
            init_wait: Duration::from_secs(3600),
            keep_fd: false,
        };
        let r = o.open(fill, check);
        let _ = tx.send(
            r.map(|m| m.map(|m| m.header::<TestHeader>().value.load(SeqCst)))
                .map_err(|e| e.to_string()),
        );
    });
    rx.recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|e| {
            panic!("hang guard: the open of {path:?} (create {create}) waited for a creator: {e}")
        })
}

/// A size no creator produces is refused at once, not after the creator wait.
#[test]
fn a_short_file_is_refused_at_once() {
    let p = TempPath::new("short");
    p.plant(&[1u8; 100]);
    let e = open_without_waiting(&p.0, true).expect_err("a 100-byte file was opened");
    assert!(
        e.contains("only 100 bytes long") && e.contains("test file"),
        "{e}"
    );
}

#[test]
fn a_bad_ready_word_is_corruption() {
    let p = TempPath::new("ready");
    let mut page = vec![0u8; 2 * PAGE];
    page[..4].copy_from_slice(&0xdead_beef_u32.to_ne_bytes());
    p.plant(&page);
    let e = err_text(p.open(true, true).open(fill, check));
    assert!(e.contains("bad ready word"), "{e}");
}

/// An empty file nobody is initialising (a creator that died before sizing it, or any
/// process that made an empty file there) is re-created at once by a read-write opener,
/// without the wait for a creator at work, and refused at once by a read-only one.
#[test]
fn an_empty_file_nobody_initialises_is_taken_over_without_waiting() {
    let p = TempPath::new("empty-fast");
    for create in [false, true] {
        p.plant(&[]);
        let r = open_without_waiting(&p.0, create);
        if create {
            assert_eq!(r, Ok(Some(42)), "re-created and published");
        } else {
            let e = r.expect_err("an empty file opened read-only");
            assert!(e.contains("never initialised"), "{e}");
        }
        let _ = std::fs::remove_file(&p.0);
    }
}

/// An empty file whose init lock is held (a creator at work) is waited for, and not
/// removed when the wait ends: its creator is alive.
#[test]
fn an_empty_file_whose_creator_holds_the_init_lock_is_waited_for() {
    let p = TempPath::new("empty-held");
    p.plant(&[]);
    let creator = std::fs::File::open(&p.0).unwrap();
    use std::os::fd::AsRawFd as _;
    // SAFETY: flock on a descriptor `creator` owns.
    let locked = unsafe { libc::flock(creator.as_raw_fd(), libc::LOCK_EX) };
    assert_eq!(locked, 0);
    let t0 = Instant::now();
    let e = err_text(p.open(true, true).open(fill, check));
    assert!(e.contains("never initialised"), "{e}");
    assert!(
        t0.elapsed() >= Duration::from_millis(100),
        "{:?}",
        t0.elapsed()
    );
    assert!(p.0.exists(), "a file whose creator is at work was removed");
    drop(creator);
    // Released (the creator died): taken over. A child another test of this process forks
    // (some run their body in one) holds a copy of `creator`'s descriptor, and so its
    // lock, until it exits or execs: on a loaded machine that can take a while, so the
    // take-over is polled for (it must come).
    let t0 = Instant::now();
    let m = loop {
        match p.open(true, true).open(fill, check) {
            Ok(m) => break m.unwrap(),
            Err(e) if e.to_string().contains("never initialised") => {
                assert!(
                    t0.elapsed() < Duration::from_secs(30),
                    "never taken over: {e}"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(m.header::<TestHeader>().value.load(SeqCst), 42);
}

/// What a creator writes into a sized file to publish it (a [`TestHeader`] that `check`
/// accepts, its ready word last), through `f`'s descriptor.
fn publish_as_creator(f: &std::fs::File) {
    use std::os::unix::fs::FileExt as _;
    f.write_all_at(&sys::getpid().to_ne_bytes(), 4).unwrap();
    f.write_all_at(&42u64.to_ne_bytes(), 8).unwrap();
    f.write_all_at(&READY.to_ne_bytes(), 0).unwrap();
}

fn flock(f: &std::fs::File, how: libc::c_int) -> bool {
    use std::os::fd::AsRawFd as _;
    // SAFETY: flock on a descriptor `f` owns.
    unsafe { libc::flock(f.as_raw_fd(), how) == 0 }
}

/// The creator publishes its header just after an opener that waits for it read the
/// ready word as 0: the opener attaches (it judges the word it read, not a second read
/// of a word that may have changed meanwhile — which once took a just-published header
/// for a corrupt one, "bad ready word", when two processes started at once).
#[test]
fn a_header_published_just_after_its_ready_word_was_read_is_attached() {
    let p = TempPath::new("ready-race");
    p.plant(&vec![0u8; 2 * PAGE]);
    // The creator at work: sized, not published, its init lock held.
    let creator = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&p.0)
        .unwrap();
    assert!(flock(&creator, libc::LOCK_EX));
    let creator = std::rc::Rc::new(creator);
    let steps = std::rc::Rc::new(std::cell::Cell::new(0));
    let _hook = on_step({
        let (creator, steps) = (creator.clone(), steps.clone());
        move |s| {
            if s == Step::ReadyRead && steps.replace(steps.get() + 1) == 0 {
                publish_as_creator(&creator);
                assert!(flock(&creator, libc::LOCK_UN));
            }
        }
    });
    let m = p.open(true, true).open(fill, check).unwrap().unwrap();
    assert!(steps.get() >= 1, "the opener never waited for the header");
    let h = m.header::<TestHeader>();
    assert_eq!((h.ready.load(SeqCst), h.value.load(SeqCst)), (READY, 42));
}

/// An opener finds a file unpublished and its init lock free (its creator made it and
/// has not locked it yet); before the opener removes it, the creator locks it and
/// publishes: it must not be able to, for the opener would then remove a published file,
/// and the two processes would go on with two different files of one namespace. The
/// opener decides and removes under one hold of the lock, so the creator is shut out
/// (and, in the protocol, finds its file gone and starts again).
#[test]
fn a_creator_cannot_publish_between_an_opener_s_look_and_its_removal() {
    use std::os::unix::fs::MetadataExt as _;
    let p = TempPath::new("abandon-race");
    p.plant(&[]);
    let planted = std::fs::metadata(&p.0).unwrap().ino();
    // None: the hook did not run; Some(true): the creator published in between.
    let outcome = std::rc::Rc::new(std::cell::Cell::new(None));
    let _hook = on_step({
        let (path, outcome) = (p.0.clone(), outcome.clone());
        move |s| {
            if s != Step::FoundAbandoned || outcome.get().is_some() {
                return;
            }
            let creator = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .unwrap();
            let locked = flock(&creator, libc::LOCK_EX | libc::LOCK_NB);
            if locked {
                creator.set_len(2 * PAGE as u64).unwrap();
                publish_as_creator(&creator);
            }
            outcome.set(Some(locked));
        }
    });
    let m = p.open(true, true).open(fill, check).unwrap().unwrap();
    assert_eq!(m.header::<TestHeader>().value.load(SeqCst), 42);
    let now = std::fs::metadata(&p.0).unwrap().ino();
    assert_eq!(
        outcome.get(),
        Some(false),
        "published meanwhile: {}",
        if now == planted {
            "kept"
        } else {
            "and removed"
        }
    );
    assert_ne!(now, planted, "the abandoned file was not replaced");
}

/// Processes starting at once: each creator's new file, empty and not yet locked, is
/// taken for abandoned and removed by another process before its creator locks it, three
/// times over. The creator starts again each time (within the creator wait) and gets a
/// published file, rather than failing for a race it did not lose for good.
#[test]
fn a_creator_whose_file_is_removed_before_it_locks_it_starts_again() {
    let p = TempPath::new("created-race");
    let removed = std::rc::Rc::new(std::cell::Cell::new(0));
    let _hook = on_step({
        let (path, removed) = (p.0.clone(), removed.clone());
        move |s| {
            if s == Step::Created && removed.get() < 3 {
                std::fs::remove_file(&path).unwrap();
                removed.set(removed.get() + 1);
            }
        }
    });
    let m = p.open(true, true).open(fill, check).unwrap().unwrap();
    assert_eq!(removed.get(), 3);
    assert_eq!(m.header::<TestHeader>().ready.load(SeqCst), READY);
    assert!(p.0.exists());
}

/// An empty file (a creator that died before sizing it) is re-created by a read-write
/// opener, and refused by a read-only one.
#[test]
fn an_abandoned_empty_file_is_recreated() {
    let p = TempPath::new("empty");
    p.plant(&[]);
    let e = err_text(p.open(false, false).open(fill, check));
    assert!(e.contains("never initialised"), "{e}");
    let m = p.open(true, true).open(fill, check).unwrap().unwrap();
    assert_eq!(m.header::<TestHeader>().value.load(SeqCst), 42);
}
