//! Opening the driver backend (`acl_notify_driver::Driver`) in a child process. The parent
//! pointed `ACL_NOTIFY_DRIVER_LIB` at the simulator's `libascendcl.so` next to the test binary;
//! the library reads the same `ACL_NOTIFY_SIM_*` variables at `aclInit`.

use acl_notify_core::Soc;
use acl_notify_driver::Driver;

use crate::check::CaseResult;
use crate::harness::{BackendKind, ENV_DRIVER_LIB, Job, run_job};

/// Opens the driver (`Driver::load()`, which honours `ACL_NOTIFY_DRIVER_LIB`) and runs the job.
pub(crate) fn run(kind: BackendKind, soc: Soc, job: &Job) -> CaseResult {
    let lib = std::env::var(ENV_DRIVER_LIB).unwrap_or_default();
    let d =
        Driver::load().map_err(|e| format!("Driver::load() with {ENV_DRIVER_LIB}={lib}: {e}"))?;
    run_job(&d, kind, soc, job)
}
