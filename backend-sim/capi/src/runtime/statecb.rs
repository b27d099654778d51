//! The registries of the stream and device state callbacks (`state_callback` exports their
//! registration) and the calls of them the runtime makes when a stream or device changes
//! state; what is called when is described in `state_callback`.

use std::collections::BTreeMap;
use std::ffi::{CStr, c_char, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

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

/// One kind of state callback, by name: the function and its `args` (as an address).
pub(crate) struct Registry<F> {
    entries: Mutex<BTreeMap<Vec<u8>, (F, usize)>>,
    /// How many entries there are, kept under the lock and read without it: with none, a
    /// state change does not take the lock. Most programs register none, and a child forked
    /// while another thread held the lock would otherwise wait for it for ever in its first
    /// stream create or device set (the fork copies the lock, held, without its holder).
    len: AtomicUsize,
    /// "stream" or "device", for messages.
    what: &'static str,
}

impl<F: Copy> Registry<F> {
    const fn new(what: &'static str) -> Self {
        Registry {
            entries: Mutex::new(BTreeMap::new()),
            len: AtomicUsize::new(0),
            what,
        }
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
        let mut all = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(func) = func else {
            all.remove(&key);
            self.len.store(all.len(), Ordering::Release);
            return Ok(());
        };
        if all.contains_key(&key) {
            return Err(param(format!(
                "a {} state callback is registered as \"{}\" already (a NULL callback \
                 unregisters it)",
                self.what,
                String::from_utf8_lossy(&key)
            )));
        }
        all.insert(key, (func, args.addr()));
        self.len.store(all.len(), Ordering::Release);
        Ok(())
    }

    /// The callbacks, copied: they are called without the lock (one may register another).
    fn all(&self) -> Vec<(F, *mut c_void)> {
        if self.len.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .map(|&(f, a)| (f, std::ptr::with_exposed_provenance_mut(a)))
            .collect()
    }
}

pub(crate) type StreamFn = unsafe extern "C" fn(*mut c_void, i32, *mut c_void);
pub(crate) type DeviceFn = unsafe extern "C" fn(i32, i32, *mut c_void);

pub(crate) static STREAMS: Registry<StreamFn> = Registry::new("stream");
pub(crate) static DEVICES: Registry<DeviceFn> = Registry::new("device");

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
}
