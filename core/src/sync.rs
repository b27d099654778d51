//! The atomics of the shared-memory structures ([`pool`](crate::pool),
//! [`table`](crate::table)): `core::sync::atomic` in every normal build, and under
//! `RUSTFLAGS="--cfg loom"` wrappers over loom's model-checked atomics, so that `core/tests/
//! loom.rs` explores the interleavings of the real code rather than of a copy.
//!
//! The wrappers keep the `const fn new` the tables need (`static` pools, `const` slot
//! constructors) and the size of the real atomics (the tables' layout assertions hold): a
//! wrapper stores its initial value, and the loom atomic is created on first use, inside the
//! model, and kept in a per-execution map by address (loom runs one thread at a time, so the
//! lazy creation is not itself a race). Only the operations the tables use are provided.

#[cfg(not(loom))]
pub use core::sync::atomic::*;

/// Whether this build is the loom model (`--cfg loom`).
pub(crate) const MODEL: bool = cfg!(loom);

/// Marks the middle of a "publish, then look" hand-off: a `SeqCst` store (or read-modify-write)
/// of one word followed by a `SeqCst` load of another, raced by a thread doing the mirror image
/// (the Dekker pattern the table's waiters and finishers use). The language's `SeqCst` already
/// guarantees that at least one side sees the other's write, so in real builds this is
/// nothing. Loom, however, models `SeqCst` loads and stores only as acquire/release (see
/// tokio-rs/loom#180) while it does model `SeqCst` fences; under loom this is such a fence, so
/// that the models check the protocol rather than report the hand-offs as lost wake-ups.
#[inline(always)]
pub(crate) fn dekker() {
    #[cfg(loom)]
    loom::sync::atomic::fence(Ordering::SeqCst);
}

#[cfg(loom)]
pub use self::model::*;

#[cfg(loom)]
mod model {
    extern crate std;

    pub use core::sync::atomic::Ordering;
    use std::any::{Any, TypeId};
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, PoisonError};

    type Objects = Mutex<HashMap<(TypeId, usize), Arc<dyn Any + Send + Sync>>>;

    loom::lazy_static! {
        /// The loom atomic behind each wrapper (by address), for the current execution only:
        /// loom drops lazy statics when an execution ends.
        static ref OBJECTS: Objects = Mutex::new(HashMap::new());
    }

    /// The loom object for the wrapper at `addr`, created by `make` on first use. (A wrapper
    /// freed and another placed at the same address within one execution would share it;
    /// the models keep every table alive for the whole execution.)
    fn object<T: Any + Send + Sync>(addr: usize, make: impl FnOnce() -> T) -> Arc<T> {
        let mut m = OBJECTS.lock().unwrap_or_else(PoisonError::into_inner);
        let e = m
            .entry((TypeId::of::<T>(), addr))
            .or_insert_with(|| Arc::new(make()));
        match Arc::clone(e).downcast::<T>() {
            Ok(a) => a,
            Err(_) => unreachable!("the map is keyed by type"),
        }
    }

    macro_rules! model_atomic {
        ($($name:ident: $t:ty),* $(,)?) => {$(
            /// A loom atomic with a `const` constructor and the size and alignment of the real
            /// one (layout assertions hold under loom too): it stores its initial value, and
            /// the loom atomic is created on first use.
            #[repr(transparent)]
            pub struct $name {
                init: core::sync::atomic::$name,
            }

            impl $name {
                /// An atomic holding `v`.
                pub const fn new(v: $t) -> Self {
                    $name { init: core::sync::atomic::$name::new(v) }
                }
                fn a(&self) -> Arc<loom::sync::atomic::$name> {
                    object(self as *const Self as usize, || {
                        loom::sync::atomic::$name::new(self.init.load(Ordering::Relaxed))
                    })
                }
                /// See `core::sync::atomic`.
                pub fn load(&self, o: Ordering) -> $t {
                    self.a().load(o)
                }
                /// See `core::sync::atomic`.
                pub fn store(&self, v: $t, o: Ordering) {
                    self.a().store(v, o)
                }
                /// See `core::sync::atomic`.
                pub fn swap(&self, v: $t, o: Ordering) -> $t {
                    self.a().swap(v, o)
                }
                /// See `core::sync::atomic`.
                pub fn compare_exchange(
                    &self,
                    cur: $t,
                    new: $t,
                    s: Ordering,
                    f: Ordering,
                ) -> Result<$t, $t> {
                    self.a().compare_exchange(cur, new, s, f)
                }
                /// See `core::sync::atomic`.
                pub fn compare_exchange_weak(
                    &self,
                    cur: $t,
                    new: $t,
                    s: Ordering,
                    f: Ordering,
                ) -> Result<$t, $t> {
                    self.a().compare_exchange_weak(cur, new, s, f)
                }
                /// See `core::sync::atomic`.
                pub fn fetch_add(&self, v: $t, o: Ordering) -> $t {
                    self.a().fetch_add(v, o)
                }
                /// See `core::sync::atomic`.
                pub fn fetch_sub(&self, v: $t, o: Ordering) -> $t {
                    self.a().fetch_sub(v, o)
                }
                /// See `core::sync::atomic`.
                pub fn fetch_and(&self, v: $t, o: Ordering) -> $t {
                    self.a().fetch_and(v, o)
                }
                /// See `core::sync::atomic`.
                pub fn fetch_or(&self, v: $t, o: Ordering) -> $t {
                    self.a().fetch_or(v, o)
                }
                /// See `core::sync::atomic`.
                pub fn fetch_max(&self, v: $t, o: Ordering) -> $t {
                    self.a().fetch_max(v, o)
                }
                /// See `core::sync::atomic`.
                pub fn fetch_min(&self, v: $t, o: Ordering) -> $t {
                    self.a().fetch_min(v, o)
                }
                /// See `core::sync::atomic`.
                pub fn fetch_update<F>(&self, s: Ordering, f: Ordering, g: F) -> Result<$t, $t>
                where
                    F: FnMut($t) -> Option<$t>,
                {
                    self.a().fetch_update(s, f, g)
                }
            }

            impl Default for $name {
                fn default() -> Self {
                    Self::new(0)
                }
            }

            impl core::fmt::Debug for $name {
                fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                    f.write_str(stringify!($name))
                }
            }
        )*};
    }

    model_atomic!(
        AtomicU8: u8,
        AtomicU16: u16,
        AtomicU32: u32,
        AtomicU64: u64,
        AtomicI32: i32,
        AtomicUsize: usize,
    );
}
