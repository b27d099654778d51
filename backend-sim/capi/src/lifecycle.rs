//! `aclInit` and `aclFinalize` as CANN's ACL layer runs them around the session (`session`):
//! the callbacks other libraries register to run at initialisation and finalisation
//! (`aclInitCallbackRegister`, `aclFinalizeCallbackRegister` and their `UnRegister`s), and
//! `aclFinalizeReference`, which finalises only once every `aclInit` has been given back.
//!
//! As hicann/runtime `src/acl/aclrt_impl/init_callback_manager.cpp` and `acl.cpp`
//! (`aclInitImpl`, `aclFinalizeInternal`, `aclFinalizeReferenceImpl`):
//! - one callback per type, except `ACL_REG_TYPE_OTHER`, which takes any number (a second one
//!   of another type is 500000, `ACL_ERROR_INTERNAL_ERROR`); a NULL function is 100000;
//!   unregistering a function not registered for that type is 500000;
//! - `aclInit` runs the init callbacks of `ACL_REG_TYPE_ACL_MODEL`, then (with a configuration
//!   file) `ACL_REG_TYPE_ACL_OP_EXECUTOR`, then `ACL_REG_TYPE_ACL_DVPP`, then
//!   `ACL_REG_TYPE_OTHER` (in registration order), each with the file's contents and length
//!   (`""`, 0 without a file); the first that fails makes `aclInit` return its code, and the
//!   process is not initialised (the next `aclInit` runs them again). An init callback
//!   registered once the process is initialised runs at once (its code is not looked at);
//! - `aclFinalize` runs the finalize callbacks of `ACL_REG_TYPE_ACL_OP_COMPILER`, `…_MODEL`,
//!   `…_DVPP`, then `ACL_REG_TYPE_OTHER`, before releasing anything; the first that fails makes
//!   it return its code, and nothing is finalised;
//! - each `aclInit`, repeated ones included (100002), counts a reference; `aclFinalizeReference`
//!   gives one back and finalises, as `aclFinalize`, with the last; with none it is 100037.
//!   It writes the count left to `*refCount` when that is not NULL. `aclFinalize` finalises
//!   whatever the count.
//!
//! Types outside `aclRegisterCallbackType` are 100000 (**ours**: CANN keeps them and never
//! calls them). A callback code that is not a CANN code is answered as 500000, naming it
//! (**ours**: CANN passes it through). CANN serialises these calls under a recursive mutex;
//! here one turn at a time too, and `aclInit`, `aclFinalize` or `aclFinalizeReference` called
//! from inside a callback are 100000 (**ours**: CANN's would run the initialisation again,
//! recursively) — every other call works in a callback.
#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_void};
use std::sync::MutexGuard;

use acl_notify_core::Error;
use acl_notify_sim::PerProcess;

use crate::errmsg::{CallError, null_arg};
use crate::ffi::{Out, aclError, api};
use crate::session;

/// `aclInitCallbackFunc`.
pub type aclInitCallbackFunc = Option<
    unsafe extern "C" fn(config: *const c_char, len: usize, user_data: *mut c_void) -> aclError,
>;
/// `aclFinalizeCallbackFunc`.
pub type aclFinalizeCallbackFunc = Option<unsafe extern "C" fn(user_data: *mut c_void) -> aclError>;

const ACL_REG_TYPE_ACL_MODEL: i32 = 0;
const ACL_REG_TYPE_ACL_OP_EXECUTOR: i32 = 1;
const ACL_REG_TYPE_ACL_OP_COMPILER: i32 = 3;
const ACL_REG_TYPE_ACL_DVPP: i32 = 6;
const ACL_REG_TYPE_ACL_RETR: i32 = 7;
const ACL_REG_TYPE_OTHER: i32 = 0xFFFF;

/// A registry's callbacks: type, function and user data (as an address).
type Entries<F> = Vec<(i32, F, usize)>;

/// One kind of callback (init or finalize): the functions registered, in registration order.
/// Its lock is a [`PerProcess`] one: `aclInit` and `aclFinalize` take it each time, and a child
/// forked while another thread held it would otherwise wait for it for ever in its own
/// `aclInit` (a child forked while it was free keeps the parent's callbacks).
struct Registry<F: 'static> {
    entries: PerProcess<Entries<F>>,
    /// "init" or "finalize", for messages.
    what: &'static str,
}

impl<F: Copy + PartialEq + Send + 'static> Registry<F> {
    const fn new(what: &'static str) -> Self {
        Registry {
            entries: PerProcess::inheriting(Vec::new, Vec::clone),
            what,
        }
    }

    fn lock(&self) -> Result<MutexGuard<'_, Entries<F>>, CallError> {
        locked(&self.entries)
    }

    fn register(&self, kind: i32, func: F, user_data: *mut c_void) -> Result<(), CallError> {
        check_type(kind)?;
        let mut entries = self.lock()?;
        if kind != ACL_REG_TYPE_OTHER && entries.iter().any(|e| e.0 == kind) {
            return Err(CallError::new(
                Error::AclInternalError,
                format!(
                    "a {} callback of type {kind} is registered already: only \
                     ACL_REG_TYPE_OTHER takes several (unregister the other first)",
                    self.what
                ),
            ));
        }
        entries.push((kind, func, user_data.addr()));
        Ok(())
    }

    fn unregister(&self, kind: i32, func: F) -> Result<(), CallError> {
        check_type(kind)?;
        let mut entries = self.lock()?;
        let Some(at) = entries.iter().position(|e| e.0 == kind && e.1 == func) else {
            return Err(CallError::new(
                Error::AclInternalError,
                format!(
                    "this function is not registered as a {} callback of type {kind}",
                    self.what
                ),
            ));
        };
        entries.remove(at);
        Ok(())
    }

    /// The callbacks of `kind`, copied (they run without the lock: one may register another).
    fn of(&self, kind: i32) -> Result<Vec<(F, *mut c_void)>, CallError> {
        Ok(self
            .lock()?
            .iter()
            .filter(|e| e.0 == kind)
            .map(|e| (e.1, std::ptr::with_exposed_provenance_mut(e.2)))
            .collect())
    }
}

type InitFn = unsafe extern "C" fn(*const c_char, usize, *mut c_void) -> aclError;
type FinalizeFn = unsafe extern "C" fn(*mut c_void) -> aclError;

static INIT: Registry<InitFn> = Registry::new("init");
static FINALIZE: Registry<FinalizeFn> = Registry::new("finalize");

/// The configuration file's contents of the `aclInit` that initialised the process, for init
/// callbacks registered afterwards (a [`PerProcess`] lock, as the registries').
static CONFIG: PerProcess<Vec<u8>> = PerProcess::inheriting(Vec::new, Vec::clone);

/// This process's value of `lock` (see [`PerProcess::lock`]).
fn locked<T: Send>(lock: &PerProcess<T>) -> Result<MutexGuard<'_, T>, CallError> {
    lock.lock().map_err(CallError::backend)
}

/// 100000 for a type `aclRegisterCallbackType` does not have.
fn check_type(kind: i32) -> Result<(), CallError> {
    if (ACL_REG_TYPE_ACL_MODEL..=ACL_REG_TYPE_ACL_RETR).contains(&kind)
        || kind == ACL_REG_TYPE_OTHER
    {
        return Ok(());
    }
    Err(CallError::new(
        Error::InvalidParam,
        format!(
            "type {kind} is not an aclRegisterCallbackType (0 to {ACL_REG_TYPE_ACL_RETR}, or \
             ACL_REG_TYPE_OTHER = {ACL_REG_TYPE_OTHER:#x})"
        ),
    ))
}

/// The failure of a callback of the program, described by `who`, that returned `code` (not
/// 0): that code when it is a CANN one, else 500000 naming it.
pub(crate) fn callback_failed(who: &str, code: aclError) -> CallError {
    match Error::try_from(code) {
        Ok(e) => CallError::new(e, format!("{who} returned it")),
        Err(_) => CallError::new(
            Error::AclInternalError,
            format!("{who} returned {code}, which is no CANN code"),
        ),
    }
}

/// `aclInit`: the session, then the init callbacks.
///
/// # Safety
///
/// `path` is NULL or NUL-terminated.
pub(crate) unsafe fn init(path: *const c_char) -> Result<(), CallError> {
    let _turn = session::Turn::take("aclInit")?;
    let mut text = Vec::new();
    session::init(|| {
        // SAFETY: the caller's contract.
        let (config, t) = unsafe { crate::config::read(path) }?;
        text = t;
        Ok(config)
    })?;
    // SAFETY: non-NULL, so NUL-terminated (the caller's contract).
    let with_file = !path.is_null() && unsafe { *path } != 0;
    let mut kinds = vec![ACL_REG_TYPE_ACL_MODEL];
    if with_file {
        kinds.push(ACL_REG_TYPE_ACL_OP_EXECUTOR);
    }
    kinds.extend([ACL_REG_TYPE_ACL_DVPP, ACL_REG_TYPE_OTHER]);
    for kind in kinds {
        for (func, user_data) in INIT.of(kind)? {
            // SAFETY: `aclInitCallbackRegister`'s contract; `text` outlives the call.
            let code = unsafe { func(text.as_ptr().cast(), text.len(), user_data) };
            if code != 0 {
                session::demote();
                return Err(callback_failed(
                    &format!("the init callback of type {kind}"),
                    code,
                ));
            }
        }
    }
    *locked(&CONFIG)? = text;
    session::initialized();
    Ok(())
}

/// `aclFinalize`'s work, the turn taken: the finalize callbacks, then the session.
fn finalize_turned() -> Result<(), CallError> {
    // As CANN's `aclFinalizeImpl`, first: no callback runs for a repeated finalize.
    if session::finalized_since_init() && !session::is_finalized() {
        return Err(CallError::new(
            Error::RepeatFinalize,
            "aclFinalize was already called, and aclInit not since: the runtime calls made \
             after it started a session of their own (as CANN's runtime serves them), which \
             only an aclFinalize after the next aclInit ends (CANN answers 100037 until then)",
        ));
    }
    if !session::is_finalized() {
        for kind in [
            ACL_REG_TYPE_ACL_OP_COMPILER,
            ACL_REG_TYPE_ACL_MODEL,
            ACL_REG_TYPE_ACL_DVPP,
            ACL_REG_TYPE_OTHER,
        ] {
            for (func, user_data) in FINALIZE.of(kind)? {
                // SAFETY: `aclFinalizeCallbackRegister`'s contract.
                let code = unsafe { func(user_data) };
                if code != 0 {
                    return Err(callback_failed(
                        &format!("the finalize callback of type {kind}"),
                        code,
                    ));
                }
            }
        }
    }
    session::finalize()
}

/// `aclFinalize`.
pub(crate) fn finalize() -> Result<(), CallError> {
    let _turn = session::Turn::take("aclFinalize")?;
    finalize_turned()
}

/// `aclError aclFinalizeReference(uint64_t *refCount)`: gives back one `aclInit`; the last one
/// finalises as `aclFinalize` does. `*refCount` (unless NULL) gets the count left.
///
/// Codes: 100037 no `aclInit` to give back; a finalize callback's code.
///
/// # Safety
///
/// `refCount` is NULL or valid for writing a `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclFinalizeReference(ref_count: *mut u64) -> aclError {
    // SAFETY: NULL or writable, by the caller's contract.
    let ref_count = unsafe { Out::new(ref_count) }.given();
    let put = |n: u64| {
        if let Some(out) = &ref_count {
            out.put(n);
        }
    };
    api("aclFinalizeReference", || {
        let _turn = session::Turn::take("aclFinalizeReference")?;
        let refs = session::init_refs();
        put(refs);
        if refs > 1 {
            put(session::release_ref().unwrap_or(refs));
            return Ok(());
        }
        if refs == 0 {
            return Err(CallError::new(
                Error::RepeatFinalize,
                "no aclInit is left to give back (aclFinalizeReference pairs with aclInit; \
                 aclFinalize, or as many aclFinalizeReference calls as aclInit calls, ran \
                 already)",
            ));
        }
        let done = finalize_turned();
        put(session::init_refs());
        done
    })
}

/// `aclError aclInitCallbackRegister(aclRegisterCallbackType type, aclInitCallbackFunc cbFunc,
/// void *userData)`: `cbFunc(config, len, userData)` runs in each `aclInit` (at once if the
/// process is initialised already).
///
/// Codes: 100000 `cbFunc` NULL, an unknown type; 500000 one of this type (not
/// `ACL_REG_TYPE_OTHER`) is registered already.
///
/// # Safety
///
/// `cbFunc` is safe to call with `userData` from any thread until unregistered.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclInitCallbackRegister(
    kind: i32,
    func: aclInitCallbackFunc,
    user_data: *mut c_void,
) -> aclError {
    api("aclInitCallbackRegister", || {
        let func = func.ok_or_else(|| null_arg("cbFunc"))?;
        INIT.register(kind, func, user_data)?;
        if session::init_refs() > 0 {
            let text = locked(&CONFIG)?.clone();
            // SAFETY: the caller's contract. Its code is not looked at, as in CANN.
            let _ = unsafe { func(text.as_ptr().cast(), text.len(), user_data) };
        }
        Ok(())
    })
}

/// `aclError aclInitCallbackUnRegister(aclRegisterCallbackType type, aclInitCallbackFunc
/// cbFunc)`.
///
/// Codes: 100000 `cbFunc` NULL, an unknown type; 500000 not registered for that type.
#[unsafe(no_mangle)]
pub extern "C" fn aclInitCallbackUnRegister(kind: i32, func: aclInitCallbackFunc) -> aclError {
    api("aclInitCallbackUnRegister", || {
        INIT.unregister(kind, func.ok_or_else(|| null_arg("cbFunc"))?)
    })
}

/// `aclError aclFinalizeCallbackRegister(aclRegisterCallbackType type, aclFinalizeCallbackFunc
/// cbFunc, void *userData)`: `cbFunc(userData)` runs in each finalisation.
///
/// Codes: as `aclInitCallbackRegister`.
///
/// # Safety
///
/// `cbFunc` is safe to call with `userData` from any thread until unregistered.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclFinalizeCallbackRegister(
    kind: i32,
    func: aclFinalizeCallbackFunc,
    user_data: *mut c_void,
) -> aclError {
    api("aclFinalizeCallbackRegister", || {
        FINALIZE.register(kind, func.ok_or_else(|| null_arg("cbFunc"))?, user_data)
    })
}

/// `aclError aclFinalizeCallbackUnRegister(aclRegisterCallbackType type,
/// aclFinalizeCallbackFunc cbFunc)`.
///
/// Codes: as `aclInitCallbackUnRegister`.
#[unsafe(no_mangle)]
pub extern "C" fn aclFinalizeCallbackUnRegister(
    kind: i32,
    func: aclFinalizeCallbackFunc,
) -> aclError {
    api("aclFinalizeCallbackUnRegister", || {
        FINALIZE.unregister(kind, func.ok_or_else(|| null_arg("cbFunc"))?)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    unsafe extern "C" fn one(_: *mut c_void) -> aclError {
        0
    }
    unsafe extern "C" fn two(_: *mut c_void) -> aclError {
        0
    }

    /// A child forked while another thread of the parent holds a registry's lock (an
    /// `aclInit` or `aclFinalize` copying its callbacks, as `fork_busy cycle` forks) registers
    /// its own callback instead of waiting for ever for a lock no thread of it will give back.
    #[test]
    fn a_child_forked_while_a_registry_is_locked_does_not_wait_for_it() {
        static R: Registry<FinalizeFn> = Registry::new("finalize");
        let registered = crate::forked::in_child_while_held(
            || R.lock(),
            || {
                R.register(ACL_REG_TYPE_OTHER, one, std::ptr::null_mut())
                    .is_ok()
            },
        );
        assert_eq!(
            registered,
            Some(true),
            "the child waited 20 s for its parent's lock"
        );
    }

    /// One callback per type but `ACL_REG_TYPE_OTHER`, which keeps each in order; unregistering
    /// takes out only the function named, of the type named.
    #[test]
    fn one_callback_per_type_but_other() {
        let r = Registry::<FinalizeFn>::new("finalize");
        let null = std::ptr::null_mut();
        r.register(ACL_REG_TYPE_ACL_DVPP, one, null).unwrap();
        let again = r.register(ACL_REG_TYPE_ACL_DVPP, two, null).unwrap_err();
        assert_eq!(again.code(), Error::AclInternalError);
        r.register(ACL_REG_TYPE_OTHER, two, null).unwrap();
        r.register(ACL_REG_TYPE_OTHER, one, null).unwrap();
        let others: Vec<FinalizeFn> = r
            .of(ACL_REG_TYPE_OTHER)
            .unwrap()
            .into_iter()
            .map(|e| e.0)
            .collect();
        assert!(others == [two as FinalizeFn, one as FinalizeFn]);
        let wrong = r.unregister(ACL_REG_TYPE_ACL_DVPP, two).unwrap_err();
        assert_eq!(wrong.code(), Error::AclInternalError);
        r.unregister(ACL_REG_TYPE_OTHER, two).unwrap();
        assert_eq!(r.of(ACL_REG_TYPE_OTHER).unwrap().len(), 1);
        assert_eq!(r.of(ACL_REG_TYPE_ACL_DVPP).unwrap().len(), 1);
        let bad = r.register(8, one, null).unwrap_err();
        assert_eq!(bad.code(), Error::InvalidParam);
    }
}
