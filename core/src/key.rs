//! The export key: at most 64 printable ASCII characters naming one notify on one device of one
//! server, with a generation and a 128-bit nonce supplied by the backend (the core has no
//! randomness), and a checksum so a mistyped or truncated key is rejected before any lookup.
//!
//! Format (exactly 64 characters, lowercase hex, fixed widths):
//!
//! ```text
//! an1-SSSSDDIIIIGGGGGGGG-NNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNN-CCCCCCCC
//! │   │   │ │   │        │                                └ FNV-1a 32 of the 55 characters before it
//! │   │   │ │   │        └ nonce, 128 bits
//! │   │   │ │   └ generation of the id (u32)
//! │   │   │ └ notify id (u16)
//! │   │   └ device (u8)
//! │   └ server id (u16)
//! └ format version
//! ```
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

const PREFIX: &[u8; 4] = b"an1-";
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

fn hex_val(c: u8) -> Result<u8> {
    match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        _ => Err(Error::ParamInvalid),
    }
}

fn get_hex(s: &[u8]) -> Result<u64> {
    let mut v = 0u64;
    for &c in s {
        v = (v << 4) | u64::from(hex_val(c)?);
    }
    Ok(v)
}

/// FNV-1a, 32 bits: a checksum against accidents, not an authenticator.
fn fnv1a(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in bytes {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
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
        let check = fnv1a(&t[..CHECK.start - 1]);
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

    /// Parses a key strictly: exactly 64 characters, the `an1-` prefix, lowercase hex in every
    /// field, dashes in place, and a matching checksum. Anything else is `ParamInvalid`
    /// (107000).
    pub fn parse(text: &[u8]) -> Result<ExportKey> {
        let t: &[u8; KEY_LEN] = text.try_into().map_err(|_| Error::ParamInvalid)?;
        if &t[..4] != PREFIX || t[BODY.end] != b'-' || t[NONCE.end] != b'-' {
            return Err(Error::ParamInvalid);
        }
        for range in [BODY, NONCE, CHECK] {
            for &c in &t[range] {
                hex_val(c)?;
            }
        }
        let check = get_hex(&t[CHECK])? as u32;
        if fnv1a(&t[..CHECK.start - 1]) != check {
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
        let h = |r: core::ops::Range<usize>| get_hex(&t[r]).unwrap_or(0);
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
mod tests {
    use super::*;

    /// A native key's text as an array (tests edit it in place).
    fn arr(k: &ExportKey) -> [u8; KEY_LEN] {
        k.as_bytes().try_into().expect("native keys are 64 bytes")
    }

    #[test]
    fn runtime_keys_are_opaque_but_carried() {
        // What a real runtime might hand out: not our format, printable, at most 64 chars.
        let k = ExportKey::from_runtime(b"ipc_notify_0x7f_dev2_1234").unwrap();
        assert!(!k.is_native());
        assert_eq!(k.fields(), None);
        assert_eq!(k.as_str(), "ipc_notify_0x7f_dev2_1234");
        let mut buf = [0xffu8; KEY_BUF_LEN + 3];
        k.write_c(&mut buf).unwrap();
        assert_eq!(ExportKey::from_runtime_c(&buf), Ok(k));
        // NULs after the key up to KEY_BUF_LEN, nothing written past it.
        assert!(buf[k.as_bytes().len()..KEY_BUF_LEN].iter().all(|&c| c == 0));
        assert_eq!(buf[KEY_BUF_LEN..], [0xff; 3]);
        // The native parser still refuses it; Debug hides the text.
        assert_eq!(ExportKey::parse(k.as_bytes()), Err(Error::ParamInvalid));
        assert!(!std::format!("{k:?}").contains("ipc_notify"));
        // A native key through from_runtime stays native.
        let n = sample_key();
        assert_eq!(ExportKey::from_runtime(n.as_bytes()), Ok(n));
        assert!(n.is_native());
        // Empty, too long, spaces, control and non-ASCII bytes are refused.
        for bad in [
            &b""[..],
            &[b'a'; 65][..],
            b"has space",
            b"tab\t",
            b"nul\0x",
            "é".as_bytes(),
        ] {
            assert_eq!(
                ExportKey::from_runtime(bad),
                Err(Error::ParamInvalid),
                "{bad:?}"
            );
        }
        assert_eq!(
            ExportKey::from_runtime(&[b'a'; 64]).map(|k| k.is_native()),
            Ok(false)
        );
        assert_eq!(
            ExportKey::from_runtime_c(b"unterminated"),
            Err(Error::ParamInvalid)
        );
    }
    use std::string::String;
    use std::vec::Vec;

    /// Deterministic "random-ish" fields (SplitMix64), plus the extremes.
    fn samples() -> Vec<KeyFields> {
        let mut v = std::vec![
            KeyFields {
                server: 0,
                device: 0,
                id: 0,
                generation: 0,
                nonce: [0; 16],
            },
            KeyFields {
                server: u16::MAX,
                device: u8::MAX,
                id: u16::MAX,
                generation: u32::MAX,
                nonce: [0xff; 16],
            },
        ];
        let mut s = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        for _ in 0..200 {
            let (a, b, c) = (next(), next(), next());
            let mut nonce = [0u8; 16];
            nonce[..8].copy_from_slice(&b.to_le_bytes());
            nonce[8..].copy_from_slice(&c.to_le_bytes());
            v.push(KeyFields {
                server: a as u16,
                device: (a >> 16) as u8,
                id: (a >> 24) as u16,
                generation: (a >> 32) as u32,
                nonce,
            });
        }
        v
    }

    fn sample_key() -> ExportKey {
        ExportKey::encode(&samples()[5])
    }

    #[test]
    fn round_trip() {
        for f in samples() {
            let k = ExportKey::encode(&f);
            assert_eq!(k.fields(), Some(f));
            assert_eq!(k.as_str().len(), KEY_LEN);
            assert!(k.as_str().bytes().all(|c| c.is_ascii_graphic()));
            assert_eq!(ExportKey::parse(k.as_bytes()), Ok(k));
            assert_eq!(k.as_str().parse::<ExportKey>(), Ok(k));
            let mut buf = [0xaau8; 80];
            k.write_c(&mut buf).unwrap();
            assert_eq!(ExportKey::parse_c(&buf), Ok(k));
        }
    }

    #[test]
    fn documented_layout() {
        let k = ExportKey::encode(&KeyFields {
            server: 0x0102,
            device: 0x03,
            id: 0x0405,
            generation: 0x0607_0809,
            nonce: [
                0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d,
                0x1e, 0x1f,
            ],
        });
        let s = k.as_str();
        assert_eq!(
            &s[..56],
            "an1-010203040506070809-101112131415161718191a1b1c1d1e1f-"
        );
        assert_eq!(
            u32::from_str_radix(&s[56..], 16).unwrap(),
            fnv1a(&s.as_bytes()[..55])
        );
    }

    #[test]
    fn distinct_fields_give_distinct_keys() {
        let base = samples()[7];
        let k = ExportKey::encode(&base);
        let variants = [
            KeyFields {
                server: base.server ^ 1,
                ..base
            },
            KeyFields {
                device: base.device ^ 1,
                ..base
            },
            KeyFields {
                id: base.id ^ 1,
                ..base
            },
            KeyFields {
                generation: base.generation ^ 1,
                ..base
            },
            KeyFields {
                nonce: {
                    let mut n = base.nonce;
                    n[15] ^= 1;
                    n
                },
                ..base
            },
        ];
        for v in variants {
            assert_ne!(ExportKey::encode(&v), k);
        }
    }

    #[test]
    fn rejects_wrong_length() {
        let k = sample_key();
        let b = k.as_bytes();
        assert_eq!(ExportKey::parse(&[]), Err(Error::ParamInvalid));
        assert_eq!(ExportKey::parse(&b[..63]), Err(Error::ParamInvalid));
        let mut long = b.to_vec();
        long.push(b'0');
        assert_eq!(ExportKey::parse(&long), Err(Error::ParamInvalid));
        // Truncation at every length, and the valid key with trailing junk.
        for n in 0..KEY_LEN {
            assert_eq!(
                ExportKey::parse(&b[..n]),
                Err(Error::ParamInvalid),
                "len {n}"
            );
        }
        for extra in [&b"\0"[..], b" ", b"\n", b"0"] {
            let mut t = b.to_vec();
            t.extend_from_slice(extra);
            assert_eq!(ExportKey::parse(&t), Err(Error::ParamInvalid));
        }
    }

    #[test]
    fn rejects_bad_characters() {
        let k = sample_key();
        let upper: String = k.as_str().to_ascii_uppercase();
        assert_eq!(ExportKey::parse(upper.as_bytes()), Err(Error::ParamInvalid));
        // One bad character at each position of the hex fields.
        for pos in (4..22).chain(23..55).chain(56..64) {
            for bad in [
                b'g', b'z', b'G', b'A', b'F', b' ', b'-', b'+', b'\0', 0x7f, 0xc3, 0xff,
            ] {
                let mut t = arr(&k);
                t[pos] = bad;
                assert_eq!(
                    ExportKey::parse(&t),
                    Err(Error::ParamInvalid),
                    "{pos} {bad}"
                );
            }
        }
        // A non-ASCII UTF-8 character in place of two bytes keeps the length at 64.
        let mut t = arr(&k);
        t[30..32].copy_from_slice("é".as_bytes());
        assert_eq!(ExportKey::parse(&t), Err(Error::ParamInvalid));
        assert!("an1-é".parse::<ExportKey>().is_err());
    }

    #[test]
    fn rejects_missing_and_moved_dashes() {
        let k = sample_key();
        let b = arr(&k);
        for dash in [3usize, 22, 55] {
            // Missing: replaced by a hex digit.
            let mut t = b;
            t[dash] = b'0';
            assert_eq!(
                ExportKey::parse(&t),
                Err(Error::ParamInvalid),
                "dash {dash}"
            );
            // Moved one place left and right (swap with the neighbour).
            for other in [dash - 1, dash + 1] {
                let mut t = b;
                t.swap(dash, other);
                assert_eq!(
                    ExportKey::parse(&t),
                    Err(Error::ParamInvalid),
                    "{dash}<->{other}"
                );
            }
            // Removed (63 characters) and re-padded at the end.
            let mut t: Vec<u8> = b.to_vec();
            t.remove(dash);
            assert_eq!(ExportKey::parse(&t), Err(Error::ParamInvalid));
            t.push(b'0');
            assert_eq!(ExportKey::parse(&t), Err(Error::ParamInvalid));
        }
        // Wrong version / prefix.
        for prefix in [b"an2-", b"AN1-", b"bn1-", b"an1_"] {
            let mut t = b;
            t[..4].copy_from_slice(prefix);
            assert_eq!(ExportKey::parse(&t), Err(Error::ParamInvalid));
        }
    }

    /// Tampering: changing ANY single character of ANY field to ANY other hex digit is caught
    /// (by the checksum for the fields it covers, by the format for the prefix and dashes, by
    /// the checksum comparison for the checksum itself).
    #[test]
    fn any_single_character_change_is_rejected() {
        for f in samples().iter().take(20) {
            let k = ExportKey::encode(f);
            let b = arr(&k);
            let mut tried = 0;
            for pos in 0..KEY_LEN {
                for &digit in HEX {
                    if digit == b[pos] {
                        continue;
                    }
                    let mut t = b;
                    t[pos] = digit;
                    assert_eq!(
                        ExportKey::parse(&t),
                        Err(Error::ParamInvalid),
                        "position {pos} changed to {}",
                        digit as char
                    );
                    tried += 1;
                }
            }
            assert!(
                tried >= KEY_LEN * 15 - 4,
                "every position was tampered with"
            );
        }
    }

    #[test]
    fn swapped_adjacent_digits_are_rejected() {
        let k = sample_key();
        let b = arr(&k);
        for pos in 4..63 {
            if b[pos] == b[pos + 1] {
                continue;
            }
            let mut t = b;
            t.swap(pos, pos + 1);
            assert_eq!(
                ExportKey::parse(&t),
                Err(Error::ParamInvalid),
                "swap at {pos}"
            );
        }
    }

    #[test]
    fn parse_c_needs_a_nul_inside_the_buffer() {
        let k = sample_key();
        let mut buf = [0u8; KEY_BUF_LEN];
        k.write_c(&mut buf).unwrap();
        assert_eq!(ExportKey::parse_c(&buf), Ok(k));
        assert_eq!(
            ExportKey::parse_c(&buf[..KEY_LEN]),
            Err(Error::ParamInvalid)
        );
        assert_eq!(ExportKey::parse_c(&[]), Err(Error::ParamInvalid));
        assert_eq!(ExportKey::parse_c(&[0]), Err(Error::ParamInvalid));
        // A NUL early truncates the key, which then fails the length check.
        buf[10] = 0;
        assert_eq!(ExportKey::parse_c(&buf), Err(Error::ParamInvalid));
    }

    #[test]
    fn write_c_with_short_buffers() {
        let k = sample_key();
        for len in [0, 1, KEY_LEN - 1, KEY_LEN] {
            let mut buf = std::vec![0x55u8; len];
            assert_eq!(k.write_c(&mut buf), Err(Error::ParamInvalid), "len {len}");
            assert!(
                buf.iter().all(|&c| c == 0x55),
                "a failed write left the buffer as is"
            );
        }
        let mut exact = [0x55u8; KEY_BUF_LEN];
        assert_eq!(k.write_c(&mut exact), Ok(()));
        assert_eq!(&exact[..KEY_LEN], k.as_bytes());
        assert_eq!(exact[KEY_LEN], 0);
        let mut big = [0x55u8; 100];
        assert_eq!(k.write_c(&mut big), Ok(()));
        assert_eq!(big[KEY_LEN], 0);
        assert!(
            big[KEY_BUF_LEN..].iter().all(|&c| c == 0x55),
            "nothing written past the NUL"
        );
    }

    #[test]
    fn debug_hides_the_nonce() {
        let f = samples()[9];
        let k = ExportKey::encode(&f);
        let dbg = std::format!("{k:?}");
        assert!(dbg.contains("<hidden>"));
        assert!(!dbg.contains(&k.as_str()[23..55]));
        assert_eq!(std::format!("{k}"), k.as_str());
    }
}
