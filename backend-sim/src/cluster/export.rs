//! The registry entry of an export (a notify's, `export/…`, or an allocation's, `mem/…`): what
//! an owner publishes — generation, nonce, owner pid, open or whitelisted, the whitelist — and
//! how an importer reads it back and checks that its key still names it.

use acl_notify_core::whitelist::{Whitelist, WhitelistEntry};
use serde_json::{Value, json};

use super::etcd::Kv;
use super::{Shared, ipc};
use crate::SimError;

/// The nonce as the registry stores it (hex).
fn hex(nonce: [u8; 16]) -> String {
    nonce.iter().map(|b| format!("{b:02x}")).collect()
}

/// The fields every export entry has; a kind adds its own to the object.
pub(super) fn entry(
    generation: u32,
    nonce: [u8; 16],
    pid: i32,
    open: bool,
    wl: &[WhitelistEntry],
) -> Value {
    let wl: Vec<Value> = wl.iter().map(|e| json!([e.sdid, e.pid])).collect();
    json!({ "gen": generation, "nonce": hex(nonce), "pid": pid, "open": open, "wl": wl })
}

/// Why an importer's key names no published export.
pub(super) enum Stale {
    /// Nothing is published under the key.
    Absent,
    /// The entry is not JSON (its text as serde_json read it).
    Unreadable(String),
    /// Published, but for another incarnation or export (another generation or nonce).
    Mismatch,
    /// Published, but the owner (this pid) destroyed what it exported: the entry stays for
    /// the importers that held it before ([`destroyed`]), and the key imports nothing more.
    Destroyed(i32),
}

/// `entry` marked as the export of something its owner destroyed: kept published for the
/// importers that hold it, refused to every later import (CANN's owner destroy removes the
/// shared id its key names).
pub(super) fn destroyed(entry: &[u8]) -> Vec<u8> {
    let mut v: Value = serde_json::from_slice(entry).unwrap_or(Value::Null);
    if let Some(o) = v.as_object_mut() {
        o.insert("destroyed".into(), Value::Bool(true));
    }
    v.to_string().into_bytes()
}

/// Whether `entry` (a registry value) is marked [`destroyed`].
pub(super) fn is_destroyed(entry: &[u8]) -> bool {
    serde_json::from_slice::<Value>(entry).is_ok_and(|v| v["destroyed"].as_bool() == Some(true))
}

impl Stale {
    /// Says why, for a key of server `server` in SuperPod `pod`: `what` the owner publishes
    /// ("a notify", "memory"), `gone` how an entry goes away, `mismatch` what a stale key
    /// means for this kind.
    pub(super) fn explain(
        self,
        server: u32,
        pod: &str,
        (what, gone, mismatch): (&str, &str, &str),
    ) -> String {
        match self {
            Stale::Absent => format!(
                "no process of server {server} has it exported to SuperPod {pod} (an owner \
                 publishes {what} when it whitelists an inter-server entry or exports it \
                 without PID validation; or {gone})"
            ),
            Stale::Unreadable(e) => format!("its registry entry is unreadable: {e}"),
            Stale::Mismatch => mismatch.to_owned(),
            Stale::Destroyed(pid) => crate::diag::destroyed_by_owner(pid),
        }
    }
}

/// The entry published at `key` (with its etcd record), if it is the export of incarnation
/// `generation` with `nonce`; `doing` names the call in an etcd failure (507022).
pub(super) fn read(
    s: &Shared,
    key: &[u8],
    doing: &str,
    generation: u32,
    nonce: [u8; 16],
) -> Result<Result<(Value, Kv), Stale>, SimError> {
    let Some(kv) = s.etcd.get(key).map_err(|e| ipc(e, doing))? else {
        return Ok(Err(Stale::Absent));
    };
    let v: Value = match serde_json::from_slice(&kv.value) {
        Ok(v) => v,
        Err(e) => return Ok(Err(Stale::Unreadable(e.to_string()))),
    };
    if v["gen"].as_u64() != Some(u64::from(generation))
        || v["nonce"].as_str() != Some(hex(nonce).as_str())
    {
        return Ok(Err(Stale::Mismatch));
    }
    if v["destroyed"].as_bool() == Some(true) {
        return Ok(Err(Stale::Destroyed(owner_pid(&v))));
    }
    Ok(Ok((v, kv)))
}

/// The whitelist an entry carries; `None` for an open export (no PID validation). Entries
/// that are not `[sdid, pid]` are skipped.
pub(super) fn whitelist(v: &Value) -> Option<Whitelist> {
    if v["open"].as_bool() == Some(true) {
        return None;
    }
    let mut wl = Whitelist::new();
    for e in v["wl"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
        let (Some(Ok(sdid)), Some(Ok(pid))) = (
            e[0].as_u64().map(u32::try_from),
            e[1].as_i64().map(i32::try_from),
        ) else {
            continue;
        };
        let _ = wl.add(WhitelistEntry::new(sdid, pid));
    }
    Some(wl)
}

/// The owner's pid an entry names (0: none).
pub(super) fn owner_pid(v: &Value) -> i32 {
    v["pid"]
        .as_i64()
        .and_then(|p| i32::try_from(p).ok())
        .unwrap_or(0)
}
