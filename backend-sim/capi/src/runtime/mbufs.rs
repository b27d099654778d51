//! The session's shared buffers (`aclrtMbuf`, `acl_rt.h`'s `aclrt*Buf*` calls): handles of
//! the one slab (kind `Mbuf`), each naming a data region of device memory that several
//! handles may share (`aclrtCopyBufRef`), its valid-data length, 96 bytes of private data and
//! the chain it heads or belongs to. The data regions are ordinary device allocations of the
//! simulator, so they count in `aclrtGetMemInfo`; a region is freed when the last handle
//! naming it is.
//!
//! What CANN documents (hicann/runtime `docs/zh/api_ref/20_shared_buffer_management_reserved.md`,
//! `src/acl/aclrt_impl/memory.cpp`): a data region of at most 4 GiB, a private area of 96
//! bytes, chains of at most 128 buffers, a copied reference pointing at the same data. What
//! only the driver decides (`halMbuf*`, closed source) is the simulator's choice, said once
//! here: a chain's buffers belong to its head from `aclrtAppendBufChain` on — freeing the head
//! frees them (hicann/runtime's AICPU scheduler, `aicpusd_resource_manager.cpp`, frees only
//! the head of the chains it builds), and freeing a member alone is refused; a copied
//! reference starts with the private data and data length of the buffer it copies; a buffer
//! already in a chain, or heading one, cannot be appended to another.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use acl_notify_core::Error;
use acl_notify_handles::{Kind, Slab};

use crate::errmsg::{CallError, param};
use crate::handle::not_live;

/// Bytes of a buffer's private data area (`MEM_SIZE_MAX`, hicann/runtime
/// `src/acl/aclrt_impl/memory.cpp`).
pub(crate) const PRIV_SIZE: usize = 96;
/// Buffers a chain holds at most, its head included (CANN's documentation of
/// `aclrtAppendBufChain`).
pub(crate) const CHAIN_MAX: usize = 128;
/// The largest data region (CANN's documentation of `aclrtAllocBuf`: "不能超过4G").
pub(crate) const DATA_MAX: usize = 4 << 30;

/// Where a buffer stands in a chain.
#[derive(Debug)]
enum Link {
    /// Heads a chain of these members (none: a buffer on its own).
    Head(Vec<u64>),
    /// Belongs to the chain of this head.
    Member(u64),
}

#[derive(Debug)]
struct Mbuf {
    /// The data region's device address (a key of [`State::regions`]).
    data: usize,
    size: usize,
    len: usize,
    private: [u8; PRIV_SIZE],
    link: Link,
}

#[derive(Debug)]
struct State {
    slab: Slab<Mbuf>,
    /// Data region → how many live buffers name it.
    regions: HashMap<usize, u32>,
}

/// The session's buffers (one lock: each call is a short table step).
#[derive(Debug)]
pub(crate) struct Mbufs {
    state: Mutex<State>,
}

/// What `aclrtGetBufData` answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Data {
    pub(crate) addr: usize,
    pub(crate) size: usize,
}

fn dead(handle: u64) -> CallError {
    not_live("mbuf", "an aclrtMbuf", handle as usize)
}

impl Mbufs {
    /// No buffers; `seed` salts the handles.
    pub(crate) fn new(seed: u64) -> Self {
        Mbufs {
            state: Mutex::new(State {
                slab: Slab::new(Kind::Mbuf, seed),
                regions: HashMap::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Each change below is made in one step after its checks: a poisoned lock still
        // guards a consistent table.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new buffer over the data region `data` of `size` bytes, just allocated; if the table
    /// is full, 207001 and the region is handed to `free` again.
    pub(crate) fn insert(
        &self,
        data: usize,
        size: usize,
        free: impl FnOnce(usize),
    ) -> Result<u64, CallError> {
        let mut s = self.lock();
        let m = Mbuf {
            data,
            size,
            len: 0,
            private: [0; PRIV_SIZE],
            link: Link::Head(Vec::new()),
        };
        match s.slab.insert(m) {
            Ok(h) => {
                s.regions.insert(data, 1);
                Ok(h)
            }
            Err(_) => {
                drop(s);
                free(data);
                Err(full())
            }
        }
    }

    /// 107000 if `ptr` is a buffer's data region (what `aclrtFree` answers for it): the
    /// region is the buffers', freed with the last one naming it. CANN's regions come from
    /// the driver's buffer pool (`halMbufAlloc`), not from `aclrtMalloc`, so its `aclrtFree`
    /// refuses them as any address it did not give (the code is the simulator's 107000 for
    /// those; the driver's own check is closed source).
    pub(crate) fn refuse_region(&self, ptr: usize) -> Result<(), CallError> {
        let s = self.lock();
        match s.regions.get(&ptr) {
            None => Ok(()),
            Some(n) => Err(param(format!(
                "{ptr:#x} is the data region of {n} aclrtMbuf{}: it is not aclrtMalloc memory; \
                 aclrtFreeBuf frees it with the last buffer naming it",
                if *n == 1 { "" } else { "s" }
            ))),
        }
    }

    /// `aclrtCopyBufRef`: a new handle on `handle`'s data region, with its private data and
    /// data length, on its own (in no chain).
    pub(crate) fn copy_ref(&self, handle: u64) -> Result<u64, CallError> {
        let mut s = self.lock();
        let m = s.slab.get(handle).ok_or_else(|| dead(handle))?;
        let copy = Mbuf {
            data: m.data,
            size: m.size,
            len: m.len,
            private: m.private,
            link: Link::Head(Vec::new()),
        };
        let data = copy.data;
        let h = s.slab.insert(copy).map_err(|_| full())?;
        *s.regions.entry(data).or_insert(0) += 1;
        Ok(h)
    }

    /// `aclrtFreeBuf`: frees `handle` and, if it heads a chain, every member; calls `free` on
    /// each data region no live buffer names any more. 107017 a dead handle; 107000 a member
    /// of a chain (its head owns it).
    pub(crate) fn free(&self, handle: u64, mut free: impl FnMut(usize)) -> Result<(), CallError> {
        let mut s = self.lock();
        match &s.slab.get(handle).ok_or_else(|| dead(handle))?.link {
            Link::Member(head) => {
                return Err(param(format!(
                    "mbuf {handle:#x} belongs to the chain headed by mbuf {head:#x}: \
                     aclrtFreeBuf of the head frees it"
                )));
            }
            Link::Head(_) => {}
        }
        let head = s.slab.remove(handle).expect("looked up above");
        let Link::Head(members) = head.link else {
            unreachable!("checked above")
        };
        let mut gone = vec![head.data];
        for m in members {
            if let Some(m) = s.slab.remove(m) {
                gone.push(m.data);
            }
        }
        let mut last = Vec::new();
        for d in gone {
            if let Some(n) = s.regions.get_mut(&d) {
                *n -= 1;
                if *n == 0 {
                    s.regions.remove(&d);
                    last.push(d);
                }
            }
        }
        drop(s);
        last.into_iter().for_each(&mut free);
        Ok(())
    }

    /// `aclrtGetBufData`.
    pub(crate) fn data(&self, handle: u64) -> Result<Data, CallError> {
        let s = self.lock();
        let m = s.slab.get(handle).ok_or_else(|| dead(handle))?;
        Ok(Data {
            addr: m.data,
            size: m.size,
        })
    }

    /// `aclrtGetBufDataLen`: 0 until `aclrtSetBufDataLen`.
    pub(crate) fn len(&self, handle: u64) -> Result<usize, CallError> {
        let s = self.lock();
        Ok(s.slab.get(handle).ok_or_else(|| dead(handle))?.len)
    }

    /// `aclrtSetBufDataLen`: 107000 a length above the data region's size.
    pub(crate) fn set_len(&self, handle: u64, len: usize) -> Result<(), CallError> {
        let mut s = self.lock();
        let m = s.slab.get_mut(handle).ok_or_else(|| dead(handle))?;
        if len > m.size {
            return Err(param(format!(
                "len {len} is more than the {} bytes of mbuf {handle:#x}'s data region",
                m.size
            )));
        }
        m.len = len;
        Ok(())
    }

    /// Runs `f` on `handle`'s private data area.
    pub(crate) fn with_private<R>(
        &self,
        handle: u64,
        f: impl FnOnce(&mut [u8; PRIV_SIZE]) -> R,
    ) -> Result<R, CallError> {
        let mut s = self.lock();
        let m = s.slab.get_mut(handle).ok_or_else(|| dead(handle))?;
        Ok(f(&mut m.private))
    }

    /// `aclrtAppendBufChain`: `buf` becomes the last member of `head`'s chain.
    ///
    /// Errors: 107017 either dead; 107000 `head` a member of a chain, `buf` the head itself, in
    /// a chain or heading one, a chain of [`CHAIN_MAX`] already.
    pub(crate) fn append(&self, head: u64, buf: u64) -> Result<(), CallError> {
        let mut s = self.lock();
        let h = s.slab.get(head).ok_or_else(|| dead(head))?;
        let b = s.slab.get(buf).ok_or_else(|| dead(buf))?;
        let members = match &h.link {
            Link::Head(m) => m.len(),
            Link::Member(of) => {
                return Err(param(format!(
                    "mbuf {head:#x} is not the head of a chain: it belongs to the chain headed \
                     by mbuf {of:#x}"
                )));
            }
        };
        if head == buf {
            return Err(param(format!(
                "mbuf {buf:#x} cannot be appended to its own chain"
            )));
        }
        match &b.link {
            Link::Member(of) => {
                return Err(param(format!(
                    "mbuf {buf:#x} already belongs to the chain headed by mbuf {of:#x}"
                )));
            }
            Link::Head(m) if !m.is_empty() => {
                return Err(param(format!(
                    "mbuf {buf:#x} heads a chain of its own ({} buffers)",
                    m.len() + 1
                )));
            }
            Link::Head(_) => {}
        }
        if members + 1 >= CHAIN_MAX {
            return Err(param(format!(
                "the chain headed by mbuf {head:#x} already holds {CHAIN_MAX} buffers, the most \
                 a chain holds"
            )));
        }
        if let Some(Link::Head(m)) = s.slab.get_mut(head).map(|h| &mut h.link) {
            m.push(buf);
        }
        if let Some(b) = s.slab.get_mut(buf) {
            b.link = Link::Member(head);
        }
        Ok(())
    }

    /// The chain `head` heads, `head` first; 107000 for a member of another chain.
    fn chain(s: &State, head: u64) -> Result<&[u64], CallError> {
        match &s.slab.get(head).ok_or_else(|| dead(head))?.link {
            Link::Head(m) => Ok(m),
            Link::Member(of) => Err(param(format!(
                "mbuf {head:#x} is not the head of a chain: it belongs to the chain headed by \
                 mbuf {of:#x}"
            ))),
        }
    }

    /// `aclrtGetBufChainNum`: the buffers of `head`'s chain, `head` included.
    pub(crate) fn chain_len(&self, head: u64) -> Result<u32, CallError> {
        let s = self.lock();
        Ok(Self::chain(&s, head)?.len() as u32 + 1)
    }

    /// `aclrtGetBufFromChain`: buffer `index` of `head`'s chain (0: `head`); 107000 past its
    /// end.
    pub(crate) fn chain_get(&self, head: u64, index: u32) -> Result<u64, CallError> {
        let s = self.lock();
        let members = Self::chain(&s, head)?;
        match index as usize {
            0 => Ok(head),
            i if i <= members.len() => Ok(members[i - 1]),
            i => Err(param(format!(
                "index {i} is past the end of the chain headed by mbuf {head:#x} ({} buffers)",
                members.len() + 1
            ))),
        }
    }
}

fn full() -> CallError {
    CallError::new(
        Error::MemoryAllocation,
        format!(
            "the process already holds {} mbufs",
            acl_notify_handles::MAX_LIVE
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(e: CallError) -> i32 {
        e.code().code()
    }

    #[test]
    fn a_data_region_lives_until_its_last_reference_is_freed() {
        let t = Mbufs::new(7);
        let a = t.insert(0x1000, 64, |_| unreachable!()).unwrap();
        t.set_len(a, 10).unwrap();
        t.with_private(a, |p| p[5] = 42).unwrap();
        let b = t.copy_ref(a).unwrap();
        assert_ne!(a, b);
        assert_eq!(
            t.data(b).unwrap(),
            Data {
                addr: 0x1000,
                size: 64
            }
        );
        assert_eq!(t.len(b).unwrap(), 10);
        assert_eq!(t.with_private(b, |p| p[5]).unwrap(), 42);
        let mut freed = Vec::new();
        t.free(a, |d| freed.push(d)).unwrap();
        assert!(freed.is_empty(), "b still names the region");
        assert_eq!(code(t.data(a).unwrap_err()), 107017);
        assert_eq!(code(t.free(a, |_| {}).unwrap_err()), 107017);
        t.free(b, |d| freed.push(d)).unwrap();
        assert_eq!(freed, vec![0x1000]);
        assert!(t.lock().regions.is_empty());
    }

    #[test]
    fn a_chain_belongs_to_its_head() {
        let t = Mbufs::new(9);
        let h = t.insert(0x1000, 8, |_| {}).unwrap();
        let m1 = t.insert(0x2000, 8, |_| {}).unwrap();
        let m2 = t.copy_ref(h).unwrap();
        assert_eq!(t.chain_len(h).unwrap(), 1);
        t.append(h, m1).unwrap();
        t.append(h, m2).unwrap();
        assert_eq!(t.chain_len(h).unwrap(), 3);
        assert_eq!(t.chain_get(h, 0).unwrap(), h);
        assert_eq!(t.chain_get(h, 2).unwrap(), m2);
        assert_eq!(code(t.chain_get(h, 3).unwrap_err()), 107000);
        // A member is not a head, goes into no second chain, is not freed on its own.
        let other = t.insert(0x3000, 8, |_| {}).unwrap();
        assert_eq!(code(t.append(other, m1).unwrap_err()), 107000);
        assert_eq!(code(t.append(m1, other).unwrap_err()), 107000);
        assert_eq!(code(t.chain_len(m1).unwrap_err()), 107000);
        assert_eq!(code(t.free(m1, |_| {}).unwrap_err()), 107000);
        assert_eq!(code(t.append(h, h).unwrap_err()), 107000);
        // A head with members cannot be appended.
        assert_eq!(code(t.append(other, h).unwrap_err()), 107000);
        // Freeing the head frees the members; h's region is freed once, with both refs.
        let mut freed = Vec::new();
        t.free(h, |d| freed.push(d)).unwrap();
        freed.sort();
        assert_eq!(freed, vec![0x1000, 0x2000]);
        assert_eq!(code(t.len(m1).unwrap_err()), 107017);
        assert_eq!(code(t.len(m2).unwrap_err()), 107017);
    }

    #[test]
    fn a_chain_holds_at_most_chain_max_buffers() {
        let t = Mbufs::new(11);
        let h = t.insert(0x1000, 8, |_| {}).unwrap();
        for i in 1..CHAIN_MAX {
            let b = t.insert(0x2000 + i * 0x100, 8, |_| {}).unwrap();
            t.append(h, b).unwrap();
        }
        assert_eq!(t.chain_len(h).unwrap(), CHAIN_MAX as u32);
        let b = t.insert(0x9_0000, 8, |_| {}).unwrap();
        assert_eq!(code(t.append(h, b).unwrap_err()), 107000);
        assert_eq!(code(t.set_len(b, 9).unwrap_err()), 107000);
        t.set_len(b, 8).unwrap();
    }
}
