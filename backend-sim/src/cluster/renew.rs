//! When a lease is renewed. A process keeps its leases alive on two threads (its own lease,
//! which holds its liveness, its exports and its holds, on one; its host's claim on the server
//! id and the pod's lease on the other), so that one lease's calls never hold back the other's renewal: a call
//! may take the client's whole bound (3 s) when a member is silent or the machine is loaded,
//! longer than a short TTL (2 s in the fault tests). Each lease is renewed a third of the TTL
//! after the start of its last renewal that went through, not after its end, so the time a
//! renewal takes does not push the next one back; one that failed is tried again after a
//! pause (the lease runs out a TTL after its last renewal, not after the failed one), of a
//! period but at most [`RETRY`]: a failed call already took the client's bound, and a cluster
//! that fails calls is often one too busy to take them faster.
//! Before, one thread renewed both leases in turn, each round a third of the TTL after the
//! end of the last: with a 2 s TTL, the process's lease went unrenewed for the third plus both
//! calls, about 2 s once the calls took a second between them, and expired (an owner's lease
//! ran out at load 20 in `fabric_memory_survives_etcd_restarted_mid_copy`).

use std::time::{Duration, Instant};

/// The longest pause after a failed renewal.
pub(super) const RETRY: Duration = Duration::from_secs(1);

/// A third of `ttl` seconds, but at least `floor`: the period between renewals.
pub(super) fn period(ttl: u32, floor: Duration) -> Duration {
    Duration::from_millis(u64::from(ttl) * 1000 / 3).max(floor)
}

/// When to renew a lease first whose grant was asked for at `asked`: a `period` after that,
/// whenever its keeper starts (a keeper that starts late renews at once).
pub(super) fn first(asked: Instant, period: Duration) -> Instant {
    asked + period
}

/// When to renew next, after a renewal that started at `started`, ended at `ended` and went
/// through (`ok`) or not: a `period` after its start, or after a failed one's end the period
/// or [`RETRY`], whichever is shorter.
pub(super) fn next(started: Instant, ended: Instant, ok: bool, period: Duration) -> Instant {
    if ok {
        started + period
    } else {
        ended + period.min(RETRY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAUSE: Duration = Duration::from_millis(100);

    /// A renewal that took longer than the period (a loaded machine, a silent member: the
    /// client gives each try up to a second) is followed by the next at once, not a period
    /// after its end: with a 2 s TTL, the lease is renewed again before it runs out.
    #[test]
    fn a_slow_renewal_does_not_push_the_next_one_back() {
        let ttl = 2;
        let every = period(ttl, PAUSE);
        assert_eq!(every, Duration::from_millis(666));
        let t0 = Instant::now();
        let took = Duration::from_millis(1500);
        let n = next(t0, t0 + took, true, every);
        assert_eq!(n, t0 + every);
        // Due as soon as the slow renewal ends: the lease's last renewal was `took` ago, less
        // than its TTL.
        assert!(n <= t0 + took && took < Duration::from_secs(ttl.into()));
        // A quick one: the next a period after its start.
        assert_eq!(
            next(t0, t0 + Duration::from_millis(2), true, every),
            t0 + every
        );
    }

    /// A lease whose grant took 1.5 s to be followed by its keeper (a join's calls on a
    /// loaded machine) is renewed at once, before its 2 s TTL runs out; before, the first
    /// renewal came a period after the keeper started, 2.17 s after the grant.
    #[test]
    fn the_first_renewal_counts_from_the_grant() {
        let every = period(2, PAUSE);
        let asked = Instant::now();
        let keeper_started = asked + Duration::from_millis(1500);
        let due = first(asked, every);
        assert!(
            due <= keeper_started,
            "due {:?} after the keeper's start",
            due - asked
        );
        assert!(due < asked + Duration::from_secs(2));
    }

    /// A renewal that failed (the cluster unreachable for the client's bound) is tried again
    /// within a second, not a period (10 s of a 30 s TTL) later; a shorter period is kept.
    #[test]
    fn a_failed_renewal_is_tried_again_soon() {
        let t0 = Instant::now();
        let end = t0 + Duration::from_secs(3);
        assert_eq!(next(t0, end, false, period(30, PAUSE)), end + RETRY);
        let short = period(2, PAUSE);
        assert_eq!(next(t0, end, false, short), end + short);
        assert_eq!(period(0, PAUSE), PAUSE);
    }
}
