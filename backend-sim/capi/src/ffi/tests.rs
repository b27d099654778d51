//! Unit tests of the exported functions: argument checks before the session, layouts, the
//! panic firewall.

use super::*;
use crate::errmsg::null_arg;
use crate::session;
use std::ffi::CStr;

fn recent() -> String {
    let p = aclGetRecentErrMsg();
    assert!(!p.is_null(), "no message recorded");
    // SAFETY: non-NULL messages are NUL-terminated and live until the next call.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

#[test]
fn null_checks_come_before_the_session_start() {
    // These run without a session and start none: the argument checks come first (a
    // call that passes them would start the process's session, which the C tests do).
    // SAFETY: NULL pointers are valid arguments.
    unsafe {
        assert_eq!(aclrtCreateNotify(std::ptr::null_mut(), 0), 100000);
        assert!(recent().contains("aclrtCreateNotify failed: ACL_ERROR_INVALID_PARAM"));
        assert_eq!(aclrtGetNotifyId(to_ptr(1), std::ptr::null_mut()), 100000);
        assert_eq!(aclrtNotifyBatchReset(std::ptr::null_mut(), 1), 100000);
        let mut n = std::ptr::null_mut();
        assert_eq!(aclrtNotifyBatchReset(&mut n, 0), 107000);
        assert_eq!(
            aclrtNotifySetImportPidInterServer(std::ptr::null_mut(), std::ptr::null_mut(), 0),
            107000
        );
        let mut pid = 0;
        assert_eq!(aclrtDeviceGetBareTgid(&mut pid), 0);
        assert_eq!(pid, std::process::id() as i32);
    }
    // The chip name is answered without a session.
    let chip = acl_notify_sim::Sim::chip_from_env().unwrap();
    // SAFETY: aclrtGetSocName returns NULL or a static NUL-terminated string.
    let name = unsafe { std::ffi::CStr::from_ptr(aclrtGetSocName()) };
    assert_eq!(name, chip.c_name());
    assert!(
        session::existing_runtime().is_none(),
        "a session was started"
    );
}

#[test]
fn cnt_argument_checks_come_first() {
    let mut info = CntRecordInfo { mode: 3, value: 0 };
    let mut wait = CntWaitInfo {
        mode: 5,
        ..CntWaitInfo::default()
    };
    let mut id = 0u32;
    // SAFETY: NULL or valid pointers to live locals.
    unsafe {
        assert_eq!(aclrtCntNotifyCreate(std::ptr::null_mut(), 0), 107000);
        let mut c = std::ptr::null_mut();
        assert_eq!(aclrtCntNotifyCreate(&mut c, 1), 107000);
        assert_eq!(aclrtCntNotifyDestroy(std::ptr::null_mut()), 107000);
        assert_eq!(
            aclrtCntNotifyRecord(to_ptr(1), std::ptr::null_mut(), std::ptr::null_mut()),
            100000
        );
        assert_eq!(
            aclrtCntNotifyRecord(std::ptr::null_mut(), std::ptr::null_mut(), &mut info),
            107000
        );
        assert_eq!(
            aclrtCntNotifyRecord(to_ptr(1), std::ptr::null_mut(), &mut info),
            107000,
            "mode 3"
        );
        assert!(recent().contains("info->mode 3"));
        assert_eq!(
            aclrtCntNotifyWaitWithTimeout(to_ptr(1), std::ptr::null_mut(), std::ptr::null_mut()),
            100000
        );
        assert_eq!(
            aclrtCntNotifyWaitWithTimeout(to_ptr(1), std::ptr::null_mut(), &mut wait),
            107000,
            "mode 5"
        );
        assert_eq!(
            aclrtCntNotifyReset(std::ptr::null_mut(), std::ptr::null_mut()),
            107000
        );
        assert_eq!(aclrtCntNotifyGetId(std::ptr::null_mut(), &mut id), 107000);
        assert_eq!(aclrtCntNotifyGetId(to_ptr(1), std::ptr::null_mut()), 107000);
    }
    assert_eq!(std::mem::size_of::<aclrtCntNotifyRecordInfo>(), 8);
    assert_eq!(std::mem::size_of::<aclrtCntNotifyWaitInfo>(), 16);
}

#[test]
fn server_pid_layout() {
    assert_eq!(std::mem::size_of::<aclrtServerPid>(), 24);
    assert_eq!(std::mem::offset_of!(aclrtServerPid, sdid), 0);
}

#[test]
fn a_panic_becomes_a_code_and_a_message() {
    let code = api("aclrtTest", || panic!("boom"));
    assert_eq!(code, 507899);
    let m = recent();
    assert!(m.contains("aclrtTest failed") && m.contains("boom"), "{m}");
}

#[test]
fn an_out_array_writes_within_its_length_and_refuses_past_it() {
    let mut buf = [7i32; 4];
    // SAFETY: a live local array of 4, of which the array is given 3.
    let a = unsafe { OutArray::new(buf.as_mut_ptr(), 3) }
        .check(|| null_arg("buf"))
        .unwrap();
    assert_eq!(a.put_all([1, 2, 3, 4, 5]), 3, "at most its length");
    assert_eq!(buf, [1, 2, 3, 7]);
    // Past the length: a defect of the library, refused (a panic, which `api` answers).
    let code = api("aclrtTest", || {
        a.put(3, 9);
        Ok(())
    });
    assert_eq!(code, 507899);
    assert!(recent().contains("element 3 written past the caller's array of 3"));
    assert_eq!(buf[3], 7, "nothing written past the length");
    // SAFETY: NULL is a valid argument.
    let none = unsafe { OutArray::<i32>::new(std::ptr::null_mut(), 8) };
    assert_eq!(
        none.check(|| null_arg("buf")).err().map(|e| e.code()),
        Some(Error::InvalidParam)
    );
}

#[test]
fn a_struct_is_written_field_by_field_and_a_string_within_its_buffer() {
    #[repr(C)]
    struct S {
        a: u8,
        b: u64,
        rsv: [u32; 2],
    }
    let mut s = S {
        a: 1,
        b: 2,
        rsv: [3, 4],
    };
    // SAFETY: a live local.
    let to = unsafe { Out::new(&raw mut s) }
        .check(|| null_arg("s"))
        .unwrap()
        .bytes();
    put_field!(to, S, b, 0x55u64);
    assert_eq!(
        (s.a, s.b, s.rsv),
        (1, 0x55, [3, 4]),
        "the other fields left as they are"
    );
    let mut name = [1 as c_char; 4];
    // SAFETY: a live local of 4 bytes.
    let n = unsafe { OutArray::new(name.as_mut_ptr(), 4) }
        .check(|| null_arg("name"))
        .unwrap();
    n.put_cstr(b"abc");
    assert_eq!(name, [97, 98, 99, 0].map(|b| b as c_char));
    let code = api("aclrtTest", || {
        n.put_cstr(b"abcd");
        Ok(())
    });
    assert_eq!(
        code, 507899,
        "no room for the NUL: refused, nothing written"
    );
    assert_eq!(name[3], 0);
}
