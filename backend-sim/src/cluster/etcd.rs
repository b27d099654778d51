//! A blocking client of etcd's v3 API through its JSON gateway (`/v3/kv/range`, `put`,
//! `deleterange`, `txn`, `/v3/lease/grant`, `keepalive`, `revoke`, `/v3/watch`; keys and values
//! base64 in JSON), over the module `http` beside it. Every call is bounded: it tries the endpoints in
//! turn, starting with the last one that answered, and gives up at its deadline with
//! [`EtcdError::Unreachable`] naming what each endpoint said; it never hangs.
//!
//! Why the gateway and not the `etcd-client` crate (gRPC over tonic/tokio): measured on this
//! project's 2-CPU machine, `etcd-client` 0.21 and tokio are 120 crates that cost about 50 s of
//! CPU to build (1 min wall on an idle machine), and need `protoc` (Debian's
//! `protobuf-compiler`) at build time; a `ureq` 3 client without TLS is 11 crates and 5 s. This
//! client is two files and `serde_json` (already in the workspace). On loopback a put through
//! the gateway costs about as much as etcd's raft round and fsync (the gateway's own JSON
//! translation is tens of µs of a ~1 ms call: see the README's cluster numbers), so gRPC would
//! not make a remote record noticeably faster. The simulator's threads block anyway (a stream
//! task runs on its worker), so an async client would only add a runtime.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::http::{self, HttpError};

/// Why an etcd call failed.
#[derive(Debug, Clone)]
pub enum EtcdError {
    /// No endpoint answered in time (each endpoint's failure is in the text).
    Unreachable(String),
    /// The cluster answered, refusing the request (or with something this client cannot read).
    Refused(String),
}

impl std::fmt::Display for EtcdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EtcdError::Unreachable(m) => write!(f, "etcd cluster unreachable: {m}"),
            EtcdError::Refused(m) => write!(f, "etcd refused the request: {m}"),
        }
    }
}

/// One key-value pair as a range or a watch gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kv {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub create_revision: i64,
    pub mod_revision: i64,
    pub lease: i64,
}

/// One event of a watch.
#[derive(Debug, Clone)]
pub struct Event {
    /// `true` for a delete (then `kv.value` is empty).
    pub delete: bool,
    pub kv: Kv,
}

/// A condition of a transaction ([`Etcd::txn`]).
#[derive(Debug, Clone)]
pub enum Cmp {
    /// The key does not exist.
    Missing(Vec<u8>),
    /// The key exists with this create revision (the same incarnation of it).
    CreatedAt(Vec<u8>, i64),
}

/// An operation of a transaction ([`Etcd::txn`]).
#[derive(Debug, Clone)]
pub enum Op {
    Put {
        key: Vec<u8>,
        value: Vec<u8>,
        lease: i64,
    },
    Get(Vec<u8>),
}

/// The outcome of a transaction.
#[derive(Debug, Clone)]
pub struct TxnResult {
    pub succeeded: bool,
    /// What each `Op::Get` of the branch that ran found, in order.
    pub gets: Vec<Option<Kv>>,
    /// The cluster's revision after the transaction.
    pub revision: i64,
}

/// A connection to one etcd cluster (no open sockets between calls: each call connects).
#[derive(Debug)]
pub struct Etcd {
    endpoints: Vec<SocketAddr>,
    /// Index of the endpoint that answered last (tried first next time).
    preferred: AtomicUsize,
    /// Bound on one call, across every endpoint tried.
    timeout: Duration,
}

/// How long one call may take at most, unless the cluster configuration says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3);

impl Etcd {
    /// A client of the cluster at `endpoints` (at least one), each call bounded by `timeout`.
    pub fn new(endpoints: Vec<SocketAddr>, timeout: Duration) -> Etcd {
        Etcd {
            endpoints,
            preferred: AtomicUsize::new(0),
            timeout,
        }
    }

    /// The endpoints, in configuration order.
    pub fn endpoints(&self) -> &[SocketAddr] {
        &self.endpoints
    }

    /// Sends `body` to `path` on the first endpoint that answers, within the call's deadline.
    /// An endpoint that times out or refuses the connection is skipped for the next; an
    /// endpoint that answers with an error status is believed (another would say the same),
    /// except for the errors a member without a leader gives, which the next may not.
    fn call(&self, path: &str, body: &Value) -> Result<Value, EtcdError> {
        let deadline = Instant::now() + self.timeout;
        let bytes = body.to_string().into_bytes();
        let n = self.endpoints.len();
        let first = self.preferred.load(Ordering::Relaxed);
        let mut why = Vec::new();
        // Each endpoint gets a fair share of what is left, so a silent first member cannot eat
        // the whole deadline; a second round gives a member that was electing a leader another
        // chance.
        for round in 0..2 {
            for k in 0..n {
                let i = (first + k) % n;
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                let share = deadline.saturating_duration_since(now) / (n - k) as u32;
                let mine = if round == 0 { now + share } else { deadline };
                let addr = &self.endpoints[i];
                let answer =
                    http::post(addr, path, &bytes, mine).and_then(|mut r| r.read_all(mine));
                match answer {
                    Ok(body) => {
                        self.preferred.store(i, Ordering::Relaxed);
                        return serde_json::from_slice(&body).map_err(|e| {
                            EtcdError::Refused(format!("{path} on {addr}: bad JSON: {e}"))
                        });
                    }
                    Err(HttpError::Status(s, b)) if !leaderless(&b) => {
                        return Err(EtcdError::Refused(format!(
                            "{path} on {addr}: HTTP {s}: {}",
                            message_of(&b)
                        )));
                    }
                    Err(e) => why.push(format!("{addr}: {e}")),
                }
            }
        }
        why.dedup();
        Err(EtcdError::Unreachable(format!(
            "{path}: no endpoint answered within {:.1} s ({})",
            self.timeout.as_secs_f64(),
            why.join("; ")
        )))
    }

    /// The value of `key`, if it exists.
    pub fn get(&self, key: &[u8]) -> Result<Option<Kv>, EtcdError> {
        let v = self.call("/v3/kv/range", &json!({ "key": b64(key) }))?;
        Ok(kvs(&v).into_iter().next())
    }

    /// Every key under `prefix`, and the revision the range was read at.
    pub fn get_prefix(&self, prefix: &[u8]) -> Result<(Vec<Kv>, i64), EtcdError> {
        let v = self.call(
            "/v3/kv/range",
            &json!({ "key": b64(prefix), "range_end": b64(&prefix_end(prefix)) }),
        )?;
        Ok((kvs(&v), revision(&v)))
    }

    /// Writes `key` (bound to `lease` unless 0); the revision it got.
    pub fn put(&self, key: &[u8], value: &[u8], lease: i64) -> Result<i64, EtcdError> {
        let mut req = json!({ "key": b64(key), "value": b64(value) });
        if lease != 0 {
            req["lease"] = json!(lease.to_string());
        }
        let v = self.call("/v3/kv/put", &req)?;
        Ok(revision(&v))
    }

    /// Deletes `key`; whether it existed.
    pub fn delete(&self, key: &[u8]) -> Result<bool, EtcdError> {
        let v = self.call("/v3/kv/deleterange", &json!({ "key": b64(key) }))?;
        Ok(int(&v["deleted"]) > 0)
    }

    /// Runs `success` if every condition of `when` holds, else `failure`, atomically.
    pub fn txn(
        &self,
        when: &[Cmp],
        success: &[Op],
        failure: &[Op],
    ) -> Result<TxnResult, EtcdError> {
        let cmp: Vec<Value> = when
            .iter()
            .map(|c| match c {
                Cmp::Missing(k) => json!({
                    "key": b64(k), "target": "CREATE", "result": "EQUAL", "create_revision": "0"
                }),
                Cmp::CreatedAt(k, rev) => json!({
                    "key": b64(k), "target": "CREATE", "result": "EQUAL",
                    "create_revision": rev.to_string()
                }),
            })
            .collect();
        let ops = |ops: &[Op]| -> Vec<Value> {
            ops.iter()
                .map(|o| match o {
                    Op::Put { key, value, lease } => {
                        let mut p = json!({ "key": b64(key), "value": b64(value) });
                        if *lease != 0 {
                            p["lease"] = json!(lease.to_string());
                        }
                        json!({ "request_put": p })
                    }
                    Op::Get(k) => json!({ "request_range": { "key": b64(k) } }),
                })
                .collect()
        };
        let v = self.call(
            "/v3/kv/txn",
            &json!({ "compare": cmp, "success": ops(success), "failure": ops(failure) }),
        )?;
        let gets = v["responses"]
            .as_array()
            .map(|rs| {
                rs.iter()
                    .filter(|r| r.get("response_range").is_some())
                    .map(|r| kvs(&r["response_range"]).into_iter().next())
                    .collect()
            })
            .unwrap_or_default();
        Ok(TxnResult {
            succeeded: v["succeeded"].as_bool().unwrap_or(false),
            gets,
            revision: revision(&v),
        })
    }

    /// A new lease of `ttl` seconds; its id.
    pub fn lease_grant(&self, ttl: u32) -> Result<i64, EtcdError> {
        let v = self.call("/v3/lease/grant", &json!({ "TTL": ttl.to_string() }))?;
        let id = int(&v["ID"]);
        if id == 0 {
            return Err(EtcdError::Refused(format!(
                "lease grant gave no id: {}",
                v["error"]
            )));
        }
        Ok(id)
    }

    /// Renews lease `id`; the TTL it has now, 0 if it had already expired.
    pub fn lease_keepalive(&self, id: i64) -> Result<i64, EtcdError> {
        let v = self.call("/v3/lease/keepalive", &json!({ "ID": id.to_string() }))?;
        Ok(int(&v["result"]["TTL"]))
    }

    /// Revokes lease `id` (its keys go at once).
    pub fn lease_revoke(&self, id: i64) -> Result<(), EtcdError> {
        match self.call("/v3/lease/revoke", &json!({ "ID": id.to_string() })) {
            // Already gone: as good as revoked.
            Err(EtcdError::Refused(m)) if m.contains("not found") => Ok(()),
            r => r.map(drop),
        }
    }

    /// Watches every key under `prefix` from revision `from` on, calling `on_event` for each
    /// event in revision order, until `stop` is set (checked at least every `poll`). A broken
    /// stream (its member died) is reopened on another endpoint from the revision after the
    /// last event seen, so no event is lost or repeated. Returns the next revision to watch
    /// from; an error only if `prefix`'s history from `from` is gone (compacted).
    pub fn watch(
        &self,
        prefix: &[u8],
        mut from: i64,
        stop: &AtomicBool,
        poll: Duration,
        mut on_event: impl FnMut(Event),
    ) -> Result<i64, EtcdError> {
        let n = self.endpoints.len();
        let mut attempt = 0usize;
        while !stop.load(Ordering::Relaxed) {
            let i = (self.preferred.load(Ordering::Relaxed) + attempt) % n;
            let addr = self.endpoints[i];
            let req = json!({ "create_request": {
                "key": b64(prefix), "range_end": b64(&prefix_end(prefix)),
                "start_revision": from.to_string(), "progress_notify": true
            }});
            let deadline = Instant::now() + self.timeout;
            let mut r = match http::post(&addr, "/v3/watch", req.to_string().as_bytes(), deadline) {
                Ok(r) => r,
                Err(_) => {
                    attempt += 1;
                    std::thread::sleep(poll.min(Duration::from_millis(100)));
                    continue;
                }
            };
            let mut pending = Vec::new();
            loop {
                if stop.load(Ordering::Relaxed) {
                    r.close();
                    return Ok(from);
                }
                let line = match r.next_line(&mut pending, poll) {
                    Ok(Some(l)) => l,
                    Err(e) if http::is_timeout(&e) => continue,
                    // Ended or broken: reopen, on the next endpoint.
                    Ok(None) | Err(_) => break,
                };
                let Ok(msg) = serde_json::from_slice::<Value>(&line) else {
                    break;
                };
                let res = &msg["result"];
                if int(&res["compact_revision"]) > 0 {
                    return Err(EtcdError::Refused(format!(
                        "watch of {}: history before revision {} was compacted",
                        String::from_utf8_lossy(prefix),
                        int(&res["compact_revision"])
                    )));
                }
                if res["canceled"].as_bool() == Some(true) || msg.get("error").is_some() {
                    break;
                }
                for ev in res["events"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
                    let kv = kv_of(&ev["kv"]);
                    from = from.max(kv.mod_revision + 1);
                    on_event(Event {
                        delete: ev["type"].as_str() == Some("DELETE"),
                        kv,
                    });
                }
                // A member that answers is a good one to go back to.
                self.preferred.store(i, Ordering::Relaxed);
                attempt = 0;
            }
            attempt += 1;
        }
        Ok(from)
    }
}

/// Whether an error body is one a member without a leader (or losing one) gives: worth asking
/// another member.
fn leaderless(body: &str) -> bool {
    ["no leader", "leader changed", "timed out", "unavailable"]
        .iter()
        .any(|m| body.contains(m))
}

fn message_of(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| body.trim().to_owned())
}

/// The first key after every key that starts with `prefix` (etcd's `range_end` for a prefix).
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// etcd's JSON carries 64-bit numbers as strings; absent means 0.
fn int(v: &Value) -> i64 {
    match v {
        Value::String(s) => s.parse().unwrap_or(0),
        Value::Number(n) => n.as_i64().unwrap_or(0),
        _ => 0,
    }
}

fn revision(v: &Value) -> i64 {
    int(&v["header"]["revision"])
}

fn kv_of(v: &Value) -> Kv {
    let bytes = |f: &str| v[f].as_str().and_then(unb64).unwrap_or_default();
    Kv {
        key: bytes("key"),
        value: bytes("value"),
        create_revision: int(&v["create_revision"]),
        mod_revision: int(&v["mod_revision"]),
        lease: int(&v["lease"]),
    }
}

fn kvs(v: &Value) -> Vec<Kv> {
    v["kvs"]
        .as_array()
        .map(|a| a.iter().map(kv_of).collect())
        .unwrap_or_default()
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding (what the gateway's JSON carries for bytes).
pub fn b64(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for k in 0..4 {
            if k <= c.len() {
                out.push(char::from(B64[(n >> (18 - 6 * k)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Decodes [`b64`]'s format; `None` for anything else.
pub fn unb64(text: &str) -> Option<Vec<u8>> {
    let t = text.trim_end_matches('=').as_bytes();
    if !text.len().is_multiple_of(4) || text.len() - t.len() > 2 {
        return None;
    }
    let mut out = Vec::with_capacity(t.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &ch in t {
        let v = B64.iter().position(|&b| b == ch)? as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_and_refuses_garbage() {
        for s in ["", "f", "fo", "foo", "foob", "fooba", "foobar"] {
            assert_eq!(unb64(&b64(s.as_bytes())).unwrap(), s.as_bytes());
        }
        assert_eq!(b64(b"foobar"), "Zm9vYmFy");
        assert_eq!(b64(b"fo"), "Zm8=");
        assert_eq!(unb64("Zm9v!mFy"), None);
        assert_eq!(unb64("Zm9"), None);
        assert_eq!(unb64("Z==="), None);
    }

    #[test]
    fn prefix_end_is_the_next_key_after_the_prefix() {
        assert_eq!(prefix_end(b"a/b"), b"a/c");
        assert_eq!(prefix_end(b"a\xff"), b"b");
        assert_eq!(prefix_end(b"\xff"), vec![0]);
    }

    #[test]
    fn an_unreachable_cluster_fails_within_the_timeout_naming_each_endpoint() {
        // Two ports nobody listens on (bound, then closed).
        let addrs: Vec<SocketAddr> = (0..2)
            .map(|_| {
                std::net::TcpListener::bind("127.0.0.1:0")
                    .unwrap()
                    .local_addr()
                    .unwrap()
            })
            .collect();
        let e = Etcd::new(addrs.clone(), Duration::from_millis(500));
        let t = Instant::now();
        let r = e.put(b"k", b"v", 0);
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        match r {
            Err(EtcdError::Unreachable(m)) => {
                for a in &addrs {
                    assert!(m.contains(&a.to_string()), "{m}");
                }
            }
            other => panic!("{other:?}"),
        }
    }
}
