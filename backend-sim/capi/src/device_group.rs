//! Device groups: `aclrtGetGroupCount`, `aclrtCreateGroupInfo`, `aclrtDestroyGroupInfo`,
//! `aclrtGetAllGroupInfo`, `aclrtGetGroupInfoDetail`, `aclrtSetGroup`, over the groups the
//! simulated machine was configured with (`acl_notify_sim::groups`, `ACL_NOTIFY_SIM_GROUPS`).
//!
//! As hicann/runtime `src/acl/aclrt_impl/group.cpp` (the ACL layer: NULL arguments 100000;
//! `aclrtCreateGroupInfo` NULL when the count fails or is 0; a group index outside
//! `[0, count)` 100000; an attribute outside `aclrtGroupAttr` 100000; a `valueLen` shorter
//! than the attribute 100000; `*paramRetSize` the attribute's size), then
//! `src/runtime/api/impl/api_impl_standard_soc.cc` (`SetGroup`, `GetGroupCount`,
//! `GetGroupInfo`: 207000 on a chip without `RT_FEATURE_DEVICE_GROUP`, which of the
//! simulator's chips only Ascend310P has, `Soc::has_device_groups`; then the current context)
//! and `src/runtime/core/src/device/device.cc` (`GroupDevice`: the count is the number of
//! groups, 0 on a device without any; `GetGroupInfo` 107014 when there are none;
//! `SetGroup` 107000 for an id outside `[0, 3]`, 107014 for an id no group has).
//!
//! CANN's `aclrtGroupInfo *` is an array the caller indexes through the runtime; here it is a
//! handle of the one slab (`handle`), so a destroyed, forged or foreign one is answered with
//! 100000 and a message rather than read, and it remembers how many groups it was made for:
//! filling one made for fewer groups than the device now has is refused (107000) where CANN
//! would write past its end. A group info not yet filled answers zeros. `aclrtSetGroup`'s
//! choice is kept per device and read by nothing else: no kernel runs.

use std::collections::HashMap;
use std::ffi::c_void;

use acl_notify_core::{Backend, Error};
use acl_notify_sim::PerProcess;
use acl_notify_sim::groups::{DeviceGroup, MAX_GROUP_ID};

use crate::errmsg::{self, CallError, null_arg, param};
use crate::ffi::{Out, aclError, api};
use crate::handle::{Kind, ProcessTable, process_table};
use crate::session::with_runtime;

/// Groups a device can have: one per id.
const MAX_GROUPS: usize = MAX_GROUP_ID as usize + 1;

/// What an `aclrtGroupInfo *` holds.
#[derive(Clone, Copy, Debug, Default)]
struct GroupInfo {
    /// How many groups it was made for (the count when it was created).
    capacity: usize,
    /// The groups, once `aclrtGetAllGroupInfo` filled it (zeros before).
    groups: [DeviceGroup; MAX_GROUPS],
}

/// The process's group infos (plain memory in CANN: they outlive a session).
static INFOS: ProcessTable<GroupInfo> = process_table!(Kind::GroupInfo, "group infos");

/// The group `aclrtSetGroup` chose on each device of this process (a forked child starts
/// with none: a `PerProcess`, so that it never finds the parent's lock held).
static CHOSEN: PerProcess<HashMap<u32, i32>> = PerProcess::new(HashMap::new);

/// The groups of the current context's device: 207000 on a chip without device groups, the
/// current context's errors (107002) after.
fn device_groups(what: &str) -> Result<(u32, Vec<DeviceGroup>), CallError> {
    with_runtime(|rt| {
        let chip = rt.backend().chip();
        if !rt.backend().soc().has_device_groups() {
            return Err(CallError::new(
                Error::FeatureNotSupport,
                format!(
                    "{chip} has no device groups ({what}: CANN has them on the Atlas inference \
                     series, Ascend310P, only)"
                ),
            ));
        }
        let (device, _) = rt.current()?;
        Ok((device, rt.backend().device_groups().to_vec()))
    })
}

/// 100000 for a pointer that is not a live group info of this process.
fn not_live(handle: usize) -> CallError {
    CallError::new(
        Error::InvalidParam,
        format!(
            "groupInfo {handle:#x} is not a live aclrtGroupInfo of this process (destroyed, or \
             not made by aclrtCreateGroupInfo)"
        ),
    )
}

/// `aclError aclrtGetGroupCount(uint32_t *count)`: how many groups the current device has (0:
/// none configured).
///
/// Codes: 100000 NULL `count`; 207000 on a chip without device groups; 107002 no current
/// context.
///
/// # Safety
///
/// `count` is NULL or valid for writing a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetGroupCount(count: *mut u32) -> aclError {
    api("aclrtGetGroupCount", || {
        // SAFETY: `count` is NULL or writable, by the caller's contract.
        unsafe { Out::new(count) }.write(
            || null_arg("count"),
            || {
                let (_, groups) = device_groups("aclrtGetGroupCount")?;
                Ok(groups.len() as u32)
            },
        )
    })
}

/// `aclrtGroupInfo *aclrtCreateGroupInfo(void)`: room for the current device's groups, to be
/// filled by `aclrtGetAllGroupInfo`. NULL (with a message) when the count fails (207000 on a
/// chip without groups, 107002 without a context) or is 0 (no group configured).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtCreateGroupInfo() -> *mut c_void {
    let mut out = 0;
    api("aclrtCreateGroupInfo", || {
        let (device, groups) = device_groups("aclrtCreateGroupInfo")?;
        if groups.is_empty() {
            // CANN logs a warning and returns NULL: not a failed call, but it says why.
            errmsg::push(format!(
                "aclrtCreateGroupInfo: device {device} has no group (none is configured: \
                 {}), so no group info is made",
                acl_notify_sim::groups::ENV_GROUPS
            ));
            return Ok(());
        }
        out = INFOS.insert(GroupInfo {
            capacity: groups.len(),
            groups: [DeviceGroup::default(); MAX_GROUPS],
        })?;
        Ok(())
    });
    crate::ffi::to_ptr(out)
}

/// `aclError aclrtDestroyGroupInfo(aclrtGroupInfo *groupInfo)`: frees a group info.
///
/// Codes: 100000 NULL, or not a live group info.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtDestroyGroupInfo(group_info: *mut c_void) -> aclError {
    api("aclrtDestroyGroupInfo", || {
        let h = group_info.addr();
        if h == 0 {
            return Err(null_arg("groupInfo"));
        }
        INFOS.remove(h).map(drop).ok_or_else(|| not_live(h))
    })
}

/// `aclError aclrtGetAllGroupInfo(aclrtGroupInfo *groupInfo)`: fills `groupInfo` with every
/// group of the current device, in id order.
///
/// Codes: 100000 NULL, or not a live group info; 207000 on a chip without device groups;
/// 107002 no current context; 107014 the device has no group; 107000 a group info made for
/// fewer groups.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtGetAllGroupInfo(group_info: *mut c_void) -> aclError {
    api("aclrtGetAllGroupInfo", || {
        let h = group_info.addr();
        if h == 0 {
            return Err(null_arg("groupInfo"));
        }
        let (device, mut groups) = device_groups("aclrtGetAllGroupInfo")?;
        if groups.is_empty() {
            return Err(CallError::new(
                Error::GroupNotCreate,
                format!(
                    "device {device} has no group (none is configured: {})",
                    acl_notify_sim::groups::ENV_GROUPS
                ),
            ));
        }
        groups.sort_by_key(|g| g.id);
        INFOS
            .update(h, |info| {
                if info.capacity < groups.len() {
                    return Err(param(format!(
                        "groupInfo {h:#x} was made for {} groups, but device {device} has {}: \
                         make it again with aclrtCreateGroupInfo",
                        info.capacity,
                        groups.len()
                    )));
                }
                info.groups[..groups.len()].copy_from_slice(&groups);
                Ok(())
            })
            .ok_or_else(|| not_live(h))?
    })
}

/// `aclrtGroupAttr`'s values.
const ATTR_AICORE: i32 = 0;
const ATTR_AIV: i32 = 1;
const ATTR_AIC: i32 = 2;
const ATTR_SDMANUM: i32 = 3;
const ATTR_ASQNUM: i32 = 4;
const ATTR_GROUPID: i32 = 5;

/// `aclError aclrtGetGroupInfoDetail(const aclrtGroupInfo *groupInfo, int32_t groupIndex,
/// aclrtGroupAttr attr, void *attrValue, size_t valueLen, size_t *paramRetSize)`: one
/// attribute of the group at `groupIndex` of a filled group info, written to `attrValue` as a
/// 4-byte integer (`int32_t` for the id, `uint32_t` for the counts); `*paramRetSize` is 4.
///
/// Codes: 100000 a NULL argument, an index outside `[0, count)`, an attribute outside
/// `aclrtGroupAttr`, a `valueLen` under 4, or not a live group info; 207000 on a chip
/// without device groups; 107002 no current context.
///
/// # Safety
///
/// `attrValue` is NULL or valid for writing `valueLen` bytes; `paramRetSize` is NULL or valid
/// for writing a `size_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetGroupInfoDetail(
    group_info: *const c_void,
    group_index: i32,
    attr: i32,
    attr_value: *mut c_void,
    value_len: usize,
    param_ret_size: *mut usize,
) -> aclError {
    // SAFETY: NULL or writable, by the caller's contract.
    let param_ret_size = unsafe { Out::new(param_ret_size) };
    api("aclrtGetGroupInfoDetail", || {
        let h = group_info.addr();
        if h == 0 {
            return Err(null_arg("groupInfo"));
        }
        if attr_value.is_null() {
            return Err(null_arg("attrValue"));
        }
        let param_ret_size = param_ret_size.check(|| null_arg("paramRetSize"))?;
        let (_, groups) = device_groups("aclrtGetGroupInfoDetail")?;
        let count = groups.len();
        let index = usize::try_from(group_index)
            .ok()
            .filter(|i| *i < count)
            .ok_or_else(|| {
                CallError::new(
                    Error::InvalidParam,
                    format!("groupIndex {group_index} is not in [0, {count})"),
                )
            })?;
        let info = INFOS.get(h).ok_or_else(|| not_live(h))?;
        let g = info.groups.get(index).copied().unwrap_or_default();
        let value: [u8; 4] = match attr {
            ATTR_AICORE => g.aicore.to_ne_bytes(),
            ATTR_AIV => g.aivector.to_ne_bytes(),
            ATTR_AIC => g.aicpu.to_ne_bytes(),
            ATTR_SDMANUM => g.sdma.to_ne_bytes(),
            ATTR_ASQNUM => g.streams.to_ne_bytes(),
            ATTR_GROUPID => g.id.to_ne_bytes(),
            other => {
                return Err(CallError::new(
                    Error::InvalidParam,
                    format!(
                        "attr {other} is not an aclrtGroupAttr ([ACL_GROUP_AICORE_INT, \
                         ACL_GROUP_GROUPID_INT], 0 to 5)"
                    ),
                ));
            }
        };
        if value_len < value.len() {
            return Err(CallError::new(
                Error::InvalidParam,
                format!(
                    "valueLen {value_len} is shorter than the attribute: required size is {}",
                    value.len()
                ),
            ));
        }
        // SAFETY: non-NULL and valid for `value_len` >= 4 bytes, the caller's contract.
        unsafe {
            attr_value
                .cast::<u8>()
                .copy_from_nonoverlapping(value.as_ptr(), value.len());
        }
        param_ret_size.put(value.len());
        Ok(())
    })
}

/// `aclError aclrtSetGroup(int32_t groupId)`: the current device's work uses group
/// `groupId` from now on (kept; nothing reads it, as no kernel runs).
///
/// Codes: 207000 on a chip without device groups; 107002 no current context; 107000 an id
/// outside `[0, 3]`; 107014 an id no group of the device has.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSetGroup(group_id: i32) -> aclError {
    api("aclrtSetGroup", || {
        let (device, groups) = device_groups("aclrtSetGroup")?;
        if !(0..=MAX_GROUP_ID).contains(&group_id) {
            return Err(param(format!(
                "groupId {group_id} is not in [0, {MAX_GROUP_ID}]"
            )));
        }
        if !groups.iter().any(|g| g.id == group_id) {
            return Err(CallError::new(
                Error::GroupNotCreate,
                format!("device {device} has no group {group_id}"),
            ));
        }
        CHOSEN
            .lock()
            .map_err(CallError::backend)?
            .insert(device, group_id);
        Ok(())
    })
}
