//! Our C headers state every fact of CANN's public runtime headers: each function's prototype,
//! each enumerator's and integer macro's value, each macro, each type's size and each struct
//! field's offset, as pinned in `backend-sim/capi/cann_headers.facts` (refreshed from a newer
//! CANN with `cargo xtask headers --refresh`, which also says how to read a difference).

#[path = "../../backend-sim/capi/headerfacts.rs"]
mod headerfacts;

use std::path::Path;

#[test]
fn our_headers_state_every_fact_of_cann_s() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let pinned = repo.join("backend-sim/capi/cann_headers.facts");
    let cann = headerfacts::parse(&std::fs::read_to_string(&pinned).unwrap()).unwrap();
    // The list covers the twelve headers ours mirror, ~400 functions among ~1,400 facts: a
    // list read wrong (or emptied) must not pass as "no differences".
    let fns = cann.iter().filter(|f| f.kind == "fn").count();
    assert!(
        fns >= 400 && cann.len() >= 1300,
        "{fns} functions of {} facts",
        cann.len()
    );
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let diffs = headerfacts::compare(&cc, &repo.join("backend-sim/capi/include"), &cann).unwrap();
    assert!(
        diffs.is_empty(),
        "{} of CANN's header facts differ in ours:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}
