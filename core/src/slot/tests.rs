//! Tests of the shared slot lifecycle that the notify and count-notify tests do not reach:
//! orphaning, retiring without a wake-up, withdrawing an export, and a claim's fill step.

use super::*;
use crate::cnt::CntSlot;
use crate::table::NotifySlot;
use crate::table::tests::TestWaiter;

fn owner(proc: u32) -> Owner {
    Owner {
        pid: 9,
        start_time: 1,
        server: 0,
        device: 0,
        proc,
    }
}

#[test]
fn an_orphaned_incarnation_holds_until_released_and_is_not_live() {
    let w = TestWaiter::new();
    let s = CntSlot::new();
    let g = s.claim(owner(0)).unwrap();
    assert!(!s.orphan(g + 1), "another incarnation");
    assert!(s.orphan(g));
    assert!(!s.orphan(g), "orphaned twice");
    assert_eq!(s.state(), Some(SlotState::Orphaned));
    assert!(s.holds(g) && !s.is_live(g) && s.is_in(g, SlotState::Orphaned));
    assert!(
        !s.export([1; 16], ExportState::Enforced),
        "an orphan is not exported"
    );
    assert!(s.release(&*w, g), "the last user releases it");
    assert_eq!(s.state(), Some(SlotState::Free));
    assert!(!s.holds(g));
    assert_eq!(s.generation(), g + 1);
    assert_eq!(s.holders(), 0);
}

#[test]
fn retire_ends_a_live_incarnation_once() {
    let s = CntSlot::new();
    let g = s.claim(owner(0)).unwrap();
    assert!(!s.retire(g + 1));
    assert!(s.retire(g));
    assert!(!s.retire(g), "retired twice");
    assert_eq!(s.claim(owner(0)), Ok(g + 1));
}

#[test]
fn unexport_withdraws_the_export_and_its_nonce() {
    let s = NotifySlot::new();
    s.claim(owner(2), crate::flags::CreateFlags::empty())
        .unwrap();
    assert!(s.export([7; 16], ExportState::Open));
    assert_eq!(s.export_state(), Some(ExportState::Open));
    s.unexport();
    assert_eq!(s.export_state(), Some(ExportState::None));
    assert_eq!(s.nonce(), [0; 16]);
    assert!(s.export([8; 16], ExportState::Enforced), "exportable again");
    assert_eq!(s.nonce(), [8; 16]);
}

#[test]
fn a_claim_fills_the_payload_before_the_slot_goes_live() {
    let s = CntSlot::new();
    let mut seen = None;
    let g = s
        .claim_raw(owner(5), 0x42, |_| seen = Some(s.state()))
        .unwrap();
    assert_eq!(seen, Some(Some(SlotState::Claiming)));
    assert!(s.is_live(g));
    assert_eq!(s.flag_bits(), 0x42);
    assert_eq!(s.holders(), 1 << 5);
    assert_eq!(s.owner(), owner(5));
    assert_eq!(
        s.claim_raw(owner(MAX_PROCS), 0, |_| {}),
        Err(TableError::BadProc)
    );
}
