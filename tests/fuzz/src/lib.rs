//! The fuzz targets' inputs and properties, as plain functions: `fuzz/` hands them to
//! libFuzzer (`cargo xtask fuzz`, nightly), and this crate's tests replay a checked-in seed
//! corpus plus generated inputs through them on the pinned stable toolchain (`cargo test`).
//!
//! Each `check` panics when a property fails; libFuzzer turns that into a crash report, the
//! replay tests into a failed test naming the input.

pub mod capi_calls;
pub mod key_parse;
pub mod replay;
pub mod shm_open;
