//! The device calls of [`Runtime`]: the current device and context, device reference
//! counts, reset, peer access.

use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::{MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use acl_notify_core::{Backend, CntNotifyOps, Error, EventOps, NotifyResources};

use crate::errmsg::CallError;

use super::context::Made;
use super::drain::{DEFAULT_RESET_TIMEOUT, Drain, ENV_RESET_TIMEOUT};
use super::statecb::{self, DeviceState, StreamState};
use super::{CURRENT, NO_DEFAULT_DEVICE, Runtime, lock};

impl Runtime {
    /// The calling thread's current device (107002 if none).
    #[inline]
    pub(crate) fn current_device(&self) -> Result<u32, CallError> {
        self.current().map(|(device, _)| device)
    }

    /// The calling thread's current device and context: the default device of `aclInit`'s
    /// configuration, set implicitly, for a thread that set none; 107002 if there is none.
    #[inline]
    pub(crate) fn current(&self) -> Result<(u32, usize), CallError> {
        match CURRENT.with(Cell::get) {
            Some((epoch, device, ctx, seen)) if epoch == self.epoch => {
                if seen == self.contexts.gone.load(Ordering::Acquire) {
                    Ok((device, ctx))
                } else {
                    self.still_current(device, ctx)
                }
            }
            _ => self.implicit_device(),
        }
    }

    /// The calling thread's current context `ctx` (of `device`) once contexts went since it
    /// was known live: 107002 if it is one of them. CANN's thread keeps pointing at a context
    /// another thread destroyed (or whose device it reset), and every call that needs a
    /// context finds it invalid (hicann/runtime `src/runtime/core/src/runtime.cc`,
    /// `Runtime::CurrentContext`; `src/runtime/core/inc/context/context.hpp`,
    /// `CHECK_CONTEXT_VALID_WITH_RETURN`), until the thread sets a device or context again.
    #[cold]
    fn still_current(&self, device: u32, ctx: usize) -> Result<(u32, usize), CallError> {
        let seen = self.contexts.gone.load(Ordering::Acquire);
        if self.contexts.is_live(ctx) {
            CURRENT.with(|c| c.set(Some((self.epoch, device, ctx, seen))));
            return Ok((device, ctx));
        }
        Err(CallError::new(
            Error::ContextNull,
            format!(
                "the calling thread's current context {ctx:#x} (device {device}) was destroyed by \
                 another thread, or its device reset: set a device (aclrtSetDevice) or a live \
                 context (aclrtSetCurrentContext) first"
            ),
        ))
    }

    /// CANN's implicit `aclrtSetDevice` of the configured default device, inside a call made
    /// by a thread without a current device (hicann/runtime
    /// `docs/zh/FAQ/如何理解默认Device和默认Stream机制.md`).
    #[cold]
    fn implicit_device(&self) -> Result<(u32, usize), CallError> {
        let d = self.default_device.load(Ordering::Relaxed);
        if d == NO_DEFAULT_DEVICE {
            return Err(CallError::new(
                Error::ContextNull,
                "the calling thread has no current device (call aclrtSetDevice first, or name \
                 a defaultDevice in aclInit's configuration file)",
            ));
        }
        self.set_device_by(d as i32, SetBy::Implicit)?;
        match CURRENT.with(Cell::get) {
            Some((epoch, device, ctx, _)) if epoch == self.epoch => Ok((device, ctx)),
            _ => Err(CallError::new(
                Error::ContextNull,
                "the default device could not be made current",
            )),
        }
    }

    /// `device` as a device of this machine (C passes `int32_t` or `uint32_t`): 107001 if
    /// there is no such device.
    pub(crate) fn device_id(&self, device: impl Into<i64>) -> Result<u32, CallError> {
        let device = device.into();
        let count = self.backend.device_count();
        u32::try_from(device)
            .ok()
            .filter(|d| *d < count)
            .ok_or_else(|| {
                CallError::new(
                    Error::InvalidDeviceId,
                    format!("device {device} does not exist (this machine has {count} devices)"),
                )
            })
    }

    /// `aclrtSetDevice`.
    pub(crate) fn set_device(&self, device: i32) -> Result<(), CallError> {
        self.set_device_by(device, SetBy::SetDevice)
    }

    /// A set of `device`, by `aclrtSetDevice` or implicitly by another call (`by` names it
    /// in errors).
    fn set_device_by(&self, device: i32, by: SetBy) -> Result<(), CallError> {
        let d = self.device_id(device)?;
        // The count and the primary context are taken together, never while another thread's
        // reset releases what its count reaching 0 released: that would release this set's
        // context and what this thread makes in it. A set of a device not set calls the
        // `SET_PRE` callbacks first, without the lock, then takes it again.
        let mut pre_called = false;
        let mut refs = loop {
            let refs = self.unreleased(d, by)?;
            let unset = refs.get(d as usize).is_some_and(|r| r.count == 0);
            if pre_called || !unset {
                break refs;
            }
            drop(refs);
            statecb::device_state(d, DeviceState::SetPre);
            pre_called = true;
        };
        let (ctx, made) = self.primary_context(d)?;
        if let Some(r) = refs.get_mut(d as usize) {
            r.count = r.count.saturating_add(1);
        }
        drop(refs);
        self.make_current(d, ctx);
        if made == Made::Now {
            self.default_stream_state(d, ctx, StreamState::CreatePost);
        }
        if matches!(by, SetBy::SetDevice) {
            statecb::device_state(d, DeviceState::SetPost);
        }
        Ok(())
    }

    /// The device counts, once no reset is releasing `device`: waits for such a reset at most
    /// [`Runtime::set_bound`], then 507033 naming it. CANN's set waits for as long as the
    /// release runs (hicann/runtime `src/runtime/core/inc/reference.hpp`, `RefObject::IncRef`
    /// spins while the count is being updated; `src/runtime/core/src/runtime.cc`,
    /// `PrimaryContextRelease` keeps it so through the device's teardown, whose stream wait has
    /// no bound). A host function of a stream on `device` does not wait at all (507033 at
    /// once): the reset drains the device's streams, that host function's own among them, so
    /// the two would wait for each other. A host function of another device's stream waits as
    /// any other set: the reset does not wait for it.
    fn unreleased(
        &self,
        device: u32,
        by: SetBy,
    ) -> Result<MutexGuard<'_, Vec<DeviceRefs>>, CallError> {
        let releasing =
            |refs: &[DeviceRefs]| refs.get(device as usize).is_some_and(|r| r.releasing);
        let mut refs = lock(&self.device_refs);
        if !releasing(&refs) {
            return Ok(refs);
        }
        if RESETTING.with(Cell::get) == Some(device) {
            return Err(being_reset(
                device,
                by,
                "this thread is resetting it (a device state callback, or a stream state \
                 callback of that reset, does not wait for its own reset); set the device \
                 after the reset returns",
            ));
        }
        if acl_notify_sim::host_function_device() == Some(device) {
            return Err(being_reset(
                device,
                by,
                "a host function of one of its streams does not wait for it (the reset \
                 drains the device's streams, this host function's among them); set the \
                 device after the reset, or from a host function of another device's stream",
            ));
        }
        let deadline = Instant::now().checked_add(self.set_bound);
        while releasing(&refs) {
            let Some(deadline) = deadline else {
                refs = self
                    .device_released
                    .wait(refs)
                    .unwrap_or_else(PoisonError::into_inner);
                continue;
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let bound = match self.reset_timeout {
                    Some(t) => format!("its drain's bound {t:?} ({ENV_RESET_TIMEOUT}) and more"),
                    None => format!("it waits for ever ({ENV_RESET_TIMEOUT}=0)"),
                };
                return Err(being_reset(
                    device,
                    by,
                    format!(
                        "this set waited {:?} for it ({bound}); the device's streams still \
                         have queued tasks the reset waits for",
                        self.set_bound
                    ),
                ));
            }
            refs = self
                .device_released
                .wait_timeout(refs, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        Ok(refs)
    }

    /// Whether another thread's reset is releasing `device` now (for tests: to act once it
    /// is, rather than after a sleep that a loaded machine may outlast).
    #[cfg(test)]
    pub(crate) fn releasing(&self, device: u32) -> bool {
        lock(&self.device_refs)
            .get(device as usize)
            .is_some_and(|r| r.releasing)
    }

    /// Makes `ctx` (a live context on `device`) current on the calling thread.
    pub(crate) fn make_current(&self, device: u32, ctx: usize) {
        let seen = self.contexts.gone.load(Ordering::Acquire);
        CURRENT.with(|c| c.set(Some((self.epoch, device, ctx, seen))));
    }

    /// Forgets the calling thread's current context if it is `ctx`.
    pub(crate) fn forget_current(&self, ctx: usize) {
        CURRENT.with(|c| {
            if matches!(c.get(), Some((e, _, x, _)) if e == self.epoch && x == ctx) {
                c.set(None);
            }
        });
    }

    /// `aclrtResetDevice` (`force`: `aclrtResetDeviceForce`). When the process's count of
    /// `aclrtSetDevice` calls for the device drops to 0, the device's streams are drained
    /// ([`Drain::Reset`]: waited for at most `ACL_NOTIFY_SIM_RESET_TIMEOUT`, then 507046),
    /// then discarded and its notify handles destroyed, as
    /// CANN does when the device's context goes away. A reset of a device whose count is
    /// already 0 is 507007 (see [`already_reset`]).
    pub(crate) fn reset_device(&self, device: i32, force: bool) -> Result<(), CallError> {
        let d = self.device_id(device)?;
        let release = {
            let mut refs = lock(&self.device_refs);
            match refs.get_mut(d as usize) {
                Some(r) if r.count > 0 => {
                    r.count = if force { 0 } else { r.count - 1 };
                    r.releasing = r.count == 0;
                    r.releasing
                }
                // Also while another thread's reset releases the device (its count is 0).
                _ => return Err(already_reset(d, force)),
            }
        };
        let forget_current = || {
            CURRENT.with(|c| {
                if matches!(c.get(), Some((e, dev, _, _)) if e == self.epoch && dev == d) {
                    c.set(None);
                }
            });
        };
        if !release {
            forget_current();
            return Ok(());
        }
        let drained = {
            // Sets of the device wait from the count's drop to 0 until the release is done
            // (see `unreleased`), even if this thread unwinds; this thread's own fail at once.
            let _released = Released {
                rt: self,
                device: d,
                resetting: RESETTING.with(|r| r.replace(Some(d))),
            };
            // The default stream first, as CANN's `PrimaryContextCallBack` reports it.
            if let Some(ctx) = self.primary_of(d) {
                self.default_stream_state(d, ctx, StreamState::DestroyPre);
            }
            statecb::device_state(d, DeviceState::ResetPre);
            // Each stream's callbacks run with its context current, as CANN's run in the
            // context being torn down: they may still use the stream.
            let before = CURRENT.with(Cell::get);
            for h in self.streams.handles_where(|s| s.device == d && !s.default) {
                if let Ok(s) = self.stream(h) {
                    self.make_current(d, s.ctx);
                }
                statecb::stream_state(h, StreamState::DestroyPre);
            }
            CURRENT.with(|c| c.set(before));
            forget_current();
            // A host function cannot wait for its own stream, which the drain would do; a
            // host function of another device's stream drains `d` as any caller does.
            let drained = if acl_notify_sim::host_function_device() == Some(d) {
                Ok(())
            } else {
                self.drain(Drain::Reset(d))
            };
            self.release(|dev| dev == d);
            drained
        };
        statecb::device_state(d, DeviceState::ResetPost);
        drained
    }

    /// Discards the streams and destroys the notify handles on devices chosen by `which`:
    /// the C stream handles, the devices' default streams, and streams still draining in an
    /// `aclrtDestroyStream` on another thread. All of them are cancelled before any is waited
    /// for (a host function on one may be synchronizing another).
    pub(crate) fn release(&self, which: impl Fn(u32) -> bool) {
        self.streams.remove_where(|s| which(s.device));
        self.drop_models_where(&which);
        self.backend.discard_streams_where(&which);
        self.backend.destroy_notifies_where(&which);
        let cnts = self.cnts.remove_where(|c| which(c.device));
        for c in cnts {
            let _ = self.backend.cnt_destroy(c.raw);
        }
        self.contexts.forget_where(&which);
        self.res_limits.forget_devices(&which);
        self.stream_infos.forget_devices(&which);
        let events = self.events.remove_where(|e| which(e.device));
        for e in events {
            let _ = self.backend.event_destroy(e.raw);
        }
    }

    /// Whether an `aclrtSetDevice` of `device` (a device of the machine) is not yet reset: its
    /// primary context is held.
    pub(crate) fn device_is_set(&self, device: u32) -> bool {
        lock(&self.device_refs)
            .get(device as usize)
            .is_some_and(|r| r.count > 0)
    }

    /// `aclrtGetDevice`.
    pub(crate) fn get_device(&self) -> Result<i32, CallError> {
        self.current_device().map(|d| d as i32)
    }

    /// `aclrtDeviceCanAccessPeer`. CANN's order (hicann/runtime
    /// `src/acl/aclrt_impl/memory.cpp`, `aclrtDeviceCanAccessPeerImpl`): `peer` equal to
    /// `device` (100000, an ACL-level check), then `peer`, then `device` existing (107001),
    /// then the SoC (207000 where it has no peer access).
    pub(crate) fn can_access_peer(&self, device: i32, peer: i32) -> Result<bool, CallError> {
        if device == peer {
            return Err(same_device(device, peer));
        }
        let p = self.device_id(peer)?;
        let d = self.device_id(device)?;
        self.backend
            .can_access_peer(d, p)
            .map_err(CallError::backend)
    }

    /// `aclrtDeviceEnablePeerAccess` (from the current device to `peer`). CANN's checks, in
    /// its order (hicann/runtime `src/acl/aclrt_impl/memory.cpp`,
    /// `aclrtDeviceEnablePeerAccessImpl`): `flags` ≠ 0 (200006, `ACL_ERROR_FEATURE_UNSUPPORTED`,
    /// before anything else), the current device (107002), `peer` equal to it (100000), `peer`
    /// existing (107001), then the SoC (207000 where it has no peer access).
    pub(crate) fn enable_peer_access(&self, peer: i32, flags: u32) -> Result<(), CallError> {
        if flags != 0 {
            return Err(CallError::new(
                Error::FeatureUnsupported,
                format!("flags {flags:#x} must be 0 (reserved)"),
            ));
        }
        let d = self.current_device()?;
        if i64::from(d) == i64::from(peer) {
            return Err(same_device(d as i32, peer));
        }
        let p = self.device_id(peer)?;
        self.backend
            .enable_peer_access(d, p)
            .map_err(CallError::backend)
    }

    /// `aclrtDeviceDisablePeerAccess` (from the current device to `peer`). The checks are
    /// CANN's, in its order (hicann/runtime `src/acl/aclrt_impl/memory.cpp`,
    /// `aclrtDeviceDisablePeerAccessImpl`): the current device, then `peer` equal to it
    /// (100000, an ACL-level check), then `peer` existing.
    pub(crate) fn disable_peer_access(&self, peer: i32) -> Result<(), CallError> {
        let d = self.current_device()?;
        if i64::from(d) == i64::from(peer) {
            return Err(same_device(d as i32, peer));
        }
        let p = self.device_id(peer)?;
        self.backend
            .disable_peer_access(d, p)
            .map_err(CallError::backend)
    }
}

/// A device's count of `aclrtSetDevice` calls in the process ([`Runtime::device_refs`]).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct DeviceRefs {
    /// Sets minus resets.
    count: u32,
    /// A reset brought the count to 0 and has not finished releasing the device yet.
    releasing: bool,
}

/// Ends a reset's release of `device` (see [`Runtime::reset_device`]): wakes the sets waiting
/// for it.
struct Released<'a> {
    rt: &'a Runtime,
    device: u32,
    /// What [`RESETTING`] held before this reset (a reset within a callback of another's).
    resetting: Option<u32>,
}

impl Drop for Released<'_> {
    fn drop(&mut self) {
        RESETTING.with(|r| r.set(self.resetting));
        if let Some(r) = lock(&self.rt.device_refs).get_mut(self.device as usize) {
            r.releasing = false;
        }
        self.rt.device_released.notify_all();
    }
}

thread_local! {
    /// The device this thread's reset is releasing (its state callbacks run meanwhile).
    static RESETTING: Cell<Option<u32>> = const { Cell::new(None) };
}

/// Who sets a device: the caller's `aclrtSetDevice`, or a call of a thread without a current
/// device that sets `aclInit`'s default device implicitly (the message of its failure is
/// recorded under that call's name, so it must not claim an `aclrtSetDevice` the user never
/// made).
#[derive(Clone, Copy, Debug)]
enum SetBy {
    SetDevice,
    Implicit,
}

/// 507033 for a set of `device` (by `by`) while another thread's reset releases it.
fn being_reset(device: u32, by: SetBy, why: impl core::fmt::Display) -> CallError {
    let who = match by {
        SetBy::SetDevice => format!("aclrtSetDevice({device})"),
        SetBy::Implicit => format!(
            "this call's implicit set of the default device {device} (aclInit's \
             defaultDevice; the calling thread has no current device)"
        ),
    };
    CallError::new(
        Error::DevSetupError,
        format!(
            "{who}: device {device} is being reset by another thread (its count of \
             aclrtSetDevice calls reached 0 and its context is being released); {why}"
        ),
    )
}

/// A reset of `device` whose count of `aclrtSetDevice` calls is already 0: CANN's runtime
/// finds no reference to drop and answers `RT_ERROR_CONTEXT_DEL`, which its error table maps
/// to 507007 (hicann/runtime `src/runtime/core/src/runtime.cc`, `PrimaryContextRelease`;
/// `src/runtime/core/src/common/errcode_manage.cc`); its documented mixing rules
/// (`docs/api_docs/aclrtResetDeviceForce.md`) make every reset past 0 an error.
fn already_reset(device: u32, force: bool) -> CallError {
    let call = if force {
        "aclrtResetDeviceForce"
    } else {
        "aclrtResetDevice"
    };
    CallError::new(
        Error::ContextReleaseError,
        format!(
            "{call}({device}): device {device} is not set in this process (never set, or its \
             count of aclrtSetDevice calls already reset to 0)"
        ),
    )
}

/// How long an `aclrtSetDevice` waits for another thread's reset releasing its device, for a
/// reset that waits `reset_timeout` for the device's streams: that wait and a margin for the
/// release; when the reset waits for ever, [`DEFAULT_RESET_TIMEOUT`].
pub(crate) fn set_bound(reset_timeout: Option<Duration>) -> Duration {
    reset_timeout.map_or(DEFAULT_RESET_TIMEOUT, |t| t.saturating_add(RELEASE_MARGIN))
}

/// What [`set_bound`] allows a reset's release beyond its drain.
const RELEASE_MARGIN: Duration = Duration::from_secs(5);

/// The ACL layer's refusal of a device paired with itself (100000).
fn same_device(device: i32, peer: i32) -> CallError {
    CallError::new(
        Error::InvalidParam,
        format!("deviceId {device} and peerDeviceId {peer} are one device; peer access needs two"),
    )
}
