//! The stress run's own shared memory (not the simulator's): a file under `/dev/shm` mapped by
//! the coordinator and every worker, holding the configuration, one block per process (pid,
//! phase, progress) and one block per channel (counters and the two export keys). Counters
//! live here, not in the workers, so what a killed process did before it died is still known.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

const MAGIC: u64 = u64::from_le_bytes(*b"ANSTRES1");
const HDR: usize = 16;
const PROC: usize = 8;
const CHAN: usize = 24;

/// Phases a worker goes through (stored in its process block).
pub mod phase {
    /// Spawned, not yet connected.
    pub const SPAWNED: u64 = 0;
    /// Opening the simulator.
    pub const OPEN: u64 = 1;
    /// Creating, exporting and whitelisting its notifies.
    pub const EXPORT: u64 = 2;
    /// Importing its partners' notifies.
    pub const IMPORT: u64 = 3;
    /// Ready, waiting for the start signal.
    pub const READY: u64 = 4;
    /// Handing records back and forth.
    pub const RUN: u64 = 5;
    /// Destroying streams and notifies.
    pub const DESTROY: u64 = 6;
    /// Finished.
    pub const DONE: u64 = 7;

    /// A name for reports.
    pub fn name(p: u64) -> &'static str {
        match p {
            SPAWNED => "spawned",
            OPEN => "open",
            EXPORT => "export",
            IMPORT => "import",
            READY => "ready",
            RUN => "running",
            DESTROY => "destroy",
            DONE => "done",
            _ => "?",
        }
    }
}

/// Header word indices.
pub mod hdr {
    /// Start signal (0 wait, 1 go).
    pub const GO: usize = 1;
    /// Abort signal: workers stop as soon as they can.
    pub const ABORT: usize = 2;
}

/// Process block word indices.
pub mod pw {
    /// Its pid (written by the coordinator right after spawning).
    pub const PID: usize = 0;
    /// Its phase ([`super::phase`]).
    pub const PHASE: usize = 1;
    /// Set by the coordinator once it killed and reaped the process.
    pub const DEAD: usize = 2;
    /// Rounds completed, all its endpoints together.
    pub const ROUNDS: usize = 3;
    /// Synchronize timeouts it saw (waiting on a dead partner).
    pub const TIMEOUTS: usize = 4;
    /// Errors it saw from the simulator (other than those timeouts).
    pub const ERRORS: usize = 5;
    /// Invariant violations it detected.
    pub const VIOLATIONS: usize = 6;
    /// Batch resets run from its streams' host functions.
    pub const BATCH_RESETS: usize = 7;
}

/// Channel block word indices.
pub mod cw {
    /// Records the recorder side started (bumped by a host function right before the record
    /// task on its stream).
    pub const STARTED: usize = 0;
    /// Waits the waiter side saw released (bumped by a host function right after the wait).
    pub const RELEASED: usize = 1;
    /// Releases seen while `RELEASED` would exceed `STARTED` (a wait released without a
    /// record).
    pub const SPURIOUS: usize = 2;
    /// 1 once the data notify's key is written.
    pub const D_READY: usize = 3;
    /// The data notify's key (64 bytes).
    pub const D_KEY: usize = 4;
    /// 1 once the acknowledgement notify's key is written.
    pub const A_READY: usize = 12;
    /// The acknowledgement notify's key (64 bytes).
    pub const A_KEY: usize = 13;
}

/// A mapped board.
pub struct Board {
    words: &'static [AtomicU64],
    procs: usize,
}

impl Board {
    fn len_words(procs: usize, chans: usize) -> usize {
        HDR + procs * PROC + chans * CHAN
    }

    /// Creates (replacing) and maps the board file.
    pub fn create(path: &Path, procs: usize, chans: usize) -> Result<Board, String> {
        let _ = std::fs::remove_file(path);
        let b = Board::map(path, procs, chans, true)?;
        b.words[0].store(MAGIC, SeqCst);
        Ok(b)
    }

    /// Maps an existing board file.
    pub fn open(path: &Path, procs: usize, chans: usize) -> Result<Board, String> {
        let b = Board::map(path, procs, chans, false)?;
        if b.words[0].load(SeqCst) != MAGIC {
            return Err(format!("{} is not a stress board", path.display()));
        }
        Ok(b)
    }

    fn map(path: &Path, procs: usize, chans: usize, create: bool) -> Result<Board, String> {
        let bytes = Board::len_words(procs, chans) * 8;
        let c = CString::new(path.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
        let flags = libc::O_RDWR
            | libc::O_CLOEXEC
            | libc::O_NOFOLLOW
            | if create {
                libc::O_CREAT | libc::O_EXCL
            } else {
                0
            };
        // SAFETY: `c` is a valid C string; the other arguments are plain integers.
        let fd = unsafe { libc::open(c.as_ptr(), flags, 0o600 as libc::c_uint) };
        if fd < 0 {
            return Err(format!(
                "open {}: {}",
                path.display(),
                std::io::Error::last_os_error()
            ));
        }
        let r = (|| {
            // SAFETY: `fd` is an open descriptor we own.
            if create && unsafe { libc::ftruncate(fd, bytes as libc::off_t) } != 0 {
                return Err(format!("ftruncate: {}", std::io::Error::last_os_error()));
            }
            // SAFETY: an all-zero `stat` (plain integers) is a valid value for fstat to fill.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            // SAFETY: `fd` is open and `st` is a valid out-pointer.
            if unsafe { libc::fstat(fd, &mut st) } != 0 || (st.st_size as usize) < bytes {
                return Err(format!("{} is too small", path.display()));
            }
            // SAFETY: a fresh shared mapping of `bytes` bytes of an open file.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    bytes,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd,
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                return Err(format!("mmap: {}", std::io::Error::last_os_error()));
            }
            Ok(p)
        })();
        // SAFETY: `fd` is ours; the mapping (if any) stays valid after close.
        unsafe { libc::close(fd) };
        let p = r?;
        // SAFETY: the mapping is page aligned, `bytes` long, never unmapped (it lives as long
        // as the process), and only accessed atomically by every process that maps it.
        let words = unsafe { std::slice::from_raw_parts(p.cast::<AtomicU64>(), bytes / 8) };
        Ok(Board { words, procs })
    }

    /// Header word `i`.
    pub fn hdr(&self, i: usize) -> &'static AtomicU64 {
        &self.words[i]
    }

    /// Word `i` of process `p`'s block.
    pub fn proc(&self, p: usize, i: usize) -> &'static AtomicU64 {
        &self.words[HDR + p * PROC + i]
    }

    /// Word `i` of channel `c`'s block.
    pub fn chan(&self, c: usize, i: usize) -> &'static AtomicU64 {
        &self.words[HDR + self.procs * PROC + c * CHAN + i]
    }

    /// Stores a 64-byte key at channel `c`, words `at..at + 8`, then sets `ready`.
    pub fn put_key(&self, c: usize, at: usize, ready: usize, key: &[u8; 64]) {
        for (i, w) in key.chunks_exact(8).enumerate() {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            self.chan(c, at + i).store(u64::from_le_bytes(b), SeqCst);
        }
        self.chan(c, ready).store(1, SeqCst);
    }

    /// The key at channel `c`, words `at..at + 8`, if `ready` is set.
    pub fn get_key(&self, c: usize, at: usize, ready: usize) -> Option<String> {
        if self.chan(c, ready).load(SeqCst) != 1 {
            return None;
        }
        let mut key = Vec::with_capacity(64);
        for i in 0..8 {
            key.extend_from_slice(&self.chan(c, at + i).load(SeqCst).to_le_bytes());
        }
        String::from_utf8(key).ok()
    }
}
