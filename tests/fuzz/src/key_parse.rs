//! Fuzz target: the export-key parser (`ExportKey::parse` / `parse_c` / `FromStr`).
//!
//! Properties checked on every input:
//! - parsing never panics, whatever the bytes;
//! - anything accepted is exactly 64 bytes and re-encodes identically: `encode(fields()) ==
//!   key`, its text equals the input, and `write_c` → `parse_c` gives it back;
//! - `parse_c` accepts exactly the inputs whose bytes before the first NUL `parse` accepts;
//! - structure-aware half: fields built from the input encode to a key that parses back to
//!   the same fields, and changing any single byte of that key to any other value is rejected
//!   (the checksum and the format catch every one-character tamper).

use acl_notify_core::key::{ExportKey, KEY_BUF_LEN, KEY_LEN, KeyFields};

fn check_accepted(k: &ExportKey, text: &[u8]) {
    assert_eq!(
        text.len(),
        KEY_LEN,
        "accepted a key of length {}",
        text.len()
    );
    assert_eq!(k.as_bytes(), text, "accepted key does not keep its text");
    let again = ExportKey::encode(&k.fields().expect("parse accepts native keys only"));
    assert_eq!(&again, k, "fields() -> encode does not give the key back");
    assert_eq!(again.as_str().as_bytes(), text);
    let mut buf = [0xa5u8; KEY_BUF_LEN + 3];
    k.write_c(&mut buf).expect("a 68-byte buffer holds a key");
    assert_eq!(ExportKey::parse_c(&buf), Ok(*k));
    assert_eq!(k.as_str().parse::<ExportKey>(), Ok(*k));
    // Display is the text; Debug must not leak the nonce (the capability).
    assert_eq!(format!("{k}").as_bytes(), text);
    assert!(!format!("{k:?}").contains(&k.as_str()[23..55]));
}

fn fields_from(data: &[u8]) -> KeyFields {
    let mut b = [0u8; 25];
    for (d, s) in b.iter_mut().zip(data) {
        *d = *s;
    }
    let mut nonce = [0u8; 16];
    nonce.copy_from_slice(&b[9..25]);
    KeyFields {
        server: u16::from_le_bytes([b[0], b[1]]),
        device: b[2],
        id: u16::from_le_bytes([b[3], b[4]]),
        generation: u32::from_le_bytes([b[5], b[6], b[7], b[8]]),
        nonce,
    }
}

pub fn check(data: &[u8]) {
    // 1. Raw bytes.
    let parsed = ExportKey::parse(data);
    if let Ok(k) = &parsed {
        check_accepted(k, data);
    }
    let parsed_c = ExportKey::parse_c(data);
    match data.iter().position(|&b| b == 0) {
        None => assert!(parsed_c.is_err(), "parse_c accepted an unterminated buffer"),
        Some(end) => {
            assert_eq!(parsed_c, ExportKey::parse(&data[..end]));
            if let Ok(k) = &parsed_c {
                check_accepted(k, &data[..end]);
            }
        }
    }
    if let Ok(s) = std::str::from_utf8(data) {
        assert_eq!(s.parse::<ExportKey>(), parsed);
    }
    // Runtime keys: native when `parse` accepts, else opaque text kept byte for byte.
    match ExportKey::from_runtime(data) {
        Ok(k) if parsed.is_ok() => assert!(k.is_native() && Ok(k) == parsed),
        Ok(k) => {
            assert!(!k.is_native() && k.fields().is_none());
            assert_eq!(k.as_bytes(), data, "runtime key does not keep its text");
            assert!(data.iter().all(|c| c.is_ascii_graphic()) && data.len() <= KEY_LEN);
        }
        Err(_) => assert!(
            data.is_empty() || data.len() > KEY_LEN || !data.iter().all(|c| c.is_ascii_graphic())
        ),
    }

    // 2. Structure-aware: a real key from the input's fields, then one tampered byte.
    let f = fields_from(data);
    let k = ExportKey::encode(&f);
    assert_eq!(k.fields(), Some(f));
    assert_eq!(ExportKey::parse(k.as_bytes()), Ok(k));
    check_accepted(&k, k.as_bytes());
    if data.len() >= 27 {
        let pos = usize::from(data[25]) % KEY_LEN;
        let val = data[26];
        let mut t: [u8; KEY_LEN] = k.as_bytes().try_into().expect("native keys are 64 bytes");
        if t[pos] != val {
            t[pos] = val;
            assert!(
                ExportKey::parse(&t).is_err(),
                "tampered key accepted: byte {pos} changed to {val:#04x}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seed corpus starts the generator-free half of the replay where it matters: at least
    /// one seed is a real key (so the accepted-key properties run on every replay), and the
    /// same key NUL-terminated exercises `parse_c`'s accepting path.
    #[test]
    fn seeds_hold_real_keys() {
        let dir = crate::replay::seed_dir("key_parse");
        let mut real = 0;
        let mut terminated = 0;
        for e in std::fs::read_dir(&dir).expect("seed folder") {
            let b = std::fs::read(e.expect("entry").path()).expect("seed");
            real += usize::from(ExportKey::parse(&b).is_ok());
            terminated += usize::from(!b.ends_with(b"\0") || ExportKey::parse_c(&b).is_ok());
        }
        assert!(real >= 1, "no seed in {} is a real key", dir.display());
        assert!(
            terminated >= 2,
            "no NUL-terminated real key among the seeds"
        );
    }
}
