//! How much device memory each simulated device has: the default, the parsing of
//! [`crate::ENV_DEVICE_MEMORY`] and the bounds a size is checked against.

/// Device memory per device when [`crate::ENV_DEVICE_MEMORY`] is not set: 32 GiB. Costs
/// address space only until allocated (the file is sparse, the reservation `PROT_NONE`).
pub const DEFAULT_DEVICE_MEMORY: u64 = 32 << 30;

/// Parses a size: a number of bytes with an optional binary suffix `K`, `M`, `G` or `T`
/// (`16G`, `512M`, `1048576`).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (num, shift) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(format!("unknown suffix {c:?}; expected K, M, G or T")),
            };
            (&t[..i], shift)
        }
        _ => (t, 0),
    };
    let n: u64 = num
        .trim()
        .parse()
        .map_err(|_| "not a size (bytes, or a number with K, M, G or T)".to_owned())?;
    n.checked_mul(1 << shift)
        .ok_or_else(|| "too large".to_owned())
        .and_then(|n| check_capacity(n).map(|()| n))
}

/// The most device memory a simulated device has (1 TiB): no allocation, nor export of one,
/// is larger.
pub(crate) const MAX_DEVICE_MEMORY: u64 = 1 << 40;

/// Refuses a device memory size below 1 MiB or above 1 TiB (the address space each process
/// reserves per device it uses).
pub(crate) fn check_capacity(bytes: u64) -> Result<(), String> {
    if !(1 << 20..=MAX_DEVICE_MEMORY).contains(&bytes) {
        return Err(format!(
            "{bytes} bytes of device memory; expected 1 MiB to 1 TiB"
        ));
    }
    Ok(())
}
