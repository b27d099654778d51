//! Import whitelists (placeholder; filled by the core issue).
