//! The registries of callbacks registered by name (the stream and device state callbacks,
//! which `state_callback` exports, and `task_abort`'s) and the calls of the state callbacks the
//! runtime makes when a stream or device changes state; what is called when is described in
//! `state_callback`.
//!
//! A registry's lock is a [`PerProcess`] one: a child forked while another thread of the
//! parent held it (registering, or copying the list to call it) gets an empty registry of its
//! own instead of waiting for ever for a lock no thread of the child will give back; forked
//! while it was free, the child keeps the parent's callbacks (its memory has them).

use std::collections::BTreeMap;
use std::ffi::{CStr, c_char, c_void};
use std::sync::MutexGuard;
use std::sync::atomic::{AtomicUsize, Ordering};

use acl_notify_sim::PerProcess;

use crate::errmsg::{CallError, param};

/// `aclrtStreamState`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub(crate) enum StreamState {
    CreatePost = 1,
    DestroyPre = 2,
}

/// `aclrtDeviceState`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub(crate) enum DeviceState {
    SetPre = 0,
    SetPost = 1,
    ResetPre = 2,
    ResetPost = 3,
}

/// A registry's callbacks: name, function and `args` (as an address).
type Entries<F> = BTreeMap<Vec<u8>, (F, usize)>;

/// One kind of callback, by name: the function and its `args` (as an address).
pub(crate) struct Registry<F: 'static> {
    entries: PerProcess<Entries<F>>,
    /// How many entries there are, kept under the lock and read without it: with none, a
    /// state change does not take the lock (most programs register none).
    len: AtomicUsize,
    /// "stream state", "device state" or "task abort", for messages.
    what: &'static str,
}

impl<F: Copy + Send + 'static> Registry<F> {
    pub(crate) const fn new(what: &'static str) -> Self {
        Registry {
            entries: PerProcess::inheriting(BTreeMap::new, BTreeMap::clone),
            len: AtomicUsize::new(0),
            what,
        }
    }

    /// This process's entries (the fork handler in place first, see [`PerProcess`]).
    fn lock(&self) -> Result<MutexGuard<'_, Entries<F>>, CallError> {
        self.entries.lock().map_err(CallError::backend)
    }

    /// Registers `func` under `name`, or (`None`) unregisters the name.
    ///
    /// # Safety
    ///
    /// `name` is NULL or NUL-terminated.
    pub(crate) unsafe fn register(
        &self,
        name: *const c_char,
        func: Option<F>,
        args: *mut c_void,
    ) -> Result<(), CallError> {
        if name.is_null() {
            return Err(param("`regName` is NULL"));
        }
        // SAFETY: non-NULL and NUL-terminated (the caller's contract).
        let key = unsafe { CStr::from_ptr(name) }.to_bytes().to_vec();
        let mut all = self.lock()?;
        let Some(func) = func else {
            all.remove(&key);
            self.len.store(all.len(), Ordering::Release);
            return Ok(());
        };
        if all.contains_key(&key) {
            return Err(param(format!(
                "a {} callback is registered as \"{}\" already (a NULL callback \
                 unregisters it)",
                self.what,
                String::from_utf8_lossy(&key)
            )));
        }
        all.insert(key, (func, args.addr()));
        self.len.store(all.len(), Ordering::Release);
        Ok(())
    }

    /// Whether none is registered (read without the lock).
    pub(crate) fn is_empty(&self) -> bool {
        self.len.load(Ordering::Acquire) == 0
    }

    /// The callbacks in name order with their names, copied: they are called without the
    /// lock (one may register another). None when the fork handler is missing (then nothing
    /// can have been registered either).
    pub(crate) fn named(&self) -> Vec<(String, F, *mut c_void)> {
        if self.len.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        let Ok(all) = self.lock() else {
            return Vec::new();
        };
        all.iter()
            .map(|(k, &(f, a))| {
                let name = String::from_utf8_lossy(k).into_owned();
                (name, f, std::ptr::with_exposed_provenance_mut(a))
            })
            .collect()
    }

    /// The callbacks in name order, as [`named`](Self::named) without the names (none made).
    fn all(&self) -> Vec<(F, *mut c_void)> {
        if self.len.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        let Ok(all) = self.lock() else {
            return Vec::new();
        };
        all.values()
            .map(|&(f, a)| (f, std::ptr::with_exposed_provenance_mut(a)))
            .collect()
    }
}

pub(crate) type StreamFn = unsafe extern "C" fn(*mut c_void, i32, *mut c_void);
pub(crate) type DeviceFn = unsafe extern "C" fn(i32, i32, *mut c_void);

pub(crate) static STREAMS: Registry<StreamFn> = Registry::new("stream state");
pub(crate) static DEVICES: Registry<DeviceFn> = Registry::new("device state");

/// Calls every stream state callback with C stream handle `stream` and `state`. The caller
/// holds no lock.
pub(crate) fn stream_state(stream: usize, state: StreamState) {
    for (f, args) in STREAMS.all() {
        // SAFETY: `aclrtRegStreamStateCallback`'s contract.
        unsafe { f(std::ptr::without_provenance_mut(stream), state as i32, args) };
    }
}

/// Calls every device state callback with `device` and `state`. The caller holds no lock.
pub(crate) fn device_state(device: u32, state: DeviceState) {
    for (f, args) in DEVICES.all() {
        // SAFETY: `aclrtRegDeviceStateCallback`'s contract.
        unsafe { f(device as i32, state as i32, args) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use acl_notify_core::Error;

    unsafe extern "C" fn one(_: i32, _: i32, _: *mut c_void) {}
    unsafe extern "C" fn two(_: i32, _: i32, _: *mut c_void) {}

    /// Names are unique; NULL names are refused; a NULL callback unregisters, the rest run in
    /// name order.
    #[test]
    fn names_are_unique_and_ordered() {
        let r = Registry::<DeviceFn>::new("device");
        let null = std::ptr::null_mut();
        // SAFETY: NUL-terminated names.
        unsafe {
            assert_eq!(
                r.register(std::ptr::null(), Some(one), null)
                    .unwrap_err()
                    .code(),
                Error::ParamInvalid
            );
            r.register(c"b".as_ptr(), Some(one), null).unwrap();
            let again = r.register(c"b".as_ptr(), Some(two), null).unwrap_err();
            assert_eq!(again.code(), Error::ParamInvalid);
            r.register(c"a".as_ptr(), Some(two), null).unwrap();
            let order: Vec<DeviceFn> = r.all().into_iter().map(|e| e.0).collect();
            assert!(order == [two as DeviceFn, one as DeviceFn]);
            r.register(c"a".as_ptr(), None, null).unwrap();
            r.register(c"never".as_ptr(), None, null).unwrap();
            assert_eq!(r.all().len(), 1);
        }
    }

    /// A child forked while another thread of the parent holds a registry's lock (a stream
    /// create copying its callbacks) registers its own callback instead of waiting for ever.
    #[test]
    fn a_child_forked_while_a_registry_is_locked_does_not_wait_for_it() {
        static R: Registry<DeviceFn> = Registry::new("device state");
        let registered = crate::forked::in_child_while_held(
            || R.lock(),
            // SAFETY: a NUL-terminated name.
            || unsafe { R.register(c"one".as_ptr(), Some(one), std::ptr::null_mut()) }.is_ok(),
        );
        assert_eq!(
            registered,
            Some(true),
            "the child waited 20 s for its parent's lock"
        );
    }
}
