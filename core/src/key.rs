//! The export key: at most 64 printable ASCII characters naming one notify on one device of one
//! server, with a generation and a 128-bit nonce supplied by the backend (the core has no
//! randomness), and a checksum so a mistyped or truncated key is rejected before any lookup.
//!
//! Format (exactly 64 characters, lowercase hex, fixed widths):
//!
//! ```text
//! an2-SSSSDDIIIIGGGGGGGG-NNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNN-CCCCCCCC
//! │   │   │ │   │        │                                └ checksum of the 55 characters before it
//! │   │   │ │   │        └ nonce, 128 bits
//! │   │   │ │   └ generation of the id (u32)
//! │   │   │ └ notify id (u16)
//! │   │   └ device (u8)
//! │   └ server id (u16)
//! └ format version
//! ```
//!
//! The checksum (the private `checksum` function) reads the text eight characters at a time:
//! version 1 of the format (`an1-`) used FNV-1a, one multiply per character, whose 55-step
//! dependency chain cost about 55 ns of the 70 ns a parse took and as much of every export
//! (measured in this crate's release build, 2026-12-05); the word-wise mix costs seven. Keys
//! are not kept past a run, and every process of a namespace runs one build (the shared files'
//! layout versions see to that), so the version moved instead of both being accepted.
//!
//! A well-formed key proves nothing: the backend must still match the nonce and generation
//! against the live notify (a guessed key opens nothing).
//!
//! A real CANN runtime writes keys in a format of its own. [`ExportKey::from_runtime`] carries
//! such a *runtime key* opaquely (1 to 64 printable ASCII characters, no readable fields), so
//! the driver backend and the typed API can pass it from exporter to importer unchanged.

use crate::error::{Error, Result};

/// Length of every key, without the C NUL terminator.
pub const KEY_LEN: usize = 64;
/// Smallest C buffer that holds a key and its NUL (`aclrtNotifyGetExportKey`'s `len`).
pub const KEY_BUF_LEN: usize = KEY_LEN + 1;

const PREFIX: &[u8; 4] = b"an2-";
const BODY: core::ops::Range<usize> = 4..22;
const NONCE: core::ops::Range<usize> = 23..55;
const CHECK: core::ops::Range<usize> = 56..64;

/// The fields a key carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct KeyFields {
    /// SuperPod server id of the owner.
    pub server: u16,
    /// Owner's device.
    pub device: u8,
    /// Notify id.
    pub id: u16,
    /// Generation of the id (bumped each time the id is reused).
    pub generation: u32,
    /// Random nonce from the OS, fixed at export.
    pub nonce: [u8; 16],
}

/// An export key: either one of ours (the native format above, whose fields can be read), or a
/// key a real CANN runtime wrote (a *runtime* key: 1 to 64 printable ASCII characters, opaque
/// to us and passed back to that runtime unchanged).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ExportKey {
    /// The text, zero-padded past `len`.
    text: [u8; KEY_LEN],
    len: u8,
    native: bool,
}

/// Whether `c` may appear in a runtime key: printable ASCII without space.
const fn is_key_char(c: u8) -> bool {
    c.is_ascii_graphic()
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn put_hex(out: &mut [u8], mut v: u64) {
    for slot in out.iter_mut().rev() {
        *slot = HEX[(v & 0xf) as usize];
        v >>= 4;
    }
}

/// The value of each byte as a lowercase hex digit, [`NOT_HEX`] for every other byte.
const HEX_VAL: [u8; 256] = {
    let mut t = [NOT_HEX; 256];
    let mut i = 0;
    while i < 16 {
        t[HEX[i] as usize] = i as u8;
        i += 1;
    }
    t
};
const NOT_HEX: u8 = 0xff;

/// Whether every byte of `s` is a lowercase hex digit (no branch per byte).
fn all_hex(s: &[u8]) -> bool {
    s.iter().fold(0u8, |bad, &c| bad | HEX_VAL[usize::from(c)]) & 0xf0 == 0
}

/// The value of `s`, which [`all_hex`] accepted.
fn get_hex(s: &[u8]) -> u64 {
    s.iter().fold(0u64, |v, &c| {
        (v << 4) | u64::from(HEX_VAL[usize::from(c)] & 0xf)
    })
}

/// The characters the checksum covers: everything before the checksum's own dash.
const CHECKED: usize = CHECK.start - 1;

/// The checksum of a key's first 55 characters: against accidents (a mistyped, truncated or
/// garbled key), not an authenticator. The text is read as seven little-endian 64-bit words
/// (the last one zero-padded), each mixed in by an xor, a multiply by an odd constant and an
/// xor-shift; every step is a bijection of the state, so two texts that differ in one word
/// always reach different states, and the state's high half after a last multiply is the
/// checksum.
fn checksum(text: &[u8; KEY_LEN]) -> u32 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let word = |i: usize| {
        let mut w = [0u8; 8];
        let end = (i + 8).min(CHECKED);
        w[..end - i].copy_from_slice(&text[i..end]);
        u64::from_le_bytes(w)
    };
    let mut h: u64 = 0x6a09_e667_f3bc_c908;
    let mut i = 0;
    while i < CHECKED {
        h = (h ^ word(i)).wrapping_mul(K);
        h ^= h >> 29;
        i += 8;
    }
    (h.wrapping_mul(K) >> 32) as u32
}

impl ExportKey {
    /// Encodes `fields` as a key.
    pub fn encode(fields: &KeyFields) -> ExportKey {
        let mut t = [b'-'; KEY_LEN];
        t[..4].copy_from_slice(PREFIX);
        put_hex(&mut t[4..8], u64::from(fields.server));
        put_hex(&mut t[8..10], u64::from(fields.device));
        put_hex(&mut t[10..14], u64::from(fields.id));
        put_hex(&mut t[14..22], u64::from(fields.generation));
        for (i, b) in fields.nonce.iter().enumerate() {
            put_hex(
                &mut t[NONCE.start + 2 * i..NONCE.start + 2 * i + 2],
                u64::from(*b),
            );
        }
        let check = checksum(&t);
        put_hex(&mut t[CHECK], u64::from(check));
        ExportKey::native(t)
    }

    const fn native(text: [u8; KEY_LEN]) -> ExportKey {
        ExportKey {
            text,
            len: KEY_LEN as u8,
            native: true,
        }
    }

    /// Parses a key strictly: exactly 64 characters, the `an2-` prefix, lowercase hex in every
    /// field, dashes in place, and a matching checksum. Anything else is `ParamInvalid`
    /// (107000).
    pub fn parse(text: &[u8]) -> Result<ExportKey> {
        let t: &[u8; KEY_LEN] = text.try_into().map_err(|_| Error::ParamInvalid)?;
        if &t[..4] != PREFIX || t[BODY.end] != b'-' || t[NONCE.end] != b'-' {
            return Err(Error::ParamInvalid);
        }
        if !(all_hex(&t[BODY]) && all_hex(&t[NONCE]) && all_hex(&t[CHECK])) {
            return Err(Error::ParamInvalid);
        }
        if checksum(t) != get_hex(&t[CHECK]) as u32 {
            return Err(Error::ParamInvalid);
        }
        Ok(ExportKey::native(*t))
    }

    /// Accepts a key as a CANN runtime hands it out: a native key if `text` parses as one,
    /// else a runtime key if it is 1 to 64 printable ASCII characters (no space). Anything
    /// else is `ParamInvalid` (107000). Use this for keys that come from a real runtime (the
    /// driver backend) or from a peer process that may run on one; use [`parse`](Self::parse)
    /// where only native keys are meaningful (the simulator).
    pub fn from_runtime(text: &[u8]) -> Result<ExportKey> {
        if let Ok(k) = ExportKey::parse(text) {
            return Ok(k);
        }
        if text.is_empty() || text.len() > KEY_LEN || !text.iter().all(|&c| is_key_char(c)) {
            return Err(Error::ParamInvalid);
        }
        let mut t = [0u8; KEY_LEN];
        t[..text.len()].copy_from_slice(text);
        Ok(ExportKey {
            text: t,
            len: text.len() as u8,
            native: false,
        })
    }

    /// [`from_runtime`](Self::from_runtime) for a C buffer: the key is the bytes before the
    /// first NUL, which must occur within `buf`.
    pub fn from_runtime_c(buf: &[u8]) -> Result<ExportKey> {
        let end = buf
            .iter()
            .position(|&b| b == 0)
            .ok_or(Error::ParamInvalid)?;
        ExportKey::from_runtime(&buf[..end])
    }

    /// Whether this is a native key (whose [`fields`](Self::fields) can be read).
    pub const fn is_native(&self) -> bool {
        self.native
    }

    /// Parses a C string buffer: the key is the bytes before the first NUL, which must occur
    /// within `buf` (a key not terminated inside the buffer is `ParamInvalid`).
    pub fn parse_c(buf: &[u8]) -> Result<ExportKey> {
        let end = buf
            .iter()
            .position(|&b| b == 0)
            .ok_or(Error::ParamInvalid)?;
        ExportKey::parse(&buf[..end])
    }

    /// The fields a native key carries; `None` for a runtime key, which is opaque.
    pub fn fields(&self) -> Option<KeyFields> {
        if !self.native {
            return None;
        }
        let t = &self.text;
        // The text was validated on construction, so every field is hex of the right width.
        let h = |r: core::ops::Range<usize>| get_hex(&t[r]);
        let mut nonce = [0u8; 16];
        for (i, b) in nonce.iter_mut().enumerate() {
            *b = h(NONCE.start + 2 * i..NONCE.start + 2 * i + 2) as u8;
        }
        Some(KeyFields {
            server: h(4..8) as u16,
            device: h(8..10) as u8,
            id: h(10..14) as u16,
            generation: h(14..22) as u32,
            nonce,
        })
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        // Every byte is ASCII by construction.
        core::str::from_utf8(self.as_bytes()).unwrap_or("")
    }

    /// The key's bytes (no NUL): 64 for a native key, 1 to 64 for a runtime key.
    pub fn as_bytes(&self) -> &[u8] {
        &self.text[..usize::from(self.len).min(KEY_LEN)]
    }

    /// Writes the key and a NUL into a C buffer; `ParamInvalid` if `buf` is shorter than
    /// [`KEY_BUF_LEN`].
    ///
    /// Always writes exactly the first [`KEY_BUF_LEN`] bytes: the key, then NULs (one for a
    /// 64-character key, more after a shorter runtime key). A copy of fixed size compiles to a
    /// few wide moves; one of the key's own length was a `memcpy` call that cost the C export
    /// about 6 ns more.
    #[inline]
    pub fn write_c(&self, buf: &mut [u8]) -> Result<()> {
        let dst = buf.get_mut(..KEY_BUF_LEN).ok_or(Error::ParamInvalid)?;
        dst[..KEY_LEN].copy_from_slice(&self.text);
        dst[KEY_LEN] = 0;
        dst[usize::from(self.len).min(KEY_LEN)] = 0;
        Ok(())
    }
}

impl core::fmt::Debug for ExportKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // The nonce (or a runtime key's text) is a capability: do not print it in logs.
        match self.fields() {
            Some(k) => write!(
                f,
                "ExportKey {{ server: {}, device: {}, id: {}, generation: {}, nonce: <hidden> }}",
                k.server, k.device, k.id, k.generation
            ),
            None => write!(
                f,
                "ExportKey {{ runtime key of {} characters: <hidden> }}",
                self.len
            ),
        }
    }
}

impl core::fmt::Display for ExportKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl core::str::FromStr for ExportKey {
    type Err = Error;
    fn from_str(s: &str) -> Result<ExportKey> {
        ExportKey::parse(s.as_bytes())
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for ExportKey {
    fn format(&self, f: defmt::Formatter<'_>) {
        match self.fields() {
            Some(k) => defmt::write!(
                f,
                "ExportKey {{ server: {}, device: {}, id: {}, generation: {} }}",
                k.server,
                k.device,
                k.id,
                k.generation
            ),
            None => defmt::write!(f, "ExportKey {{ runtime key of {} characters }}", self.len),
        }
    }
}

#[cfg(test)]
mod tests;
