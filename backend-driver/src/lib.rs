//! `acl-notify-driver`: the core traits over CANN (placeholder; filled by the driver issue).
