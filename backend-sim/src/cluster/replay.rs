//! Requests that reach an owner twice. The etcd client tries a call again when its member
//! answered that it could not serve it (shutting down, no leader) or the connection broke
//! mid-call (see [`super::etcd`]): a transaction that was committed before the answer was lost
//! is then committed a second time, and the owner's watch sees two puts of one request. A
//! record applied twice sets the flag again after its wait consumed it, so the next wait is let
//! through before its own record (and reads the previous round's data); a write applied twice
//! can land over a later write. So each importer numbers its requests (one counter per
//! process, the same number on every try), and the owner applies a number once: [`Replays`]
//! keeps the last [`WINDOW`] numbers of each importer it heard from.

use std::collections::{HashMap, VecDeque};

/// Numbers remembered per importer. A second try of a call comes within that call's deadline
/// (3 s), in which one importer's other threads commit far fewer requests than this (each is
/// an etcd commit, ~1 ms).
pub(super) const WINDOW: usize = 4096;

/// Importers remembered; the one heard from least recently is forgotten first.
const SENDERS: usize = 256;

/// An importer: (server id, pid).
pub(super) type Sender = (u32, i32);

/// The request numbers an owner applied lately, per importer.
#[derive(Default)]
pub(super) struct Replays {
    seen: HashMap<Sender, VecDeque<u64>>,
    /// Importers by the time they were last heard from, oldest first.
    order: VecDeque<Sender>,
}

impl Replays {
    /// `true` the first time request `tok` of `from` is seen (apply it), `false` for another
    /// try of one already applied.
    pub(super) fn first(&mut self, from: Sender, tok: u64) -> bool {
        if let Some(at) = self.order.iter().position(|s| *s == from) {
            self.order.remove(at);
        } else if self.order.len() == SENDERS
            && let Some(old) = self.order.pop_front()
        {
            self.seen.remove(&old);
        }
        self.order.push_back(from);
        let toks = self.seen.entry(from).or_default();
        if toks.contains(&tok) {
            return false;
        }
        if toks.len() == WINDOW {
            toks.pop_front();
        }
        toks.push_back(tok);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_applied_once_per_importer() {
        let mut r = Replays::default();
        assert!(r.first((0, 10), 1));
        assert!(r.first((0, 10), 2));
        assert!(!r.first((0, 10), 1), "a second try of request 1");
        // The same number from another importer (or the same pid on another server) is new.
        assert!(r.first((0, 11), 1));
        assert!(r.first((1, 10), 1));
        assert!(!r.first((1, 10), 1));
    }

    #[test]
    fn the_window_and_the_senders_are_bounded() {
        let mut r = Replays::default();
        for t in 0..WINDOW as u64 + 10 {
            assert!(r.first((0, 1), t));
        }
        assert_eq!(r.seen[&(0, 1)].len(), WINDOW);
        // Out of order within the window is still caught.
        assert!(!r.first((0, 1), WINDOW as u64));
        for p in 0..SENDERS as i32 + 5 {
            r.first((2, p), 0);
        }
        assert_eq!(r.seen.len(), SENDERS);
        assert_eq!(r.order.len(), SENDERS);
    }
}
