//! The device-side notify table (placeholder; filled by the simulator issue).
