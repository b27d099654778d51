//! The case list: every case and multi-process role, generic over the backend, with the SoCs
//! each applies to (SPEC §4).

use std::time::Duration;

use acl_notify_core::{Feature, Soc};

use crate::harness::{Case, Role, TestBackend};

mod basic;
mod batch;
mod cnt;
mod diag;
mod event;
mod host;
mod host_once;
mod ipc;
mod ipc_mem;
mod mp;
mod semantics;
mod soc;
mod typed;

/// The default hard limit of one case's child process.
pub const CASE_TIMEOUT: Duration = Duration::from_secs(60);

/// Every SoC.
pub fn any(_: Soc) -> bool {
    true
}
/// SoCs with notifies (all but IPV350).
pub fn notify(s: Soc) -> bool {
    s.has(Feature::Notify)
}
/// SoCs with IPC.
pub fn ipc(s: Soc) -> bool {
    s.has(Feature::Ipc)
}
/// SoCs with notifies but without IPC.
pub fn notify_no_ipc(s: Soc) -> bool {
    notify(s) && !ipc(s)
}
/// SoCs with batch reset.
pub fn batch(s: Soc) -> bool {
    s.has(Feature::BatchReset)
}
/// SoCs with notifies but without batch reset.
pub fn notify_no_batch(s: Soc) -> bool {
    notify(s) && !batch(s)
}
/// SoCs with batch reset and IPC.
pub fn batch_ipc(s: Soc) -> bool {
    batch(s) && ipc(s)
}
/// SoCs with inter-server whitelists.
pub fn inter_server(s: Soc) -> bool {
    s.has(Feature::InterServer)
}
/// SoCs with IPC but without inter-server whitelists.
pub fn ipc_no_inter_server(s: Soc) -> bool {
    ipc(s) && !inter_server(s)
}
/// SoCs without notifies (IPV350).
pub fn no_notify(s: Soc) -> bool {
    !notify(s)
}

/// Builds a case with the default timeout.
pub fn case<B>(
    name: &'static str,
    applies: fn(Soc) -> bool,
    run: fn(&crate::harness::Ctx<'_, B>) -> crate::check::CaseResult,
) -> Case<B> {
    Case {
        name,
        applies,
        timeout: CASE_TIMEOUT,
        sim_only: false,
        run,
    }
}

/// Every case, in a stable order.
pub fn all<B: TestBackend>() -> Vec<Case<B>> {
    let mut v = Vec::new();
    v.extend(basic::cases());
    v.extend(soc::cases());
    v.extend(semantics::cases());
    v.extend(batch::cases());
    v.extend(ipc::cases());
    v.extend(ipc_mem::cases());
    v.extend(host::cases());
    v.extend(host_once::cases());
    v.extend(cnt::cases());
    v.extend(event::cases());
    v.extend(diag::cases());
    v.extend(typed::cases());
    v.extend(mp::cases());
    v
}

/// Every role of the multi-process cases.
pub fn roles<B: TestBackend>() -> Vec<Role<B>> {
    let mut v = mp::roles();
    v.extend(ipc_mem::roles());
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use acl_notify_sim::Sim;
    use std::collections::HashSet;

    #[test]
    fn names_are_unique() {
        let cases = all::<Sim>();
        let names: HashSet<_> = cases.iter().map(|c| c.name).collect();
        assert_eq!(names.len(), cases.len());
        let roles = roles::<Sim>();
        let names: HashSet<_> = roles.iter().map(|r| r.name).collect();
        assert_eq!(names.len(), roles.len());
    }

    #[test]
    fn every_soc_has_cases() {
        let cases = all::<Sim>();
        for &soc in Soc::ALL {
            assert!(
                cases.iter().filter(|c| (c.applies)(soc)).count() >= 2,
                "{soc}"
            );
        }
    }
}
