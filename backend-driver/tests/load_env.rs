//! `Driver::load()` honours `ACL_NOTIFY_DRIVER_LIB` exclusively. One test per binary: it sets
//! process environment variables, which must not race with other threads.

use acl_notify_core::Error;
use acl_notify_driver::{
    DEFAULT_CANN_LIB, DEFAULT_TOOLKIT_LIB, Driver, ENV_LIB, LIB_NAME, LIB_NAME_RT,
};

#[test]
fn load_uses_only_the_library_the_environment_names_and_reports_every_path() {
    let missing = "/nonexistent/acl-notify-env/libascendcl.so";
    // SAFETY: this binary has exactly one test, so no other thread reads the environment.
    unsafe { std::env::set_var(ENV_LIB, missing) };
    let e = Driver::load().expect_err("the named library does not exist");
    let text = e.to_string();
    assert!(text.contains(missing), "{text}");
    assert!(text.contains(ENV_LIB), "{text}");
    assert!(
        !text.contains(DEFAULT_TOOLKIT_LIB),
        "an explicit choice must not fall back: {text}"
    );
    assert_eq!(e.kind(), Error::DrvInternalError);

    // Unset (or empty): both names on the search path, in $ASCEND_HOME_PATH/lib64 and in the
    // default install folders.
    // Under `cargo test` the loader path includes the target directory, so the simulator's
    // library may be found: give it a namespace of its own and remove it afterwards.
    let ns = format!("driver-load-env-{}", std::process::id());
    // SAFETY: as above.
    unsafe {
        std::env::set_var(ENV_LIB, "");
        std::env::set_var("ASCEND_HOME_PATH", "/nonexistent/ascend-home");
        std::env::set_var("ACL_NOTIFY_SIM_NAMESPACE", &ns);
    }
    match Driver::load() {
        // A machine with the toolkit (or the simulator's library on the loader path) loads it.
        Ok(d) => {
            assert!(!d.soc_name().is_empty());
            drop(d);
            let _ = acl_notify_sim::Sim::remove_namespace(&ns);
        }
        Err(e) => {
            let text = e.to_string();
            for part in [
                LIB_NAME,
                LIB_NAME_RT,
                "/nonexistent/ascend-home/lib64/libascendcl.so",
                "/nonexistent/ascend-home/lib64/libacl_rt.so",
                DEFAULT_TOOLKIT_LIB,
                "/usr/local/Ascend/ascend-toolkit/latest/lib64/libacl_rt.so",
                DEFAULT_CANN_LIB,
                "/usr/local/Ascend/cann/lib64/libacl_rt.so",
            ] {
                assert!(text.contains(part), "{part:?} not in {text}");
            }
        }
    }
}
