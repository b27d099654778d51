//! `libascendcl.so` for the simulator: the subset of CANN's AscendCL C API that covers Notify
//! management (SPEC §3) plus the device, stream and initialisation calls around it, so C and
//! C++ programs written for CANN compile against `include/acl/acl.h` and run unchanged.
//!
//! Layers, from C inwards:
//! - [`ffi`]: the exported `extern "C"` functions. Every one catches panics, checks its
//!   pointer arguments, and records a message for `aclGetRecentErrMsg` on failure.
//! - `runtime`: what CANN's C API adds to a backend — handle tables (`handle`), the per-thread
//!   current device, NULL-means-default-stream, and SPEC §3's check order — generic over any
//!   `B: NotifyResources + StreamOps`.
//! - `session`: `aclInit`/`aclFinalize`, and the one place the simulator is chosen as `B`.
//!
//! Configuration comes from the `ACL_NOTIFY_SIM_*` environment variables, read at `aclInit`.

#[cfg(not(target_pointer_width = "64"))]
compile_error!("the C ABI encodes handles in 64-bit pointers (LP64 only)");

mod context;
mod errmsg;
mod event;
pub mod ffi;
pub mod ffi_event;
mod handle;
mod runtime;
mod session;
