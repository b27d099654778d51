//! What a queued copy, set or value task would be refused for, without queueing it: stream
//! capture (the C layer's `aclmdlRI*`) stores such calls to replay them later, and CANN checks
//! a captured task's arguments when it is captured, as it checks an uncaptured one when it is
//! queued (hicann/runtime `src/runtime/api/impl/api_error.cc`, `ApiErrorDecorator::MemcpyAsync`:
//! count, kind and the sides' locations, before `ApiImpl` queues or captures the task), so a
//! bad range is the capturing call's error, not a replay's.
//!
//! Every check is the one the queueing call makes (`copy_sides`, `set_side`, `value_side`,
//! the pieces of a reserved range); a side in memory imported from another host is checked
//! at each replay only (its owner answers for it then).

use super::direction;
use super::unqueued::{Place, verdict};
use super::{AsyncCopy, MemcpyKind, Side, within};
use crate::Sim;
use crate::error::SimError;

impl Sim {
    /// Whether another host's memory holds `addr` (checked at replay only).
    fn remote_side(&self, addr: usize, what: &str) -> Result<bool, SimError> {
        match self.inner.cluster.as_ref() {
            Some(c) => Ok(c.mem_import_at(addr, what)?.is_some()),
            None => Ok(false),
        }
    }

    /// The device pieces of a side in a reserved range, each a live allocation's range:
    /// `Ok(true)` if the side is in one.
    fn reserved_side(&self, addr: usize, len: usize, what: &str) -> Result<bool, SimError> {
        let Some(pieces) = self.vmm_pieces(addr, len, what)? else {
            return Ok(false);
        };
        for p in &pieces {
            self.range_ref(p.at, p.len, what)?;
        }
        Ok(true)
    }

    /// [`memcpy_async`](Self::memcpy_async)'s refusals of a copy, nothing queued; then what
    /// CANN's `aclrtMemcpyAsync` does with it, as
    /// [`memcpy_async_as_cann`](Self::memcpy_async_as_cann) answers it ([`super::unqueued`];
    /// [`AsyncCopy::Queued`]: it queues the copy).
    pub fn memcpy_check(
        &self,
        dst: usize,
        dest_max: usize,
        src: usize,
        count: usize,
        kind: MemcpyKind,
    ) -> Result<AsyncCopy, SimError> {
        self.mem_checked(|| {
            if count == 0 {
                return Ok(AsyncCopy::Queued);
            }
            within(count, dest_max, "destMax")?;
            if self.remote_side(dst, "destination")? || self.remote_side(src, "source")? {
                return Ok(AsyncCopy::Queued);
            }
            let host = &self.mem().host;
            let d = self.reserved_side(dst, count, "destination")?;
            let s = self.reserved_side(src, count, "source")?;
            if d || s {
                // The other side as a plain copy checks it; a reserved range is device memory.
                let check = |addr, on: bool, what| {
                    if on {
                        return Ok((Place::Device, false));
                    }
                    let side = self.side(addr, count, what)?;
                    let managed = matches!(side, Side::Device(r) if Self::is_managed(&r.alloc));
                    Ok::<_, SimError>((Place::of_side(&side, host), managed))
                };
                let (pd, md) = check(dst, d, "destination")?;
                let (ps, ms) = check(src, s, "source")?;
                let kind = direction::resolve(kind, (pd, dst), (ps, src), || md || ms)?;
                return Ok(verdict(kind, pd, ps));
            }
            let (d, s) = self.copy_sides(dst, dest_max, src, count, kind)?;
            let (pd, ps) = (Place::of_side(&d, host), Place::of_side(&s, host));
            let kind = Self::copy_kind(kind, (&d, pd, dst), (&s, ps, src))?;
            self.peer_copy_ok(&d, &s)?;
            Ok(verdict(kind, pd, ps))
        })
    }

    /// [`memset_async`](Self::memset_async)'s refusals of a set, nothing queued.
    pub fn memset_check(&self, dst: usize, max: usize, count: usize) -> Result<(), SimError> {
        self.mem_checked(|| {
            if count == 0 {
                return Ok(());
            }
            within(count, max, "maxCount")?;
            if self.remote_side(dst, "range")? || self.reserved_side(dst, count, "range")? {
                return Ok(());
            }
            self.set_side(dst, max, count).map(|_| ())
        })
    }

    /// [`value_write`](Self::value_write)'s and [`value_wait`](Self::value_wait)'s refusals
    /// of the word at `addr`, nothing queued.
    pub fn value_check(&self, addr: usize) -> Result<(), SimError> {
        self.mem_checked(|| {
            let word = self.vmm_word(addr)?;
            self.value_side(word.at, "devAddr").map(|_| ())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NamespaceGuard as Ns;
    use acl_notify_core::{BackendError as _, Error};

    fn open(tag: &str) -> (Sim, Ns) {
        crate::mem::tests::test_sim(
            "precheck",
            tag,
            acl_notify_core::Soc::Ascend910B,
            1,
            1 << 20,
        )
    }

    fn code<T>(r: Result<T, SimError>) -> Option<Error> {
        r.err().map(|e| e.kind())
    }

    #[test]
    fn a_check_refuses_what_the_queued_call_refuses() {
        let (sim, _ns) = open("refuses");
        let a = sim.malloc(0, 4096, 0).unwrap();
        let b = sim.malloc(0, 4096, 0).unwrap();
        let host = [0u8; 64];
        let h = host.as_ptr().addr();
        let d2d = MemcpyKind::DeviceToDevice;
        assert_eq!(code(sim.memcpy_check(a, 4096, b, 4096, d2d)), None);
        assert_eq!(
            code(sim.memcpy_check(a, 64, h, 64, MemcpyKind::HostToDevice)),
            None
        );
        // Past the allocation's end, past destMax, a device side the kind calls host beside
        // pageable memory (CANN's table refuses it; between known places it corrects).
        assert_eq!(
            code(sim.memcpy_check(a + 8, 4096, b, 4096, d2d)),
            Some(Error::ParamInvalid)
        );
        assert_eq!(
            code(sim.memcpy_check(a, 16, b, 64, d2d)),
            Some(Error::ParamInvalid)
        );
        assert_eq!(
            code(sim.memcpy_check(a, 64, h, 64, MemcpyKind::DeviceToHost)),
            Some(Error::ParamInvalid)
        );
        assert_eq!(
            sim.memcpy_check(a, 64, b, 64, MemcpyKind::HostToDevice)
                .unwrap(),
            AsyncCopy::Queued
        );
        assert_eq!(code(sim.memset_check(a, 4096, 4096)), None);
        assert_eq!(
            code(sim.memset_check(a + 1, 4096, 4096)),
            Some(Error::ParamInvalid)
        );
        assert_eq!(code(sim.value_check(a + 8)), None);
        assert_eq!(code(sim.value_check(a + 4)), Some(Error::ParamInvalid));
        assert_eq!(code(sim.value_check(h)), Some(Error::ParamInvalid));
        // A freed allocation.
        sim.free(b).unwrap();
        assert_eq!(
            code(sim.memcpy_check(a, 64, b, 64, d2d)),
            Some(Error::ParamInvalid)
        );
        assert_eq!(code(sim.memset_check(b, 64, 64)), Some(Error::ParamInvalid));
        assert_eq!(code(sim.value_check(b)), Some(Error::ParamInvalid));
        sim.free(a).unwrap();
    }
}
