//! A blocking client of etcd's v3 API through its JSON gateway (`/v3/kv/range`, `put`,
//! `deleterange`, `txn`, `/v3/lease/grant`, `keepalive`, `revoke`, `/v3/watch`; keys and values
//! base64 in JSON), over the `ureq` HTTP crate. Every call is bounded: it tries the endpoints in
//! turn, starting with the last one that answered, each within its share of the call's deadline
//! (ureq's global timeout covers connecting, sending and receiving), and gives up at the
//! deadline with [`EtcdError::Unreachable`] naming what each endpoint said; it never hangs. A
//! watch is a streamed answer read line by line, each read bounded (ureq's per-read timeout), so
//! a stopped watch ends within that bound.
//!
//! Why the gateway and not the `etcd-client` crate (gRPC over tonic/tokio): measured on this
//! project's 2-CPU machine, `etcd-client` 0.21 and tokio are 120 crates that cost about 50 s of
//! CPU to build (1 min wall on an idle machine), and need `protoc` (Debian's
//! `protobuf-compiler`) at build time; `ureq` 3 without its default features (no TLS, no gzip)
//! is 11 crates and about 5 s, and `serde_json` is already in the workspace. On loopback a put
//! through the gateway costs about as much as etcd's raft round and fsync (the gateway's own
//! JSON translation is tens of µs of a ~1 ms call: see the README's cluster numbers), so gRPC
//! would not make a remote record noticeably faster. The simulator's threads block anyway (a
//! stream task runs on its worker), so an async client would only add a runtime. Plain HTTP
//! only: etcd's client port without TLS, as the cluster mode documents.

use std::io::Read;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};

/// Largest answer accepted (a range over a whole prefix of this simulator stays far below).
const MAX_BODY: u64 = 16 << 20;

/// Why an etcd call failed.
#[derive(Debug, Clone)]
pub enum EtcdError {
    /// No endpoint answered in time (each endpoint's failure is in the text).
    Unreachable(String),
    /// The cluster answered, refusing the request (or with something this client cannot read).
    Refused(String),
    /// The request named a lease the cluster no longer has (it expired, or was revoked): the
    /// caller's own lease is gone.
    LeaseGone(String),
}

impl std::fmt::Display for EtcdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EtcdError::Unreachable(m) => write!(f, "etcd cluster unreachable: {m}"),
            EtcdError::Refused(m) => write!(f, "etcd refused the request: {m}"),
            EtcdError::LeaseGone(m) => write!(f, "etcd no longer has the lease: {m}"),
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
    /// The key exists.
    Exists(Vec<u8>),
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
    /// The first key from `start` up to (not including) `end`, without its value (whether
    /// any is there): a range of at most one key. In a transaction's branch it sees what the
    /// branch's operations before it wrote.
    First {
        start: Vec<u8>,
        end: Vec<u8>,
    },
    /// Deletes the key (nothing if it does not exist).
    Delete(Vec<u8>),
}

/// The outcome of a transaction.
#[derive(Debug, Clone)]
pub struct TxnResult {
    pub succeeded: bool,
    /// What each `Op::Get` (and `Op::First`) of the branch that ran found, in order.
    pub gets: Vec<Option<Kv>>,
    /// The cluster's revision after the transaction.
    pub revision: i64,
}

/// A client of one etcd cluster (a `ureq` agent: idle connections to the members are kept for
/// the next call).
#[derive(Debug)]
pub struct Etcd {
    endpoints: Vec<SocketAddr>,
    agent: ureq::Agent,
    /// Index of the endpoint that answered last (tried first next time).
    preferred: AtomicUsize,
    /// Bound on one call, across every endpoint tried.
    timeout: Duration,
}

/// How long one call may take at most, unless the cluster configuration says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3);

/// A call's bound holds at least this many tries of one request: each try gets at most
/// this share of it (1 s of the default 3 s), so a request held by a member that lost its
/// leader is sent again within the bound (see [`Etcd::call`]).
const ATTEMPTS: u32 = 3;

impl Etcd {
    /// A client of the cluster at `endpoints` (at least one), each call bounded by `timeout`.
    pub fn new(endpoints: Vec<SocketAddr>, timeout: Duration) -> Etcd {
        Etcd {
            endpoints,
            agent: agent(),
            preferred: AtomicUsize::new(0),
            timeout,
        }
    }

    /// The bound on one call.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The endpoints, in configuration order.
    pub fn endpoints(&self) -> &[SocketAddr] {
        &self.endpoints
    }

    /// Sends `body` to `path` on the first endpoint that answers, within the call's deadline.
    /// An endpoint that times out or refuses the connection is skipped for the next; an
    /// endpoint that answers with an error status is believed (another would say the same),
    /// except for the errors a member without a leader (or one shutting down) gives, which the
    /// next may not. When every endpoint failed so, the endpoints are tried again after a
    /// pause (50 ms, doubling up to 400 ms) until the deadline: a member restarted, or a
    /// leader elected, within the call's bound is a delay, not a failure.
    ///
    /// No try gets more than [`ATTEMPTS`]'s share of the bound, in any round ([`try_budget`]):
    /// a member that took the request and cannot serve it holds it silently until its own
    /// request timeout (etcd's 5 s and more, past this bound), and that happens to the
    /// requests a follower forwarded to a leader that died with them — the survivors elect
    /// another leader in about a second, but that request is lost. Sent again, it is served.
    ///
    /// The deadline counts the time the calling thread could run ([`RunDeadline`]): a
    /// process stopped mid-call (SIGSTOP, a debugger) for longer than the bound finds its
    /// try timed out on the resume (the read, interrupted, finds its own time spent), and
    /// the call sends the request again instead of failing for a wait etcd did not cause.
    fn call(&self, path: &str, body: &Value) -> Result<Value, EtcdError> {
        let mut deadline = RunDeadline::new(self.timeout);
        let bytes = body.to_string().into_bytes();
        let n = self.endpoints.len();
        let first = self.preferred.load(Ordering::Relaxed);
        let mut why = Vec::new();
        let mut pause = Duration::from_millis(50);
        // Each endpoint gets a fair share of what is left, so a silent first member cannot eat
        // the whole deadline; later rounds give members that were down or electing a leader
        // another chance. No try holds more than a third of the bound.
        for round in 0.. {
            if round > 0 {
                let left = deadline.left();
                if left.is_zero() {
                    break;
                }
                let nap = pause.min(left);
                std::thread::sleep(nap);
                deadline.step(nap);
                pause = (pause * 2).min(Duration::from_millis(400));
            }
            for k in 0..n {
                let i = (first + k) % n;
                let left = deadline.left();
                if left.is_zero() {
                    break;
                }
                let budget = try_budget(left, k, n, round, self.timeout);
                let addr = &self.endpoints[i];
                let answer = self.post(addr, path, &bytes, budget);
                deadline.step(budget);
                match answer {
                    Ok(body) => {
                        self.preferred.store(i, Ordering::Relaxed);
                        return serde_json::from_slice(&body).map_err(|e| {
                            EtcdError::Refused(format!("{path} on {addr}: bad JSON: {e}"))
                        });
                    }
                    Err(Failure::Status(s, b)) if b.contains(LEASE_NOT_FOUND) => {
                        return Err(EtcdError::LeaseGone(format!(
                            "{path} on {addr}: HTTP {s}: {}",
                            message_of(&b)
                        )));
                    }
                    Err(Failure::Status(s, b)) if !leaderless(&b) => {
                        return Err(EtcdError::Refused(format!(
                            "{path} on {addr}: HTTP {s}: {}",
                            message_of(&b)
                        )));
                    }
                    Err(Failure::Status(s, b)) => {
                        note(&mut why, format!("{addr}: HTTP {s}: {}", message_of(&b)))
                    }
                    Err(Failure::Transport(e)) => {
                        note(&mut why, format!("{addr}: {}", describe(&e)))
                    }
                }
            }
        }
        Err(EtcdError::Unreachable(format!(
            "{path}: no endpoint answered within {:.1} s{} ({})",
            self.timeout.as_secs_f64(),
            deadline.not_counted(),
            why.join("; ")
        )))
    }

    /// `POST`s `body` to `path` on `addr` and reads the whole answer, all within `budget`
    /// (connecting, sending, and receiving the head and body together: ureq's global timeout).
    fn post(
        &self,
        addr: &SocketAddr,
        path: &str,
        body: &[u8],
        budget: Duration,
    ) -> Result<Vec<u8>, Failure> {
        let mut resp = self
            .agent
            .post(format!("http://{addr}{path}"))
            .config()
            .timeout_global(Some(budget))
            .build()
            .content_type("application/json")
            .send(body)
            .map_err(Failure::Transport)?;
        let status = resp.status().as_u16();
        let answer = resp
            .body_mut()
            .with_config()
            .limit(MAX_BODY)
            .read_to_vec()
            .map_err(Failure::Transport)?;
        if !(200..300).contains(&status) {
            return Err(Failure::Status(
                status,
                String::from_utf8_lossy(&answer).into_owned(),
            ));
        }
        Ok(answer)
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

    /// Every key that was under `prefix` at `revision` (etcd's state as it was then; refused
    /// once etcd compacted that revision away).
    pub fn get_prefix_at(&self, prefix: &[u8], revision: i64) -> Result<Vec<Kv>, EtcdError> {
        let v = self.call(
            "/v3/kv/range",
            &json!({
                "key": b64(prefix),
                "range_end": b64(&prefix_end(prefix)),
                "revision": revision.to_string(),
            }),
        )?;
        Ok(kvs(&v))
    }

    /// The keys from `start` up to (not including) `end`, without their values: one range
    /// read.
    pub fn keys_in(&self, start: &[u8], end: &[u8]) -> Result<Vec<Vec<u8>>, EtcdError> {
        let v = self.call(
            "/v3/kv/range",
            &json!({ "key": b64(start), "range_end": b64(end), "keys_only": true }),
        )?;
        Ok(kvs(&v).into_iter().map(|kv| kv.key).collect())
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
                Cmp::Exists(k) => json!({
                    "key": b64(k), "target": "CREATE", "result": "GREATER", "create_revision": "0"
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
                    Op::First { start, end } => json!({ "request_range": {
                        "key": b64(start), "range_end": b64(end), "keys_only": true,
                        "limit": "1"
                    } }),
                    Op::Delete(k) => json!({ "request_delete_range": { "key": b64(k) } }),
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

    /// The id of the member that answered, and of the leader it knows (0: none).
    pub fn status(&self) -> Result<(u64, u64), EtcdError> {
        let v = self.call("/v3/maintenance/status", &json!({}))?;
        // Member ids use all 64 bits: past `int`'s i64.
        let id = |x: &Value| x.as_str().and_then(|s| s.parse().ok()).unwrap_or(0);
        Ok((id(&v["header"]["member_id"]), id(&v["leader"])))
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
    /// last event seen, so no event is lost or repeated; so is a stream silent for a bound
    /// (of the time this thread could run: `RunDeadline`) whose member then fails a read
    /// the leader must confirm (it hangs, or is cut off from the others, which commit what it
    /// never sends). Returns the next revision to watch from; an error only if `prefix`'s
    /// history from `from` is gone (compacted).
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
            // Connecting and the answer's head are bounded by the call timeout; the body is
            // read with each read bounded by `poll`, so `stop` is seen within it.
            let opened = self
                .agent
                .post(format!("http://{addr}/v3/watch"))
                .config()
                .timeout_connect(Some(self.timeout))
                .timeout_send_request(Some(self.timeout))
                .timeout_send_body(Some(self.timeout))
                .timeout_recv_response(Some(self.timeout))
                .timeout_per_read(Some(poll))
                .build()
                .content_type("application/json")
                .send(req.to_string().as_bytes());
            let mut body = match opened {
                Ok(r) if r.status().is_success() => r.into_body().into_reader(),
                _ => {
                    attempt += 1;
                    std::thread::sleep(poll.min(Duration::from_millis(100)));
                    continue;
                }
            };
            let mut pending = Vec::new();
            // The stream's silence, in time this thread could run: each quiet read is a step
            // bounded by `poll` ([`RunDeadline`]), so a process stopped (or starved) for longer
            // than the bound does not take its member's quiet stream for a dead member's on
            // the resume; a member that sends nothing to a running process still is asked.
            let mut quiet = RunDeadline::new(self.timeout);
            loop {
                if stop.load(Ordering::Relaxed) {
                    return Ok(from);
                }
                let line = match next_line(&mut body, &mut pending) {
                    Ok(Some(l)) => l,
                    // A quiet stream may be a member that hangs, or one cut off from the
                    // others: it sends nothing while the others commit. After a bound of
                    // silence, ask that member for a read the leader must confirm; if it
                    // cannot answer within a try's share, reopen on the next endpoint.
                    Err(e) if is_timeout(&e) => {
                        quiet.step(poll);
                        if !quiet.left().is_zero() {
                            continue;
                        }
                        if !self.serves(&addr, prefix) {
                            break;
                        }
                        quiet = RunDeadline::new(self.timeout);
                        continue;
                    }
                    // Ended or broken: reopen, on the next endpoint.
                    Ok(None) | Err(_) => break,
                };
                quiet = RunDeadline::new(self.timeout);
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

impl Etcd {
    /// Whether the member at `addr` serves a linearizable read (one key under `prefix`, keys
    /// only) within a try's share of the bound: one a leader confirms, so a member that hangs,
    /// or has no leader, or is cut off from the others, does not.
    fn serves(&self, addr: &SocketAddr, prefix: &[u8]) -> bool {
        let body = json!({ "key": b64(prefix), "range_end": b64(&prefix_end(prefix)),
                           "keys_only": true, "limit": "1" });
        self.post(
            addr,
            "/v3/kv/range",
            body.to_string().as_bytes(),
            self.timeout / ATTEMPTS,
        )
        .is_ok()
    }
}

/// What try `k` (from 0) of `n` endpoints in round `round` (from 0) of a call bounded by
/// `bound` may take, `left` of the bound remaining: in the first round a fair share of
/// what is left among the endpoints not yet tried, so that a silent first member cannot eat
/// the whole deadline; later, what is left; never more than [`ATTEMPTS`]'s share of the
/// bound (see [`Etcd::call`]).
fn try_budget(left: Duration, k: usize, n: usize, round: u32, bound: Duration) -> Duration {
    let share = if round == 0 {
        left / n.saturating_sub(k).max(1) as u32
    } else {
        left
    };
    share.min(bound / ATTEMPTS)
}

/// A call's deadline in time its thread could run. The call is a series of steps, each
/// bounded by itself (a try by its budget, ureq's global timeout; a pause by its length); a
/// step that ended later than its bound allowed ended late because the thread did not run
/// for the excess — the process was stopped (SIGSTOP, a debugger, job control) or waited for
/// a CPU — and the deadline moves on by as much. So a process stopped mid-call for longer
/// than the bound gets its call's remaining time on the resume instead of a timeout etcd
/// did not cause, while a member that does not answer a running process still costs the
/// call its bound: every step spends at least its own bound, or ends early by itself.
/// The monotonic clock goes on while a process is stopped, and Linux has no clock of a
/// process's stopped time; its own steps' lateness is what tells it.
#[derive(Debug)]
pub(super) struct RunDeadline {
    at: Instant,
    /// When the last step ended (or the call started).
    last: Instant,
    /// The time steps took beyond their bounds, so far.
    lost: Duration,
}

impl RunDeadline {
    pub(super) fn new(bound: Duration) -> RunDeadline {
        let now = Instant::now();
        RunDeadline {
            at: now + bound,
            last: now,
            lost: Duration::ZERO,
        }
    }

    /// What is left of the bound.
    pub(super) fn left(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    /// Notes that a step that may take `bound` (and what little the call did since the last
    /// one) ended now: any time beyond `bound` moves the deadline on.
    pub(super) fn step(&mut self, bound: Duration) {
        let now = Instant::now();
        let late = now
            .saturating_duration_since(self.last)
            .saturating_sub(bound);
        self.lost += late;
        self.at += late;
        self.last = now;
    }

    /// `" of running time (the process did not run for another 2.3 s: stopped, or waiting
    /// for a CPU)"` when the call lost a tenth of a second or more so, else nothing: for
    /// the message of a call that ran out.
    pub(super) fn not_counted(&self) -> String {
        if self.lost < Duration::from_millis(100) {
            return String::new();
        }
        format!(
            " of running time (the process did not run for another {:.1} s: stopped, or \
             waiting for a CPU)",
            self.lost.as_secs_f64()
        )
    }
}

/// The `ureq` agent every HTTP request to an etcd member goes through (this client's, and the
/// test harness's reads of a member's `/metrics`): URLs name socket addresses
/// ([`Addresses`], so no request starts a thread), no proxy, no redirect, and every status's
/// answer read by the caller, which checks it (etcd's 4xx/5xx body says why).
pub(super) fn agent() -> ureq::Agent {
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        // The endpoints are addresses on the cluster's network, never through a proxy
        // named by the environment.
        .proxy(None)
        .max_redirects(0)
        .build();
    ureq::Agent::with_parts(
        config,
        ureq::unversioned::transport::DefaultConnector::new(),
        Addresses,
    )
}

/// ureq's resolver for this client, whose URLs name socket addresses (the endpoints were
/// resolved once, by [`super::ClusterConfig::parse`]): the address itself, parsed back. ureq's
/// own resolver starts a thread for each lookup that has a timeout, every call's, to bound it,
/// even of an address; a process that may start no more (its `RLIMIT_NPROC`, the machine's
/// `pid_max`) panicked there in the middle of the call, and every call paid a thread's start.
#[derive(Debug)]
struct Addresses;

impl ureq::unversioned::resolver::Resolver for Addresses {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        _: &ureq::config::Config,
        _: ureq::unversioned::transport::NextTimeout,
    ) -> Result<ureq::unversioned::resolver::ResolvedSocketAddrs, ureq::Error> {
        let addr = uri
            .authority()
            .and_then(|a| a.as_str().parse::<SocketAddr>().ok())
            .ok_or(ureq::Error::HostNotFound)?;
        let mut found = self.empty();
        found.push(addr);
        Ok(found)
    }
}

/// Why one request to one endpoint failed.
#[derive(Debug)]
enum Failure {
    /// No connection, a reset, no answer in time, or an answer that is not HTTP.
    Transport(ureq::Error),
    /// The member answered with a non-2xx status; its body (etcd's JSON error) is kept.
    Status(u16, String),
}

/// A transport failure in a few words (ureq's timeout names the phase that ran out).
fn describe(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Timeout(phase) => format!("timed out ({phase})"),
        e => e.to_string(),
    }
}

/// The next newline-terminated message of a streamed body: `Ok(None)` at its end. A read
/// that times out is an error [`is_timeout`] recognises; a partial message stays in `pending`
/// for the next call.
fn next_line(body: &mut impl Read, pending: &mut Vec<u8>) -> std::io::Result<Option<Vec<u8>>> {
    // Where the search for the newline resumes: the bytes before it have none (a message
    // that carries memory is a megabyte or two, read 64 KiB at a time).
    let mut from = 0;
    let mut buf = vec![0u8; 64 << 10];
    loop {
        if let Some(i) = pending[from..].iter().position(|&b| b == b'\n') {
            let rest = pending.split_off(from + i + 1);
            let mut line = std::mem::replace(pending, rest);
            line.pop();
            from = 0;
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return Ok(Some(line));
        }
        from = pending.len();
        let n = body.read(&mut buf)?;
        if n == 0 {
            return Ok(None);
        }
        if (pending.len() + n) as u64 > MAX_BODY {
            return Err(std::io::Error::other("streamed message too large"));
        }
        pending.extend_from_slice(&buf[..n]);
    }
}

/// Whether a read of a streamed body found nothing within its per-read timeout (the stream
/// itself may still be good).
fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
    ) || e
        .get_ref()
        .and_then(|x| x.downcast_ref::<ureq::Error>())
        .is_some_and(|x| matches!(x, ureq::Error::Timeout(_)))
}

/// Whether an error body is one a member without a leader (or losing one) gives: worth asking
/// another member.
/// What etcd answers (gRPC code 5, HTTP 404) to a request bound to a lease it no longer has.
const LEASE_NOT_FOUND: &str = "requested lease not found";

/// Adds `what` to the reasons a call failed, once (rounds repeat them).
fn note(why: &mut Vec<String>, what: String) {
    if !why.contains(&what) {
        why.push(what);
    }
}

/// An error status of a member that cannot serve the request now but may soon (no leader, an
/// election, a gateway whose connection to its member is closing as the member shuts down:
/// "the client connection is closing", 408, or "transport is closing", 503): another member,
/// or the same one a moment later, may answer.
fn leaderless(body: &str) -> bool {
    [
        "no leader",
        "leader changed",
        "timed out",
        "unavailable",
        "is closing",
    ]
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

/// Standard base64 with padding (what the gateway's JSON carries for bytes).
pub fn b64(data: &[u8]) -> String {
    BASE64.encode(data)
}

/// Decodes [`b64`]'s format; `None` for anything else.
pub fn unb64(text: &str) -> Option<Vec<u8>> {
    BASE64.decode(text).ok()
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
        // The call ends once its 500 ms bound is spent (it says so below); a wall-clock bound
        // here only turns a call that ignores its deadline (tries until an endpoint answers,
        // or a connect's own minutes-long timeout) into a failure: 2 s ran out at load 10.
        assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
        assert!(
            t.elapsed() >= Duration::from_millis(500),
            "{:?}",
            t.elapsed()
        );
        match r {
            Err(EtcdError::Unreachable(m)) => {
                assert!(m.contains("no endpoint answered within 0.5 s"), "{m}");
                for a in &addrs {
                    assert!(m.contains(&a.to_string()), "{m}");
                }
            }
            other => panic!("{other:?}"),
        }
    }

    /// Serves one canned answer per connection on a loopback port, `parts` written with
    /// `gap` between them; the server thread keeps the connection open `linger` after.
    fn serve(parts: Vec<&'static [u8]>, gap: Duration, linger: Duration) -> SocketAddr {
        use std::io::Write;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                let parts = parts.clone();
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    let _ = s.read(&mut buf);
                    for p in parts {
                        if s.write_all(p).is_err() {
                            return;
                        }
                        std::thread::sleep(gap);
                    }
                    std::thread::sleep(linger);
                });
            }
        });
        addr
    }

    #[test]
    fn an_error_status_is_refused_with_etcd_s_message_and_the_endpoint() {
        let a = serve(
            vec![
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: 38\r\nConnection: close\r\n\r\n",
                b"{\"code\":3,\"message\":\"bad lease id 7\"}\n",
            ],
            Duration::ZERO,
            Duration::ZERO,
        );
        match Etcd::new(vec![a], Duration::from_secs(5)).put(b"k", b"v", 7) {
            Err(EtcdError::Refused(m)) => {
                assert!(
                    m.contains("bad lease id 7") && m.contains(&a.to_string()),
                    "{m}"
                )
            }
            other => panic!("{other:?}"),
        }
    }

    /// etcd's answer to a put bound to a lease it no longer has (expired or revoked): the
    /// caller's own lease is gone, which is no refusal of the request like any other.
    #[test]
    fn a_put_on_a_lease_etcd_no_longer_has_says_so() {
        let body = b"{\"error\":\"etcdserver: requested lease not found\",\"message\":\"etcdserver: requested lease not found\",\"code\":5}\n";
        let head = format!(
            "HTTP/1.1 404 Not Found\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let head: &'static [u8] = Box::leak(head.into_bytes().into_boxed_slice());
        let a = serve(vec![head, body], Duration::ZERO, Duration::ZERO);
        match Etcd::new(vec![a], Duration::from_secs(5)).put(b"k", b"v", 7) {
            Err(EtcdError::LeaseGone(m)) => {
                assert!(m.contains("requested lease not found"), "{m}")
            }
            other => panic!("{other:?}"),
        }
    }

    /// A single member restarted during a call (its port refuses connections for 300 ms, then
    /// it answers): the call waits for it within its bound instead of failing at once.
    #[test]
    fn a_member_back_within_the_bound_answers_the_call() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        let up = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            let l = std::net::TcpListener::bind(addr).unwrap();
            let (mut s, _) = l.accept().unwrap();
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            use std::io::Write;
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 27\r\nConnection: close\r\n\r\n{\"header\":{\"revision\":\"9\"}}")
                .unwrap();
        });
        let e = Etcd::new(vec![addr], Duration::from_secs(3));
        let t = Instant::now();
        assert_eq!(e.put(b"k", b"v", 0).unwrap(), 9);
        assert!(
            t.elapsed() >= Duration::from_millis(250),
            "{:?}",
            t.elapsed()
        );
        up.join().unwrap();
    }

    /// A member that took the request and holds it without an answer (a follower whose
    /// leader died with the request it forwarded: it answers only at its own request timeout,
    /// past the call's bound), though it would serve the same request sent again: the call
    /// sends it again within its bound instead of waiting there for the whole bound.
    #[test]
    fn a_request_held_by_its_member_is_sent_again_within_the_bound() {
        use std::io::Write;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for (i, s) in l.incoming().enumerate() {
                let Ok(mut s) = s else { return };
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                if i == 0 {
                    // The first request: taken, never answered (the connection stays open).
                    held.push(s);
                    continue;
                }
                let _ = s.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 27\r\nConnection: close\r\n\r\n{\"header\":{\"revision\":\"7\"}}",
                );
            }
        });
        let e = Etcd::new(vec![addr], Duration::from_secs(3));
        assert_eq!(e.put(b"k", b"v", 0).unwrap(), 7);
    }

    /// A gateway whose connection to its member is closing (the member shutting down) answers
    /// 408: the request was not served, so it is tried again, and at the deadline the call is
    /// unreachable, not refused.
    #[test]
    fn a_gateway_closing_its_connection_is_no_refusal() {
        let body = b"{\"error\":\"grpc: the client connection is closing\",\"code\":1,\"message\":\"grpc: the client connection is closing\"}\n";
        let head = format!(
            "HTTP/1.1 408 Request Timeout\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let head: &'static [u8] = Box::leak(head.into_bytes().into_boxed_slice());
        let a = serve(vec![head, body], Duration::ZERO, Duration::ZERO);
        let t = Instant::now();
        match Etcd::new(vec![a], Duration::from_millis(600)).put(b"k", b"v", 0) {
            Err(EtcdError::Unreachable(m)) => {
                assert!(m.contains("connection is closing"), "{m}");
                // Said once, though every round heard it.
                assert_eq!(m.matches("connection is closing").count(), 1, "{m}");
            }
            other => panic!("{other:?}"),
        }
        assert!(
            t.elapsed() >= Duration::from_millis(500),
            "{:?}",
            t.elapsed()
        );
    }

    /// A child of this test process ([`crate::fork::fork_child`]), killed and reaped when
    /// dropped unless [`wait`](Self::wait)ed for: a failing test leaves no process stopped.
    struct Child(Option<libc::pid_t>);

    impl Child {
        fn pid(&self) -> libc::pid_t {
            self.0.unwrap_or(0)
        }

        fn signal(&self, sig: libc::c_int) {
            // SAFETY: no memory-safety preconditions; the pid is this test's own unreaped
            // child.
            assert_eq!(unsafe { libc::kill(self.pid(), sig) }, 0);
        }

        /// Stops it (SIGSTOP) and returns once it is stopped (a 60 s bound that only turns a
        /// hang into a failure).
        fn stop(&self) {
            self.signal(libc::SIGSTOP);
            let t = Instant::now();
            while !stopped(self.pid()) {
                assert!(
                    t.elapsed() < Duration::from_secs(60),
                    "the child never stopped"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        }

        fn wait(mut self) -> Result<(), i32> {
            crate::fork::wait_child(self.0.take().unwrap_or(0))
        }
    }

    impl Drop for Child {
        fn drop(&mut self) {
            if let Some(pid) = self.0.take() {
                // SAFETY: as in `signal`; SIGKILL ends it stopped or not.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                let _ = crate::fork::wait_child(pid);
            }
        }
    }

    /// Whether process `pid` is stopped (`T` in `/proc/PID/stat`).
    fn stopped(pid: libc::pid_t) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| Some(s[s.rfind(')')? + 1..].trim_start().starts_with('T')))
            .unwrap_or(false)
    }

    /// A call in flight when its process was stopped (SIGSTOP: job control, a debugger, a
    /// script that pauses processes) for longer than the call's bound, while etcd answered:
    /// on the resume the call gets its answer, not a 507022 "no endpoint answered". Before,
    /// its bound counted the time the process was stopped: the read, interrupted at the
    /// resume, found its time spent, and so did the call.
    #[test]
    fn a_call_whose_process_was_stopped_past_its_bound_is_answered() {
        use std::io::Write;
        use std::sync::mpsc;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let (asked, request) = mpsc::channel();
        let (go, answer_now) = mpsc::channel::<()>();
        std::thread::spawn(move || {
            for (i, s) in l.incoming().enumerate() {
                let Ok(mut s) = s else { return };
                let _ = s.read(&mut [0u8; 4096]);
                if i == 0 {
                    // The first request is answered once its caller is stopped.
                    let _ = asked.send(());
                    if answer_now.recv().is_err() {
                        return;
                    }
                }
                let _ = s.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 27\r\nConnection: close\r\n\r\n{\"header\":{\"revision\":\"7\"}}",
                );
            }
        });
        let bound = Duration::from_secs(1);
        let child = Child(Some(crate::fork::fork_child(move || {
            let r = Etcd::new(vec![addr], bound).put(b"k", b"v", 0);
            assert_eq!(r.as_ref().ok(), Some(&7), "{r:?}");
            true
        })));
        // Bounds that only turn a hang into a failure.
        request
            .recv_timeout(Duration::from_secs(60))
            .expect("the child's request never came");
        child.stop();
        go.send(()).unwrap();
        // Stopped for longer than the call's whole bound.
        std::thread::sleep(bound * 2);
        child.signal(libc::SIGCONT);
        assert_eq!(
            child.wait(),
            Ok(()),
            "the stopped call failed (its error is on stderr)"
        );
    }

    /// A watch whose process was stopped for longer than the call bound, its stream quiet,
    /// does not ask the member whether it serves on the resume: the silence counts the time
    /// the process could run. Before, it counted wall time, and the resumed watch asked at
    /// once (and, had the ask run late too, reopened the stream elsewhere).
    #[test]
    fn a_watch_stopped_past_its_bound_does_not_doubt_its_quiet_member() {
        use std::io::Write;
        use std::sync::mpsc;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let (tx, connected) = mpsc::channel();
        std::thread::spawn(move || {
            for (i, s) in l.incoming().enumerate() {
                let Ok(mut s) = s else { return };
                let _ = s.read(&mut [0u8; 4096]);
                let _ = tx.send(i);
                if i == 0 {
                    // The watch: one event, then silence with the stream open.
                    let _ = s.write_all(
                        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n50\r\n{\"result\":{\"events\":[{\"kv\":{\"key\":\"YQ==\",\"value\":\"MQ==\",\"mod_revision\":\"5\"}}]}}\n\r\n",
                    );
                    std::thread::spawn(move || {
                        std::thread::sleep(Duration::from_secs(120));
                        drop(s);
                    });
                }
            }
        });
        let bound = Duration::from_secs(5);
        // The child says when it has the event (its stream quiet from then on).
        let (mut heard, mut tell) = std::os::unix::net::UnixStream::pair().unwrap();
        let child = Child(Some(crate::fork::fork_child(move || {
            let stop = AtomicBool::new(false);
            let poll = Duration::from_millis(50);
            let _ = Etcd::new(vec![addr], bound).watch(b"a", 1, &stop, poll, |_| {
                let _ = tell.write_all(b"e");
            });
            true
        })));
        // Bounds that only turn a hang into a failure.
        assert_eq!(
            connected.recv_timeout(Duration::from_secs(60)),
            Ok(0),
            "the child's watch never came"
        );
        heard
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let mut e = [0u8; 1];
        heard
            .read_exact(&mut e)
            .expect("the child never had the event");
        child.stop();
        // Stopped for longer than the bound; then a second of running, well short of it
        // (what ran before the stop was this thread's reaction, milliseconds): the member is
        // not asked. (Load can only make the child run less than that second.)
        std::thread::sleep(bound + Duration::from_secs(1));
        child.signal(libc::SIGCONT);
        let r = connected.recv_timeout(Duration::from_secs(1));
        assert!(
            r.is_err(),
            "the resumed watch asked its member (connection {r:?}) after less than its bound of running time"
        );
    }

    /// A process that may start no more threads (at its `RLIMIT_NPROC`, or the machine at
    /// `pid_max`) still gets its answer: a call starts no thread. Before, ureq's resolver
    /// started one per call to bound the name lookup (even of an address, which these
    /// endpoints are), and a refused start panicked in the middle of the call.
    #[test]
    fn a_call_starts_no_thread() {
        let addr = serve(
            vec![
                b"HTTP/1.1 200 OK\r\nContent-Length: 27\r\nConnection: close\r\n\r\n",
                b"{\"header\":{\"revision\":\"5\"}}",
            ],
            Duration::ZERO,
            Duration::ZERO,
        );
        let child = Child(Some(crate::fork::fork_child(move || {
            // SAFETY: plain system calls in the forked child (one thread); a root child drops
            // to `nobody` first, since root's thread starts ignore RLIMIT_NPROC.
            unsafe {
                if libc::geteuid() == 0 {
                    assert_eq!(libc::setgid(65534), 0);
                    assert_eq!(libc::setuid(65534), 0);
                }
                let none = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                assert_eq!(libc::setrlimit(libc::RLIMIT_NPROC, &none), 0);
            }
            assert!(
                std::thread::Builder::new().spawn(|| ()).is_err(),
                "the child can still start threads: the test proves nothing"
            );
            let r = Etcd::new(vec![addr], Duration::from_secs(10)).put(b"k", b"v", 0);
            assert_eq!(r.as_ref().ok(), Some(&5), "{r:?}");
            true
        })));
        assert_eq!(
            child.wait(),
            Ok(()),
            "the call failed (its panic is on stderr)"
        );
    }

    /// A silent first member holds a try for its share of the bound, and the next member
    /// answers in what is left. What share it gets is [`try_budget`]'s (checked exactly
    /// below); this call checks the order (the silent member tried first, for at least its
    /// share; the good one answering after it), with no upper bound of wall time: a put that
    /// the silent member held for the whole bound would fail, which is the bound that tells.
    /// Before, a 7.4 s upper bound told a third of the bound from a half, and flaked under
    /// load.
    #[test]
    fn a_silent_member_costs_its_share_and_the_next_one_answers() {
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        silent.set_nonblocking(true).unwrap();
        let good = serve(
            vec![
                b"HTTP/1.1 200 OK\r\nContent-Length: 36\r\nConnection: close\r\n\r\n",
                b"{\"header\":{\"revision\":\"42\"},\"x\":1}\n\n",
            ],
            Duration::ZERO,
            Duration::ZERO,
        );
        // A bound long enough that the good member's answer, however loaded the machine,
        // comes in what is left (a bound of 2 s failed at load 25: 1.2 s after the silent
        // member's share).
        let bound = Duration::from_secs(15);
        let e = Etcd::new(vec![silent.local_addr().unwrap(), good], bound);
        let t = Instant::now();
        // Had the silent member taken the whole bound, the put would have failed.
        assert_eq!(e.put(b"k", b"v", 0).unwrap(), 42);
        let took = t.elapsed();
        // It was tried first (its connection waits in the backlog), and held the call for
        // its share before the good member was asked.
        assert!(silent.accept().is_ok(), "the silent member was not tried");
        assert!(
            took >= bound / ATTEMPTS - Duration::from_millis(100),
            "{took:?}"
        );
        // The good member answers next time first.
        assert_eq!(e.preferred.load(Ordering::Relaxed), 1);
    }

    /// The share of a call's bound each try gets: in the first round a fair split of what is
    /// left among the endpoints not yet tried, never more than a third of the bound; later
    /// rounds what is left, as capped.
    #[test]
    fn each_try_gets_a_fair_share_but_at_most_a_third_of_the_bound() {
        let s = Duration::from_secs;
        let ms = Duration::from_millis;
        let bound = s(15);
        // Two endpoints: the first gets a third (5 s), not the half a fair split gives.
        assert_eq!(try_budget(bound, 0, 2, 0, bound), s(5));
        assert_eq!(try_budget(s(10), 1, 2, 0, bound), s(5));
        // Six: each a sixth of what is left, below the cap.
        assert_eq!(try_budget(s(12), 0, 6, 0, bound), s(2));
        assert_eq!(try_budget(s(3), 4, 6, 0, bound), ms(1500));
        // Later rounds: what is left, at most a third.
        assert_eq!(try_budget(s(12), 1, 6, 1, bound), s(5));
        assert_eq!(try_budget(ms(700), 0, 1, 3, bound), ms(700));
        // One endpoint, the default bound: a second a try.
        assert_eq!(try_budget(s(3), 0, 1, 0, s(3)), s(1));
    }

    /// A watch whose member hangs (its stream open, nothing sent, no read answered) moves to
    /// the next endpoint after a bound of silence and a failed read there, and gets the
    /// events from where it was. Before, it waited on the silent stream for ever.
    #[test]
    fn a_watch_on_a_hung_member_moves_to_the_next_one() {
        let hung = serve(
            vec![b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"],
            Duration::ZERO,
            Duration::from_secs(60),
        );
        let good = serve(
            vec![
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                b"50\r\n{\"result\":{\"events\":[{\"kv\":{\"key\":\"YQ==\",\"value\":\"MQ==\",\"mod_revision\":\"5\"}}]}}\n\r\n",
            ],
            Duration::ZERO,
            Duration::from_secs(60),
        );
        let e = Etcd::new(vec![hung, good], Duration::from_millis(900));
        let stop = AtomicBool::new(false);
        let mut seen = Vec::new();
        std::thread::scope(|sc| {
            sc.spawn(|| {
                let t = Instant::now();
                while !stop.load(Ordering::Relaxed) && t.elapsed() < Duration::from_secs(20) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                stop.store(true, Ordering::Relaxed);
            });
            e.watch(b"a", 1, &stop, Duration::from_millis(50), |ev| {
                seen.push(ev.kv.mod_revision);
                stop.store(true, Ordering::Relaxed);
            })
            .unwrap()
        });
        assert_eq!(seen, vec![5]);
    }

    #[test]
    fn a_watch_outlives_quiet_reads_and_ends_soon_after_stop() {
        // A chunked stream: one event, a pause far longer than the per-read bound, another.
        let a = serve(
            vec![
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                b"50\r\n{\"result\":{\"events\":[{\"kv\":{\"key\":\"YQ==\",\"value\":\"MQ==\",\"mod_revision\":\"5\"}}]}}\n\r\n",
                b"51\r\n{\"result\":{\"events\":[{\"type\":\"DELETE\",\"kv\":{\"key\":\"YQ==\",\"mod_revision\":\"6\"}}]}}\n\r\n",
            ],
            Duration::from_millis(400),
            Duration::from_secs(30),
        );
        let e = Etcd::new(vec![a], Duration::from_secs(2));
        let stop = AtomicBool::new(false);
        let mut seen = Vec::new();
        let t = Instant::now();
        let next = std::thread::scope(|sc| {
            sc.spawn(|| {
                std::thread::sleep(Duration::from_millis(1500));
                stop.store(true, Ordering::Relaxed);
            });
            e.watch(b"a", 1, &stop, Duration::from_millis(50), |ev| {
                seen.push((ev.delete, ev.kv.key.clone(), ev.kv.mod_revision))
            })
            .unwrap()
        });
        // Both events, once each, on one stream: a stream reopened after a quiet read would
        // have seen the first event again (the fake server sends it to every connection).
        assert_eq!(
            seen,
            vec![(false, b"a".to_vec(), 5), (true, b"a".to_vec(), 6)]
        );
        assert_eq!(next, 7);
        // The server keeps the stream open for 30 s; the watch ended on `stop` (set at
        // 1.5 s), not when the server closed it. A bound short of the server's 30 s, not of
        // how soon after `stop` (2.5 s, which load could run out).
        let took = t.elapsed();
        assert!(took < Duration::from_secs(20), "{took:?}");
    }
}
