//! An IPC event handle's bytes (`aclrtIpcGetEventHandle`'s): the simulator's magic, the
//! server, device, slot and generation of the event, its creator's pid and a tag of the
//! namespace, written by [`Parsed::write`] and read back by [`parse`].

use acl_notify_core::Error;
use acl_notify_core::event::{IPC_EVENT_HANDLE_SIZE, IpcEventHandle};

use super::Parsed;
use crate::error::SimError;

/// The first bytes of every handle this simulator writes.
const HANDLE_MAGIC: [u8; 8] = *b"ACLNIPCE";

/// FNV-1a of the namespace: a handle of another namespace is refused, not misread.
pub(super) fn ns_tag(namespace: &str) -> u64 {
    namespace.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn word(h: &IpcEventHandle, at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&h.0[at..at + 4]);
    u32::from_le_bytes(b)
}

pub(super) fn parse(h: &IpcEventHandle) -> Result<Parsed, SimError> {
    if h.0[..8] != HANDLE_MAGIC || h.0[36..].iter().any(|&b| b != 0) {
        return Err(SimError::new(
            Error::ParamInvalid,
            "the IPC event handle is malformed (not one aclrtIpcGetEventHandle wrote)",
        ));
    }
    let mut tag = [0u8; 8];
    tag.copy_from_slice(&h.0[28..36]);
    Ok(Parsed {
        server: word(h, 8),
        dev: word(h, 12),
        idx: word(h, 16),
        generation: word(h, 20),
        owner: word(h, 24) as i32,
        ns_tag: u64::from_le_bytes(tag),
    })
}

impl Parsed {
    /// The handle that says this (what [`parse`] reads back).
    pub(super) fn write(&self) -> IpcEventHandle {
        let mut h = [0u8; IPC_EVENT_HANDLE_SIZE];
        h[..8].copy_from_slice(&HANDLE_MAGIC);
        h[8..12].copy_from_slice(&self.server.to_le_bytes());
        h[12..16].copy_from_slice(&self.dev.to_le_bytes());
        h[16..20].copy_from_slice(&self.idx.to_le_bytes());
        h[20..24].copy_from_slice(&self.generation.to_le_bytes());
        h[24..28].copy_from_slice(&self.owner.to_le_bytes());
        h[28..36].copy_from_slice(&self.ns_tag.to_le_bytes());
        IpcEventHandle(h)
    }
}
