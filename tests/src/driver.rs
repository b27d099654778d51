//! Opening the driver backend (`acl_notify_driver::Driver`) in a child process.
//!
//! The driver crate is being written in parallel; until `Driver` exists, every driver trial
//! fails with a message saying so (never a silent pass).

use crate::check::CaseResult;
use crate::harness::{BackendKind, Job};
use acl_notify_core::Soc;

/// Opens the driver (`Driver::load()`, which honours `ACL_NOTIFY_DRIVER_LIB`) and runs the job.
pub(crate) fn run(kind: BackendKind, soc: Soc, job: &Job) -> CaseResult {
    let _ = (kind, soc, job);
    Err(
        "acl_notify_driver::Driver does not exist yet in this tree (backend-driver/ is a \
         placeholder); the driver trials cannot run"
            .to_owned(),
    )
}
