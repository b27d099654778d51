//! The device groups of the simulated machine: how its administrator split each device's cores
//! into groups (on a real machine with the driver's `dcmi_create_capability_group`, before the
//! program starts), which `aclrtGetGroupCount`, `aclrtGetAllGroupInfo` and `aclrtSetGroup`
//! report. Configured by [`ENV_GROUPS`] (or [`SimBuilder::groups`](crate::SimBuilder::groups));
//! only chips with CANN's device groups take any (`Soc::has_device_groups`).
//!
//! What a group holds is the driver's `capability_group_info` as CANN's runtime caches it
//! (hicann/runtime `src/runtime/core/src/device/device.cc`, `GroupDevice::FillCache`): its id,
//! whether it is the default group (`extend_attribute` bit 0; at most one), its AI Cores, AI
//! Vector cores, AI CPUs, SDMA engines and active stream queues. Every device of the machine
//! has the same groups.

use acl_notify_core::Chip;

/// Environment variable giving the device groups: groups separated by `,`, each
/// `ID:AICORE:AIVECTOR:AICPU:SDMA:STREAMS`, the id followed by `*` for the default group
/// (e.g. `0*:4:4:2:2:8,1:4:3:2:2:8`). Unset: no groups.
pub const ENV_GROUPS: &str = "ACL_NOTIFY_SIM_GROUPS";

/// The largest group id (CANN's `MAX_GROUP_ID`, `src/runtime/core/inc/device/
/// device_properties.h`; the smallest is 0).
pub const MAX_GROUP_ID: i32 = 3;

/// One group of every device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceGroup {
    /// In `[0, MAX_GROUP_ID]`, unique.
    pub id: i32,
    /// The default group (the driver's flag bit 0).
    pub default: bool,
    /// AI Cores.
    pub aicore: u32,
    /// AI Vector cores.
    pub aivector: u32,
    /// AI CPUs.
    pub aicpu: u32,
    /// SDMA engines.
    pub sdma: u32,
    /// Active stream queues.
    pub streams: u32,
}

/// Parses [`ENV_GROUPS`]'s value for a device of `chip`: ids in `[0, 3]`, unique, at most
/// one default, and the groups' cores within the chip's (`Chip::cores`). Errors say what is
/// wrong, in words.
pub fn parse(text: &str, chip: Chip) -> Result<Vec<DeviceGroup>, String> {
    if !chip.soc().has_device_groups() {
        return Err(format!(
            "{chip} has no device groups (CANN has them on the Atlas inference series, \
             Ascend310P, only)"
        ));
    }
    let mut groups: Vec<DeviceGroup> = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let fields: Vec<&str> = part.split(':').map(str::trim).collect();
        let [id, aicore, aivector, aicpu, sdma, streams] = fields[..] else {
            return Err(format!(
                "group {part:?}: expected ID:AICORE:AIVECTOR:AICPU:SDMA:STREAMS"
            ));
        };
        let (id, default) = match id.strip_suffix('*') {
            Some(i) => (i, true),
            None => (id, false),
        };
        let number = |what: &str, v: &str| {
            v.parse::<u32>()
                .map_err(|_| format!("group {part:?}: {what} {v:?} is not a number"))
        };
        let id = id
            .parse::<i32>()
            .ok()
            .filter(|i| (0..=MAX_GROUP_ID).contains(i))
            .ok_or_else(|| format!("group {part:?}: the id is not in [0, {MAX_GROUP_ID}]"))?;
        if groups.iter().any(|g| g.id == id) {
            return Err(format!("group id {id} is given twice"));
        }
        if default && groups.iter().any(|g| g.default) {
            return Err(format!("group {id}: a second default group"));
        }
        groups.push(DeviceGroup {
            id,
            default,
            aicore: number("AICORE", aicore)?,
            aivector: number("AIVECTOR", aivector)?,
            aicpu: number("AICPU", aicpu)?,
            sdma: number("SDMA", sdma)?,
            streams: number("STREAMS", streams)?,
        });
    }
    if let Some(cores) = chip.cores() {
        let sum = |f: fn(&DeviceGroup) -> u32| groups.iter().map(f).sum::<u32>();
        for (what, used, has) in [
            ("AI Cores", sum(|g| g.aicore), cores.ai_core),
            ("AI Vector cores", sum(|g| g.aivector), cores.vector_core),
            ("AI CPUs", sum(|g| g.aicpu), cores.ai_cpu),
        ] {
            if used > has {
                return Err(format!(
                    "the groups take {used} {what}, but {chip} has {has}"
                ));
            }
        }
    }
    Ok(groups)
}

#[cfg(test)]
mod tests {
    use super::*;
    use acl_notify_core::Soc;

    fn p310() -> Chip {
        Chip::from_name("Ascend310P3").unwrap()
    }

    #[test]
    fn groups_parse_with_their_default() {
        let g = parse("0*:4:4:2:2:8, 2:4:3:2:1:16", p310()).unwrap();
        assert_eq!(g.len(), 2);
        assert!(g[0].default && !g[1].default);
        assert_eq!((g[1].id, g[1].aivector, g[1].streams), (2, 3, 16));
        assert!(parse("", p310()).unwrap().is_empty());
    }

    #[test]
    fn bad_groups_are_refused_in_words() {
        for (text, word) in [
            ("4:1:1:1:1:1", "[0, 3]"),
            ("0:1:1:1:1:1,0:1:1:1:1:1", "twice"),
            ("0*:1:1:1:1:1,1*:1:1:1:1:1", "second default"),
            ("0:1:1:1", "expected"),
            ("0:x:1:1:1:1", "AICORE"),
            ("0:9:1:1:1:1", "AI Cores"),
        ] {
            let e = parse(text, p310()).unwrap_err();
            assert!(e.contains(word), "{text}: {e}");
        }
        let e = parse("0:1:1:1:1:1", Soc::Ascend910B.default_chip()).unwrap_err();
        assert!(e.contains("no device groups"), "{e}");
    }
}
