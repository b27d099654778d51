//! Tests of count notifies: the C vocabulary (modes, info structs) and the count slot's
//! records, waits, release and repair.

use super::*;
use crate::slot::{Owner, SlotState};
use crate::sync::Ordering::SeqCst;
use crate::table::tests::TestWaiter;
use crate::waiter::{TableError, WaitArgs, WaitOutcome};
use core::time::Duration;
use std::sync::Arc;
use std::thread;
use std::time::Instant;
use std::vec::Vec;

fn never() -> bool {
    false
}

fn owner() -> Owner {
    Owner {
        pid: 42,
        start_time: 7,
        server: 0,
        device: 1,
        proc: 3,
    }
}

fn args(ms: u64) -> WaitArgs<'static> {
    WaitArgs {
        proc: 0,
        timeout: Some(Duration::from_millis(ms)),
        cancel: &never,
    }
}

#[test]
fn c_values_and_layouts() {
    assert_eq!(core::mem::size_of::<CntRecordInfo>(), 8);
    assert_eq!(core::mem::size_of::<CntWaitInfo>(), 16);
    assert_eq!(core::mem::size_of::<CntSlot>(), 128);
    let rec: Vec<u32> = CntRecordMode::ALL.iter().map(|m| *m as u32).collect();
    assert_eq!(rec, [0, 1, 2, 4]);
    let wait: Vec<u32> = CntWaitMode::ALL.iter().map(|m| *m as u32).collect();
    assert_eq!(wait, [0, 1, 2, 3, 4]);
    for m in CntRecordMode::ALL {
        assert_eq!(CntRecordMode::from_raw(m as u32), Ok(m));
    }
    for m in CntWaitMode::ALL {
        assert_eq!(CntWaitMode::from_raw(m as u32), Ok(m));
    }
    for bad in [3, 5, 6, u32::MAX] {
        assert_eq!(
            CntRecordMode::from_raw(bad),
            Err(Error::ParamInvalid),
            "{bad}"
        );
    }
    for bad in [5, 6, 100, u32::MAX] {
        assert_eq!(
            CntWaitMode::from_raw(bad),
            Err(Error::ParamInvalid),
            "{bad}"
        );
    }
}

#[test]
fn info_validation_round_trips() {
    let r = CntRecordInfo { mode: 1, value: 9 };
    assert_eq!(CntRecord::from_info(&r), Ok(CntRecord::add(9)));
    assert_eq!(CntRecord::add(9).to_info(), r);
    assert_eq!(
        CntRecord::from_info(&CntRecordInfo { mode: 3, value: 0 }),
        Err(Error::ParamInvalid)
    );
    let w = CntWaitInfo {
        mode: 4,
        value: 0b101,
        timeout: 3,
        is_clear: 7,
        rsv: [1, 2, 3],
    };
    let v = CntWait::from_info(&w).unwrap();
    assert_eq!(v.mode, CntWaitMode::EqualWithBitmask);
    assert_eq!(v.on_satisfied, OnSatisfied::Clear);
    assert_eq!(v.timeout.duration(), Some(Duration::from_secs(3)));
    assert_eq!(v.to_info().is_clear, 1);
    assert_eq!(v.to_info().rsv, [0; 3]);
    let forever = CntWait::from_info(&CntWaitInfo::default()).unwrap();
    assert_eq!(forever, CntWait::new(CntWaitMode::Less, 0));
    assert_eq!(
        CntWait::from_info(&CntWaitInfo {
            mode: 5,
            ..CntWaitInfo::default()
        }),
        Err(Error::ParamInvalid)
    );
}

#[test]
fn modes_apply_and_compare() {
    use CntRecordMode::*;
    assert_eq!(Set.apply(5, 9), 9);
    assert_eq!(Add.apply(u32::MAX, 2), 1, "ADD wraps at 2^32");
    assert_eq!(BitOr.apply(0b0101, 0b0011), 0b0111);
    assert_eq!(BitAnd.apply(0b0101, 0b0011), 0b0001);
    use CntWaitMode::*;
    assert!(Less.satisfied(1, 2) && !Less.satisfied(2, 2));
    assert!(Equal.satisfied(2, 2) && !Equal.satisfied(3, 2));
    assert!(Bigger.satisfied(3, 2) && !Bigger.satisfied(2, 2));
    assert!(BiggerOrEqual.satisfied(2, 2) && !BiggerOrEqual.satisfied(1, 2));
    assert!(EqualWithBitmask.satisfied(0b1110, 0b0110));
    assert!(!EqualWithBitmask.satisfied(0b1010, 0b0110));
    assert!(
        EqualWithBitmask.satisfied(0, 0),
        "an empty mask always holds"
    );
    assert!(!Less.satisfied(0, 0), "nothing is below 0");
}

#[test]
fn pools_per_soc() {
    assert_eq!(max_cnt_notifies(Soc::Ascend950PR), MAX_CNT_NOTIFIES);
    assert_eq!(max_cnt_notifies(Soc::Ascend950DT), MAX_CNT_NOTIFIES);
    for s in Soc::ALL {
        if !matches!(s, Soc::Ascend950PR | Soc::Ascend950DT) {
            assert_eq!(max_cnt_notifies(*s), 0, "{s}");
        }
    }
    fn cap<C: CntPools>() -> u32 {
        C::MAX_CNT_NOTIFIES
    }
    assert_eq!(cap::<crate::soc::Ascend950PR>(), 8192);
    let mut p = <crate::soc::Ascend950DT as CntPools>::CntPool::new();
    assert_eq!(p.capacity(), MAX_CNT_NOTIFIES);
    assert_eq!(p.alloc(), Ok(0));
}

#[test]
fn record_then_wait_every_mode() {
    let w = TestWaiter::new();
    let s = CntSlot::new();
    let g = s.claim(owner()).unwrap();
    assert_eq!(s.record(&*w, CntRecord::set(u32::MAX), 11), u32::MAX);
    assert_eq!(s.record(&*w, CntRecord::add(2), 12), 1, "wrap-around");
    let last = s.last_record().unwrap();
    assert_eq!(
        (last.pid, last.mode, last.value),
        (12, Some(CntRecordMode::Add), 2)
    );
    let keep = OnSatisfied::Keep;
    assert_eq!(
        s.wait(&*w, g, CntWaitMode::Equal, 1, keep, args(0)),
        Ok(WaitOutcome::Consumed)
    );
    assert_eq!(
        s.wait(&*w, g, CntWaitMode::Bigger, 1, keep, args(20)),
        Ok(WaitOutcome::TimedOut)
    );
    s.record(&*w, CntRecord::bit_or(0b110), 1);
    assert_eq!(s.count(), 0b111);
    assert_eq!(
        s.wait(&*w, g, CntWaitMode::EqualWithBitmask, 0b101, keep, args(0)),
        Ok(WaitOutcome::Consumed)
    );
    s.record(&*w, CntRecord::bit_and(0b010), 1);
    assert_eq!(s.count(), 0b010);
    assert_eq!(
        s.wait(&*w, g, CntWaitMode::Less, 3, OnSatisfied::Clear, args(0)),
        Ok(WaitOutcome::Consumed)
    );
    assert_eq!(s.count(), 0, "clear-on-wait");
    assert_eq!(
        s.wait(&*w, g, CntWaitMode::BiggerOrEqual, 1, keep, args(10)),
        Ok(WaitOutcome::TimedOut)
    );
    assert_eq!(s.waiters(), 0);
    // A stale generation ends the wait with an error, not a hang.
    assert_eq!(
        s.wait(&*w, g + 1, CntWaitMode::Less, 0, keep, args(1000)),
        Err(TableError::Corrupt)
    );
}

#[test]
fn one_record_releases_every_satisfied_waiter() {
    let w = TestWaiter::new();
    let s = Arc::new(CntSlot::new());
    let g = s.claim(owner()).unwrap();
    let mut hs = Vec::new();
    for need in [1u32, 2, 3] {
        let (s2, w2) = (s.clone(), w.clone());
        hs.push(thread::spawn(move || {
            s2.wait(
                &*w2,
                g,
                CntWaitMode::BiggerOrEqual,
                need,
                OnSatisfied::Keep,
                args(10_000),
            )
        }));
    }
    let end = Instant::now() + Duration::from_secs(10);
    while s.waiters() < 3 {
        assert!(Instant::now() < end);
        thread::sleep(Duration::from_millis(1));
    }
    s.record(&*w, CntRecord::add(3), 5);
    for h in hs {
        assert_eq!(h.join().unwrap(), Ok(WaitOutcome::Consumed));
    }
}

#[test]
fn clearing_waiters_never_share_a_count() {
    // Two clearing waiters on "count >= 1": one record of 1 releases exactly one.
    let w = TestWaiter::new();
    let s = Arc::new(CntSlot::new());
    let g = s.claim(owner()).unwrap();
    let mut hs = Vec::new();
    for _ in 0..2 {
        let (s2, w2) = (s.clone(), w.clone());
        hs.push(thread::spawn(move || {
            s2.wait(
                &*w2,
                g,
                CntWaitMode::BiggerOrEqual,
                1,
                OnSatisfied::Clear,
                args(400),
            )
        }));
    }
    let end = Instant::now() + Duration::from_secs(10);
    while s.waiters() < 2 {
        assert!(Instant::now() < end);
        thread::sleep(Duration::from_millis(1));
    }
    s.record(&*w, CntRecord::add(1), 5);
    let outs: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    let consumed = outs
        .iter()
        .filter(|o| **o == Ok(WaitOutcome::Consumed))
        .count();
    assert_eq!(consumed, 1, "{outs:?}");
    assert_eq!(s.count(), 0);
}

#[test]
fn release_and_reclaim() {
    let w = TestWaiter::new();
    let s = CntSlot::new();
    let g = s.claim(owner()).unwrap();
    assert_eq!(s.claim(owner()), Err(TableError::Corrupt));
    assert_eq!(s.owner(), owner());
    assert!(!s.release(&*w, g + 1), "wrong generation");
    assert!(s.release(&*w, g));
    assert!(!s.release(&*w, g), "released twice");
    assert_eq!(s.state(), Some(SlotState::Free));
    let g2 = s.claim(owner()).unwrap();
    assert_eq!(g2, g + 1);
    assert!(s.last_record().is_none());
    assert!(!s.reclaim_if(&*w, |_| false));
    assert!(s.reclaim_if(&*w, |o| o.pid == 42));
    assert_eq!(s.state(), Some(SlotState::Free));
    assert!(!s.reclaim_if(&*w, |_| true), "a free slot is not reclaimed");
}

#[test]
fn retire_abandoned_frees_free_and_half_claimed_slots_but_not_live_ones() {
    use crate::slot::word;
    let s = CntSlot::new();
    assert!(s.retire_abandoned(), "a free slot: only its id is leaked");
    let g = s.claim(owner()).unwrap();
    assert!(!s.retire_abandoned(), "a live slot is in use");
    assert_eq!(s.state(), Some(SlotState::Live));
    // A claim cut short by the death of its process leaves the slot claiming, with the
    // owner's holder bit set.
    s.life.state_gen.store(word(g, SlotState::Claiming), SeqCst);
    assert_ne!(s.holders(), 0);
    assert!(s.retire_abandoned());
    assert_eq!(s.state(), Some(SlotState::Free));
    assert_eq!(s.holders(), 0);
    assert_eq!(s.generation(), g + 1);
    // A corrupt state word is repaired the same way.
    s.life.state_gen.store(u64::from(g + 1) << 32 | 77, SeqCst);
    assert!(s.retire_abandoned());
    assert_eq!(s.state(), Some(SlotState::Free));
    assert_eq!(s.claim(owner()), Ok(g + 2));
}

#[test]
fn cancel_ends_a_forever_wait() {
    use core::sync::atomic::AtomicBool;
    let w = TestWaiter::new();
    let s = Arc::new(CntSlot::new());
    let g = s.claim(owner()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (s2, w2, st2) = (s.clone(), w.clone(), stop.clone());
    let h = thread::spawn(move || {
        let c = move || st2.load(SeqCst);
        s2.wait(
            &*w2,
            g,
            CntWaitMode::Equal,
            99,
            OnSatisfied::Keep,
            WaitArgs {
                proc: 0,
                timeout: None,
                cancel: &c,
            },
        )
    });
    thread::sleep(Duration::from_millis(20));
    stop.store(true, SeqCst);
    s.sync.wake_all(&*w);
    assert_eq!(h.join().unwrap(), Ok(WaitOutcome::Cancelled));
    assert_eq!(s.waiters(), 0);
}

/// A clearing wait reports the count it cleared, and giving it back makes the count as if
/// the wait had not cleared it: the same count when nothing changed it since; with a record
/// in between, that record applied to the count given back (an `ADD` adds, a `SET` stays).
/// A waiter asleep on the count is woken by it.
#[test]
fn a_cleared_count_given_back_is_as_if_never_cleared() {
    let w = TestWaiter::new();
    let s = Arc::new(CntSlot::new());
    let g = s.claim(owner()).unwrap();
    let clear = OnSatisfied::Clear;
    s.record(&*w, CntRecord::add(3), 1);
    assert_eq!(
        s.wait_clearing(&*w, g, CntWaitMode::BiggerOrEqual, 1, clear, args(0)),
        Ok((WaitOutcome::Consumed, 3))
    );
    assert_eq!(s.count(), 0);
    let (s2, w2) = (s.clone(), w.clone());
    let h = thread::spawn(move || {
        s2.wait(
            &*w2,
            g,
            CntWaitMode::Equal,
            3,
            OnSatisfied::Keep,
            args(10_000),
        )
    });
    let end = Instant::now() + Duration::from_secs(10);
    while s.waiters() < 1 {
        assert!(Instant::now() < end);
        thread::sleep(Duration::from_millis(1));
    }
    s.give_back(&*w, 3);
    assert_eq!(h.join().unwrap(), Ok(WaitOutcome::Consumed));
    assert_eq!(s.count(), 3);
    // A keeping wait, or one that is not satisfied, took nothing.
    assert_eq!(
        s.wait_clearing(&*w, g, CntWaitMode::Equal, 3, OnSatisfied::Keep, args(0)),
        Ok((WaitOutcome::Consumed, 0))
    );
    assert_eq!(
        s.wait_clearing(&*w, g, CntWaitMode::Less, 3, clear, args(0)),
        Ok((WaitOutcome::TimedOut, 0))
    );
    // Records between the clear and the give-back.
    s.wait_clearing(&*w, g, CntWaitMode::Equal, 3, clear, args(0))
        .unwrap();
    s.record(&*w, CntRecord::add(2), 1);
    s.give_back(&*w, 3);
    assert_eq!(
        s.count(),
        5,
        "an ADD in between adds to what was given back"
    );
    s.wait_clearing(&*w, g, CntWaitMode::Equal, 5, clear, args(0))
        .unwrap();
    s.record(&*w, CntRecord::set(7), 1);
    s.give_back(&*w, 5);
    assert_eq!(s.count(), 7, "a SET in between stays");
    s.give_back(&*w, 0);
    assert_eq!(s.count(), 7);
}
