//! A remote record carried by the copy before it: an importer's `aclrtMemcpyAsync` into another
//! host's memory followed, next on the same stream, by a record of a remote notify (the pattern
//! of every cross-host step of a collective: write the peer's buffer, then tell it) is sent as
//! one etcd transaction when the copy runs, not two: the copy's put, then the record's, each on
//! its own condition (the allocation, the export still the incarnation imported). Each cross-host
//! step cost three transactions (the copy, its record, the peer's acknowledgement) of about a
//! millisecond of etcd's CPU each; this makes it two.
//!
//! What it keeps of two transactions in stream order:
//!
//! - *Order*: the owner's record watch sees the puts of one transaction in the order of its
//!   operations (one revision, its sub-revisions in order), so it applies the copy's bytes, then
//!   the record, as it applies two transactions in revision order.
//! - *Back to back only*: a record is carried only if it is the very next task of the stream
//!   after the copy (its ticket follows the copy's: [`crate::submitted`] tells each claim its
//!   ticket), decided at the record's claim, while the copy has not started. Anything queued
//!   between them (a wait, another copy, from any thread) leaves both to go alone.
//! - *All or nothing*: the transaction commits both or neither, so a process that dies between
//!   the copy and the record leaves the owner neither, or both — never the record without the
//!   data (two transactions could leave the copy alone, which is also allowed).
//! - *Failures as before*: if a condition fails (the owner freed the memory, withdrew the export,
//!   or died), nothing was put; the copy is sent alone, failing or not as it would have, and the
//!   record task, when the stream runs it (not after a failed copy on an `ACL_STOP_ON_FAILURE`
//!   stream), sends the record alone with its own message. A transaction etcd may or may not
//!   have committed (no answer within the bound) fails the copy (507022), and the record task
//!   sends the record again under the same request number: the owner applies a number once
//!   (`replay`), so it is applied once either way.
//! - *The record task stays a task*: it runs where it was queued, after the copy, and succeeds
//!   at once when its record went with the copy.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use serde_json::json;

use super::{Cluster, MemLink, RemoteMem, RemoteNotify, Shared, ipc};
use crate::SimError;
use crate::job::SimStream;
use crate::locks::lock;

/// Where a copy's carried record is.
#[derive(Debug)]
enum State {
    /// The copy has not started; no record is attached.
    Open,
    /// A record of this notify is attached; the copy has not started.
    Attached(RemoteNotify),
    /// The copy started with nothing attached: a record queued now goes alone.
    Closed,
    /// The copy is sending the attached record with it.
    Sending,
    /// The record was committed with the copy.
    Sent,
    /// The record was not (or may not have been) committed with the copy: its task sends it
    /// alone, as request number `tok`.
    Unsent(u64),
}

/// A copy into another host's memory that may carry the record queued right after it.
#[derive(Debug)]
pub(crate) struct Carry {
    state: Mutex<State>,
}

/// The last carrying copy claimed on a stream.
struct Claimed {
    /// The stream; its address is the key, kept from reuse by this (a stream freed and
    /// another allocated there is another key).
    stream: Weak<SimStream>,
    /// The copy's ticket on it.
    ticket: u32,
    carry: Arc<Carry>,
}

/// The last carrying copy claimed on each stream, by the stream's address.
#[derive(Default)]
pub(super) struct Carries(Mutex<HashMap<usize, Claimed>>);

/// The calling thread's last claimed ticket (in a queue's `on_claim`: the task being claimed).
fn ticket() -> u32 {
    crate::submitted::last_task()
}

/// What a record task attached to a copy finds when it runs.
pub(crate) type Attached = Arc<OnceLock<Arc<Carry>>>;

impl Cluster {
    /// A carry for a copy of at most one etcd value into another host's memory (registered
    /// on its stream by [`copy_claimed`](Self::copy_claimed) as it is queued).
    pub(crate) fn carry(&self) -> Arc<Carry> {
        Arc::new(Carry {
            state: Mutex::new(State::Open),
        })
    }

    /// In the copy's claim on `stream`: `carry`'s copy is the stream's last task.
    pub(crate) fn copy_claimed(&self, stream: &Arc<SimStream>, carry: &Arc<Carry>) {
        let mut m = lock(&self.carries.0);
        m.retain(|_, c| c.stream.strong_count() > 0);
        m.insert(
            Arc::as_ptr(stream) as usize,
            Claimed {
                stream: Arc::downgrade(stream),
                ticket: ticket(),
                carry: Arc::clone(carry),
            },
        );
    }

    /// In the claim of a record of remote notify `n` on `stream`: attaches it to the copy
    /// queued right before it, if that copy carries and has not started (then `attached`
    /// names the copy).
    pub(crate) fn record_claimed(
        &self,
        stream: &Arc<SimStream>,
        n: &RemoteNotify,
        attached: &Attached,
    ) {
        let m = lock(&self.carries.0);
        let Some(c) = m.get(&(Arc::as_ptr(stream) as usize)) else {
            return;
        };
        if c.stream.strong_count() == 0 || c.ticket.wrapping_add(1) != ticket() {
            return;
        }
        let mut st = lock(&c.carry.state);
        if matches!(*st, State::Open) {
            *st = State::Attached(n.clone());
            let _ = attached.set(Arc::clone(&c.carry));
        }
    }

    /// The delivery of one record to remote notify `n`'s owner, to run as a stream task: the
    /// record itself, or nothing more when it went with the copy before it (`attached`). It
    /// holds the cluster's shared state, not the `Sim`: a task queued for ever does not keep
    /// the `Sim` alive.
    pub fn record_task(
        &self,
        n: RemoteNotify,
        attached: Attached,
    ) -> impl FnOnce() -> Result<(), SimError> + Send + 'static {
        let s = Arc::clone(&self.shared);
        move || {
            let tok = attached.get().and_then(|c| match *lock(&c.state) {
                State::Sent => Some(None),
                State::Unsent(tok) => Some(Some(tok)),
                // The copy never ran (or ran without it): alone.
                _ => None,
            });
            match tok {
                Some(None) => Ok(()),
                Some(Some(tok)) => s.record_numbered(&n, false, tok),
                None => s.record(&n, false),
            }
        }
    }
}

impl MemLink {
    /// [`write`](Self::write) of `data` (at most one etcd value) at offset `at` of `m`, with
    /// the record `carry` took on, if any, in the same transaction (see the module doc).
    pub(crate) fn write_carrying(
        &self,
        m: &RemoteMem,
        at: u64,
        data: &[u8],
        carry: &Carry,
    ) -> Result<(), SimError> {
        let n = {
            let mut st = lock(&carry.state);
            match std::mem::replace(&mut *st, State::Closed) {
                State::Attached(n) => {
                    *st = State::Sending;
                    Some(n)
                }
                _ => None,
            }
        };
        let Some(n) = n else {
            return self.write(m, at, data);
        };
        let s: &Shared = &self.0;
        let mut header = Self::write_header(m, at);
        header["tok"] = json!(s.token());
        let rtok = s.token();
        let (mcmp, mput) = s.mem_op(m, &header, data);
        let (rcmp, rput) = s.record_op(&n, false, rtok);
        let sent = s.etcd.txn(&[mcmp, rcmp], &[mput, rput], &[]);
        let done = |state| *lock(&carry.state) = state;
        match sent {
            Ok(t) if t.succeeded => {
                done(State::Sent);
                Ok(())
            }
            // A condition failed, nothing was put: each goes alone, saying why if it fails.
            Ok(_) => {
                done(State::Unsent(rtok));
                s.mem_numbered(m, &header, data)
            }
            Err(e) => {
                done(State::Unsent(rtok));
                Err(ipc(e, &format!("a copy through {}", m.describe())))
            }
        }
    }
}
