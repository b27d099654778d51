//! `aclInit`'s configuration file (CANN's `acl.json`): read and checked as CANN reads it, and
//! the one setting the simulator acts on, the default device.
//!
//! CANN (hicann/runtime `src/acl/aclrt_impl/acl.cpp` `aclInitImpl`, `acl_rt_impl_base.cpp`
//! `GetStrFromConfigPath`, `src/acl/common/json_parser.cpp`): a NULL or empty path means no
//! configuration; a path that does not resolve or cannot be opened is
//! `ACL_ERROR_INVALID_FILE`; an empty file is no configuration; a file that is not JSON, or
//! nests objects or arrays more than 10 deep, is `ACL_ERROR_PARSE_FILE`. Its
//! `"defaultDevice": {"default_device": "<n>"}` makes device n the device of every thread
//! that has not set one ("an implicit aclrtSetDevice inside the calls",
//! `docs/zh/FAQ/如何理解默认Device和默认Stream机制.md`); the value must be `0` or a positive
//! integer written as a string, else `ACL_ERROR_INVALID_PARAM`. Every other setting (dump,
//! profiling, error-message mode, …) is accepted and ignored.

use std::ffi::{CStr, c_char};
use std::os::unix::ffi::OsStrExt;

use acl_notify_core::Error;

use crate::errmsg::CallError;

/// How deep objects, and arrays, may nest in the file (CANN's `MAX_CONFIG_OBJ_DEPTH`,
/// `MAX_CONFIG_ARRAY_DEPTH`).
const MAX_DEPTH: usize = 10;

/// What `aclInit`'s configuration asks of the simulator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct AclConfig {
    /// `defaultDevice.default_device`: the device of threads that set none.
    pub(crate) default_device: Option<u32>,
}

/// Reads the configuration at `path` (NULL or "": none), with the file's bytes (empty without
/// a file): what CANN hands to the init callbacks (`aclInitCallbackRegister`).
///
/// Codes: 100003 the file cannot be found or read; 100006 not JSON, nested too deep, or
/// `defaultDevice` not an object of strings (**[ours]**: CANN answers a wrongly typed value
/// with an internal error); 100000 `default_device` not `0` or a positive integer.
///
/// # Safety
///
/// `path` is NULL or NUL-terminated.
pub(crate) unsafe fn read(path: *const c_char) -> Result<(AclConfig, Vec<u8>), CallError> {
    if path.is_null() {
        return Ok((AclConfig::default(), Vec::new()));
    }
    // SAFETY: non-NULL and NUL-terminated (the caller's contract).
    let bytes = unsafe { CStr::from_ptr(path) }.to_bytes();
    if bytes.is_empty() {
        return Ok((AclConfig::default(), Vec::new()));
    }
    let path = std::path::Path::new(std::ffi::OsStr::from_bytes(bytes));
    let text = std::fs::read(path).map_err(|e| {
        CallError::new(
            Error::InvalidFile,
            format!(
                "cannot read aclInit's configuration file {}: {e}",
                path.display()
            ),
        )
    })?;
    let config = parse(&text).map_err(|(code, why)| {
        CallError::new(
            code,
            format!("aclInit's configuration file {}: {why}", path.display()),
        )
    })?;
    Ok((config, text))
}

/// The configuration in `text` (the file's bytes), or the code and what is wrong.
fn parse(text: &[u8]) -> Result<AclConfig, (Error, String)> {
    let Some(js) = json(text)? else {
        return Ok(AclConfig::default());
    };
    let Some(dd) = js.get("defaultDevice") else {
        return Ok(AclConfig::default());
    };
    let Some(dd) = dd.as_object() else {
        return Err((
            Error::ParseFile,
            "\"defaultDevice\" is not an object".into(),
        ));
    };
    let Some(id) = dd.get("default_device") else {
        return Ok(AclConfig::default());
    };
    let Some(id) = id.as_str() else {
        return Err((
            Error::ParseFile,
            format!("\"default_device\" is {id}, not a string such as \"0\""),
        ));
    };
    let decimal = id == "0"
        || (id.starts_with(|c: char| ('1'..='9').contains(&c))
            && id.bytes().all(|b| b.is_ascii_digit()));
    match decimal.then(|| id.parse::<u32>().ok()).flatten() {
        Some(d) => Ok(AclConfig {
            default_device: Some(d),
        }),
        None => Err((
            Error::InvalidParam,
            format!("\"default_device\" is \"{id}\": it must be 0 or a positive integer"),
        )),
    }
}

/// The JSON of a configuration file's bytes as CANN's `JsonParser` reads it (`None`: an empty
/// file, no configuration), or the code and what is wrong: not JSON, or objects or arrays
/// nested more than [`MAX_DEPTH`] deep (100006).
pub(crate) fn json(text: &[u8]) -> Result<Option<serde_json::Value>, (Error, String)> {
    if text.is_empty() {
        return Ok(None);
    }
    let js: serde_json::Value = serde_json::from_slice(text)
        .map_err(|e| (Error::ParseFile, format!("not valid JSON: {e}")))?;
    let (objects, arrays) = depth(&js);
    if objects > MAX_DEPTH || arrays > MAX_DEPTH {
        return Err((
            Error::ParseFile,
            format!(
                "objects nest {objects} deep and arrays {arrays} deep; at most {MAX_DEPTH} each"
            ),
        ));
    }
    Ok(Some(js))
}

/// How deep objects and arrays nest in `v` (a lone `{}` is one object deep).
fn depth(v: &serde_json::Value) -> (usize, usize) {
    use serde_json::Value;
    let deepest = |items: &mut dyn Iterator<Item = &Value>| {
        items
            .map(depth)
            .fold((0, 0), |x, y| (x.0.max(y.0), x.1.max(y.1)))
    };
    match v {
        Value::Object(m) => {
            let (o, a) = deepest(&mut m.values());
            (o + 1, a)
        }
        Value::Array(items) => {
            let (o, a) = deepest(&mut items.iter());
            (o, a + 1)
        }
        _ => (0, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_without_a_default_device_configure_nothing() {
        for text in [
            "",
            "{}",
            "{\"dump\": {\"dump_path\": \"/tmp\"}}",
            "{\"defaultDevice\": {}}",
        ] {
            assert_eq!(parse(text.as_bytes()), Ok(AclConfig::default()), "{text}");
        }
    }

    #[test]
    fn the_default_device_is_a_decimal_string() {
        let cfg = |id: &str| {
            parse(format!("{{\"defaultDevice\": {{\"default_device\": {id}}}}}").as_bytes())
        };
        let device = |d| {
            Ok(AclConfig {
                default_device: Some(d),
            })
        };
        assert_eq!(cfg("\"0\""), device(0));
        assert_eq!(cfg("\"12\""), device(12));
        for bad in ["\"01\"", "\"-1\"", "\"\"", "\"1a\"", "\"99999999999\""] {
            assert_eq!(cfg(bad).map_err(|e| e.0), Err(Error::InvalidParam), "{bad}");
        }
        assert_eq!(cfg("0").map_err(|e| e.0), Err(Error::ParseFile));
    }

    #[test]
    fn malformed_or_too_deep_files_are_parse_errors() {
        assert_eq!(parse(b"{").map_err(|e| e.0), Err(Error::ParseFile));
        assert_eq!(
            parse(b"{\"defaultDevice\": 3}").map_err(|e| e.0),
            Err(Error::ParseFile)
        );
        // n objects inside each other, the outermost included; n arrays inside an object.
        let objects = |n: usize| format!("{}{{}}{}", "{\"a\":".repeat(n - 1), "}".repeat(n - 1));
        let arrays = |n: usize| format!("{{\"x\": {}{}}}", "[".repeat(n), "]".repeat(n));
        let code = |text: String| parse(text.as_bytes()).map_err(|e| e.0);
        assert_eq!(code(objects(10)), Ok(AclConfig::default()));
        assert_eq!(code(objects(11)), Err(Error::ParseFile));
        assert_eq!(code(arrays(10)), Ok(AclConfig::default()));
        assert_eq!(code(arrays(11)), Err(Error::ParseFile));
    }
}
