//! Noticing that a trial's processes did not run for a while: stopped (SIGSTOP, as a script
//! that pauses other processes for a quiet benchmark window sends them) or starved. Every
//! clock a case and the backend use (`Instant`, the simulator's timeouts) goes on while they
//! are stopped, so every wall-clock bound that runs out in such a gap fires at the resume —
//! a synchronize's bound before the stream's worker has timed its wait out, a role's wait for
//! a file before the coordinator could write it — and the case fails whatever the backend did.
//! The harness's poll loop of a trial naps at most 20 ms; a gap between two of its looks far
//! longer than that is such a pause, and the failure says so.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A gap between two looks of the poll loop longer than this counts as a pause. Heavy load
/// does not come near it: at load 14 on the project's 2-CPU VM a runnable thread waits tens of
/// milliseconds for a CPU, not a second.
pub const PAUSE_GAP: Duration = Duration::from_secs(1);

/// Watches the gaps between the looks of a poll loop.
#[derive(Debug)]
pub struct PauseWatch {
    last: Instant,
    /// The longest gap over [`PAUSE_GAP`]: its length, when it ended (monotonic, and the
    /// wall clock's time of day for the reader of the failure).
    longest: Option<(Duration, Instant, SystemTime)>,
    /// How many gaps were over [`PAUSE_GAP`] and their total.
    count: u32,
    total: Duration,
}

impl PauseWatch {
    /// A watch whose first look is `now`.
    pub fn new(now: Instant) -> Self {
        PauseWatch {
            last: now,
            longest: None,
            count: 0,
            total: Duration::ZERO,
        }
    }

    /// One look of the loop at `now` (at or after the previous one).
    pub fn look(&mut self, now: Instant) {
        let gap = now.saturating_duration_since(self.last);
        self.last = now;
        if gap > PAUSE_GAP {
            self.count += 1;
            self.total += gap;
            if self.longest.is_none_or(|(g, _, _)| gap > g) {
                self.longest = Some((gap, now, SystemTime::now()));
            }
        }
    }

    /// The longest pause seen, if any.
    pub fn longest(&self) -> Option<Duration> {
        self.longest.map(|(g, _, _)| g)
    }

    /// A note for a failure of the trial that ended at `end`, when the loop saw a pause.
    pub fn note(&self, end: Instant) -> Option<String> {
        let (gap, at, wall) = self.longest?;
        let others = if self.count > 1 {
            format!(" ({} such gaps, {:.1?} in all)", self.count, self.total)
        } else {
            String::new()
        };
        Some(format!(
            "\nnote: the trial's parent did not run for {gap:.1?}{others}, its longest gap between \
             two looks at the case process (which it takes every 20 ms at most), ending at \
             {} UTC, {:.1?} before the trial ended: the trial's processes were stopped (SIGSTOP, \
             e.g. by a script pausing processes for a quiet benchmark window) or starved. A \
             bound or timing check that ran out in that gap fails whatever the backend does; \
             rerun the trial before judging it",
            time_of_day(wall),
            end.saturating_duration_since(at)
        ))
    }
}

/// `HH:MM:SS.mmm` of `t` (UTC).
fn time_of_day(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let s = d.as_secs() % 86_400;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        s / 3600,
        s / 60 % 60,
        s % 60,
        d.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn short_gaps_are_no_pause_and_a_long_one_is_named() {
        let t0 = Instant::now();
        let mut w = PauseWatch::new(t0);
        for i in 1..=50 {
            w.look(t0 + Duration::from_millis(20 * i));
        }
        assert_eq!(w.longest(), None);
        assert_eq!(w.note(t0 + Duration::from_secs(1)), None);
        let resumed = t0 + Duration::from_millis(1000 + 27_500);
        w.look(resumed);
        w.look(resumed + Duration::from_millis(20));
        assert_eq!(w.longest(), Some(Duration::from_millis(27_500)));
        let note = w.note(resumed + Duration::from_millis(400)).unwrap();
        assert!(note.contains("did not run for 27.5s"), "{note}");
        assert!(note.contains("400.0ms before the trial ended"), "{note}");
        assert!(note.contains("SIGSTOP"), "{note}");
        // A second, shorter pause is counted, the longest still named.
        w.look(resumed + Duration::from_millis(20 + 2_000));
        let note = w.note(resumed + Duration::from_secs(3)).unwrap();
        assert!(
            note.contains("did not run for 27.5s (2 such gaps, 29.5s in all)"),
            "{note}"
        );
    }

    /// The premise: a process SIGSTOPped and resumed sees the stop as a gap of its monotonic
    /// clock (what quiet-window scripts do to the trials' processes).
    #[test]
    fn a_sigstop_of_this_process_is_seen_as_a_pause() {
        let mut w = PauseWatch::new(Instant::now());
        let mut sh = Command::new("sh")
            .args([
                "-c",
                "sleep 0.1; kill -STOP $PPID; sleep 1.5; kill -CONT $PPID",
            ])
            .spawn()
            .expect("spawning sh");
        let start = Instant::now();
        while sh.try_wait().expect("polling sh").is_none() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "sh did not finish"
            );
            std::thread::sleep(Duration::from_millis(10));
            w.look(Instant::now());
        }
        let gap = w.longest().expect("the stop was not seen");
        assert!(
            (Duration::from_millis(1400)..Duration::from_secs(10)).contains(&gap),
            "{gap:?}"
        );
    }
}
