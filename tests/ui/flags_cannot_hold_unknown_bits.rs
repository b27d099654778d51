// A flag word holds only the bits its type defines: the only way from a raw word is
// `from_raw`, which answers 107000 for an unknown bit, so no backend ever re-checks one.
// bitflags' `from_bits_retain` (which kept unknown bits) does not exist, nor does the field.
use acl_notify_core::{CreateFlags, ImportFlags};

fn main() {
    let _ = CreateFlags::from_bits_retain(0x100);
    let _ = ImportFlags(0x4);
}
