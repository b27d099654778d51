//! How a process leaves the cluster, and what the other hosts call it after: a process that
//! leaves normally (`aclFinalize`, its `Sim` dropped) marks so (`left/<sid>/<pid>`) in the
//! transaction that deletes its liveness key, before revoking its lease, since etcd tells a
//! revoked lease from an expired one to no one; the marks are bound to the pod's lease
//! (`pod-lease`), which every process renews and the last one out revokes (or which expires a
//! TTL after the last process died), so a mark lasts while anyone may ask and nothing of the
//! pod outlives its processes. The last process of a server releases the server id. A
//! process of another host is then live (its lease holds), exited (its mark) or dead (its lease
//! expired without one): the words of every message that names one.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

use acl_notify_core::Error;

use super::etcd::{self, Cmp, EtcdError, Op};
use super::{Cluster, Shared, ipc, key_span};
use crate::SimError;
use crate::error::err;
use crate::locks::lock;

/// The value of the pod's lease key (`pod-lease`): what the key is for, to whoever reads it.
pub(super) const POD_LEASE_VALUE: &[u8] = b"the lease of the marks of processes that left (left/)";

impl Shared {
    /// The mark of process `pid` of server `server` having left normally (see the module doc).
    pub(super) fn left_key(&self, server: u32, pid: i32) -> Vec<u8> {
        self.key(&format!("left/{server}/{pid}"))
    }

    /// What the cluster knows of a process, from what a read found: its liveness key
    /// (`proc`) and its mark of having left (`left`).
    pub(super) fn state_of(proc: bool, left: bool) -> crate::diag::RemoteState {
        use crate::diag::RemoteState;
        match (proc, left) {
            (true, _) => RemoteState::Live,
            (false, true) => RemoteState::Exited,
            (false, false) => RemoteState::Dead,
        }
    }

    /// Puts `put` for process `pid` of server `server` on the condition `when` (that the
    /// object it addresses is still the incarnation the request names), reading, when the
    /// condition fails, that object's key and the process's liveness key and mark of having
    /// left in the same transaction: `None` when the put was made, else whether the object's
    /// key is there and what the cluster knows of its owner, for the caller's words. Codes:
    /// 507022 unreachable (`doing` names the request).
    pub(super) fn put_if_current(
        &self,
        (when, put): (Cmp, Op),
        (server, pid): (u32, i32),
        doing: impl FnOnce() -> String,
    ) -> Result<Option<(bool, crate::diag::RemoteState)>, SimError> {
        let (Cmp::CreatedAt(key, _) | Cmp::Missing(key) | Cmp::Exists(key)) = &when;
        let reads = [
            Op::Get(key.clone()),
            Op::Get(self.proc_key(server, pid)),
            Op::Get(self.left_key(server, pid)),
        ];
        let t = self
            .etcd
            .txn(&[when], &[put], &reads)
            .map_err(|e| ipc(e, &doing()))?;
        if t.succeeded {
            return Ok(None);
        }
        let mut g = t.gets.into_iter().map(|v| v.is_some());
        let (object, owner, left) = (
            g.next().unwrap_or(false),
            g.next().unwrap_or(false),
            g.next().unwrap_or(false),
        );
        Ok(Some((object, Shared::state_of(owner, left))))
    }

    /// Releases the host's claim of its server id when no process of the server is left in
    /// the cluster (this one's lease just revoked): the next job may give the id to another
    /// host at once, not a TTL later. A process of this host joining meanwhile registered
    /// before it claims (see [`Cluster::join`]), so it keeps the claim; one registering after
    /// this look claims anew (or its keeper does, finding the lease revoked).
    pub(super) fn release_server_if_last(&self) {
        let prefix = self.key(&format!("proc/{}/", self.server));
        let end = etcd::prefix_end(&prefix);
        if self.etcd.keys_in(&prefix, &end).is_ok_and(|k| k.is_empty()) {
            let _ = self.etcd.lease_revoke(*lock(&self.server_lease));
        }
    }

    /// The pod's lease, which holds the marks of processes that left: the one its key
    /// (`pod-lease`) names, renewed now, or a new one put there if there is none (the first
    /// process of the pod, or every process gone for a TTL). Two calls when the pod has one.
    pub(super) fn claim_pod(&self) -> Result<i64, SimError> {
        let key = self.key("pod-lease");
        let doing = "joining the cluster (the pod's lease)";
        for _ in 0..5 {
            if let Some(kv) = self.etcd.get(&key).map_err(|e| ipc(e, doing))?
                && self
                    .etcd
                    .lease_keepalive(kv.lease)
                    .map_err(|e| ipc(e, doing))?
                    > 0
            {
                return Ok(kv.lease);
            }
            let lease = self.etcd.lease_grant(self.ttl).map_err(|e| ipc(e, doing))?;
            let t = self
                .etcd
                .txn(
                    &[Cmp::Missing(key.clone())],
                    &[Op::Put {
                        key: key.clone(),
                        value: POD_LEASE_VALUE.to_vec(),
                        lease,
                    }],
                    &[],
                )
                .map_err(|e| ipc(e, doing))?;
            if t.succeeded {
                return Ok(lease);
            }
            // Another process put one meanwhile: use that.
            let _ = self.etcd.lease_revoke(lease);
        }
        Err(err(
            Error::IpcError,
            format!(
                "could not take the lease of SuperPod {}: its key kept changing",
                self.pod
            ),
        ))
    }

    /// Marks this process as having left normally and deletes its liveness key, in one
    /// transaction (see the module doc): the other hosts then name it "exited", never "dead",
    /// whenever they read it. The same transaction looks whether any process of this server,
    /// and of the pod, is still registered after it (a range of at most one key each), for
    /// [`release_if_last`](Self::release_if_last): leaving costs that transaction and the
    /// lease's revocation, where it was a range read more for each claim.
    fn mark_left(&self) -> Marked {
        let server = self.key(&format!("proc/{}/", self.server));
        let pod = self.key("proc/");
        for again in [true, false] {
            let lease = *lock(&self.pod_lease);
            match self.etcd.txn(
                &[],
                &[
                    Op::Put {
                        key: self.left_key(self.server, self.pid),
                        value: self.host.clone().into_bytes(),
                        lease,
                    },
                    Op::Delete(self.proc_key(self.server, self.pid)),
                    Op::First {
                        end: etcd::prefix_end(&server),
                        start: server.clone(),
                    },
                    Op::First {
                        end: etcd::prefix_end(&pod),
                        start: pod.clone(),
                    },
                ],
                &[],
            ) {
                Ok(t) => {
                    let mut g = t.gets.into_iter();
                    let (s, p) = (g.next().flatten(), g.next().flatten());
                    return Marked::Put {
                        server_left: s.is_some(),
                        pod_left: p.is_some(),
                    };
                }
                // The pod's lease went (every other process left, the last revoking it, or
                // it expired while the cluster was away): take it again, once.
                Err(EtcdError::LeaseGone(_)) if again => match self.claim_pod() {
                    Ok(l) => *lock(&self.pod_lease) = l,
                    Err(_) => return Marked::Refused,
                },
                Err(EtcdError::Unreachable(_)) => return Marked::Unanswered,
                Err(_) => return Marked::Refused,
            }
        }
        Marked::Refused
    }

    /// After this process's lease was revoked: releases the server id when no process of
    /// the server is left in the cluster ([`release_server_if_last`](Self::release_server_if_last)),
    /// and revokes the pod's lease (the marks of the processes that left go with it) when no
    /// process of the pod is, as `marked` found them; after a refused mark, by reading again.
    /// A process joining meanwhile that took either lease finds it revoked at its claim
    /// keeper's first renewal (or its next) and takes a new one.
    fn release_if_last(&self, marked: Marked) {
        let (server, pod) = match marked {
            Marked::Put {
                server_left,
                pod_left,
            } => (!server_left, !pod_left),
            Marked::Refused | Marked::Unanswered => {
                let pod = self.key("proc/");
                let end = etcd::prefix_end(&pod);
                self.release_server_if_last();
                (
                    false,
                    self.etcd.keys_in(&pod, &end).is_ok_and(|k| k.is_empty()),
                )
            }
        };
        if server {
            let _ = self.etcd.lease_revoke(*lock(&self.server_lease));
        }
        if pod {
            let _ = self.etcd.lease_revoke(*lock(&self.pod_lease));
        }
    }
}

/// What marking this process's leaving found (see [`Shared::mark_left`]).
#[derive(Clone, Copy, Debug)]
enum Marked {
    /// Marked; whether any other process of this server, and of the pod, was still
    /// registered.
    Put { server_left: bool, pod_left: bool },
    /// Refused (not for want of an answer): the process leaves as it would have, the claims
    /// looked at again.
    Refused,
    /// The cluster did not answer within the client's bound.
    Unanswered,
}

impl crate::diag::RemoteLiveness for Shared {
    /// Nothing for a notify this process did not publish (no other host could record on
    /// it) or first published after its last lapse (the other hosts imported it from the
    /// live lease).
    fn own_lapse(&self, dev: u32, id: u32) -> String {
        let life = lock(&self.published).get(&(dev, id)).map(|p| p.life);
        life.map_or_else(String::new, |l| self.own_lapse_text(l))
    }

    /// One range read, keys only, from the smallest of the processes' keys to just past the
    /// largest (what lies between, other processes' keys, comes along and is ignored); when
    /// some are gone, one more of their marks of having left (read after: a process that
    /// leaves puts its mark in the transaction that deletes its liveness key).
    fn alive(&self, procs: &[(u32, i32)]) -> Option<Vec<crate::diag::RemoteState>> {
        let keys: Vec<Vec<u8>> = procs
            .iter()
            .map(|&(server, pid)| self.proc_key(server, pid))
            .collect();
        let (start, end) = key_span(&keys)?;
        let live = self.etcd.keys_in(start, &end).ok()?;
        let gone: Vec<Vec<u8>> = procs
            .iter()
            .zip(&keys)
            .filter(|(_, k)| !live.contains(k))
            .map(|(&(server, pid), _)| self.left_key(server, pid))
            .collect();
        let left = match key_span(&gone) {
            Some((start, end)) => self.etcd.keys_in(start, &end).ok()?,
            None => Vec::new(),
        };
        Some(
            procs
                .iter()
                .zip(&keys)
                .map(|(&(server, pid), k)| {
                    Shared::state_of(live.contains(k), left.contains(&self.left_key(server, pid)))
                })
                .collect(),
        )
    }
}

impl Drop for Cluster {
    /// Leaves the cluster within one client bound: the process marks itself as having left
    /// (see [`Shared::mark_left`]) and revokes its lease while the threads end (each may be
    /// inside a call that takes the whole bound when the cluster is silent), not after them;
    /// the last process of its server releases the server id, the last of the pod the pod's
    /// lease.
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        let lease = *lock(&self.shared.proc_lease);
        let s = Arc::clone(&self.shared);
        let revoke = std::thread::Builder::new()
            .name("acl-sim-leave".into())
            .spawn(move || {
                // A cluster that did not answer the mark within the bound is not asked again:
                // the lease expires by itself, and the process is taken for dead.
                let marked = s.mark_left();
                if !matches!(marked, Marked::Unanswered) && s.etcd.lease_revoke(lease).is_ok() {
                    s.release_if_last(marked);
                }
            });
        let threads: Vec<JoinHandle<()>> = lock(&self.watcher)
            .take()
            .into_iter()
            .chain(std::mem::take(&mut *lock(&self.keepers)))
            .collect();
        for t in threads {
            let _ = t.join();
        }
        match revoke {
            Ok(t) => {
                let _ = t.join();
            }
            Err(_) => {
                if !matches!(self.shared.mark_left(), Marked::Unanswered) {
                    let _ = self.shared.etcd.lease_revoke(lease);
                }
            }
        }
        // The keeper replaced an expired lease meanwhile (the cluster came back): that one too.
        let now = *lock(&self.shared.proc_lease);
        if now != lease {
            let _ = self.shared.etcd.lease_revoke(now);
        }
    }
}
