//! `acl-notify-sim`: the software device (placeholder; filled by the simulator issue).
