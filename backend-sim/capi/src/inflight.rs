//! The session's calls in flight, counted without a locked instruction on the caller's side:
//! how the notify control plane (`session::with_runtime`) reaches the session without taking
//! the session lock, while `aclFinalize` still waits for every such call before it releases
//! the session and frees it.
//!
//! # Why not the lock
//!
//! A read lock is two locked read-modify-writes per call (take, give back), each a full
//! barrier that drains the store buffer: on this project's VM the pair cost about 9 ns a
//! call, three times in an export+import+close, more than half of what that operation cost
//! more through the C ABI than through the Rust API (the bench's `control.ipc`; figures in
//! `bench/README.md`'s History, 2026-12-05).
//!
//! # How
//!
//! Each thread owns a slot (one of [`SLOTS`], claimed on the thread's first call and given
//! back when the thread exits) holding one word that only its owner writes: the calls of the
//! thread in flight (low 32 bits) and how many it has finished (high 32 bits). A call stores
//! its slot's word + 1, then reads the published session ([`Published::run`]; no fence between:
//! compiler order only), runs, and stores the word + 2³² (one finished, none in flight).
//!
//! `aclFinalize` takes the session out of the lock's state, then [`Published::withdraw`] stores
//! null and issues `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`: every thread of the
//! process that is running executes a full memory barrier (one not running has been through a
//! context switch, which is one). After it, a call either made its slot's store visible
//! before it read the session (then `withdraw` sees it in flight and waits for its finish to
//! be counted), or reads null and takes the lock path, where it waits for `aclFinalize`
//! (membarrier(2) pairs exactly this "asymmetric" fence: a cheap side that orders by compiler
//! barrier only, and a rare side that pays a system call). A session is published only once
//! the process has registered for private expedited membarriers; where that is refused (an
//! old kernel, a seccomp filter), nothing is published and every call takes the lock.
//!
//! A thread without a slot (more than [`SLOTS`] threads at once) takes the lock too.
//!
//! # Fork
//!
//! A forked child has the forking thread only: calls of the parent's other threads that were
//! in flight never finish there. The fork handler withdraws the parent's session without
//! waiting ([`Published::forget`]: it is not the child's, `session` starts the child's own)
//! and clears every slot's in-flight count ([`forget_in_child`]). The slots of the parent's
//! other threads stay claimed in the child (nothing of theirs runs there to give them back);
//! the child has the rest.
//!
//! # Not for calls that block
//!
//! `aclFinalize` waits for the calls in flight, as it waited for the lock's readers: only
//! calls that never block and never call back into the C API run this way. A call made from
//! a signal handler on a thread that is inside one takes the lock: counted in the same slot,
//! its finish would look like the outer call's to `withdraw`, which would then stop waiting
//! while the outer call still ran. (With the lock, such a call waits for a finalize that
//! waits for the outer call: a deadlock, as before this fast path existed, never a session
//! freed under a call.) A signal that lands between the slot's load and store in `run` and
//! makes a whole call there leaves the word as the outer call's store sets it: the nested
//! call's finish is lost, so `withdraw` waits for the outer call's, which is later.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering, compiler_fence};

/// Threads that can be in the fast path at once; the others take the lock.
pub(crate) const SLOTS: usize = 64;

/// One finished call, in a slot's word.
const DONE: u64 = 1 << 32;

/// A slot's word (see the module doc), alone on its cache line: only its owner writes it,
/// and `withdraw` reads it.
#[repr(align(64))]
struct Slot {
    word: AtomicU64,
    taken: AtomicBool,
}

static SLOT: [Slot; SLOTS] = [const {
    Slot {
        word: AtomicU64::new(0),
        taken: AtomicBool::new(false),
    }
}; SLOTS];

/// Whether this process is registered for private expedited membarriers (cleared in a
/// forked child, which registers again: a new process).
static REGISTERED: AtomicBool = AtomicBool::new(false);

/// `MEMBARRIER_CMD_PRIVATE_EXPEDITED` and its registration (`linux/membarrier.h`; the `libc`
/// crate has the system call's number only).
const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

/// [`MINE`] before the thread's first call.
const UNCLAIMED: u32 = u32::MAX;
/// [`MINE`] of a thread that found no free slot, or whose slot was given back at its exit.
const NONE: u32 = u32::MAX - 1;

thread_local! {
    /// This thread's slot index, or [`UNCLAIMED`] / [`NONE`]. No destructor, so it can be read
    /// at any time, also after [`OWNER`]'s has run.
    static MINE: Cell<u32> = const { Cell::new(UNCLAIMED) };
    /// Gives the thread's slot back when the thread exits.
    static OWNER: Owner = const { Owner };
}

struct Owner;

impl Drop for Owner {
    fn drop(&mut self) {
        let i = MINE.with(|m| m.replace(NONE));
        if let Some(s) = SLOT.get(i as usize) {
            s.taken.store(false, Ordering::Release);
        }
    }
}

/// This thread's slot, claimed on its first call; `None` if every slot is taken (or the
/// thread is exiting).
#[inline]
fn my_slot() -> Option<&'static Slot> {
    let i = MINE.try_with(Cell::get).ok()?;
    match SLOT.get(i as usize) {
        Some(s) => Some(s),
        None if i == UNCLAIMED => claim(),
        None => None,
    }
}

#[cold]
fn claim() -> Option<&'static Slot> {
    // Registers the destructor that gives the slot back; refused while the thread exits.
    OWNER.try_with(|_| ()).ok()?;
    let found = SLOT.iter().position(|s| {
        !s.taken.load(Ordering::Relaxed)
            && s.taken
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    });
    let i = found.map_or(NONE, |i| i as u32);
    MINE.with(|m| m.set(i));
    found.map(|i| &SLOT[i])
}

/// Counts the call finished when dropped (also when `f` unwinds).
struct InFlight {
    slot: &'static Slot,
    /// The slot's word before the call.
    before: u64,
}

impl Drop for InFlight {
    #[inline]
    fn drop(&mut self) {
        self.slot
            .word
            .store(self.before.wrapping_add(DONE), Ordering::Release);
    }
}

/// A value calls may reach without a lock while it is published (the session's `Runtime`:
/// `session::SESSION`), and withdrawn with a wait for the calls in flight on it.
pub(crate) struct Published<T> {
    ptr: AtomicPtr<T>,
}

impl<T: Sync> Published<T> {
    /// Nothing published.
    pub(crate) const fn new() -> Self {
        Published {
            ptr: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// Runs `f` on the published value, counted in flight; gives `f` back unrun if nothing is
    /// published or this thread has no slot (the caller then takes its lock).
    #[inline]
    pub(crate) fn run<R, F: FnOnce(&T) -> R>(&self, f: F) -> Result<R, F> {
        let Some(slot) = my_slot() else {
            return Err(f);
        };
        // Only this thread writes the word: a load and a store, not a read-modify-write.
        let before = slot.word.load(Ordering::Relaxed);
        if before as u32 != 0 {
            // A call from a signal handler on a thread inside one: its finish would count
            // in this slot as the outer call's, and `withdraw` would stop waiting while the
            // outer call still runs. It takes the lock (module doc).
            return Err(f);
        }
        slot.word.store(before.wrapping_add(1), Ordering::Relaxed);
        // The store above is ordered before the load below by `withdraw`'s membarrier
        // (module doc); only the compiler must not swap them.
        compiler_fence(Ordering::SeqCst);
        let v = self.ptr.load(Ordering::Acquire);
        let done = InFlight { slot, before };
        if v.is_null() {
            drop(done);
            return Err(f);
        }
        // SAFETY: `publish`'s caller keeps the value alive until `withdraw` has returned, and
        // `withdraw` waits for this call (in flight in this slot, visible to it after its
        // membarrier) to count itself finished (`done`, dropped after `f`).
        let r = f(unsafe { &*v });
        drop(done);
        Ok(r)
    }

    /// Publishes `v` for [`run`](Self::run), if this process can register for private
    /// expedited membarriers (else calls keep taking the lock). The caller keeps `v` alive,
    /// and publishes nothing else, until [`withdraw`](Self::withdraw) has returned.
    pub(crate) fn publish(&self, v: &T) {
        if !registered() {
            return;
        }
        self.ptr
            .store(std::ptr::from_ref(v).cast_mut(), Ordering::Release);
    }

    /// Withdraws the published value, if any, and waits until no call runs on it any more.
    /// Returns `false` if that could not be made sure (the membarrier failed, which it does
    /// not once registered): the caller must then not free the value.
    pub(crate) fn withdraw(&self) -> bool {
        self.ptr.store(std::ptr::null_mut(), Ordering::Release);
        if !REGISTERED.load(Ordering::Acquire) {
            // Nothing was published since this process began (or was forked).
            return true;
        }
        // SAFETY: a system call with integer arguments only.
        let r =
            unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) };
        if r != 0 {
            return false;
        }
        for s in &SLOT {
            let w0 = s.word.load(Ordering::Acquire);
            if w0 as u32 == 0 {
                continue;
            }
            // In flight: wait until a call of that slot is counted finished (one that began
            // after the membarrier reads null, so the first finish counted since is the one
            // in flight now, or a later one after it).
            let mut spins = 0u32;
            loop {
                let w = s.word.load(Ordering::Acquire);
                if w as u32 == 0 || (w >> 32) != (w0 >> 32) {
                    break;
                }
                spins += 1;
                if spins < 64 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
        }
        true
    }

    /// In a forked child (from the fork handler: stores to atomics only): nothing is
    /// published, without a wait (what was is the parent's).
    pub(crate) fn forget(&self) {
        self.ptr.store(std::ptr::null_mut(), Ordering::Release);
    }
}

/// Whether this process is registered for private expedited membarriers, registering it if
/// not yet.
fn registered() -> bool {
    if REGISTERED.load(Ordering::Acquire) {
        return true;
    }
    // SAFETY: a system call with integer arguments only.
    let r = unsafe {
        libc::syscall(
            libc::SYS_membarrier,
            MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
            0,
            0,
        )
    };
    if r != 0 {
        return false;
    }
    REGISTERED.store(true, Ordering::Release);
    true
}

/// The fork handler's part (runs in the child, before `fork()` returns there; stores to
/// atomics only): the parent's calls in flight never finish here, and the child registers
/// for membarriers anew (a new process).
pub(crate) fn forget_in_child() {
    REGISTERED.store(false, Ordering::Relaxed);
    for s in &SLOT {
        let w = s.word.load(Ordering::Relaxed);
        s.word.store(w & !u64::from(u32::MAX), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::mpsc::channel;
    use std::time::Duration;

    const LONG: Duration = Duration::from_secs(20);

    #[test]
    fn withdraw_waits_for_a_call_in_flight() {
        static V: Published<u32> = Published::new();
        assert!(
            registered(),
            "membarrier(2) refused: the fast path is off on this machine"
        );
        let v = Box::new(7u32);
        V.publish(&v);
        let (entered_tx, entered) = channel();
        let (release, release_rx) = channel::<()>();
        let caller = std::thread::spawn(move || {
            V.run(|x| {
                entered_tx.send(()).unwrap();
                release_rx.recv_timeout(LONG).expect("never released");
                *x
            })
            .ok()
        });
        entered.recv_timeout(LONG).expect("the call did not start");
        static WITHDRAWN: AtomicBool = AtomicBool::new(false);
        let finalizer = std::thread::spawn(|| {
            assert!(V.withdraw());
            WITHDRAWN.store(true, Ordering::SeqCst);
        });
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            !WITHDRAWN.load(Ordering::SeqCst),
            "withdraw returned while a call ran on the value"
        );
        release.send(()).unwrap();
        assert_eq!(caller.join().unwrap(), Some(7));
        finalizer.join().unwrap();
        assert!(WITHDRAWN.load(Ordering::SeqCst));
        assert!(V.run(|x| *x).is_err(), "a withdrawn value was reached");
        drop(v);
    }

    #[test]
    fn nothing_published_gives_the_call_back() {
        static V: Published<u32> = Published::new();
        assert!(V.run(|x| *x).is_err());
        assert!(V.withdraw());
    }

    #[test]
    fn a_thread_gives_its_slot_back_when_it_exits() {
        static V: Published<u32> = Published::new();
        static SEVEN: u32 = 7;
        V.publish(&SEVEN);
        // More threads, one after the other, than there are slots: each finds one free.
        for i in 0..3 * SLOTS {
            let got = std::thread::spawn(|| V.run(|x| *x).ok()).join().unwrap();
            assert_eq!(got, Some(7), "thread {i} found no slot");
        }
        assert!(V.withdraw());
    }
}
