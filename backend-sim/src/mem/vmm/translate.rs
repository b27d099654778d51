//! How copies, sets, value tasks and reduces reach the memory behind a reserved range: an
//! address range of a reserved range translated into the physical allocations mapped there
//! ([`Piece`]s, each with its mapping's mark for a queued task to hold), and the copy and set
//! made piece by piece, every piece checked before any byte moves.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use acl_notify_core::RawStream;

use super::super::{AsyncCopy, MemcpyKind, lock, within};
use super::{MapMark, invalid, reservation_at};
use crate::Sim;
use crate::error::SimError;

/// One piece of a translated range: the address to use, its length, and the mark of the
/// mapping it was translated through (`None` for a side not in a reserved range).
#[derive(Clone, Debug)]
pub(in crate::mem) struct Piece {
    pub(in crate::mem) at: usize,
    pub(in crate::mem) len: usize,
    pub(in crate::mem) mark: Option<Arc<MapMark>>,
}

impl Sim {
    /// The pieces of `[addr, addr + len)` if `addr` is in a reserved range: each a physical
    /// allocation's address and length, in order. `Ok(None)` for any other address.
    ///
    /// Errors: 107000 a part of the range that no mapping covers, or past the reserved range.
    pub(in crate::mem) fn vmm_pieces(
        &self,
        addr: usize,
        len: usize,
        what: &str,
    ) -> Result<Option<Vec<Piece>>, SimError> {
        // Nothing reserved (most programs): no lock; every copy's side asks.
        if self.vmm().reserved.load(Relaxed) == 0 {
            return Ok(None);
        }
        let st = lock(&self.vmm().state);
        let Some((base, r)) = reservation_at(&st, addr) else {
            return Ok(None);
        };
        let mut pieces = Vec::new();
        let (mut at, end) = (addr, addr.saturating_add(len));
        while at < end {
            let m = r
                .maps
                .range(..=at)
                .next_back()
                .filter(|(start, m)| at < *start + m.len);
            let Some((start, m)) = m else {
                return Err(invalid(format!(
                    "{what} [{addr:#x}, {end:#x}) is in reserved range {base:#x} ({} bytes), \
                     but nothing is mapped at {at:#x} (aclrtMapMem)",
                    r.size
                )));
            };
            let n = (start + m.len - at).min(end - at);
            pieces.push(Piece {
                at: m.addr + (at - start),
                len: n,
                mark: Some(Arc::clone(&m.mark)),
            });
            at += n;
        }
        Ok(Some(pieces))
    }

    /// The address a value task (`aclrtValueWrite` / `aclrtValueWait`) on the 8 bytes at
    /// `addr` uses: in a reserved range, the physical allocation's it is mapped to (an
    /// 8-aligned word lies in one mapping: mappings are whole pages); any other address as it
    /// is (an unaligned one is refused by the value task's own check).
    ///
    /// Errors: 107000 a part of a reserved range that nothing is mapped at.
    pub(in crate::mem) fn vmm_word(&self, addr: usize) -> Result<Piece, SimError> {
        if !addr.is_multiple_of(8) {
            return Ok(Piece {
                at: addr,
                len: 8,
                mark: None,
            });
        }
        self.vmm_span(addr, 8, "devAddr")
    }

    /// The address a range that is used whole (`len` bytes at `addr`, `what` in messages: a
    /// value task's word, a reduce's range) stands for: in a reserved range, the address in
    /// the physical allocation mapped there, with the mapping's mark (for a queued task to
    /// hold); any other address as it is.
    ///
    /// Errors: 107000 a part of a reserved range that nothing is mapped at, or a range over
    /// two mappings (ours: such a range is not one allocation's).
    pub(in crate::mem) fn vmm_span(
        &self,
        addr: usize,
        len: usize,
        what: &str,
    ) -> Result<Piece, SimError> {
        match self.vmm_pieces(addr, len, what)? {
            Some(mut p) if p.len() == 1 => p.pop().ok_or_else(|| invalid("no piece")),
            Some(p) => Err(invalid(format!(
                "{what} [{addr:#x}, +{len}) spans {} mappings of a reserved range; it must lie \
                 in one",
                p.len()
            ))),
            None => Ok(Piece {
                at: addr,
                len,
                mark: None,
            }),
        }
    }

    /// For a copy with a side in a reserved range: the copy made piece by piece through the
    /// physical allocations (queued on `stream` if given); `None` when neither side is in one
    /// (the ordinary paths go on). `leave_unqueued` (queued only): a copy CANN does not queue
    /// is answered instead, nothing queued (judged at the first piece, whose host side is the
    /// copy's; [`super::unqueued`]).
    #[allow(clippy::too_many_arguments)]
    pub(in crate::mem) fn vmm_memcpy(
        &self,
        dst: usize,
        dest_max: usize,
        src: usize,
        count: usize,
        kind: MemcpyKind,
        stream: Option<RawStream>,
        leave_unqueued: bool,
    ) -> Option<Result<AsyncCopy, SimError>> {
        if self.vmm().reserved.load(Relaxed) == 0 {
            return None;
        }
        let run = || -> Result<Option<AsyncCopy>, SimError> {
            let d = self.vmm_pieces(dst, count, "destination")?;
            let s = self.vmm_pieces(src, count, "source")?;
            if d.is_none() && s.is_none() {
                return Ok(None);
            }
            within(count, dest_max, "destMax")?;
            // The kind is judged with each piece's sides (the first piece's refusal is the
            // copy's, nothing queued): a reserved range is device memory.
            let d = self.vmm_side(d, dst, count, "destination")?;
            let s = self.vmm_side(s, src, count, "source")?;
            for (i, (to, from, n)) in zip_pieces(&d, &s).into_iter().enumerate() {
                // SAFETY: device pieces are mapped physical allocations, checked again by the
                // copy; a host side is the caller's contract (this function's callers'), whole
                // ranges of it split into consecutive pieces.
                let done = unsafe {
                    match stream {
                        None => self
                            .memcpy(to.at, n, from.at, n, kind)
                            .map(|()| AsyncCopy::Queued),
                        Some(st) => self.memcpy_async_through(
                            to.at,
                            n,
                            from.at,
                            n,
                            kind,
                            st,
                            [to.mark, from.mark],
                            leave_unqueued && i == 0,
                        ),
                    }
                }?;
                if done != AsyncCopy::Queued {
                    return Ok(Some(done));
                }
            }
            Ok(Some(AsyncCopy::Queued))
        };
        run().transpose()
    }

    /// For a set in a reserved range: the set made piece by piece (queued on `stream` if
    /// given); `None` when `dst` is in none.
    pub(in crate::mem) fn vmm_memset(
        &self,
        dst: usize,
        max: usize,
        value: u8,
        count: usize,
        stream: Option<RawStream>,
    ) -> Option<Result<(), SimError>> {
        if self.vmm().reserved.load(Relaxed) == 0 {
            return None;
        }
        let run = || -> Result<Option<()>, SimError> {
            let Some(pieces) = self.vmm_pieces(dst, count, "range")? else {
                return Ok(None);
            };
            within(count, max, "maxCount")?;
            for p in &pieces {
                self.range_ref(p.at, p.len, "range")?;
            }
            for Piece { at, len: n, mark } in pieces {
                match stream {
                    None => self.memset(at, n, value, n),
                    Some(st) => self.memset_async_through(at, n, value, n, st, mark),
                }?;
            }
            Ok(Some(()))
        };
        run().transpose()
    }

    /// One side of a copy with a side in a reserved range, checked whole before any byte
    /// moves: its pieces if it is in one (each a live allocation's range), else the side as
    /// it is (a host range, or an ordinary device range checked against its allocation).
    fn vmm_side(
        &self,
        pieces: Option<Vec<Piece>>,
        addr: usize,
        len: usize,
        what: &str,
    ) -> Result<Vec<Piece>, SimError> {
        let Some(pieces) = pieces else {
            self.side(addr, len, what)?;
            return Ok(vec![Piece {
                at: addr,
                len,
                mark: None,
            }]);
        };
        for p in &pieces {
            self.range_ref(p.at, p.len, what)?;
        }
        Ok(pieces)
    }
}

/// Two sides' pieces (of the same total length) cut where either's pieces end:
/// (destination, source, length) triples, each piece keeping its mapping's mark.
fn zip_pieces(d: &[Piece], s: &[Piece]) -> Vec<(Piece, Piece, usize)> {
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    let (mut di, mut sj) = (0, 0);
    let cut = |p: &Piece, off: usize, n: usize| Piece {
        at: p.at + off,
        len: n,
        mark: p.mark.clone(),
    };
    while i < d.len() && j < s.len() {
        let n = (d[i].len - di).min(s[j].len - sj);
        out.push((cut(&d[i], di, n), cut(&s[j], sj, n), n));
        di += n;
        sj += n;
        if di == d[i].len {
            i += 1;
            di = 0;
        }
        if sj == s[j].len {
            j += 1;
            sj = 0;
        }
    }
    out
}
