//! Tests of export keys: encoding, parsing, checksums and the refusal of malformed text.

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
        "an2-010203040506070809-101112131415161718191a1b1c1d1e1f-"
    );
    assert_eq!(
        u32::from_str_radix(&s[56..], 16).unwrap(),
        checksum(s.as_bytes().try_into().unwrap())
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
    assert!("an2-é".parse::<ExportKey>().is_err());
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
    for prefix in [b"an1-", b"AN2-", b"bn2-", b"an2_"] {
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

/// The format is fixed across builds (processes of one run exchange keys as text): this key's
/// checksum was computed independently (Python, from the definition on `checksum`) and must not
/// move.
#[test]
fn the_checksum_of_a_known_key_does_not_move() {
    let k = ExportKey::encode(&KeyFields {
        server: 0,
        device: 2,
        id: 7,
        generation: 1,
        nonce: *b"acl-notify-seed!",
    });
    assert_eq!(
        k.as_str(),
        "an2-000002000700000001-61636c2d6e6f746966792d7365656421-19b89217"
    );
}
