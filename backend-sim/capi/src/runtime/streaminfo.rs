//! What a stream answers about itself: its id, the priority and flags it was created with
//! (`aclrtStreamGetId`, `aclrtStreamGetPriority`, `aclrtStreamGetFlags`). Host-side
//! bookkeeping kept per backend stream; the simulator runs every stream the same way.
//!
//! CANN's rules (hicann/runtime):
//!
//! - An id is unique among the live streams of one device and comes back once its stream is
//!   destroyed (the driver's per-device stream id pool): when the destroy has finished, so a
//!   stream still draining in `aclrtDestroyStream` keeps it; a device reset frees them all. Here
//!   the lowest free id is handed out. A context's default stream has one too, taken on its
//!   first query (the device's default stream is made on first use as well).
//! - The priority is clamped into [0, 7] at creation (`src/runtime/api/impl/api_error.cc`,
//!   `ApiErrorDecorator::StreamCreate`: `RT_STREAM_GREATEST_PRIORITY` 0 to
//!   `RT_STREAM_LEAST_PRIORITY` 7, `base_info.hpp`); `aclrtCreateStreamWithConfig` passes its
//!   `uint32_t` as an `int32_t`, so values above `INT32_MAX` are negative and become 0.
//! - The flags answered are the `ACL_STREAM_*` bits the stream was created with
//!   (`src/acl/aclrt_impl/stream.cpp`, `aclrtStreamGetFlagsImpl` maps each runtime flag back to
//!   its ACL bit); a stream of `aclrtCreateStream` and a default stream answer 0.
//! - The overflow switch (`aclrtSetStreamOverflowSwitch`, 0 or 1, else 100000 from the ACL
//!   layer) is plain state on the chips with `RT_FEATURE_STREAM_ATTR_OVERFLOW_CHECK`
//!   (`src/runtime/config/910_B_93` and `950`, `dev_info_reg.cc`); elsewhere the set answers 0
//!   and does nothing, before even the stream is checked (`src/runtime/api/api_c_stream.cc`,
//!   `rtSetStreamOverflowSwitch`). The get answers the stream's switch on chips with STARS
//!   (`isStars`: those and Ascend310B's `mini_v3`), 1 elsewhere (`api_impl.cc`,
//!   `ApiImpl::GetStreamOverflowSwitch`). Both use the stream in its own context only (107003).
//!   IPV350's configuration is not identified in hicann/runtime: it is taken as neither.
//! - The getters of id, priority and flags do not check the stream's context (`src/runtime/api/impl/api_impl.cc`,
//!   `ApiImpl::GetStreamId`, `StreamGetPriority`, `StreamGetFlags`): a live stream of another
//!   device or context answers its own values. Priority and flags need a current context
//!   (107002 without), the id does not.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use acl_notify_core::{Backend, RawStream, Soc};

use super::Runtime;
use crate::errmsg::CallError;

/// `RT_STREAM_LEAST_PRIORITY`: the largest priority a stream keeps (0 is the greatest).
pub(crate) const LEAST_PRIORITY: u32 = 7;

/// What one stream answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StreamInfo {
    /// Unique among the live streams of its device.
    pub(crate) id: i32,
    /// In [0, [`LEAST_PRIORITY`]].
    pub(crate) priority: u32,
    /// `ACL_STREAM_*` bits.
    pub(crate) flags: u32,
    /// The overflow switch (`aclrtSetStreamOverflowSwitch`), off at creation.
    pub(crate) overflow: bool,
    /// `ACL_STREAM_ATTR_USER_CUSTOM_TAG`, 0 at creation (`streamattr`).
    pub(crate) tag: u32,
    /// `ACL_STREAM_ATTR_CACHE_OP_INFO`, off at creation (`streamattr`).
    pub(crate) cache_op_info: bool,
}

/// Whether `soc` keeps a stream's overflow switch (`RT_FEATURE_STREAM_ATTR_OVERFLOW_CHECK`).
pub(crate) fn keeps_overflow_switch(soc: Soc) -> bool {
    matches!(
        soc,
        Soc::Ascend910B | Soc::Ascend910_93 | Soc::Ascend950PR | Soc::Ascend950DT
    )
}

/// Whether `soc` answers a stream's overflow switch (`isStars`); 1 elsewhere.
pub(crate) fn answers_overflow_switch(soc: Soc) -> bool {
    keeps_overflow_switch(soc) || soc == Soc::Ascend310B
}

/// The stream ids of one device (`lowest_free_ids`), and how many of the device's streams the program
/// created hold one (the stream accounting `aclrtCreateStream` refuses by and
/// `aclrtGetStreamAvailableNum` answers from).
#[derive(Default)]
struct StreamIds {
    ids: super::lowest_free_ids::LowestFreeIds,
    created: u32,
}

impl StreamIds {
    fn take(&mut self) -> i32 {
        // Stream ids are `int32_t`: 2³¹ live streams on one device cannot exist.
        i32::try_from(self.ids.take()).unwrap_or(i32::MAX)
    }

    fn give_back(&mut self, id: i32) {
        if let Ok(id) = u32::try_from(id) {
            self.ids.give_back(id);
        }
    }
}

#[derive(Default)]
struct Inner {
    /// Per backend stream, its device and what it answers.
    streams: HashMap<RawStream, (u32, StreamInfo)>,
    /// Per device, its pool and the pool's number (a reset starts a new pool).
    ids: HashMap<u32, (u64, StreamIds)>,
    /// The created streams ([`StreamInfos::register_created`]) and their devices: counted in
    /// their pool's `created` until their id is freed.
    counted: HashMap<RawStream, u32>,
    /// The number of the next pool.
    pools: u64,
}

impl Inner {
    fn pool(&mut self, device: u32) -> &mut (u64, StreamIds) {
        let n = &mut self.pools;
        self.ids.entry(device).or_insert_with(|| {
            *n += 1;
            (*n, StreamIds::default())
        })
    }
}

/// The id of a stream being destroyed, still taken ([`StreamInfos::forget_stream`]): given back
/// by [`StreamInfos::free_id`] once the destroy has finished.
#[must_use = "the id stays taken until it is given to `free_id`"]
pub(crate) struct HeldId {
    device: u32,
    pool: u64,
    id: i32,
    /// A created stream's: its pool's `created` count goes down with the id.
    counted: bool,
}

/// The session's stream records. An entry is made when its stream is (or, for a default
/// stream, on its first query) and goes with its stream (`forget_stream`: destroyed, or
/// discarded with its context) or its device (`forget_devices`: reset).
#[derive(Default)]
pub(crate) struct StreamInfos {
    inner: Mutex<Inner>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A priority as CANN keeps it: the `int32_t` it was passed as, clamped into [0, 7].
pub(crate) fn clamp_priority(priority: u32) -> u32 {
    (priority as i32).clamp(0, LEAST_PRIORITY as i32) as u32
}

impl StreamInfos {
    /// Records stream `raw` of `device` (an id is taken); the record it already has, if any.
    pub(crate) fn register(
        &self,
        raw: RawStream,
        device: u32,
        priority: u32,
        flags: u32,
    ) -> StreamInfo {
        let mut g = lock(&self.inner);
        if let Some((_, info)) = g.streams.get(&raw) {
            return *info;
        }
        let id = g.pool(device).1.take();
        let info = StreamInfo {
            id,
            priority: clamp_priority(priority),
            flags,
            overflow: false,
            tag: 0,
            cache_op_info: false,
        };
        g.streams.insert(raw, (device, info));
        info
    }

    /// Records stream `raw` that the program created on `device` (`aclrtCreateStream` and
    /// its neighbours), counted against the device's `max` streams: `None` when `max` of its
    /// created streams still hold their ids (the stream is not recorded).
    pub(crate) fn register_created(
        &self,
        raw: RawStream,
        device: u32,
        priority: u32,
        flags: u32,
        max: u32,
    ) -> Option<StreamInfo> {
        {
            let mut g = lock(&self.inner);
            let pool = &mut g.pool(device).1;
            if pool.created >= max {
                return None;
            }
            pool.created += 1;
            g.counted.insert(raw, device);
        }
        Some(self.register(raw, device, priority, flags))
    }

    /// How many more streams the program may create on `device` of its `max`.
    pub(crate) fn available(&self, device: u32, max: u32) -> u32 {
        max.saturating_sub(lock(&self.inner).pool(device).1.created)
    }

    /// The record of stream `raw`, if it has one.
    pub(crate) fn get(&self, raw: RawStream) -> Option<StreamInfo> {
        lock(&self.inner).streams.get(&raw).map(|(_, i)| *i)
    }

    /// Changes the record of stream `raw` with `f`; false if it has no record.
    pub(crate) fn update(&self, raw: RawStream, f: impl FnOnce(&mut StreamInfo)) -> bool {
        match lock(&self.inner).streams.get_mut(&raw) {
            Some((_, info)) => {
                f(info);
                true
            }
            None => false,
        }
    }

    /// Forgets a stream being destroyed: its record goes now, its id stays taken until it is
    /// given to [`free_id`](Self::free_id) once the destroy has finished (a draining stream
    /// is still the device's, as CANN's id is until the stream is gone).
    pub(crate) fn forget_stream(&self, raw: RawStream) -> Option<HeldId> {
        let mut g = lock(&self.inner);
        let (device, info) = g.streams.remove(&raw)?;
        let counted = g.counted.remove(&raw).is_some();
        let pool = g.pool(device).0;
        Some(HeldId {
            device,
            pool,
            id: info.id,
            counted,
        })
    }

    /// Frees the id of a destroyed stream, unless its device was reset meanwhile (the reset
    /// freed every id of its device, and the new pool may have handed this one out again).
    pub(crate) fn free_id(&self, held: Option<HeldId>) {
        let Some(h) = held else {
            return;
        };
        if let Some((pool, ids)) = lock(&self.inner).ids.get_mut(&h.device)
            && *pool == h.pool
        {
            ids.give_back(h.id);
            if h.counted {
                ids.created = ids.created.saturating_sub(1);
            }
        }
    }

    /// Forgets the streams of the devices `which` picks (reset): their ids start over.
    pub(crate) fn forget_devices(&self, which: &impl Fn(u32) -> bool) {
        let mut g = lock(&self.inner);
        g.streams.retain(|_, (d, _)| !which(*d));
        g.ids.retain(|d, _| !which(*d));
        g.counted.retain(|_, d| !which(*d));
    }

    /// The number of records (tests: none outlives its stream).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        lock(&self.inner).streams.len()
    }
}

impl Runtime {
    /// `aclrtGetStreamAvailableNum`: how many more streams the program may create on the
    /// current device (107002 without a current context; `None` on a chip without a stream
    /// count, IPV350).
    pub(crate) fn streams_available(&self) -> Result<Option<u32>, CallError> {
        let Some(max) = self.backend.soc().max_streams() else {
            return Ok(None);
        };
        let (device, _) = self.current()?;
        Ok(Some(self.stream_infos.available(device, max)))
    }

    /// What C stream `stream` answers (NULL: the current context's default stream). Checks:
    /// 107017 a handle that is not a live stream; 107002 no current context when `stream` is
    /// NULL or `need_context`.
    pub(crate) fn stream_info(
        &self,
        stream: usize,
        need_context: bool,
    ) -> Result<StreamInfo, CallError> {
        let (raw, device, default) = if stream == 0 {
            let (device, ctx) = self.current()?;
            (self.context_default_stream(device, ctx)?, device, true)
        } else {
            let e = self.stream(stream)?;
            if need_context {
                self.current()?;
            }
            (e.raw, e.device, e.default)
        };
        if default {
            return Ok(self.stream_infos.register(raw, device, 0, 0));
        }
        // A created stream is recorded before its handle is handed out: no record means it
        // was destroyed (or its device reset) since the look above.
        self.stream_infos
            .get(raw)
            .ok_or_else(|| super::bad_stream(stream))
    }
}

impl Runtime {
    /// The backend stream and record of C stream `stream` used in the current context (NULL:
    /// its default stream). Checks: 107017; 107002; 107003 a stream of another device or
    /// context.
    pub(crate) fn stream_info_here(
        &self,
        stream: usize,
    ) -> Result<(RawStream, StreamInfo), CallError> {
        let raw = self.resolve_stream_any(stream)?;
        let default = stream == 0 || self.stream(stream).is_ok_and(|e| e.default);
        if default {
            let (device, _) = self.current()?;
            return Ok((raw, self.stream_infos.register(raw, device, 0, 0)));
        }
        let info = self
            .stream_infos
            .get(raw)
            .ok_or_else(|| super::bad_stream(stream))?;
        Ok((raw, info))
    }

    /// `aclrtSetStreamOverflowSwitch` (`on` checked to be 0 or 1 by the caller).
    pub(crate) fn set_overflow_switch(&self, stream: usize, on: bool) -> Result<(), CallError> {
        if !keeps_overflow_switch(self.backend().soc()) {
            return Ok(());
        }
        self.update_stream_info(stream, |i| i.overflow = on)
    }

    /// Changes the record of C stream `stream` used in the current context (NULL: its
    /// default stream) with `f`. Checks as [`stream_info_here`](Self::stream_info_here).
    pub(crate) fn update_stream_info(
        &self,
        stream: usize,
        f: impl FnOnce(&mut StreamInfo),
    ) -> Result<(), CallError> {
        let (raw, _) = self.stream_info_here(stream)?;
        if self.stream_infos.update(raw, f) {
            Ok(())
        } else {
            Err(super::bad_stream(stream))
        }
    }

    /// `aclrtGetStreamOverflowSwitch`.
    pub(crate) fn overflow_switch(&self, stream: usize) -> Result<u32, CallError> {
        let (_, info) = self.stream_info_here(stream)?;
        if answers_overflow_switch(self.backend().soc()) {
            Ok(u32::from(info.overflow))
        } else {
            Ok(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_per_device_and_come_back_lowest_first() {
        let s = StreamInfos::default();
        let a = s.register(RawStream(1), 0, 0, 0);
        let b = s.register(RawStream(2), 0, 0, 0);
        let c = s.register(RawStream(3), 1, 0, 0);
        assert_eq!((a.id, b.id, c.id), (0, 1, 0));
        assert_eq!(
            s.register(RawStream(1), 0, 5, 5),
            a,
            "a second register keeps the record"
        );
        let held = s.forget_stream(RawStream(1));
        assert_eq!(
            s.register(RawStream(7), 0, 0, 0).id,
            2,
            "an id still held was handed out"
        );
        s.free_id(held);
        s.free_id(s.forget_stream(RawStream(7)));
        assert_eq!(s.register(RawStream(4), 0, 0, 0).id, 0);
        assert_eq!(s.register(RawStream(5), 0, 0, 0).id, 2);
        let held = s.forget_stream(RawStream(5));
        s.forget_devices(&|d| d == 0);
        assert_eq!(s.len(), 1);
        assert_eq!(
            s.register(RawStream(6), 0, 0, 0).id,
            0,
            "a reset frees the ids"
        );
        // The id held across the reset is not given to the new pool (0 is taken there).
        s.free_id(held);
        assert_eq!(s.register(RawStream(8), 0, 0, 0).id, 1);
    }

    #[test]
    fn priorities_are_clamped_as_cann_does() {
        assert_eq!(clamp_priority(0), 0);
        assert_eq!(clamp_priority(3), 3);
        assert_eq!(clamp_priority(7), 7);
        assert_eq!(clamp_priority(8), 7);
        assert_eq!(clamp_priority(0x7fff_ffff), 7);
        assert_eq!(clamp_priority(0x8000_0000), 0);
        assert_eq!(clamp_priority(u32::MAX), 0);
    }
}
