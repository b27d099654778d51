//! `aclsysGetVersionStr` / `aclsysGetVersionNum` (and the deprecated `aclsysGetCANNVersion`,
//! which splits it into parts): the version of an installed CANN package,
//! read from its `version.info` file exactly where CANN reads it (hicann/runtime
//! `src/acl/aclrt_impl/acl.cpp`, `GetPkgVersionContent` and `CalculateVersionNum`):
//!
//! - `driver` and `firmware`: `<path>/<pkg>/version.info`, `<path>` from the line
//!   `Driver_Install_Path_Param=<path>` (`Firmware_Install_Path_Param=`) of
//!   `/etc/ascend_install.info`;
//! - any other package: `$ASCEND_HOME_PATH/share/info/<pkg>/version.info`;
//! - a name with `-` is also tried with `_` instead (and the other way round).
//!
//! The version is what follows `Version=` on the first line holding it, trimmed. The simulator
//! installs no package: a program gets an answer when the machine (or a test) has the file.

use std::ffi::{CStr, c_char};
use std::path::PathBuf;

use acl_notify_core::Error;

use crate::errmsg::{CallError, null_arg};
use crate::ffi::{Out, OutArray, aclError, api};

/// `ACL_PKG_VERSION_MAX_SIZE`: the size of the caller's `versionStr` buffer, NUL included.
const VERSION_MAX: usize = 128;

fn invalid_file(reason: impl core::fmt::Display) -> CallError {
    CallError::new(Error::InvalidFile, reason)
}

/// The `Version=` value of one `version.info` file.
fn read_version(path: &std::path::Path) -> Result<String, CallError> {
    let text = std::fs::read(path).map_err(|e| {
        invalid_file(format!(
            "cannot read {}: {e} (is the package installed?)",
            path.display()
        ))
    })?;
    let text = String::from_utf8_lossy(&text);
    let v = text
        .lines()
        .find_map(|l| l.find("Version=").map(|i| l[i + "Version=".len()..].trim()))
        .unwrap_or("");
    if v.is_empty() {
        return Err(invalid_file(format!(
            "{} has no `Version=` value",
            path.display()
        )));
    }
    Ok(v.to_owned())
}

/// Where `pkg`'s `version.info` is.
fn version_file(pkg: &str) -> Result<PathBuf, CallError> {
    let key = match pkg {
        "driver" => Some("Driver_Install_Path_Param="),
        "firmware" => Some("Firmware_Install_Path_Param="),
        _ => None,
    };
    if let Some(key) = key {
        const INSTALL: &str = "/etc/ascend_install.info";
        let text = std::fs::read(INSTALL)
            .map_err(|e| invalid_file(format!("cannot read {INSTALL}: {e}")))?;
        let dir = String::from_utf8_lossy(&text)
            .lines()
            .filter_map(|l| l.find(key).map(|i| l[i + key.len()..].to_owned()))
            .find(|p| !p.is_empty())
            .ok_or_else(|| invalid_file(format!("{INSTALL} has no `{key}` line")))?;
        return Ok(PathBuf::from(format!("{dir}/{pkg}/version.info")));
    }
    let home = std::env::var_os("ASCEND_HOME_PATH")
        .ok_or_else(|| invalid_file("ASCEND_HOME_PATH is not set"))?;
    let home = std::fs::canonicalize(&home).map_err(|e| {
        invalid_file(format!(
            "ASCEND_HOME_PATH {}: {e}",
            PathBuf::from(&home).display()
        ))
    })?;
    let mut path = home.into_os_string();
    path.push(format!("/share/info/{pkg}/version.info"));
    Ok(PathBuf::from(path))
}

/// The version string of package `pkg`, trying the `-`/`_` spelling too (CANN's
/// `GetPkgVersionContent`).
fn package_version(pkg: &str) -> Result<String, CallError> {
    let alt = if pkg.contains('-') {
        Some(pkg.replace('-', "_"))
    } else if pkg.contains('_') {
        Some(pkg.replace('_', "-"))
    } else {
        None
    };
    let first = version_file(pkg).and_then(|p| read_version(&p));
    match (first, alt) {
        (Ok(v), _) => Ok(v),
        (Err(e), None) => Err(e),
        (Err(_), Some(alt)) => version_file(&alt).and_then(|p| read_version(&p)),
    }
}

fn parse_error(v: &str, what: &str) -> CallError {
    CallError::new(
        Error::AclInternalError,
        format!("version `{v}` cannot be turned into a number: {what}"),
    )
}

/// CANN's `CalculateVersionNum`: `major.minor.patch[<pre>]` as major·10⁷ + minor·10⁵ +
/// patch·10³, a pre-release suffix (`alpha`, `beta`, `rc`, at most one separator `.`/`-`
/// before it, then an optional number after at most one separator) lowering it by 300, 200 or
/// 100 and raising it by that number.
pub(crate) fn version_number(v: &str) -> Result<i32, CallError> {
    let num = |s: &str| s.parse::<i32>().ok();
    let dot1 = v.find('.').filter(|&i| i > 0);
    let dot1 = dot1.ok_or_else(|| parse_error(v, "no major version"))?;
    let dot2 = v[dot1 + 1..]
        .find('.')
        .map(|i| i + dot1 + 1)
        .filter(|&i| i > dot1 + 1)
        .ok_or_else(|| parse_error(v, "no minor version"))?;
    let digits = v[dot2 + 1..].bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return Err(parse_error(v, "no patch version"));
    }
    let end = dot2 + 1 + digits;
    let (Some(major), Some(minor), Some(patch)) = (
        num(&v[..dot1]),
        num(&v[dot1 + 1..dot2]),
        num(&v[dot2 + 1..end]),
    ) else {
        return Err(parse_error(v, "a part is not a number"));
    };
    let base = major
        .wrapping_mul(10_000_000)
        .wrapping_add(minor.wrapping_mul(100_000))
        .wrapping_add(patch.wrapping_mul(1000));
    let suffix = &v[end..];
    if suffix.is_empty() {
        return Ok(base);
    }
    let lower = suffix.to_ascii_lowercase();
    let (at, len, weight) = [("alpha", 300), ("beta", 200), ("rc", 100)]
        .iter()
        .find_map(|&(k, w)| lower.find(k).map(|i| (i, k.len(), w)))
        .ok_or_else(|| parse_error(v, "unknown pre-release suffix"))?;
    if at > 1 {
        return Err(parse_error(
            v,
            "more than one separator before the pre-release",
        ));
    }
    let rest = &suffix[at + len..];
    let pre = if rest.is_empty() {
        0
    } else {
        let d = rest
            .bytes()
            .position(|c| c.is_ascii_digit())
            .filter(|&d| d <= 1 && rest.as_bytes()[..d].iter().all(|&c| c == b'.' || c == b'-'))
            .ok_or_else(|| parse_error(v, "bad pre-release number"))?;
        // CANN parses with `std::stoi`, which takes a sign; `rest[d..]` starts with a digit.
        num(&rest[d..]).ok_or_else(|| parse_error(v, "bad pre-release number"))?
    };
    Ok(base.wrapping_sub(weight).wrapping_add(pre))
}

/// Reads `pkg_name` (checked non-NULL).
///
/// # Safety
///
/// `pkg_name` is NUL-terminated.
unsafe fn package_name(pkg_name: *const c_char) -> String {
    // SAFETY: the caller's contract.
    unsafe { CStr::from_ptr(pkg_name) }
        .to_string_lossy()
        .into_owned()
}

/// `aclError aclsysGetVersionStr(char *pkgName, char *versionStr)`: copies package
/// `pkgName`'s version (see the module) into `versionStr` (`ACL_PKG_VERSION_MAX_SIZE` bytes).
///
/// Codes: 100000 a pointer NULL (`versionStr` checked first); 100003 no such package, no
/// `ASCEND_HOME_PATH`, or a file without a version; 500000 a version too long for the buffer.
///
/// # Safety
///
/// `pkg_name` is NULL or NUL-terminated; `version_str` is NULL or valid for writing 128 bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclsysGetVersionStr(
    pkg_name: *mut c_char,
    version_str: *mut c_char,
) -> aclError {
    // SAFETY: NULL or writable for `ACL_PKG_VERSION_MAX_SIZE` bytes, by the caller's contract.
    let out = unsafe { OutArray::new(version_str, VERSION_MAX) };
    api("aclsysGetVersionStr", || {
        let out = out.check(|| null_arg("versionStr"))?;
        if pkg_name.is_null() {
            return Err(null_arg("pkgName"));
        }
        // SAFETY: non-NULL; the caller's contract.
        let v = package_version(&unsafe { package_name(pkg_name) })?;
        if v.len() >= VERSION_MAX {
            return Err(CallError::new(
                Error::AclInternalError,
                format!("version `{v}` does not fit in {VERSION_MAX} bytes"),
            ));
        }
        out.put_cstr(v.as_bytes());
        Ok(())
    })
}

/// `aclError aclsysGetVersionNum(char *pkgName, int32_t *versionNum)`: package `pkgName`'s
/// version as a number (see [`version_number`]).
///
/// Codes: 100000 a pointer NULL (`versionNum` checked first); 100003 as
/// `aclsysGetVersionStr`; 500000 a version that is not `major.minor.patch[<pre-release>]`.
///
/// # Safety
///
/// `pkg_name` is NULL or NUL-terminated; `version_num` is NULL or valid for writing an
/// `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclsysGetVersionNum(
    pkg_name: *mut c_char,
    version_num: *mut i32,
) -> aclError {
    api("aclsysGetVersionNum", || {
        // SAFETY: `version_num` is NULL or writable, by the caller's contract.
        unsafe { Out::new(version_num) }.write(
            || null_arg("versionNum"),
            || {
                if pkg_name.is_null() {
                    return Err(null_arg("pkgName"));
                }
                // SAFETY: non-NULL; the caller's contract.
                let v = package_version(&unsafe { package_name(pkg_name) })?;
                let n = version_number(&v)?;
                Ok(n)
            },
        )
    })
}

/// `aclCANNPackageVersion`: the version and its four parts, each NUL-terminated.
#[repr(C)]
pub struct aclCANNPackageVersion {
    version: [c_char; VERSION_MAX],
    major: [c_char; PART_MAX],
    minor: [c_char; PART_MAX],
    release: [c_char; PART_MAX],
    patch: [c_char; PART_MAX],
    reserved: [c_char; VERSION_MAX],
}

/// `ACL_PKG_VERSION_PARTS_MAX_SIZE`.
const PART_MAX: usize = 64;

/// The package `aclsysGetCANNVersion` reads for each `aclCANNPackageName` (hicann/runtime
/// `src/acl/aclrt_impl/acl.cpp`, `kMapToPkgName`).
fn cann_package(name: i32) -> Option<&'static str> {
    Some(match name {
        0 | 1 => "runtime",
        2 => "bisheng-compiler",
        3 => "hccl",
        4 => "oam-tools",
        5 | 6 => "ops-legacy",
        7 => "driver",
        _ => return None,
    })
}

/// CANN's `ConvertVersion` and `FillinPackageVersion`: `8.0.RC1-beta.1` becomes `8.0.RC1.beta1`
/// (the first `-` a `.`, the dots after it dropped), split at each `.` into at least two
/// non-empty parts (missing ones `0`), each cut to its buffer; `None` if it has fewer parts or
/// an empty one.
fn package_parts(v: &str) -> Option<(String, [String; 4])> {
    let v = match v.split_once('-') {
        Some((a, b)) => format!("{a}.{}", b.replace('.', "")),
        None => v.to_owned(),
    };
    let mut parts: Vec<String> = v.split('.').map(str::to_owned).collect();
    if parts.len() < 2 {
        return None;
    }
    while parts.len() < 4 {
        parts.push("0".into());
    }
    if v.is_empty() || parts[..4].iter().any(String::is_empty) {
        return None;
    }
    let [a, b, c, d] = [&parts[0], &parts[1], &parts[2], &parts[3]].map(|p| p.clone());
    Some((v, [a, b, c, d]))
}

/// Copies `s`, cut to `N - 1` bytes, into `buf`, NUL-terminated.
fn put<const N: usize>(buf: &mut [c_char; N], s: &str) {
    for (d, b) in buf.iter_mut().zip(s.bytes().take(N - 1)) {
        *d = b as c_char;
    }
}

/// `aclError aclsysGetCANNVersion(aclCANNPackageName name, aclCANNPackageVersion *version)`
/// (deprecated in CANN for `aclsysGetVersionStr`): package `name`'s version, read as
/// `aclsysGetVersionStr` reads it (`runtime` for `ACL_PKG_NAME_CANN` and `…_RUNTIME`,
/// `bisheng-compiler`, `hccl`, `oam-tools`, `ops-legacy` for `…_OPP` and `…_OPP_KERNEL`, and
/// the driver), then split as [`package_parts`] says; `*version` is zeroed first.
///
/// Codes: 100000 `version` NULL, or a name `aclCANNPackageName` lacks; 100003 no such file,
/// no `ASCEND_HOME_PATH`, no version, or one with fewer than two parts or an empty one.
///
/// # Safety
///
/// `version` is NULL or valid for writing an `aclCANNPackageVersion`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclsysGetCANNVersion(
    name: i32,
    version: *mut aclCANNPackageVersion,
) -> aclError {
    // SAFETY: NULL or writable, by the caller's contract.
    let version = unsafe { Out::new(version) };
    api("aclsysGetCANNVersion", || {
        let version = version.check(|| null_arg("version"))?;
        let pkg = cann_package(name).ok_or_else(|| {
            CallError::new(
                Error::InvalidParam,
                format!("name {name} is not an aclCANNPackageName (0 to 7)"),
            )
        })?;
        let v = package_version(pkg)?;
        let (whole, parts) = package_parts(&v).ok_or_else(|| {
            invalid_file(format!(
                "version `{v}` of package {pkg} is not at least two non-empty parts separated by \
                 dots"
            ))
        })?;
        // Zeroed, then the parts (the reserved bytes stay 0), written whole.
        let mut out = aclCANNPackageVersion {
            version: [0; VERSION_MAX],
            major: [0; PART_MAX],
            minor: [0; PART_MAX],
            release: [0; PART_MAX],
            patch: [0; PART_MAX],
            reserved: [0; VERSION_MAX],
        };
        put(&mut out.version, &whole);
        for (buf, p) in [
            &mut out.major,
            &mut out.minor,
            &mut out.release,
            &mut out.patch,
        ]
        .into_iter()
        .zip(&parts)
        {
            put(buf, p);
        }
        version.put(out);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::{package_parts, version_number};

    #[test]
    fn package_parts_as_cann_splits_them() {
        let p = |v: &str| package_parts(v).map(|(w, p)| (w, p.to_vec()));
        assert_eq!(
            p("8.0.RC1-beta.1"),
            Some((
                "8.0.RC1.beta1".into(),
                vec!["8", "0", "RC1", "beta1"]
                    .into_iter()
                    .map(String::from)
                    .collect()
            ))
        );
        assert_eq!(
            p("9.1"),
            Some((
                "9.1".into(),
                vec!["9", "1", "0", "0"]
                    .into_iter()
                    .map(String::from)
                    .collect()
            ))
        );
        assert_eq!(p("9.1.0.5.7").map(|x| x.1.len()), Some(4));
        for bad in ["", "9", "9..1", ".1", "9.", "-1"] {
            assert_eq!(p(bad), None, "{bad}");
        }
    }

    #[test]
    fn numbers_as_cann_computes_them() {
        assert_eq!(version_number("8.0.0").unwrap(), 80_000_000);
        assert_eq!(version_number("8.1.2").unwrap(), 80_102_000);
        assert_eq!(version_number("8.0.RC1").ok(), None);
        assert_eq!(
            version_number("8.0.0.alpha001").unwrap(),
            80_000_000 - 300 + 1
        );
        assert_eq!(
            version_number("8.0.0-beta.2").unwrap(),
            80_000_000 - 200 + 2
        );
        assert_eq!(version_number("8.0.0rc3").unwrap(), 80_000_000 - 100 + 3);
        assert_eq!(version_number("8.0.0.rc").unwrap(), 80_000_000 - 100);
        for bad in [
            "",
            "8",
            ".0.0",
            "8..0",
            "8.0.",
            "8.0.0x",
            "8.0.0..rc1",
            "8.0.0rc1a",
        ] {
            assert!(version_number(bad).is_err(), "{bad}");
        }
    }
}
