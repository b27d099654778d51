//! From the name `aclrtGetSocName()` returns to the core's SoC family.
//!
//! A CANN runtime names the concrete chip (`Ascend910B3`, `Ascend910_9391`, `Ascend950PR_9599`,
//! `Ascend310P3`, …); the SPEC's capability table is per family. The mapping below is by the
//! naming scheme of the CANN runtime's own sources; a name outside it is refused at load unless
//! `ACL_NOTIFY_DRIVER_SOC` names the family explicitly.
//!
//! One name means different things to the two kinds of library: a CANN runtime calls a
//! first-generation Ascend 910 with 30 AI cores at base clock `Ascend910B` (its platform file
//! `Ascend910B.ini` has `Short_SoC_version=Ascend910`, the `dav-c100` core; the Atlas A2 chips
//! are `Ascend910B1`…`B4`, `Ascend910B2C`, `Ascend910B4-1`), while acl-notify's simulator
//! returns the family names of SPEC §4, where `Ascend910B` is the Atlas A2 family. Hence
//! [`SocNaming`].

use acl_notify_core::Soc;

/// How a library names its SoC in `aclrtGetSocName()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SocNaming {
    /// A CANN runtime: the chip's name. A bare `Ascend910B` is a first-generation Ascend 910
    /// (family `Ascend910`).
    Chip,
    /// A library following SPEC §4, which returns family names (`Ascend910B` = the Atlas A2
    /// family): acl-notify's simulator, recognised by its `aclnsim*` extension symbols. Chip
    /// names are understood too.
    Family,
}

/// The family of a SoC name under `naming`, or `None` if the name is not one this binding
/// knows.
pub fn family_of(name: &str, naming: SocNaming) -> Option<Soc> {
    if naming == SocNaming::Family
        && let Ok(s) = Soc::from_name(name)
    {
        return Some(s);
    }
    match name {
        // The Atlas training series (first-generation Ascend 910) under its chip names, as the
        // runtime derives them from core count and clock (`Runtime::SocTypeInit`).
        "Ascend910" | "Ascend910A" | "Ascend910ProA" | "Ascend910PremiumA" | "Ascend910B"
        | "Ascend910ProB" => return Some(Soc::Ascend910),
        _ => {}
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
    PREFIXES
        .iter()
        .find(|(p, _)| name.starts_with(p))
        .map(|(_, soc)| *soc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chip_names_map_to_families() {
        let cases = [
            ("Ascend910B1", Soc::Ascend910B),
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
            ("Ascend910A", Soc::Ascend910),
            ("Ascend910ProB", Soc::Ascend910),
            // CANN's name for a 30-core first-generation Ascend 910, not an Atlas A2 chip.
            ("Ascend910B", Soc::Ascend910),
            ("IPV350", Soc::IPV350),
        ];
        for naming in [SocNaming::Chip, SocNaming::Family] {
            for (name, soc) in cases {
                let want = match (naming, name) {
                    (SocNaming::Family, "Ascend910B") => Soc::Ascend910B,
                    _ => soc,
                };
                assert_eq!(family_of(name, naming), Some(want), "{name} ({naming:?})");
            }
            for unknown in [
                "",
                "Ascend310",
                "Ascend610",
                "BS9SX1AA",
                "ascend910b",
                "Ascend910C",
            ] {
                assert_eq!(family_of(unknown, naming), None, "{unknown} ({naming:?})");
            }
        }
        for s in Soc::ALL {
            assert_eq!(family_of(s.name(), SocNaming::Family), Some(*s));
        }
    }
}
