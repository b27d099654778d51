//! `acl-notify-tests`: the conformance suite every backend must pass (SPEC §1–§4 and §7), its
//! multi-process cases, and the harness that runs them.
//!
//! - [`harness`]: trials `<backend>::<SoC>::<case>` under libtest-mimic, one child process per
//!   trial (fresh namespace, hard timeout, cleanup), role processes for multi-process cases.
//! - [`cases`]: the cases, generic over `B: Backend + NotifyResources + StreamOps + HostOps`.
//! - [`check`]: assertion macros whose failures name the call, the expected and the actual code.
//! - [`leftovers`]: sweeping what killed test runs left (scratch directories, namespaces).
//! - [`pause`]: noticing that a trial's processes were stopped or starved (its failure says so).
//! - [`progress`]: bounding other processes by the time they could run, not wall time (the C
//!   programs' harness, `xtask`'s builds).
//! - [`util`]: probes (host functions that show whether a stream got past a task), bounded
//!   synchronize, reading flags through timed waits, filling id pools.
//!
//! Run: `ACL_NOTIFY_TEST_BACKEND=sim cargo test -p acl-notify-tests --test conformance`
//! (`driver` or `all` for the driver backend, which needs `cargo build -p acl-notify-capi`).

#[macro_use]
pub mod check;
pub mod cases;
mod driver;
pub mod fault;
pub mod harness;
pub mod leftovers;
pub mod pause;
pub mod progress;
pub mod util;

pub use harness::main;
