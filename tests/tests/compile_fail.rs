//! Compile-fail cases for the typestate API (and for items taken out of the public API):
//! every file under `tests/ui/` is one misuse that must not compile, with the compiler's
//! message pinned in the `.stderr` beside it (regenerate with
//! `TRYBUILD=overwrite cargo test -p acl-notify-tests --test compile_fail`, then read the
//! diff: each message must name the misuse the file's first comment describes).

#[test]
fn typestate_misuse_does_not_compile() {
    let t = trybuild::TestCases::new();
    t.compile_fail("ui/*.rs");
}
