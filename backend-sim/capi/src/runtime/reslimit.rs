//! Core resource limits (CANN's `aclrtSetDeviceResLimit` family): how many Cube and Vector
//! Cores the process's kernels on a device, on one stream, or from one thread may use. The
//! simulator runs no kernels, so a limit only changes what the calls answer; the rules are
//! CANN's (hicann/runtime `src/runtime/api/impl/api_impl.cc`, `SetDeviceResLimit` to
//! `GetResInCurrentThread`, and `api_error.cc` for the checks):
//!
//! - A device starts at its chip's counts ([`Cores`]: the AI Cores for Cube Cores, the
//!   Vector Cores), is limited per process and reset to them; a device that is not set up in
//!   the process (no `aclrtSetDevice`, no context on it) is 507033.
//! - A stream may be limited on its own, to at most its device's counts (not bounded by the
//!   device's limit); a stream without a limit answers its device's.
//! - A thread may use one stream's limits (`aclrtUseStreamResInCurrentThread`, NULL: the
//!   current context's default stream); `aclrtGetResInCurrentThread` answers that stream's
//!   limit where it has one, else the current device's.
//!
//! A value above the chip's count, or a type other than Cube (0) or Vector (1) Cores, is
//! 107000. IPV350, whose cores CANN publishes no configuration of and whose documentation
//! marks these calls unsupported, answers 207000.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use acl_notify_core::{Cores, Error, RawStream};

use super::Runtime;
use crate::errmsg::CallError;

/// `aclrtDevResLimitType`: Cube Cores (`ACL_RT_DEV_RES_CUBE_CORE`, 0) and Vector Cores
/// (`ACL_RT_DEV_RES_VECTOR_CORE`, 1).
const TYPES: usize = 2;

/// A limit per type; `None`: not set.
type Limits = [Option<u32>; TYPES];

thread_local! {
    /// The stream whose limits the calling thread uses (`aclrtUseStreamResInCurrentThread`),
    /// tagged with the session's epoch.
    static RES_STREAM: Cell<Option<(u64, RawStream)>> = const { Cell::new(None) };
}

/// The session's limits.
#[derive(Default)]
pub(crate) struct ResLimits {
    /// Per device, the process's limits.
    devices: Mutex<HashMap<u32, Limits>>,
    /// Per backend stream, its device and the limits set on it. An entry goes with its
    /// stream's device (`forget_devices`) or its stream (`forget_stream`: destroyed, or
    /// discarded with its context by `destroy_context`).
    pub(super) streams: Mutex<HashMap<RawStream, (u32, Limits)>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ResLimits {
    /// Forgets the limits of the devices `which` picks and of their streams (the devices were
    /// reset: CANN's device objects, which hold them, go).
    pub(crate) fn forget_devices(&self, which: &impl Fn(u32) -> bool) {
        lock(&self.devices).retain(|d, _| !which(*d));
        lock(&self.streams).retain(|_, (d, _)| !which(*d));
    }

    /// Forgets the limits of a destroyed stream.
    pub(crate) fn forget_stream(&self, raw: RawStream) {
        lock(&self.streams).remove(&raw);
    }
}

/// The limit type `t` as an index: 107000 for anything but 0 and 1 (CANN's "[0, 2)").
fn res_type(t: i32) -> Result<usize, CallError> {
    usize::try_from(t)
        .ok()
        .filter(|&i| i < TYPES)
        .ok_or_else(|| {
            CallError::new(
                Error::ParamInvalid,
                format!(
                    "resource type {t} is neither ACL_RT_DEV_RES_CUBE_CORE (0) nor \
                     ACL_RT_DEV_RES_VECTOR_CORE (1)"
                ),
            )
        })
}

/// A C `int32_t` device id: 107001 if negative (CANN checks that before anything else).
fn non_negative(device: i32) -> Result<i32, CallError> {
    if device < 0 {
        return Err(CallError::new(
            Error::InvalidDeviceId,
            format!("device {device} is negative"),
        ));
    }
    Ok(device)
}

impl Runtime {
    /// The chip's counts, per type: what a device starts at and what no limit may exceed.
    fn res_counts(&self) -> Result<[u32; TYPES], CallError> {
        let chip = self.backend().chip();
        match chip.cores() {
            Some(Cores {
                ai_core,
                vector_core,
                ..
            }) => Ok([ai_core, vector_core]),
            None => Err(CallError::new(
                Error::FeatureNotSupport,
                format!("core resource limits are not supported on {chip}"),
            )),
        }
    }

    /// `value` as a limit of type `t`: 107000 above the chip's count.
    fn res_value(&self, t: usize, value: u32) -> Result<u32, CallError> {
        let max = self.res_counts()?[t];
        if value > max {
            return Err(CallError::new(
                Error::ParamInvalid,
                format!(
                    "{value} {} exceeds the {max} of {}",
                    ["Cube Cores", "Vector Cores"][t],
                    self.backend().chip()
                ),
            ));
        }
        Ok(value)
    }

    /// `device` (a C `int32_t`) as a device set up in this process: 107001 no such device,
    /// 507033 none of its contexts is alive (no `aclrtSetDevice`, or it was reset).
    fn set_up_device(&self, device: i32) -> Result<u32, CallError> {
        let d = self.device_id(non_negative(device)?)?;
        if !self.contexts.on_device(d) {
            return Err(CallError::new(
                Error::DevSetupError,
                format!("device {d} is not set up in this process (call aclrtSetDevice first)"),
            ));
        }
        Ok(d)
    }

    /// The process's limit of type `t` on device `d` (the chip's count where none is set).
    fn device_res(&self, d: u32, t: usize) -> Result<u32, CallError> {
        let counts = self.res_counts()?;
        Ok(lock(&self.res_limits.devices)
            .get(&d)
            .and_then(|l| l[t])
            .unwrap_or(counts[t]))
    }

    /// `aclrtSetDeviceResLimit`. Codes: 107001; 107000 bad type or value; 507033; 207000.
    pub(crate) fn set_device_res_limit(
        &self,
        device: i32,
        t: i32,
        value: u32,
    ) -> Result<(), CallError> {
        non_negative(device)?;
        let t = res_type(t)?;
        let d = self.set_up_device(device)?;
        let value = self.res_value(t, value)?;
        lock(&self.res_limits.devices).entry(d).or_default()[t] = Some(value);
        Ok(())
    }

    /// `aclrtGetDeviceResLimit`. Codes: 107001; 107000 bad type; 507033; 207000.
    pub(crate) fn get_device_res_limit(&self, device: i32, t: i32) -> Result<u32, CallError> {
        non_negative(device)?;
        let t = res_type(t)?;
        let d = self.set_up_device(device)?;
        self.device_res(d, t)
    }

    /// `aclrtResetDeviceResLimit`: back to the chip's counts. Codes: 107001; 507033; 207000.
    pub(crate) fn reset_device_res_limit(&self, device: i32) -> Result<(), CallError> {
        let d = self.set_up_device(device)?;
        self.res_counts()?;
        lock(&self.res_limits.devices).remove(&d);
        Ok(())
    }

    /// The backend stream a C stream argument of these calls means, and its device: a live
    /// stream (any device's: CANN checks only the handle), or for NULL the current context's
    /// default stream. Codes: 107017; 107002.
    fn res_stream(&self, stream: usize) -> Result<(RawStream, u32), CallError> {
        if stream != 0 {
            let s = self.stream(stream)?;
            return Ok((s.raw, s.device));
        }
        let (device, ctx) = self.current()?;
        Ok((self.context_default_stream(device, ctx)?, device))
    }

    /// `aclrtSetStreamResLimit`. Codes: 107017; 107000 bad type or value; 107002; 207000.
    pub(crate) fn set_stream_res_limit(
        &self,
        stream: usize,
        t: i32,
        value: u32,
    ) -> Result<(), CallError> {
        if stream != 0 {
            self.stream(stream)?;
        }
        let t = res_type(t)?;
        let (raw, device) = self.res_stream(stream)?;
        let value = self.res_value(t, value)?;
        lock(&self.res_limits.streams)
            .entry(raw)
            .or_insert((device, [None; TYPES]))
            .1[t] = Some(value);
        Ok(())
    }

    /// `aclrtResetStreamResLimit`. Codes: 107017; 107002.
    pub(crate) fn reset_stream_res_limit(&self, stream: usize) -> Result<(), CallError> {
        let (raw, _) = self.res_stream(stream)?;
        self.res_limits.forget_stream(raw);
        Ok(())
    }

    /// The limit of type `t` of stream `raw` on `device`: its own, else its device's.
    fn stream_res(&self, raw: RawStream, device: u32, t: usize) -> Result<u32, CallError> {
        let own = lock(&self.res_limits.streams)
            .get(&raw)
            .and_then(|(_, l)| l[t]);
        match own {
            Some(v) => Ok(v),
            None => self.device_res(device, t),
        }
    }

    /// `aclrtGetStreamResLimit`. Codes: 107017; 107000 bad type; 107002; 207000.
    pub(crate) fn get_stream_res_limit(&self, stream: usize, t: i32) -> Result<u32, CallError> {
        if stream != 0 {
            self.stream(stream)?;
        }
        let t = res_type(t)?;
        let (raw, device) = self.res_stream(stream)?;
        self.stream_res(raw, device, t)
    }

    /// `aclrtUseStreamResInCurrentThread`: the calling thread uses `stream`'s limits from
    /// now on (the last call wins). Codes: 107017; 107002.
    pub(crate) fn use_stream_res(&self, stream: usize) -> Result<(), CallError> {
        let (raw, _) = self.res_stream(stream)?;
        RES_STREAM.with(|c| c.set(Some((self.epoch, raw))));
        Ok(())
    }

    /// `aclrtUnuseStreamResInCurrentThread`: the calling thread stops using `stream`'s
    /// limits if it uses them (another stream's it keeps, as CANN does). Codes: 107017;
    /// 107002.
    pub(crate) fn unuse_stream_res(&self, stream: usize) -> Result<(), CallError> {
        let (raw, _) = self.res_stream(stream)?;
        RES_STREAM.with(|c| {
            if c.get() == Some((self.epoch, raw)) {
                c.set(None);
            }
        });
        Ok(())
    }

    /// `aclrtGetResInCurrentThread`: the limit of the stream the calling thread uses, where
    /// it has one of type `t`, else the current device's. Codes: 107000 bad type; 107002 no
    /// current device; 207000.
    pub(crate) fn res_in_current_thread(&self, t: i32) -> Result<u32, CallError> {
        let t = res_type(t)?;
        if let Some((epoch, raw)) = RES_STREAM.with(Cell::get)
            && epoch == self.epoch
            && let Some(v) = lock(&self.res_limits.streams)
                .get(&raw)
                .and_then(|(_, l)| l[t])
        {
            return Ok(v);
        }
        let device = self.current_device()?;
        self.device_res(device, t)
    }
}
