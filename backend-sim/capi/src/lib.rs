//! `libascendcl.so` subset over the simulator (placeholder; filled by the C ABI issue).
