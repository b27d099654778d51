//! A stream's attributes (`aclrtSetStreamAttribute` / `aclrtGetStreamAttribute`): the
//! failure mode (the simulator's stream keeps it, as `aclrtSetStreamFailureMode` sets it), the
//! overflow switch, a user tag, the operator-information cache switch and the priority (kept
//! with the stream's other answers, `streaminfo`). No kernel runs here, so the last four are
//! state a program reads back, with CANN's checks.
//!
//! CANN's rules (hicann/runtime `src/runtime/api/api_c_stream.cc`, `rtsStreamSetAttribute` /
//! `rtsStreamGetAttribute`, after the ACL layer's NULL check of the value, 100000; the
//! features per chip from `src/runtime/config/*/dev_info_reg.cc`):
//!
//! - The stream handle is checked first (107017); an attribute outside 1–5 is 107000.
//! - Failure mode: set on the chips with `RT_FEATURE_STREAM_ATTR_FAILURE_MODE` (every SoC of
//!   ours but IPV350, whose configuration hicann/runtime does not hold; 207000 there), as
//!   `aclrtSetStreamFailureMode` does (bit 0 of the `uint64_t`); the get answers the mode.
//! - Overflow switch: as `aclrtSetStreamOverflowSwitch` / `aclrtGetStreamOverflowSwitch`
//!   (`streaminfo`), the set answering 0 and doing nothing on chips without the switch before
//!   any other check, and a value of 2 or more being 107000 (`ApiErrorDecorator::
//!   SetStreamOverflowSwitch`, `api_error.cc`: `RT_OVERFLOW_MODE_UNDEF`).
//! - User tag: kept on the chips with `RT_FEATURE_STREAM_ATTR_USER_CUSTOM_TAG` (Ascend910B,
//!   Ascend910_93, the 950 family); elsewhere set and get answer 0 and do nothing (the get
//!   writes nothing). A stream of the current context only (107003), as `ApiImpl::SetStreamTag`.
//! - Operator-information cache switch: 0 or 1, else 107000
//!   (`ApiErrorDecorator::SetStreamCacheOpInfoSwitch`).
//! - Priority: clamped into [0, 7] as at creation (`ApiErrorDecorator::SetStreamPriorityValue`);
//!   a NULL stream is 107000 there (set and get), as the decorator checks the stream pointer
//!   before the default stream is looked up. `aclrtStreamGetPriority` answers the new value.

use acl_notify_core::{Backend as _, Error, FailureMode, Soc};

use super::Runtime;
use super::streaminfo::{clamp_priority, keeps_overflow_switch};
use crate::errmsg::CallError;

/// `ACL_STREAM_ATTR_*` (`acl_rt.h`).
const FAILURE_MODE: u32 = 1;
const FLOAT_OVERFLOW_CHECK: u32 = 2;
const USER_CUSTOM_TAG: u32 = 3;
const CACHE_OP_INFO: u32 = 4;
const PRIORITY: u32 = 5;

/// What `aclrtStreamAttrValue` holds for one attribute: `failureMode` is its `uint64_t`, the
/// others its `uint32_t`s, all at offset 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AttrValue {
    /// `failureMode`.
    Wide(u64),
    /// `overflowSwitch`, `userCustomTag`, `cacheOpInfoSwitch`, `streamPriority`.
    Narrow(u32),
}

/// Whether `soc` sets a stream's failure mode through the attribute.
fn has_failure_mode_attr(soc: Soc) -> bool {
    soc != Soc::IPV350
}

/// Whether `soc` keeps a stream's user tag.
fn keeps_user_tag(soc: Soc) -> bool {
    matches!(
        soc,
        Soc::Ascend910B | Soc::Ascend910_93 | Soc::Ascend950PR | Soc::Ascend950DT
    )
}

fn bad_attr(attr: u32) -> CallError {
    CallError::new(
        Error::ParamInvalid,
        format!(
            "stmAttrType {attr}: expected an ACL_STREAM_ATTR_* value, FAILURE_MODE (1) to \
             PRIORITY (5)"
        ),
    )
}

fn null_stream_priority() -> CallError {
    CallError::new(
        Error::ParamInvalid,
        "a NULL stream has no priority attribute (CANN checks the stream itself; name it)",
    )
}

impl Runtime {
    /// `aclrtSetStreamAttribute(stream, attr, value)`; `value` is the union's first 8 bytes
    /// as a `uint64_t` (the `uint32_t` members are its low half's bytes, read by the caller).
    pub(crate) fn set_stream_attr(
        &self,
        stream: usize,
        attr: u32,
        value: AttrValue,
    ) -> Result<(), CallError> {
        if stream != 0 {
            self.stream(stream)?;
        }
        let soc = self.backend().soc();
        let narrow = match value {
            AttrValue::Narrow(v) => v,
            AttrValue::Wide(v) => v as u32,
        };
        match attr {
            FAILURE_MODE => {
                if !has_failure_mode_attr(soc) {
                    return Err(CallError::new(
                        Error::FeatureNotSupport,
                        format!(
                            "the failure-mode attribute is not supported on {}",
                            soc.name()
                        ),
                    ));
                }
                let mode = match value {
                    AttrValue::Wide(v) => v,
                    AttrValue::Narrow(v) => u64::from(v),
                };
                self.set_failure_mode(stream, mode)
            }
            FLOAT_OVERFLOW_CHECK => {
                if !keeps_overflow_switch(soc) {
                    return Ok(());
                }
                if narrow > 1 {
                    return Err(CallError::new(
                        Error::ParamInvalid,
                        format!("overflowSwitch {narrow}: expected 0 or 1"),
                    ));
                }
                self.set_overflow_switch(stream, narrow == 1)
            }
            USER_CUSTOM_TAG => {
                if !keeps_user_tag(soc) {
                    return Ok(());
                }
                self.update_stream_info(stream, |i| i.tag = narrow)
            }
            CACHE_OP_INFO => {
                if narrow > 1 {
                    return Err(CallError::new(
                        Error::ParamInvalid,
                        format!("cacheOpInfoSwitch {narrow}: expected 0 or 1"),
                    ));
                }
                self.update_stream_info(stream, |i| i.cache_op_info = narrow == 1)
            }
            PRIORITY => {
                if stream == 0 {
                    return Err(null_stream_priority());
                }
                let p = clamp_priority(narrow);
                self.update_stream_info(stream, |i| i.priority = p)
            }
            _ => Err(bad_attr(attr)),
        }
    }

    /// `aclrtGetStreamAttribute(stream, attr, value)`: the value to write, `None` when CANN
    /// writes nothing (the user tag on a chip without it).
    pub(crate) fn stream_attr(
        &self,
        stream: usize,
        attr: u32,
    ) -> Result<Option<AttrValue>, CallError> {
        if stream != 0 {
            self.stream(stream)?;
        }
        let soc = self.backend().soc();
        let v = match attr {
            FAILURE_MODE => {
                let raw = self.resolve_stream(stream)?;
                let mode = self
                    .backend()
                    .failure_mode(raw)
                    .map_err(CallError::backend)?;
                AttrValue::Wide(u64::from(mode == FailureMode::StopOnFailure))
            }
            FLOAT_OVERFLOW_CHECK => AttrValue::Narrow(self.overflow_switch(stream)?),
            USER_CUSTOM_TAG => {
                if !keeps_user_tag(soc) {
                    return Ok(None);
                }
                AttrValue::Narrow(self.stream_info_here(stream)?.1.tag)
            }
            CACHE_OP_INFO => {
                AttrValue::Narrow(u32::from(self.stream_info_here(stream)?.1.cache_op_info))
            }
            PRIORITY => {
                if stream == 0 {
                    return Err(null_stream_priority());
                }
                AttrValue::Narrow(self.stream_info_here(stream)?.1.priority)
            }
            _ => return Err(bad_attr(attr)),
        };
        Ok(Some(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use acl_notify_sim::NamespaceGuard as Ns;

    fn runtime(tag: &str, soc: Soc) -> (Runtime, Ns) {
        let (sim, ns) = Ns::open_sim(
            format!("unit-capi-attr-{tag}-{}", std::process::id()),
            soc,
            2,
        )
        .expect("opening a test Sim");
        let rt = Runtime::new(sim, 1, 42);
        rt.set_device(0).unwrap();
        (rt, ns)
    }

    #[test]
    fn attributes_set_are_read_back() {
        let (rt, _ns) = runtime("back", Soc::Ascend910B);
        let s = rt.create_stream().unwrap();
        let get = |a| rt.stream_attr(s, a).unwrap();
        assert_eq!(get(FAILURE_MODE), Some(AttrValue::Wide(0)));
        rt.set_stream_attr(s, FAILURE_MODE, AttrValue::Wide(1))
            .unwrap();
        assert_eq!(get(FAILURE_MODE), Some(AttrValue::Wide(1)));
        rt.set_stream_attr(s, FLOAT_OVERFLOW_CHECK, AttrValue::Narrow(1))
            .unwrap();
        assert_eq!(get(FLOAT_OVERFLOW_CHECK), Some(AttrValue::Narrow(1)));
        assert_eq!(rt.overflow_switch(s).unwrap(), 1, "the switch is one");
        rt.set_stream_attr(s, USER_CUSTOM_TAG, AttrValue::Narrow(0xbeef))
            .unwrap();
        assert_eq!(get(USER_CUSTOM_TAG), Some(AttrValue::Narrow(0xbeef)));
        rt.set_stream_attr(s, CACHE_OP_INFO, AttrValue::Narrow(1))
            .unwrap();
        assert_eq!(get(CACHE_OP_INFO), Some(AttrValue::Narrow(1)));
        rt.set_stream_attr(s, PRIORITY, AttrValue::Narrow(9))
            .unwrap();
        assert_eq!(get(PRIORITY), Some(AttrValue::Narrow(7)), "clamped");
        assert_eq!(rt.stream_info(s, true).unwrap().priority, 7);
        // The default stream keeps its own.
        rt.set_stream_attr(0, USER_CUSTOM_TAG, AttrValue::Narrow(5))
            .unwrap();
        assert_eq!(
            rt.stream_attr(0, USER_CUSTOM_TAG).unwrap(),
            Some(AttrValue::Narrow(5))
        );
        assert_eq!(get(USER_CUSTOM_TAG), Some(AttrValue::Narrow(0xbeef)));
    }

    #[test]
    fn bad_values_and_chips_without_the_attribute_answer_canns_codes() {
        let (rt, _ns) = runtime("bad", Soc::Ascend910B);
        let s = rt.create_stream().unwrap();
        let code = |r: Result<(), CallError>| r.unwrap_err().code();
        assert_eq!(
            code(rt.set_stream_attr(s, 6, AttrValue::Narrow(0))),
            Error::ParamInvalid
        );
        assert_eq!(
            code(rt.set_stream_attr(s, 0, AttrValue::Narrow(0))),
            Error::ParamInvalid
        );
        assert_eq!(
            rt.stream_attr(s, 6).unwrap_err().code(),
            Error::ParamInvalid
        );
        assert_eq!(
            code(rt.set_stream_attr(s, FLOAT_OVERFLOW_CHECK, AttrValue::Narrow(2))),
            Error::ParamInvalid
        );
        assert_eq!(
            code(rt.set_stream_attr(s, CACHE_OP_INFO, AttrValue::Narrow(2))),
            Error::ParamInvalid
        );
        assert_eq!(
            code(rt.set_stream_attr(0, PRIORITY, AttrValue::Narrow(1))),
            Error::ParamInvalid
        );
        assert_eq!(
            rt.stream_attr(0, PRIORITY).unwrap_err().code(),
            Error::ParamInvalid
        );
        let dead = s ^ 1;
        assert_eq!(
            code(rt.set_stream_attr(dead, PRIORITY, AttrValue::Narrow(1))),
            Error::InvalidHandle
        );
        // A chip without the user tag: the set does nothing, the get writes nothing.
        let (old, _ns2) = runtime("310p", Soc::Ascend310P);
        let t = old.create_stream().unwrap();
        old.set_stream_attr(t, USER_CUSTOM_TAG, AttrValue::Narrow(3))
            .unwrap();
        assert_eq!(old.stream_attr(t, USER_CUSTOM_TAG).unwrap(), None);
        // Nor the overflow switch: the set answers 0 even for a bad value.
        old.set_stream_attr(t, FLOAT_OVERFLOW_CHECK, AttrValue::Narrow(7))
            .unwrap();
        let (ipv, _ns3) = runtime("ipv", Soc::IPV350);
        let u = ipv.create_stream().unwrap();
        assert_eq!(
            code(ipv.set_stream_attr(u, FAILURE_MODE, AttrValue::Wide(1))),
            Error::FeatureNotSupport
        );
    }
}
