//! The typestate API (placeholder; filled by the core issue).
