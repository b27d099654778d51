//! Loading failures are clear errors, never crashes: a path that does not exist, a library
//! that is not a CANN runtime.

use acl_notify_core::Error;
use acl_notify_driver::Driver;

#[test]
fn a_library_path_that_does_not_exist_is_named_in_the_error() {
    let path = "/nonexistent/acl-notify-test/lib64/libascendcl.so";
    let e = Driver::load_from(path).expect_err("loading a missing file must fail");
    let text = e.to_string();
    assert!(text.contains(path), "the error must name the path: {text}");
    assert!(
        text.contains("No such file or directory"),
        "the error must carry the loader's message: {text}"
    );
    assert_eq!(e.function(), Some("dlopen"));
    assert_eq!(e.kind(), Error::DrvInternalError);
}

#[test]
fn a_library_without_the_acl_symbols_names_them() {
    // libc is loadable everywhere and exports none of CANN's functions.
    let e = Driver::load_from("libc.so.6").expect_err("libc is not a CANN runtime");
    let text = e.to_string();
    assert_eq!(e.function(), Some("dlsym"));
    assert!(text.contains("libc.so.6"), "names the library: {text}");
    for sym in ["aclInit", "aclrtCreateNotify", "aclrtNotifyImportByKey"] {
        assert!(text.contains(sym), "names the missing {sym}: {text}");
    }
    // Every required symbol is listed, the optional ones are not.
    for sym in Driver::required_symbols() {
        assert!(text.contains(sym), "{sym} missing from {text}");
    }
    assert!(
        !text.contains("aclnsim"),
        "optional symbols are not required: {text}"
    );
}

#[test]
fn a_file_that_is_not_a_library_is_a_clear_error() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(format!("not-a-library-{}.so", std::process::id()));
    std::fs::write(&path, b"this is text, not ELF").unwrap();
    let e = Driver::load_from(&path).expect_err("a text file is not a library");
    let text = e.to_string();
    assert!(text.contains(&*path.to_string_lossy()), "{text}");
    assert_eq!(e.function(), Some("dlopen"));
    let _ = std::fs::remove_file(&path);
}
