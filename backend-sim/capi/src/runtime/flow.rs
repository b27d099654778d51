//! Run-time control flow of a built model: the stored tasks of a model whose streams branch,
//! loop or start each other (`aclrtSetLabel`, `aclrtSwitchLabelByIndex`, `aclrtSwitchStream`,
//! `aclrtActiveStream`, streams bound with `ACL_MODEL_STREAM_FLAG_DEFAULT`) become a small
//! program, and an execution is its interpreter: a driver task on the execution's stream
//! queues each model stream's tasks up to its next control task, then a task that reads the
//! control task's operands from device memory *when it runs* (in that stream's order, after
//! the tasks before it) and tells the driver; the driver decides where each stream goes on
//! and queues the next block. The execution ends when no stream runs any more.
//!
//! CANN's semantics followed (hicann/runtime `docs/zh/api_ref/10_label_management.md`,
//! `06_stream_management.md` `aclrtActiveStream`/`aclrtSwitchStream`,
//! `15_model_running_instance__management.md` `aclmdlRIBindStream`; the tasks' firmware is not
//! public source):
//!
//! - a label marks a place in its stream's tasks; `aclrtSwitchLabelByIndex` reads a `uint32`
//!   index at `ptr` and goes on at label `index` of its list (an index past the list's last:
//!   the last), on the label's stream; the switching stream stops;
//! - `aclrtSwitchStream` compares the `int32`/`int64` values at `leftValue` and `rightValue`:
//!   when `cond` holds, `trueStream` runs from its first task and the switching stream stops;
//!   otherwise the switching stream goes on;
//! - `aclrtActiveStream` starts `activeStream` from its first task, beside the activating one;
//! - the streams bound with `ACL_MODEL_STREAM_FLAG_HEAD` start with each execution, the
//!   others only when a task starts them.
//!
//! The simulator's own choices: a stream started while it still runs queues its new run after
//! the current one; an event wait in such a model pairs with the record latest queued when
//! its block is queued; executions of one model run one at a time (a second waits, on its
//! own stream, for the first to end). A failed read stops the stream that read (its error is
//! the execution's).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use acl_notify_core::Error;
use acl_notify_sim::SimError;
use acl_notify_sim::mem::indirect::{Reader, Word};

use crate::errmsg::{CallError, param};

/// `aclrtCondition`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cond {
    Equal,
    NotEqual,
    Greater,
    GreaterOrEqual,
    Less,
    LessOrEqual,
}

impl Cond {
    /// The condition a C value names: 107000 for another (`ApiErrorDecorator::StreamSwitchEx`).
    pub(crate) fn from_c(c: i32) -> Result<Cond, CallError> {
        Ok(match c {
            0 => Cond::Equal,
            1 => Cond::NotEqual,
            2 => Cond::Greater,
            3 => Cond::GreaterOrEqual,
            4 => Cond::Less,
            5 => Cond::LessOrEqual,
            c => {
                return Err(param(format!(
                    "cond {c}: an aclrtCondition, ACL_RT_EQUAL (0) to ACL_RT_LESS_OR_EQUAL (5)"
                )));
            }
        })
    }

    fn holds(self, l: i64, r: i64) -> bool {
        match self {
            Cond::Equal => l == r,
            Cond::NotEqual => l != r,
            Cond::Greater => l > r,
            Cond::GreaterOrEqual => l >= r,
            Cond::Less => l < r,
            Cond::LessOrEqual => l <= r,
        }
    }
}

/// A control task as stored in a model (C handles; `list` indexes the model's label lists
/// as they were when the switch was stored).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Control {
    /// `aclrtSetLabel`: the label's handle.
    Label(usize),
    /// `aclrtSwitchLabelByIndex`.
    SwitchIndex { ptr: usize, max: u32, list: usize },
    /// `aclrtSwitchStream` (`wide`: `ACL_RT_SWITCH_INT64`).
    SwitchStream {
        left: usize,
        right: usize,
        cond: Cond,
        wide: bool,
        target: usize,
    },
    /// `aclrtActiveStream`: the stream started.
    Active(usize),
}

impl Control {
    /// The call's name, for messages.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Control::Label(_) => "aclrtSetLabel",
            Control::SwitchIndex { .. } => "aclrtSwitchLabelByIndex",
            Control::SwitchStream { .. } => "aclrtSwitchStream",
            Control::Active(_) => "aclrtActiveStream",
        }
    }
}

/// A step of a stream's program.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Op {
    /// The model's task of this index.
    Task(usize),
    /// Go on at `targets[min(index, len - 1)]` (stream, step).
    Index {
        ptr: usize,
        targets: Vec<(usize, usize)>,
    },
    Switch {
        left: usize,
        right: usize,
        cond: Cond,
        wide: bool,
        target: usize,
    },
    Active(usize),
}

/// A model's streams as a program: the steps of each, and which start with an execution.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Program {
    streams: Vec<Vec<Op>>,
    heads: Vec<usize>,
}

impl Program {
    /// The program of `tasks` (stream index, control task or `None` for a plain one) on
    /// `heads.len()` streams (`heads[i]`: stream `i` starts with each execution), `lists`
    /// the label handles of the switches' lists, `stream_of` a C stream handle's index.
    /// 507000 (`ACL_ERROR_RT_INTERNAL_ERROR`, CANN's `RT_ERROR_LABEL_STREAM`/`_MODEL`, as its
    /// `ApiImpl::LabelListCpy` checks) for a label of a list set on no stream of the model.
    pub(super) fn new(
        tasks: &[(usize, Option<Control>)],
        heads: &[bool],
        lists: &[Vec<usize>],
        stream_of: impl Fn(usize) -> Option<usize>,
    ) -> Result<Program, CallError> {
        let mut streams: Vec<Vec<Op>> = vec![Vec::new(); heads.len()];
        let mut labels: Vec<(usize, (usize, usize))> = Vec::new();
        let mut switches = Vec::new();
        for (n, &(i, c)) in tasks.iter().enumerate() {
            let here = streams[i].len();
            let op = match c {
                None => Op::Task(n),
                Some(Control::Label(l)) => {
                    labels.push((l, (i, here)));
                    continue;
                }
                Some(Control::SwitchIndex { ptr, max, list }) => {
                    switches.push((i, here, max, list));
                    Op::Index {
                        ptr,
                        targets: Vec::new(),
                    }
                }
                Some(Control::SwitchStream {
                    left,
                    right,
                    cond,
                    wide,
                    target,
                }) => Op::Switch {
                    left,
                    right,
                    cond,
                    wide,
                    target: index_of(&stream_of, target)?,
                },
                Some(Control::Active(t)) => Op::Active(index_of(&stream_of, t)?),
            };
            streams[i].push(op);
        }
        for (i, at, max, list) in switches {
            let handles = lists.get(list).map(Vec::as_slice).unwrap_or_default();
            let take = handles.len().min(max as usize);
            let targets = handles[..take]
                .iter()
                .map(|&l| {
                    labels
                        .iter()
                        .find(|(h, _)| *h == l)
                        .map(|&(_, p)| p)
                        .ok_or_else(|| {
                            CallError::new(
                                Error::InternalError,
                                format!(
                                    "label {l:#x} of the list an aclrtSwitchLabelByIndex on the \
                                     model's stream {i} jumps through is set on no stream of \
                                     the model (aclrtSetLabel)"
                                ),
                            )
                        })
                })
                .collect::<Result<Vec<_>, _>>()?;
            if let Some(Op::Index { targets: t, .. }) = streams[i].get_mut(at) {
                *t = targets;
            }
        }
        let heads = (0..heads.len()).filter(|&i| heads[i]).collect();
        Ok(Program { streams, heads })
    }

    /// Whether an execution must interpret it (else every task is queued up front).
    pub(super) fn branches(&self) -> bool {
        self.heads.len() != self.streams.len()
            || self
                .streams
                .iter()
                .flatten()
                .any(|op| !matches!(op, Op::Task(_)))
    }
}

fn index_of(stream_of: &impl Fn(usize) -> Option<usize>, s: usize) -> Result<usize, CallError> {
    stream_of(s).ok_or_else(|| {
        CallError::new(
            Error::StreamModel,
            format!("stream {s:#x} is not a stream of the model"),
        )
    })
}

/// What the driver asks of the C layer: queue a model task, or a read of device words whose
/// values come back to the driver (`Sim::read_async`), on a model stream (by index).
pub(super) trait Env {
    fn queue_task(&self, stream: usize, task: usize) -> Result<(), CallError>;
    fn queue_read(
        &self,
        stream: usize,
        words: Vec<(Word, &'static str)>,
        then: Reader,
    ) -> Result<(), CallError>;
}

/// A model's executions' shared state: one runs at a time; `abort` stops the one running.
#[derive(Debug, Default)]
pub(super) struct Runs {
    running: Mutex<bool>,
    turn: Condvar,
    pub(super) abort: AtomicBool,
}

/// What the read tasks tell the driver: the stream, the step it stopped at, the values.
type Heard = (usize, usize, Result<Vec<u64>, CallError>);

#[derive(Default)]
struct Inbox {
    heard: Mutex<VecDeque<Heard>>,
    ready: Condvar,
}

impl Inbox {
    fn lock(&self) -> MutexGuard<'_, VecDeque<Heard>> {
        self.heard.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Sends its stream's news once; dropped unsent (its task dropped unrun), it says so.
struct Notice {
    inbox: Arc<Inbox>,
    at: (usize, usize),
    sent: bool,
}

impl Notice {
    fn send(mut self, r: Result<Vec<u64>, CallError>) {
        self.sent = true;
        self.inbox.lock().push_back((self.at.0, self.at.1, r));
        self.inbox.ready.notify_all();
    }
}

impl Drop for Notice {
    fn drop(&mut self) {
        if !self.sent {
            let e = CallError::new(
                Error::InternalError,
                format!(
                    "the model's stream {} was discarded while the execution ran",
                    self.at.0
                ),
            );
            self.inbox.lock().push_back((self.at.0, self.at.1, Err(e)));
            self.inbox.ready.notify_all();
        }
    }
}

/// How long the driver sleeps between looks at its cancellation.
const SLICE: Duration = Duration::from_millis(2);

/// Runs one execution of `program` through `env`: waits for the model's turn, starts the head
/// streams, follows each stream's control tasks as their reads report, and returns when no
/// stream runs (the first error seen, if any). `cancelled` is polled between waits.
pub(super) fn drive(
    program: &Program,
    runs: &Runs,
    env: &dyn Env,
    cancelled: &dyn Fn() -> bool,
) -> Result<(), CallError> {
    {
        let mut busy = runs.running.lock().unwrap_or_else(PoisonError::into_inner);
        while *busy {
            if cancelled() {
                return Err(stopped());
            }
            busy = runs
                .turn
                .wait_timeout(busy, SLICE)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        *busy = true;
    }
    let r = interpret(program, runs, env, cancelled);
    // An abort stops the execution it finds running or queued: the next starts afresh.
    runs.abort.store(false, Ordering::Release);
    *runs.running.lock().unwrap_or_else(PoisonError::into_inner) = false;
    runs.turn.notify_all();
    r
}

fn stopped() -> CallError {
    CallError::new(
        Error::InternalError,
        "the execution's stream was destroyed while it waited for the model",
    )
}

fn interpret(
    program: &Program,
    runs: &Runs,
    env: &dyn Env,
    cancelled: &dyn Fn() -> bool,
) -> Result<(), CallError> {
    let inbox = Arc::new(Inbox::default());
    let mut live = 0usize;
    let mut first: Option<CallError> = None;
    // Starts streams at steps: their blocks' tasks queued in the model's task order (so a
    // wait on one stream is queued after the record on another it pairs with), then each
    // stream's read of its control task's operands.
    let start = |at: &[(usize, usize)], live: &mut usize| -> Result<(), CallError> {
        let mut queue: Vec<(usize, usize)> = Vec::new();
        let mut ends = Vec::with_capacity(at.len());
        for &(s, from) in at {
            let steps = &program.streams[s];
            let mut k = from;
            while let Some(Op::Task(n)) = steps.get(k) {
                queue.push((*n, s));
                k += 1;
            }
            ends.push((s, k));
        }
        queue.sort_unstable();
        for (n, s) in queue {
            env.queue_task(s, n)?;
        }
        for (s, k) in ends {
            let words = match program.streams[s].get(k) {
                Some(Op::Index { ptr, .. }) => vec![(Word::At32(*ptr), "label index")],
                Some(Op::Switch {
                    left, right, wide, ..
                }) => {
                    let w = |a: usize| if *wide { Word::At(a, 0) } else { Word::At32(a) };
                    vec![(w(*left), "left value"), (w(*right), "right value")]
                }
                _ => Vec::new(),
            };
            let notice = Notice {
                inbox: Arc::clone(&inbox),
                at: (s, k),
                sent: false,
            };
            let then: Reader = Box::new(move |r: Result<&[u64], &SimError>| {
                notice.send(
                    r.map(<[u64]>::to_vec)
                        .map_err(|e| CallError::backend(e.clone())),
                );
            });
            env.queue_read(s, words, then)?;
            *live += 1;
        }
        Ok(())
    };
    let note = |r: Result<(), CallError>, first: &mut Option<CallError>| {
        if let Err(e) = r {
            first.get_or_insert(e);
        }
    };
    let heads: Vec<(usize, usize)> = program.heads.iter().map(|&h| (h, 0)).collect();
    note(start(&heads, &mut live), &mut first);
    while live > 0 {
        let (s, at, r) = {
            let mut q = inbox.lock();
            loop {
                if let Some(h) = q.pop_front() {
                    break h;
                }
                if cancelled() {
                    // The streams' discards drop the read tasks, whose notices arrive.
                    runs.abort.store(true, Ordering::Release);
                }
                q = inbox
                    .ready
                    .wait_timeout(q, SLICE)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
        };
        live -= 1;
        let values = match r {
            Ok(v) => v,
            Err(e) => {
                note(Err(e), &mut first);
                continue;
            }
        };
        if runs.abort.load(Ordering::Acquire) || first.is_some() {
            continue;
        }
        let next: Vec<(usize, usize)> = match program.streams[s].get(at) {
            None | Some(Op::Task(_)) => Vec::new(),
            Some(Op::Index { targets, .. }) => {
                let i = (values[0] as usize).min(targets.len().saturating_sub(1));
                targets.get(i).copied().into_iter().collect()
            }
            Some(Op::Switch {
                cond, wide, target, ..
            }) => {
                let v = |x: u64| {
                    if *wide {
                        x as i64
                    } else {
                        i64::from(x as u32 as i32)
                    }
                };
                if cond.holds(v(values[0]), v(values[1])) {
                    vec![(*target, 0)]
                } else {
                    vec![(s, at + 1)]
                }
            }
            Some(Op::Active(t)) => vec![(*t, 0), (s, at + 1)],
        };
        note(start(&next, &mut live), &mut first);
    }
    if runs.abort.load(Ordering::Acquire) && first.is_none() {
        return Err(CallError::new(
            Error::ModelAbortNormal,
            "the execution was aborted (aclmdlRIAbort) before its end",
        ));
    }
    first.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program(tasks: &[(usize, Option<Control>)], heads: &[bool]) -> Program {
        let lists = vec![vec![0xA1, 0xA2]];
        Program::new(tasks, heads, &lists, |s| Some(s - 0x100)).unwrap()
    }

    #[test]
    fn labels_mark_places_and_switches_resolve_to_them() {
        let p = program(
            &[
                (0, None),
                (0, Some(Control::Label(0xA1))),
                (0, None),
                (
                    0,
                    Some(Control::SwitchIndex {
                        ptr: 8,
                        max: 2,
                        list: 0,
                    }),
                ),
                (1, Some(Control::Label(0xA2))),
                (1, None),
            ],
            &[true, false],
        );
        assert_eq!(p.heads, vec![0]);
        assert_eq!(
            p.streams[0],
            vec![
                Op::Task(0),
                Op::Task(2),
                Op::Index {
                    ptr: 8,
                    targets: vec![(0, 1), (1, 0)]
                }
            ]
        );
        assert_eq!(p.streams[1], vec![Op::Task(5)]);
        assert!(p.branches());
        assert!(!program(&[(0, None), (1, None)], &[true, true]).branches());
    }

    #[test]
    fn a_label_set_nowhere_is_refused() {
        let e = Program::new(
            &[(
                0,
                Some(Control::SwitchIndex {
                    ptr: 8,
                    max: 2,
                    list: 0,
                }),
            )],
            &[true],
            &[vec![0xA1]],
            |_| Some(0),
        )
        .unwrap_err();
        assert_eq!(e.code(), Error::InternalError);
    }

    #[test]
    fn conditions_compare_signed_values() {
        assert!(Cond::Less.holds(-1, 0));
        assert!(Cond::GreaterOrEqual.holds(3, 3));
        assert!(!Cond::NotEqual.holds(3, 3));
        assert!(Cond::from_c(6).is_err());
    }
}
