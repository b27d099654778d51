//! No success for an effect a truncated file lost: a call that touches the shared files checks,
//! once it is done, whether one of them was found cut short while it ran, and answers 507899
//! instead of what it was about to report.
//!
//! The first access to a cut-off page is answered by [`crate::sigbus`] with a private zero page:
//! the access goes on and "succeeds" on memory nobody else sees. Each call checks
//! [`intact`](crate::shm::ShmFile::intact) before it starts, which catches every later call,
//! but not the one whose own access found the loss. [`Sim::checked`] closes that gap: it
//! reads the handler's fault count before and after the call, and
//!
//! - a call that succeeded while one of the `Sim`'s files it can touch is lost answers 507899
//!   (its effect may be in a zero page); a notify call never touches the device-memory files,
//!   so their loss (found by another thread while it ran) does not change its answer;
//! - a call that failed answers 507899 instead if a page was lost during it (its failure may
//!   come from zeros it read: an import refused because the whitelist read as empty);
//! - a call that failed on a file already lost before it started keeps its error (the
//!   order of checks of SPEC §3 decides, as for an intact file; most answer 507899 anyway).
//!
//! The cost when nothing is lost is two loads of one atomic (and one of the file's flag once
//! the handler has run in this process). Stream
//! tasks (records and waits) make the same check themselves after touching the notify, so a
//! record that landed in a zero page fails its stream's next synchronize with 507899.
//!
//! Device memory ([`crate::mem`]) is checked the same way, its files included
//! ([`Sim::mem_checked`]): a copy or set into an arena cut short answers 507899, and so does
//! a queued copy or set (through its stream's next synchronize).

use crate::Sim;
use crate::error::SimError;
use crate::sigbus;

impl Sim {
    /// Runs `f`, a call that touches the shared files, and answers 507899 if it may have
    /// acted on a page cut off by a truncation (see the module docs).
    pub(crate) fn checked<T>(
        &self,
        f: impl FnOnce() -> Result<T, SimError>,
    ) -> Result<T, SimError> {
        self.checked_by(f, || self.inner.file.is_lost(), || self.notify_lost_file())
    }

    /// [`checked`](Self::checked) for the device-memory calls ([`crate::mem`]): the
    /// device-memory files count too, and a call made once one of them was found cut short
    /// answers 507899 at once (what it would read there are zeros: a slot that looks freed,
    /// a whitelist that looks empty).
    pub(crate) fn mem_checked<T>(
        &self,
        f: impl FnOnce() -> Result<T, SimError>,
    ) -> Result<T, SimError> {
        // Only the handler marks a file lost, and it counts what it does: until it has run
        // once in this process, no device-memory file can be lost (and a copy pays nothing
        // for the check but a load).
        let mem_lost = || sigbus::faults() != 0 && self.mem().any_lost();
        if mem_lost()
            && let Some(e) = self.mem().lost_file()
        {
            return Err(e);
        }
        self.checked_by(
            f,
            || self.inner.file.is_lost() || mem_lost(),
            || self.lost_file(),
        )
    }

    /// `lost` says whether a file the call may touch is lost; `lost_file` names one. A
    /// notify call never touches device memory: a fault there (another thread's queued copy,
    /// say, running while this call did) must not turn its success into 507899.
    fn checked_by<T>(
        &self,
        f: impl FnOnce() -> Result<T, SimError>,
        lost: impl FnOnce() -> bool,
        lost_file: impl FnOnce() -> Option<SimError>,
    ) -> Result<T, SimError> {
        let before = sigbus::faults();
        let r = f();
        let during = sigbus::faults() != before;
        // Only the handler marks a file lost, and it counts what it does: with no fault yet
        // in this process, nothing is lost (a load instead of the files' flags).
        if !during && (r.is_err() || before == 0 || !lost()) {
            return r;
        }
        match lost_file() {
            Some(e) if r.is_ok() || during => Err(e),
            _ => r,
        }
    }

    /// 507899 naming the first of this `Sim`'s files (its server's, other servers' it opened,
    /// the count-notify file, the device-memory files) found cut short; `None` if all are
    /// intact.
    fn lost_file(&self) -> Option<SimError> {
        self.notify_lost_file().or_else(|| self.mem().lost_file())
    }

    /// [`lost_file`](Self::lost_file) without the device-memory files: the files a notify
    /// call (a record, a wait, a synchronize, a count notify's call) can touch.
    pub(crate) fn notify_lost_file(&self) -> Option<SimError> {
        if let Err(e) = self.inner.file.intact() {
            return Some(e);
        }
        let remote = crate::locks::lock(&self.inner.remote);
        if let Some(e) = remote.values().find_map(|f| f.intact().err()) {
            return Some(e);
        }
        drop(remote);
        self.inner.cnt.opened().and_then(|f| f.intact().err())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use acl_notify_core::{
        Backend, BackendError, CreateFlags, Error, ExportFlags, HostOps, ImportFlags,
        NotifyResources, ServerPid, Soc, StreamOps, StreamStatus, SyncWait, Timeout,
    };

    use crate::NamespaceGuard as Ns;
    use crate::Sim;
    use crate::error::SimError;

    /// Boundaries whose cut takes pages the calls below use: some call must find each.
    const FIRST_PAGES_USED: [&str; 6] = [
        "nothing kept",
        "process table",
        "device headers",
        "id pools",
        "notify slots",
        "whitelists",
    ];

    type Call<'a> = (&'static str, Box<dyn Fn() -> Result<(), SimError> + 'a>);

    /// Truncates the namespace's file at every size boundary of its layout under a running
    /// process, then makes every notify call once (starting from each call in turn, so that
    /// each gets to be the first to touch a cut-off page). A call may succeed only while
    /// nothing it touched was cut off: a success with the file found lost is an effect that
    /// went into a private zero page. Every failure is 507899 (the calls are valid ones). Some
    /// call finds the loss at every boundary that cuts a page the calls use; at the file's
    /// end all succeed.
    #[test]
    fn no_call_reports_success_for_an_effect_a_truncation_lost() {
        let probe_ns = Ns(format!("unit-lost-probe-{}", std::process::id()));
        let probe = Sim::builder()
            .soc(Soc::Ascend910_93)
            .devices(2)
            .namespace(&probe_ns.0)
            .open()
            .unwrap();
        let boundaries = probe.inner.file.layout_boundaries();
        drop(probe);
        let end = boundaries.last().map(|b| b.1);
        let calls = 13;
        let mut noticed_first = std::collections::BTreeMap::new();
        for (what, at) in boundaries {
            for first in 0..calls {
                let ns = Ns(format!("unit-lost-{}-{first}-{at}", std::process::id()));
                let lost = run(&ns.0, at, first, what);
                if Some(at) == end {
                    assert!(
                        lost.is_none(),
                        "{what}: nothing was cut, yet {lost:?} failed"
                    );
                } else if let Some(name) = lost {
                    *noticed_first.entry(name).or_insert(0) += 1;
                } else {
                    // Past every page the calls use (the second page of a region, device 1's
                    // part): they all succeeded, and rightly (checked call by call).
                    assert!(
                        !FIRST_PAGES_USED.contains(&what),
                        "{what} ({at}): the calls use this region's first page, yet no call \
                         found the cut (first call #{first})"
                    );
                }
            }
        }
        eprintln!("first call to find the loss: {noticed_first:?}");
    }

    /// One run: sets up notifies in every state on a fresh namespace, cuts its file to `at`
    /// bytes, makes the calls starting from `first`, checks each answer and returns which
    /// call first answered 507899 (`None`: none did).
    fn run(ns: &str, at: usize, first: usize, what: &str) -> Option<&'static str> {
        let sim = Sim::builder()
            .soc(Soc::Ascend910_93)
            .devices(2)
            .namespace(ns)
            .open()
            .unwrap();
        let me = sim.bare_tgid();
        let (s1, s2) = (sim.create_stream(0).unwrap(), sim.create_stream(0).unwrap());
        let new = || sim.create_notify(0, CreateFlags::empty()).unwrap();
        let (created, to_export, exported, to_record) = (new(), new(), new(), new());
        let (pending_a, pending_b, pending_c, to_reset, to_destroy) =
            (new(), new(), new(), new(), new());
        let key = sim.export_key(exported, ExportFlags::empty()).unwrap();
        sim.set_import_pids(exported, &[me]).unwrap();
        for n in [pending_a, pending_b, pending_c, to_reset] {
            sim.record(n, s1).unwrap();
        }
        sim.synchronize(s1, SyncWait::Forever).unwrap();
        let sync = SyncWait::AtMost(Duration::from_secs(10));
        let list: Vec<Call<'_>> = vec![
            (
                "create",
                Box::new(|| sim.create_notify(0, CreateFlags::empty()).map(drop)),
            ),
            ("get id", Box::new(|| sim.notify_info(created).map(drop))),
            (
                "export",
                Box::new(|| sim.export_key(to_export, ExportFlags::empty()).map(drop)),
            ),
            (
                "set import pid",
                Box::new(|| sim.set_import_pids(exported, &[me])),
            ),
            (
                "set import pid inter-server",
                Box::new(|| {
                    sim.set_import_server_pids(
                        exported,
                        &[ServerPid {
                            sdid: sim.sdid_of(0),
                            pid: me,
                        }],
                    )
                }),
            ),
            (
                "import",
                Box::new(|| {
                    sim.import_by_key(1, key.as_str(), ImportFlags::ENABLE_PEER_ACCESS)
                        .map(drop)
                }),
            ),
            (
                "record + synchronize",
                Box::new(|| {
                    sim.record(to_record, s1)?;
                    sim.synchronize(s1, sync)
                }),
            ),
            (
                "wait + synchronize",
                Box::new(|| {
                    sim.wait_and_reset(pending_a, s2, Timeout::from_c(5))?;
                    sim.synchronize(s2, sync)
                }),
            ),
            ("batch reset", Box::new(|| sim.batch_reset(&[to_reset]))),
            (
                "host wait",
                Box::new(|| sim.host_wait(pending_b, Duration::from_secs(5))),
            ),
            (
                "try consume",
                Box::new(|| match sim.try_consume(pending_c)? {
                    true => Ok(()),
                    false => panic!("{what}: the pending record was not there"),
                }),
            ),
            (
                "free count",
                Box::new(|| {
                    let free = sim.notifies_free(0)?;
                    assert!(free < 8192 - 8, "{what}: {free} ids free with 9 in use");
                    Ok(())
                }),
            ),
            ("destroy", Box::new(|| sim.destroy_notify(to_destroy))),
        ];
        assert_eq!(list.len(), 13);
        std::fs::OpenOptions::new()
            .write(true)
            .open(sim.shm_path())
            .unwrap()
            .set_len(at as u64)
            .unwrap();
        let mut noticed = None;
        for k in 0..list.len() {
            let (name, call) = &list[(first + k) % list.len()];
            match call() {
                Ok(()) => assert!(
                    !sim.inner.file.is_lost(),
                    "{what} ({at} bytes kept): {name} reported success, but the file was found \
                     cut short (its effect may be in a zero page)"
                ),
                Err(e) => {
                    assert_eq!(
                        e.kind(),
                        Error::DrvInternalError,
                        "{what} ({at} bytes kept): {name}: {e}"
                    );
                    noticed.get_or_insert(*name);
                }
            }
        }
        noticed
    }

    /// Device memory: the device-memory file is cut under a running process, at the start of
    /// its arena (the allocation table kept) and at its first page; then every memory call is
    /// made once. None may succeed while the file is found lost; every failure is 507899; the
    /// first copy into the cut arena finds it (without the check it "succeeds" into a private
    /// zero page).
    #[test]
    fn no_memory_call_reports_success_for_bytes_a_truncation_lost() {
        use crate::mem::{MemcpyKind, mem_file_path};
        const CAP: u64 = 4 << 20;
        for arena_only in [true, false] {
            let ns = Ns(format!("unit-lost-mem-{arena_only}-{}", std::process::id()));
            let sim = Sim::builder()
                .soc(Soc::Ascend910B)
                .devices(2)
                .namespace(&ns.0)
                .device_memory(CAP)
                .open()
                .unwrap();
            let (a, b) = (
                sim.malloc(0, 8192, 0).unwrap(),
                sim.malloc(0, 8192, 0).unwrap(),
            );
            let s = sim.create_stream(0).unwrap();
            // A set queued before the cut, run after it.
            let (s2, gate) = (
                sim.create_stream(0).unwrap(),
                sim.create_notify(0, CreateFlags::empty()).unwrap(),
            );
            sim.wait_and_reset(gate, s2, Timeout::Forever).unwrap();
            sim.memset_async(a, 8192, 3, 8192, s2).unwrap();
            let host = vec![7u8; 8192];
            let path = mem_file_path(&ns.0, 0, 0);
            let len = std::fs::metadata(&path).unwrap().len();
            let at = if arena_only { len - CAP } else { 0 };
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(at)
                .unwrap();
            let h2d = |dst: usize| {
                // SAFETY: `host` is a live buffer of 8192 bytes.
                unsafe {
                    sim.memcpy(
                        dst,
                        8192,
                        host.as_ptr().addr(),
                        8192,
                        MemcpyKind::HostToDevice,
                    )
                }
            };
            sim.record(gate, s).unwrap();
            // The task has run (and found the cut) before the synchronize starts.
            let t = std::time::Instant::now();
            while sim.query(s2).unwrap() != StreamStatus::Complete {
                assert!(
                    t.elapsed() < Duration::from_secs(10),
                    "the queued set never ran"
                );
                std::thread::yield_now();
            }
            let queued = sim
                .synchronize(s2, SyncWait::AtMost(Duration::from_secs(10)))
                .unwrap_err();
            assert_eq!(queued.kind(), Error::DrvInternalError, "{queued}");
            let first = h2d(a).unwrap_err();
            assert_eq!(first.kind(), Error::DrvInternalError, "{first}");
            assert!(first.message().contains("mem0d0"), "{first}");
            let list: Vec<Call<'_>> = vec![
                ("memcpy", Box::new(|| h2d(b))),
                ("memset", Box::new(|| sim.memset(b, 8192, 1, 8192))),
                (
                    "memset async + synchronize",
                    Box::new(|| {
                        sim.memset_async(a, 8192, 1, 8192, s)?;
                        sim.synchronize(s, SyncWait::AtMost(Duration::from_secs(10)))
                    }),
                ),
                ("mem info", Box::new(|| sim.mem_info(0).map(drop))),
                ("malloc", Box::new(|| sim.malloc(0, 4096, 0).map(drop))),
                (
                    "export",
                    Box::new(|| sim.ipc_mem_export(a, 8192, true).map(drop)),
                ),
                ("free", Box::new(|| sim.free(b))),
            ];
            for (name, call) in &list {
                match call() {
                    Ok(()) => assert!(
                        !sim.mem().any_lost(),
                        "{name} succeeded with the device-memory file cut"
                    ),
                    Err(e) => assert_eq!(e.kind(), Error::DrvInternalError, "{name}: {e}"),
                }
            }
        }
    }
}
