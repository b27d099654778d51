//! From the name `aclrtGetSocName()` returns to the core's SoC family.
//!
//! A CANN runtime names the concrete chip (`Ascend910B3`, `Ascend910_9391`, `Ascend950PR_9599`,
//! `Ascend310P3`, …); the SPEC's capability table is per family. The mapping below is by the
//! naming scheme of the CANN runtime's own sources; a name outside it is refused at load unless
//! `ACL_NOTIFY_DRIVER_SOC` names the family explicitly.

use acl_notify_core::Soc;

/// The family of a chip name, or `None` if the name is not one this binding knows.
pub fn family_of(name: &str) -> Option<Soc> {
    if let Ok(s) = Soc::from_name(name) {
        return Some(s);
    }
    // Order matters: `Ascend910_93…` and `Ascend910B…` before the plain `Ascend910` family.
    const PREFIXES: &[(&str, Soc)] = &[
        ("Ascend950PR", Soc::Ascend950PR),
        ("Ascend950DT", Soc::Ascend950DT),
        ("Ascend910_93", Soc::Ascend910_93),
        ("Ascend910B", Soc::Ascend910B),
        ("Ascend310P", Soc::Ascend310P),
        ("Ascend310B", Soc::Ascend310B),
        ("IPV350", Soc::IPV350),
    ];
    if let Some((_, soc)) = PREFIXES.iter().find(|(p, _)| name.starts_with(p)) {
        return Some(*soc);
    }
    match name {
        // The Atlas training series (first-generation Ascend 910) under its chip names.
        "Ascend910A" | "Ascend910ProA" | "Ascend910ProB" | "Ascend910PremiumA" => {
            Some(Soc::Ascend910)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chip_names_map_to_families() {
        let cases = [
            ("Ascend910B", Soc::Ascend910B),
            ("Ascend910B3", Soc::Ascend910B),
            ("Ascend910B2C", Soc::Ascend910B),
            ("Ascend910B4-1", Soc::Ascend910B),
            ("Ascend910_93", Soc::Ascend910_93),
            ("Ascend910_9391", Soc::Ascend910_93),
            ("Ascend910_9362", Soc::Ascend910_93),
            ("Ascend950PR_9599", Soc::Ascend950PR),
            ("Ascend950DT_9591", Soc::Ascend950DT),
            ("Ascend310P3", Soc::Ascend310P),
            ("Ascend310B1", Soc::Ascend310B),
            ("Ascend910", Soc::Ascend910),
            ("Ascend910ProB", Soc::Ascend910),
            ("IPV350", Soc::IPV350),
        ];
        for (name, soc) in cases {
            assert_eq!(family_of(name), Some(soc), "{name}");
        }
        for unknown in [
            "",
            "Ascend310",
            "Ascend610",
            "BS9SX1AA",
            "ascend910b",
            "Ascend910C",
        ] {
            assert_eq!(family_of(unknown), None, "{unknown}");
        }
        for s in Soc::ALL {
            assert_eq!(family_of(s.name()), Some(*s));
        }
    }
}
