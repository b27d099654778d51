//! Count notifies (SPEC §6): every record mode (set, add — wrapping at 2³² —, bit-or, bit-and,
//! reset), every wait mode (less, equal, bigger, bigger-or-equal, equal-with-bitmask) both
//! satisfied at once and released by a later record, clear-on-wait, timeouts in seconds,
//! the separate id pool and its machine-wide budget, handle and device checks, and 207000 on
//! every SoC without count notifies.
//!
//! Every [`TestBackend`] has [`CntNotifyOps`]; a driver whose library lacks the count-notify
//! symbols (a CANN older than the 950's) reports these cases as skipped on the 950 SoCs.

use std::time::Duration;

use acl_notify_core::cnt::{MAX_CNT_NOTIFIES, max_cnt_notifies};
use acl_notify_core::{
    BackendError, CntRecord, CntWait, CntWaitMode, CreateFlags, Error, Feature, RawCntNotify,
    RawStream, Soc, StreamDestroy, SyncWait,
};

use super::case;
use crate::check::{CaseResult, SKIP_PREFIX};
use crate::harness::{BackendKind, Case, Ctx, DEVICES, TestBackend};
use crate::util::secs;

/// SoCs with count notifies (the 950 family).
pub fn cnt(s: Soc) -> bool {
    s.has(Feature::CntNotify)
}

/// SoCs without count notifies (every other one, IPV350 included).
pub fn no_cnt(s: Soc) -> bool {
    !cnt(s)
}

pub fn cases<B: TestBackend>() -> Vec<Case<B>> {
    vec![
        case("cnt::not_supported", no_cnt, |c| with_cnt(c, not_supported)),
        case("cnt::create_id_destroy", cnt, |c| {
            with_cnt(c, create_id_destroy)
        }),
        case("cnt::record_modes", cnt, |c| with_cnt(c, record_modes)),
        case("cnt::add_wraps_at_2_32", cnt, |c| with_cnt(c, add_wraps)),
        case("cnt::wait_modes", cnt, |c| with_cnt(c, wait_modes)),
        case("cnt::clear_on_wait", cnt, |c| with_cnt(c, clear_on_wait)),
        case("cnt::timeout", cnt, |c| with_cnt(c, timeout)),
        case("cnt::one_record_releases_every_satisfied_wait", cnt, |c| {
            with_cnt(c, releases_all)
        }),
        case("cnt::handles_and_devices", cnt, |c| {
            with_cnt(c, handles_and_devices)
        }),
        case("cnt::separate_pool_and_budget", cnt, |c| {
            with_cnt(c, pool_and_budget)
        }),
    ]
}

/// Runs `f` on `ctx.b` (skipped for a driver without count notifies).
fn with_cnt<B: TestBackend>(ctx: &Ctx<'_, B>, f: fn(&dyn Probe) -> CaseResult) -> CaseResult {
    if ctx.kind == BackendKind::Driver
        && let Some(skip) = driver_without_cnt(ctx.b, ctx.soc)
    {
        return Err(skip);
    }
    f(&On {
        b: ctx.b,
        soc: ctx.soc,
    })
}

/// The driver answers 207000 on a 950 SoC when its library lacks the `aclrtCntNotify*`
/// symbols (a CANN older than the 950's): not applicable, like `HostOps`.
fn driver_without_cnt<B: TestBackend>(d: &B, soc: Soc) -> Option<String> {
    match d.cnt_notifies_free(0) {
        Err(e) if cnt(soc) && e.kind() == Error::FeatureNotSupport => Some(format!(
            "{SKIP_PREFIX}the driver's library lacks the count-notify symbols ({e})"
        )),
        _ => None,
    }
}

/// The operations the cases use, object-safe, with errors reduced to (code, text).
trait Probe {
    fn soc(&self) -> Soc;
    fn pid(&self) -> i32;
    fn create(&self, device: u32) -> Result<RawCntNotify, (Error, String)>;
    fn destroy(&self, c: RawCntNotify) -> Result<(), (Error, String)>;
    fn id(&self, c: RawCntNotify) -> Result<u32, (Error, String)>;
    fn record(&self, c: RawCntNotify, s: RawStream, r: CntRecord) -> Result<(), (Error, String)>;
    fn wait(&self, c: RawCntNotify, s: RawStream, w: CntWait) -> Result<(), (Error, String)>;
    fn reset(&self, c: RawCntNotify, s: RawStream) -> Result<(), (Error, String)>;
    fn free(&self, device: u32) -> Result<u32, (Error, String)>;
    fn notifies_free(&self, device: u32) -> Result<u32, (Error, String)>;
    fn create_notify(&self, device: u32) -> Result<(), (Error, String)>;
    fn stream(&self, device: u32) -> Result<RawStream, (Error, String)>;
    fn drop_stream(&self, s: RawStream) -> Result<(), (Error, String)>;
    fn sync(&self, s: RawStream, bound: Duration) -> Result<(), (Error, String)>;
}

struct On<'a, C> {
    b: &'a C,
    soc: Soc,
}

fn e<E: BackendError>(e: E) -> (Error, String) {
    (e.kind(), e.to_string())
}

impl<C: TestBackend> Probe for On<'_, C> {
    fn soc(&self) -> Soc {
        self.soc
    }
    fn pid(&self) -> i32 {
        self.b.bare_tgid()
    }
    fn create(&self, device: u32) -> Result<RawCntNotify, (Error, String)> {
        self.b.cnt_create(device).map_err(e)
    }
    fn destroy(&self, c: RawCntNotify) -> Result<(), (Error, String)> {
        self.b.cnt_destroy(c).map_err(e)
    }
    fn id(&self, c: RawCntNotify) -> Result<u32, (Error, String)> {
        self.b.cnt_id(c).map_err(e)
    }
    fn record(&self, c: RawCntNotify, s: RawStream, r: CntRecord) -> Result<(), (Error, String)> {
        self.b.cnt_record(c, s, r).map_err(e)
    }
    fn wait(&self, c: RawCntNotify, s: RawStream, w: CntWait) -> Result<(), (Error, String)> {
        self.b.cnt_wait(c, s, w).map_err(e)
    }
    fn reset(&self, c: RawCntNotify, s: RawStream) -> Result<(), (Error, String)> {
        self.b.cnt_reset(c, s).map_err(e)
    }
    fn free(&self, device: u32) -> Result<u32, (Error, String)> {
        self.b.cnt_notifies_free(device).map_err(e)
    }
    fn notifies_free(&self, device: u32) -> Result<u32, (Error, String)> {
        self.b.notifies_free(device).map_err(e)
    }
    fn create_notify(&self, device: u32) -> Result<(), (Error, String)> {
        self.b
            .create_notify(device, CreateFlags::empty())
            .map(|_| ())
            .map_err(e)
    }
    fn stream(&self, device: u32) -> Result<RawStream, (Error, String)> {
        self.b.create_stream(device).map_err(e)
    }
    fn drop_stream(&self, s: RawStream) -> Result<(), (Error, String)> {
        self.b.destroy_stream(s, StreamDestroy::Discard).map_err(e)
    }
    fn sync(&self, s: RawStream, bound: Duration) -> Result<(), (Error, String)> {
        self.b.synchronize(s, SyncWait::AtMost(bound)).map_err(e)
    }
}

/// Turns an unexpected result into the suite's failure text.
macro_rules! must {
    ($e:expr) => {
        $e.map_err(|(k, m)| {
            format!(
                "line {}: `{}`\n    expected: success\n    got:      {k} — {m}",
                line!(),
                stringify!($e)
            )
        })?
    };
}

/// The call must fail with `$want`.
macro_rules! must_fail {
    ($e:expr, $want:expr) => {
        match $e {
            Err((k, _)) if k == $want => {}
            Err((k, m)) => {
                return Err(format!(
                    "line {}: `{}`\n    expected: {}\n    got:      {k} — {m}",
                    line!(),
                    stringify!($e),
                    $want
                ));
            }
            Ok(v) => {
                return Err(format!(
                    "line {}: `{}`\n    expected: {}\n    got:      success ({v:?})",
                    line!(),
                    stringify!($e),
                    $want
                ));
            }
        }
    };
}

const LONG: Duration = Duration::from_secs(10);
/// How long a stream must stay blocked to count as "still waiting".
const BLOCKED: Duration = Duration::from_millis(150);

/// Everything enqueued on `s` has run (bounded).
fn done(p: &dyn Probe, s: RawStream, what: &str) -> CaseResult {
    p.sync(s, LONG).map_err(|(k, m)| {
        format!("{what}: synchronize\n    expected: success\n    got:      {k} — {m}")
    })
}

/// The stream is still stalled in a wait.
fn blocked(p: &dyn Probe, s: RawStream, what: &str) -> CaseResult {
    match p.sync(s, BLOCKED) {
        Err((Error::StreamSyncTimeout, _)) => Ok(()),
        Err((k, m)) => Err(format!(
            "{what}: the wait should still block (507046 from a {BLOCKED:?} synchronize), got \
             {k} — {m}"
        )),
        Ok(()) => Err(format!(
            "{what}: the wait should still block, but the stream finished"
        )),
    }
}

/// The count equals `v`: a wait for `EQUAL v` passes at once (a 1 s timeout bounds it).
fn count_is(p: &dyn Probe, c: RawCntNotify, s: RawStream, v: u32, what: &str) -> CaseResult {
    must!(p.wait(
        c,
        s,
        CntWait::new(CntWaitMode::Equal, v).with_timeout(secs(1))
    ));
    match p.sync(s, LONG) {
        Ok(()) => Ok(()),
        Err((k, m)) => Err(format!(
            "{what}: the count should be {v:#x} (a wait for EQUAL {v:#x} with a 1 s timeout), \
             got {k} — {m}"
        )),
    }
}

fn not_supported(p: &dyn Probe) -> CaseResult {
    must_fail!(p.create(0), Error::FeatureNotSupport);
    must_fail!(p.free(0), Error::FeatureNotSupport);
    // The SoC check comes before the handle check.
    let g = RawCntNotify(0x5a5a_5a5a);
    must_fail!(p.destroy(g), Error::FeatureNotSupport);
    must_fail!(p.id(g), Error::FeatureNotSupport);
    if p.soc().has(Feature::Notify) {
        let s = must!(p.stream(0));
        must_fail!(p.record(g, s, CntRecord::add(1)), Error::FeatureNotSupport);
        must_fail!(
            p.wait(g, s, CntWait::new(CntWaitMode::Equal, 1)),
            Error::FeatureNotSupport
        );
        must_fail!(p.reset(g, s), Error::FeatureNotSupport);
    }
    if max_cnt_notifies(p.soc()) != 0 {
        return Err(format!("{} reports a count-notify pool", p.soc()));
    }
    Ok(())
}

fn create_id_destroy(p: &dyn Probe) -> CaseResult {
    let mut ids = Vec::new();
    let mut handles = Vec::new();
    for dev in [0, 0, 1, DEVICES - 1] {
        let c = must!(p.create(dev));
        ids.push((dev, must!(p.id(c))));
        handles.push(c);
    }
    for (i, a) in ids.iter().enumerate() {
        if a.1 >= MAX_CNT_NOTIFIES {
            return Err(format!("id {} out of range 0..{MAX_CNT_NOTIFIES}", a.1));
        }
        for b in &ids[i + 1..] {
            if a == b {
                return Err(format!("two live count notifies share {a:?}"));
            }
        }
    }
    let c = handles[0];
    must!(p.destroy(c));
    must_fail!(p.destroy(c), Error::InvalidHandle);
    must_fail!(p.id(c), Error::InvalidHandle);
    let s = must!(p.stream(0));
    must_fail!(p.record(c, s, CntRecord::set(1)), Error::InvalidHandle);
    must_fail!(
        p.wait(c, s, CntWait::new(CntWaitMode::Equal, 1)),
        Error::InvalidHandle
    );
    must_fail!(p.reset(c, s), Error::InvalidHandle);
    // A fresh count notify starts at 0.
    let fresh = must!(p.create(0));
    count_is(p, fresh, s, 0, "a new count notify")?;
    for h in &handles[1..] {
        must!(p.destroy(*h));
    }
    Ok(())
}

fn record_modes(p: &dyn Probe) -> CaseResult {
    let c = must!(p.create(0));
    let s = must!(p.stream(0));
    must!(p.record(c, s, CntRecord::set(5)));
    count_is(p, c, s, 5, "SET 5")?;
    must!(p.record(c, s, CntRecord::add(3)));
    count_is(p, c, s, 8, "ADD 3 after 5")?;
    must!(p.record(c, s, CntRecord::bit_or(0x11)));
    count_is(p, c, s, 0x19, "BIT_OR 0x11 after 8")?;
    must!(p.record(c, s, CntRecord::bit_and(0x0c)));
    count_is(p, c, s, 0x08, "BIT_AND 0x0c after 0x19")?;
    must!(p.record(c, s, CntRecord::set(0xdead_beef)));
    count_is(p, c, s, 0xdead_beef, "SET overwrites")?;
    must!(p.reset(c, s));
    count_is(p, c, s, 0, "reset")?;
    // Records run in stream order: the last one wins.
    for v in 1..=20 {
        must!(p.record(c, s, CntRecord::add(v)));
    }
    count_is(p, c, s, 210, "ADD 1..=20 in order")?;
    // A record on another device's stream reaches the same counter.
    let s1 = must!(p.stream(1));
    must!(p.record(c, s1, CntRecord::add(1)));
    done(p, s1, "record from device 1")?;
    count_is(p, c, s, 211, "ADD 1 from device 1")?;
    must!(p.destroy(c));
    Ok(())
}

fn add_wraps(p: &dyn Probe) -> CaseResult {
    let c = must!(p.create(0));
    let s = must!(p.stream(0));
    must!(p.record(c, s, CntRecord::set(u32::MAX)));
    must!(p.record(c, s, CntRecord::add(2)));
    count_is(p, c, s, 1, "0xFFFFFFFF + 2 wraps to 1")?;
    // Not saturated: a "less than 2" wait passes, a "bigger than 0xFFFFFFF0" one would not.
    must!(p.wait(
        c,
        s,
        CntWait::new(CntWaitMode::Less, 2).with_timeout(secs(1))
    ));
    done(p, s, "LESS 2 after the wrap")?;
    // Adding 2^32 - 1 is subtracting 1.
    must!(p.record(c, s, CntRecord::add(u32::MAX)));
    count_is(p, c, s, 0, "1 + 0xFFFFFFFF wraps to 0")?;
    must!(p.destroy(c));
    Ok(())
}

/// For each wait mode: a wait that is satisfied at once, and one that blocks until a record
/// makes its condition true.
fn wait_modes(p: &dyn Probe) -> CaseResult {
    use CntWaitMode::*;
    // (mode, value, count before, record that releases it, count after)
    let rows: [(CntWaitMode, u32, u32, CntRecord); 5] = [
        (Less, 5, 10, CntRecord::set(4)),
        (Equal, 7, 4, CntRecord::add(3)),
        (Bigger, 7, 7, CntRecord::add(1)),
        (BiggerOrEqual, 10, 8, CntRecord::add(2)),
        (EqualWithBitmask, 0b1010, 0b1000, CntRecord::bit_or(0b0010)),
    ];
    let c = must!(p.create(0));
    let w = must!(p.stream(0));
    let r = must!(p.stream(0));
    for (mode, value, before, release) in rows {
        let what = format!("{} {value:#x} at count {before:#x}", mode.name());
        must!(p.record(c, r, CntRecord::set(before)));
        done(p, r, &what)?;
        must!(p.wait(c, w, CntWait::new(mode, value)));
        blocked(p, w, &what)?;
        must!(p.record(c, r, release));
        done(p, r, &what)?;
        done(p, w, &format!("{what}, released by {release:?}"))?;
        // Now satisfied: a second wait passes at once and leaves the count alone.
        must!(p.wait(c, w, CntWait::new(mode, value).with_timeout(secs(1))));
        done(p, w, &format!("{what}: second wait"))?;
        let after = release.mode.apply(before, release.value);
        count_is(p, c, w, after, &format!("{what}: count kept"))?;
    }
    // Mask edge: an empty mask is always satisfied; "nothing is below 0".
    must!(p.reset(c, r));
    done(p, r, "reset")?;
    must!(p.wait(
        c,
        w,
        CntWait::new(EqualWithBitmask, 0).with_timeout(secs(1))
    ));
    done(p, w, "EQUAL_WITH_BITMASK 0")?;
    must!(p.wait(c, w, CntWait::new(Less, 0)));
    blocked(p, w, "LESS 0")?;
    must!(p.drop_stream(w));
    must!(p.destroy(c));
    Ok(())
}

fn clear_on_wait(p: &dyn Probe) -> CaseResult {
    let c = must!(p.create(0));
    let s = must!(p.stream(0));
    must!(p.record(c, s, CntRecord::set(3)));
    must!(p.wait(c, s, CntWait::new(CntWaitMode::BiggerOrEqual, 2)));
    count_is(p, c, s, 3, "a wait without isClear keeps the count")?;
    must!(p.wait(c, s, CntWait::new(CntWaitMode::BiggerOrEqual, 2).clearing()));
    count_is(p, c, s, 0, "a wait with isClear sets it to 0")?;
    // A clearing wait that blocks clears what released it.
    let w = must!(p.stream(0));
    must!(p.wait(c, w, CntWait::new(CntWaitMode::Equal, 9).clearing()));
    blocked(p, w, "EQUAL 9 with isClear")?;
    must!(p.record(c, s, CntRecord::add(9)));
    done(p, w, "released by ADD 9")?;
    count_is(p, c, s, 0, "cleared after the release")?;
    must!(p.destroy(c));
    Ok(())
}

fn timeout(p: &dyn Probe) -> CaseResult {
    let c = must!(p.create(0));
    let s = must!(p.stream(0));
    let t = std::time::Instant::now();
    must!(p.wait(
        c,
        s,
        CntWait::new(CntWaitMode::Equal, 1).with_timeout(secs(1))
    ));
    // The stream goes on after the failed wait (continue mode).
    must!(p.record(c, s, CntRecord::set(42)));
    match p.sync(s, LONG) {
        Err((Error::TaskTimeout, _)) => {}
        other => {
            return Err(format!(
                "a 1 s wait that is never satisfied: expected 107020 from synchronize, got \
                 {other:?}"
            ));
        }
    }
    let el = t.elapsed();
    // A lower bound only (a loaded machine makes a timeout late, never early).
    if el < Duration::from_millis(900) {
        return Err(format!("a 1 s timeout fired after {el:.2?}"));
    }
    done(p, s, "the error is reported once")?;
    count_is(p, c, s, 42, "the record after the failed wait ran")?;
    must!(p.destroy(c));
    Ok(())
}

fn releases_all(p: &dyn Probe) -> CaseResult {
    let c = must!(p.create(0));
    let r = must!(p.stream(0));
    let streams: Vec<RawStream> = (0..3)
        .map(|_| p.stream(0))
        .collect::<Result<_, _>>()
        .map_err(|(k, m)| format!("create_stream: {k} — {m}"))?;
    for (i, s) in streams.iter().enumerate() {
        must!(p.wait(
            c,
            *s,
            CntWait::new(CntWaitMode::BiggerOrEqual, i as u32 + 1)
        ));
    }
    for s in &streams {
        blocked(p, *s, "before the record")?;
    }
    must!(p.record(c, r, CntRecord::add(3)));
    for (i, s) in streams.iter().enumerate() {
        done(
            p,
            *s,
            &format!("wait #{i} (count >= {}) after ADD 3", i + 1),
        )?;
    }
    must!(p.destroy(c));
    Ok(())
}

fn handles_and_devices(p: &dyn Probe) -> CaseResult {
    let c = must!(p.create(1));
    let s0 = must!(p.stream(0));
    let s1 = must!(p.stream(1));
    // Waits only from the count notify's device.
    must_fail!(
        p.wait(c, s0, CntWait::new(CntWaitMode::Equal, 0)),
        Error::ParamInvalid
    );
    must!(p.wait(c, s1, CntWait::new(CntWaitMode::Equal, 0)));
    done(p, s1, "wait from the owner's device")?;
    for g in [
        RawCntNotify(0),
        RawCntNotify(u64::MAX),
        RawCntNotify(0x5a5a_5a5a_5a5a_5a5a),
    ] {
        must_fail!(p.id(g), Error::InvalidHandle);
        must_fail!(p.destroy(g), Error::InvalidHandle);
        must_fail!(p.record(g, s1, CntRecord::add(1)), Error::InvalidHandle);
    }
    for g in [RawStream(0x5a5a_5a5a_5a5a_5a5a), RawStream(u64::MAX)] {
        must_fail!(p.record(c, g, CntRecord::add(1)), Error::InvalidHandle);
        must_fail!(
            p.wait(c, g, CntWait::new(CntWaitMode::Equal, 0)),
            Error::InvalidHandle
        );
    }
    must_fail!(p.create(DEVICES), Error::InvalidDeviceId);
    must_fail!(p.free(DEVICES), Error::InvalidDeviceId);
    must!(p.destroy(c));
    Ok(())
}

fn pool_and_budget(p: &dyn Probe) -> CaseResult {
    let max = max_cnt_notifies(p.soc());
    for dev in 0..DEVICES {
        let f = must!(p.free(dev));
        if f != max {
            return Err(format!(
                "device {dev}: {f} count-notify ids free on a fresh machine, expected {max}"
            ));
        }
    }
    // Notify ids and count-notify ids are separate pools.
    let nfree = must!(p.notifies_free(2));
    must!(p.create_notify(2));
    must!(p.create_notify(2));
    let f = must!(p.free(2));
    if f != max {
        return Err(format!(
            "2 notifies took count-notify ids: {f} free, expected {max}"
        ));
    }
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(must!(p.create(2)));
    }
    let f = must!(p.free(2));
    if f != max - 3 {
        return Err(format!(
            "after 3 count notifies: {f} free, expected {}",
            max - 3
        ));
    }
    let n = must!(p.notifies_free(2));
    if n != nfree - 2 {
        return Err(format!(
            "count notifies took notify ids: {n} free, expected {}",
            nfree - 2
        ));
    }
    // Exhaust device 3: exactly `max` creates succeed, then 207009.
    let mut all = Vec::with_capacity(max as usize);
    loop {
        match p.create(3) {
            Ok(c) => {
                all.push(c);
                if all.len() > max as usize {
                    return Err(format!("device 3 gave more than {max} count notifies"));
                }
            }
            Err((Error::NoNotifyResource, m)) => {
                // The 207009 explains itself: the device and who owns its ids.
                let want = format!("pid {} (alive) holds {max}", p.pid());
                if !m.contains("device 3") || !m.contains(&want) {
                    return Err(format!(
                        "the 207009 message lacks \"device 3\" or {want:?}: {m}"
                    ));
                }
                break;
            }
            Err((k, m)) => {
                return Err(format!(
                    "count notify #{} on device 3: {k} — {m} (expected success until 207009)",
                    all.len() + 1
                ));
            }
        }
    }
    if all.len() != max as usize {
        return Err(format!(
            "device 3 gave {} count notifies, expected {max}",
            all.len()
        ));
    }
    let f = must!(p.free(3));
    if f != 0 {
        return Err(format!(
            "device 3 is full but reports {f} count-notify ids free"
        ));
    }
    must!(p.destroy(all[0]));
    let again = must!(p.create(3));
    must!(p.destroy(again));
    for c in &all[1..] {
        must!(p.destroy(*c));
    }
    let f = must!(p.free(3));
    if f != max {
        return Err(format!(
            "after destroying all: {f} free on device 3, expected {max}"
        ));
    }
    for c in held {
        must!(p.destroy(c));
    }
    Ok(())
}
