//! `acl-notify-sim`: the software device — CANN notify semantics on Linux, with device state in
//! shared memory so that real processes opening the same namespace see the same machine.
//!
//! Entry points: [`Sim::from_env`] (the `ACL_NOTIFY_SIM_*` variables) and [`Sim::builder`].
//! [`Sim`] implements the core's [`Backend`](acl_notify_core::Backend),
//! [`NotifyResources`](acl_notify_core::NotifyResources),
//! [`StreamOps`](acl_notify_core::StreamOps), [`HostOps`](acl_notify_core::HostOps) and
//! [`CntNotifyOps`](acl_notify_core::CntNotifyOps) traits with [`SimError`] as the error type.
//!
//! # How it fits together
//!
//! - [`shm`]: one file per (namespace, server) under `/dev/shm`, holding the per-device id
//!   pools, the core notify table ([`acl_notify_core::table`]), whitelists and the process
//!   table. Waits and records operate directly on the shared flag words (shared futexes), so a
//!   record in one process wakes a stream waiting in another without polling.
//! - [`stream`]: the in-process stream engine (one worker thread per stream); notify records
//!   and waits are tasks on it, so a wait stalls the stream, never the caller.
//! - Handles ([`RawNotify`](acl_notify_core::RawNotify),
//!   [`RawStream`](acl_notify_core::RawStream)) are process-local table entries validated on every
//!   call (kind, a random per-`Sim` salt, generation and index: `acl_notify_handles`, the slab
//!   the C library and the driver use too): stale, forged or foreign handles get 107017. The C
//!   library hands the notify handles to C as they are.
//! - References: each process holds at most one bit per notify in the shared holder bitmap,
//!   kept while any of its handles or queued tasks uses the notify; the id is freed when the
//!   last bit goes. A process that dies is reclaimed by the survivors ([`Sim::gc`], also run
//!   on open and before answering 207009).
//!
//! # Where things are
//!
//! - `config`: the `ACL_NOTIFY_SIM_*` variables, [`SimBuilder`] and [`StreamCpus`]; `open`:
//!   opening a machine from them.
//! - `sim`: [`Sim`] and its per-process state, the checks every call shares.
//! - `entries`: the process-local notify and stream handle entries; `pin`: the per-stream pins
//!   of a notify, which queued tasks use by address (no count per task); `lookup`: finding a handle's entry.
//! - `ipc_policy`: whitelists and the checks of an import.
//! - `job`: what a stream runs (`SimJob`); `enqueue`: how it is queued; `blocked`: what a
//!   stream's blocked task is doing; `waiters`: the hot path of a stream's records and waits
//!   (adaptive spin, prefetch, the slow wait).
//! - `spin`: how long a wait may spin, given the load; `placement`: a worker the kernel put
//!   on a crowded CPU moves itself ([`StreamCpus::Adaptive`]).
//! - `mapfile`: the shared-file layer every file kind uses (the creation protocol, the header
//!   every kind starts with, the mapping, the files' names, the per-process registry); `shm`,
//!   `cnt`, `ipc_event`, `waitgraph` and `mem`'s device-memory file are its kinds.
//! - `cnt`, `event`, `mem`: count notifies, events and device memory, each its state below and
//!   its `Sim` calls in a submodule (`cnt::sim`, `event::sim`, the files of `mem`).
//! - `traits`: the core's backend traits implemented for [`Sim`].
//!
//! Imports run one way: the shared-memory layer (`sys`, `mapfile`, `shm`, `stream`, …) knows
//! nothing of `Sim`; the per-process state (`entries`, `job`, `cnt`, `mem::state`, …) knows
//! nothing of `Sim` either; `sim` holds them; the modules that add methods to `Sim` sit above
//! it. `tests/module_graph.rs` checks that no chain of imports comes back to where it started.
//!
//! # Limits and costs
//!
//! - 64 devices per machine; 64 live processes per namespace and server (the holder bitmap;
//!   a 65th gets 207005 until a registered process exits or dies); 16 waiters per notify hold
//!   a FIFO ticket at once, further waiters wait for a ticket (see [`acl_notify_core::table`]).
//! - Memory: the file is sparse (an 8 × 65535 Ascend950PR machine is a 600 MiB file with
//!   12 KiB allocated after open). A notify in use costs its 192-byte slot plus 3 bytes of
//!   pool; an exported notify one more 1040-byte whitelist (measured by
//!   `shm::tests::sparse_file_and_bytes_per_notify`).
//! - A wait blocked on a stream notices a discarding destroy at once (the stream's cancel
//!   waker wakes the futex), at worst after [`acl_notify_core::table::CHUNK`] (50 ms) if the
//!   wake raced ahead of the sleep.
//! - Whitelisted PIDs that are not running when whitelisted, and entries for other servers,
//!   have an unknown start time and match any process with that PID.
//! - `fork()`: a child may open a `Sim` of its own, also when other threads of its parent were
//!   inside the simulator at the fork (the process-wide locks are fresh in a child, and nothing
//!   lazily initialised can be left half-done; see the `fork` module). It must not use a `Sim`
//!   it inherited, not even drop it: that `Sim` is the parent's, its stream threads are not in
//!   the child (a drop would wait for them for ever) and its locks may be held by threads that
//!   are gone. `std::mem::forget` it, or exit without dropping it.

mod blocked;
mod busy;
pub use busy::StreamBusy;
pub mod cluster;
pub mod cnt;
mod composed;
mod config;
mod diag;
mod enqueue;
mod entries;
mod error;
mod event;
mod failure_scope;
mod fork;
pub mod groups;
/// For the C library's process-wide locks, not an API of the crate.
#[doc(hidden)]
pub use fork::{PerProcess, also_in_child as fork_also_in_child, required as fork_required};
pub mod inspect;
mod ipc_event;
mod ipc_policy;
mod job;
mod locks;
mod lookup;
mod lost;
mod mapfile;
pub mod mem;
mod open;
mod pair_cache;
mod parked;
mod pin;
mod placement;
mod prefetch;
/// The tests' bound on a wait: the time the process could run, not wall time (the tests
/// crate's watch, one rule for the project's tests: see there).
#[cfg(test)]
#[path = "../../tests/src/progress.rs"]
#[allow(dead_code)] // Its groups' watch is for other processes; these tests watch their own.
mod progress;
mod repair;
mod ring;
pub mod shm;
mod sigbus;
mod sim;
mod spin;
pub mod stream;
mod submitted;
mod sys;
mod tagged_cache;
mod task_failure;
#[cfg(test)]
mod tests;
pub mod trace;
mod traits;
mod valgrind;
mod waiters;
pub mod waitgraph;
mod wake_slice;
mod yielding;

pub use acl_notify_core::table::MergedRecords;
pub use enqueue::{Head, StreamHead};
pub use error::SimError;
pub use failure_scope::{FailureScope, ScopeFailure};
pub use job::{
    HostFunctionBlocked, host_function_blocked, host_function_cancelled, host_function_device,
    host_function_waits, in_host_function,
};
pub use shm::GcReport;
pub use submitted::{NO_TASK, last_task as thread_last_task};
pub use task_failure::{FailureListener, TaskFailure};

pub use config::{
    DEFAULT_ENQUEUE_TIMEOUT, ENV_DEVICE_MEMORY, ENV_DEVICES, ENV_ENQUEUE_TIMEOUT, ENV_NAMESPACE,
    ENV_SERVER_ID, ENV_SOC, ENV_SPIN_BUDGET, ENV_STREAM_CPUS, LEAK_REPAIR_GRACE, MAX_DEVICES,
    MAX_NAMESPACE_LEN, STREAM_CAPACITY, SimBuilder, StreamCpus,
};
pub use sim::{NamespaceGuard, Sim};
