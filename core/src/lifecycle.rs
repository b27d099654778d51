//! The notify handle lifecycle as one transition table (state × operation → new state or the
//! SPEC's error code). The C ABI and the backends consult it at run time; the typestate API in
//! [`crate::typed`] encodes the same rules in types.

use crate::error::{Error, Result};
use crate::flags::PidValidation;
use crate::soc::IpcBatchReset;

/// The state of one process's handle to a notify.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum Lifecycle {
    /// Created by this process, not exported.
    Created = 1,
    /// Exported with PID validation; no importer whitelisted yet.
    Exported = 2,
    /// Exported with `DISABLE_PID_VALIDATION`: anyone with the key may import.
    ExportedOpen = 3,
    /// Exported with PID validation and at least one PID whitelisted.
    Whitelisted = 4,
    /// Imported from another process's key.
    Imported = 5,
    /// Destroyed: every operation is `InvalidHandle`.
    Destroyed = 6,
}

/// An operation on a handle, as far as the lifecycle is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Op {
    /// `aclrtRecordNotify`.
    Record,
    /// `aclrtWaitAndResetNotify` (the device check is the backend's).
    WaitAndReset,
    /// `aclrtGetNotifyId`.
    GetId,
    /// One element of `aclrtNotifyBatchReset`, on a SoC that treats IPC notifies as given
    /// ([`Soc::caps`](crate::Soc::caps)`().ipc_batch_reset`).
    BatchReset(IpcBatchReset),
    /// `aclrtNotifyGetExportKey`.
    Export(PidValidation),
    /// `aclrtNotifySetImportPid` / `aclrtNotifySetImportPidInterServer`.
    SetImportPid,
    /// `aclrtDestroyNotify`.
    Destroy,
}

impl Lifecycle {
    /// Every state, for exhaustive tests.
    pub const ALL: [Lifecycle; 6] = [
        Lifecycle::Created,
        Lifecycle::Exported,
        Lifecycle::ExportedOpen,
        Lifecycle::Whitelisted,
        Lifecycle::Imported,
        Lifecycle::Destroyed,
    ];

    /// The state after `op`, or the code the SPEC gives for `op` in this state:
    ///
    /// | state \ op | Record, Wait, GetId | BatchReset(Reset) | BatchReset(Refused) | Export | SetImportPid | Destroy |
    /// |---|---|---|---|---|---|---|
    /// | Created | same | same | same | Exported / ExportedOpen | 107000 | Destroyed |
    /// | Exported | same | same | 507009 | 507000 | Whitelisted | Destroyed |
    /// | ExportedOpen | same | same | 507009 | 507000 | 207006 | Destroyed |
    /// | Whitelisted | same | same | 507009 | 507000 | Whitelisted | Destroyed |
    /// | Imported | same | same | 507009 | 507000 | 207006 | Destroyed |
    /// | Destroyed | 107017 | 107017 | 107017 | 107017 | 107017 | 107017 |
    pub const fn apply(self, op: Op) -> Result<Lifecycle> {
        use Lifecycle::*;
        if let Destroyed = self {
            return Err(Error::InvalidHandle);
        }
        match op {
            Op::Record | Op::WaitAndReset | Op::GetId => Ok(self),
            Op::BatchReset(IpcBatchReset::Reset) => Ok(self),
            Op::BatchReset(IpcBatchReset::Refused) => match self {
                Created => Ok(Created),
                _ => Err(Error::TaskTypeNotSupport),
            },
            Op::Export(v) => match self {
                Created => Ok(match v {
                    PidValidation::Enforced => Exported,
                    PidValidation::Disabled => ExportedOpen,
                }),
                _ => Err(Error::InternalError),
            },
            Op::SetImportPid => match self {
                Created => Err(Error::ParamInvalid),
                Exported | Whitelisted => Ok(Whitelisted),
                _ => Err(Error::NoPermission),
            },
            Op::Destroy => Ok(Destroyed),
        }
    }

    /// Decodes the `#[repr(u8)]` value (for state kept in shared memory); `None` if invalid.
    pub const fn from_u8(v: u8) -> Option<Lifecycle> {
        match v {
            1 => Some(Lifecycle::Created),
            2 => Some(Lifecycle::Exported),
            3 => Some(Lifecycle::ExportedOpen),
            4 => Some(Lifecycle::Whitelisted),
            5 => Some(Lifecycle::Imported),
            6 => Some(Lifecycle::Destroyed),
            _ => None,
        }
    }

    /// Whether this handle is the owner's (created here) rather than an importer's.
    pub const fn is_owner(self) -> bool {
        matches!(
            self,
            Lifecycle::Created
                | Lifecycle::Exported
                | Lifecycle::ExportedOpen
                | Lifecycle::Whitelisted
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Lifecycle::*;

    const OPS: [Op; 9] = [
        Op::Record,
        Op::WaitAndReset,
        Op::GetId,
        Op::BatchReset(IpcBatchReset::Reset),
        Op::BatchReset(IpcBatchReset::Refused),
        Op::Export(PidValidation::Enforced),
        Op::Export(PidValidation::Disabled),
        Op::SetImportPid,
        Op::Destroy,
    ];

    /// The whole table, written out independently of `apply`'s match arms.
    fn expected(s: Lifecycle, op: Op) -> Result<Lifecycle> {
        let e = |c| Err(c);
        match (s, op) {
            (Destroyed, _) => e(Error::InvalidHandle),
            (_, Op::Destroy) => Ok(Destroyed),
            (s, Op::Record | Op::WaitAndReset | Op::GetId) => Ok(s),
            (s, Op::BatchReset(IpcBatchReset::Reset)) => Ok(s),
            (Created, Op::BatchReset(IpcBatchReset::Refused)) => Ok(Created),
            (_, Op::BatchReset(IpcBatchReset::Refused)) => e(Error::TaskTypeNotSupport),
            (Created, Op::Export(PidValidation::Enforced)) => Ok(Exported),
            (Created, Op::Export(PidValidation::Disabled)) => Ok(ExportedOpen),
            (_, Op::Export(_)) => e(Error::InternalError),
            (Created, Op::SetImportPid) => e(Error::ParamInvalid),
            (Exported | Whitelisted, Op::SetImportPid) => Ok(Whitelisted),
            (ExportedOpen | Imported, Op::SetImportPid) => e(Error::NoPermission),
        }
    }

    #[test]
    fn every_state_times_every_op() {
        let mut n = 0;
        for s in Lifecycle::ALL {
            for op in OPS {
                assert_eq!(s.apply(op), expected(s, op), "{s:?} × {op:?}");
                n += 1;
            }
        }
        assert_eq!(n, 54);
    }

    #[test]
    fn u8_round_trip() {
        for s in Lifecycle::ALL {
            assert_eq!(Lifecycle::from_u8(s as u8), Some(s));
        }
        assert_eq!(Lifecycle::from_u8(0), None);
        assert_eq!(Lifecycle::from_u8(7), None);
    }
}
