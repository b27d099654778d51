//! The conformance suite every backend must pass (placeholder; filled by the simulator issue).
