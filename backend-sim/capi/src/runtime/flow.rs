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
//! the current one; executions of one model run one at a time (a second waits, on its own
//! stream, for the first to end). A failed read stops the stream that read (its error is the
//! execution's). A destroyed execution stream drops the model streams' queued tasks and the
//! driver gives up on them after [`STOP_WAIT`].
//!
//! An event wait in such a model pairs with the record latest queued when its block is
//! queued (the model's events are Ex events, `capture`). CANN differs: a captured record
//! writes 1 to the event's word and a captured wait waits until the word is 1
//! (hicann/runtime `src/runtime/feature/aclgraph/event_capture.cc`, `RecordSoftwareEvent`,
//! `CaptureWaitProcess`), so there a wait whose record is in a block queued later (a stream
//! started after the waiting one) waits for it, where here it pairs with an earlier record
//! (or none, and does not wait). Blocks started together are queued in the model's task
//! order, so a wait stored after its record pairs as in CANN; the difference shows only for
//! a wait on a record of a stream the control flow starts later: not supported, documented.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

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

/// `aclrtSwitchStream`'s operands: the values at `left` and `right` compared by `cond`
/// (`wide`: `ACL_RT_SWITCH_INT64`), and the stream started when it holds (a C handle in a
/// [`Control`], the stream's index in an [`Op`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Switch {
    pub(crate) left: usize,
    pub(crate) right: usize,
    pub(crate) cond: Cond,
    pub(crate) wide: bool,
    pub(crate) target: usize,
}

/// `aclmdlRICondTaskType`: how a conditional task picks among its sub-models from the
/// 64-bit condition word it reads when it runs (hicann/runtime
/// `src/runtime/core/src/task/stars_cond_isa_helper.cc`, `ConstructIfCondSetupBranch`,
/// `ConstructWhileCondSetupBranch`, `ConstructSwitchCondSetupBranch`, and
/// `ConstructCaptureConditionJumpBackFc` in `aclgraph_cond_task.cc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CondKind {
    /// Not 0: sub-model 0; 0: sub-model 1 if there is one, else none.
    If,
    /// Sub-model 0 while the word is not 0, read again after each run (0 at once: none).
    While,
    /// Sub-model `word` when it is below their number, else none. The word is read as
    /// unsigned here: CANN's check is a signed branch (`BLT` in
    /// `ConstructSwitchCondSetupBranch`), so a word that is negative as an `int64` passes it
    /// and indexes before the sub-model array on the device (undefined there); the simulator
    /// runs none for it, as for any index past the last.
    Switch,
}

impl CondKind {
    /// The type a C value names: 107000 for another (`ApiErrorDecorator::StreamAddCondTask`).
    pub(crate) fn from_c(t: u32) -> Result<CondKind, CallError> {
        Ok(match t {
            0 => CondKind::If,
            1 => CondKind::While,
            2 => CondKind::Switch,
            t => {
                return Err(param(format!(
                    "params.type {t}: ACL_MODEL_RI_COND_TYPE_IF (0), _WHILE (1) or _SWITCH (2)"
                )));
            }
        })
    }

    /// `CheckCondTaskParamsSize` (`aclgraph_cond_task.cc`): an if has 1 or 2 sub-models, a
    /// while 1, a switch at least 1; 107000 otherwise.
    pub(crate) fn check_size(self, size: u32) -> Result<(), CallError> {
        let (ok, want) = match self {
            CondKind::If => (size == 1 || size == 2, "1 or 2"),
            CondKind::While => (size == 1, "1"),
            CondKind::Switch => (size > 0, "at least 1"),
        };
        if ok {
            return Ok(());
        }
        Err(param(format!(
            "params.size {size}: a {self:?} conditional task has {want} sub-models"
        )))
    }

    /// The sub-model `word` selects among `n` (`None`: none runs).
    fn pick(self, word: u64, n: usize) -> Option<usize> {
        match self {
            CondKind::If if word != 0 => Some(0),
            CondKind::If => (n > 1).then_some(1),
            CondKind::While => (word != 0).then_some(0),
            // CANN compares with a signed branch (`BLT`); a word read as a negative number
            // would index before the array: the simulator runs none for it.
            CondKind::Switch => usize::try_from(word).ok().filter(|&i| i < n),
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
    /// `aclrtSwitchStream` (`target`: the true stream's handle).
    SwitchStream(Switch),
    /// `aclrtActiveStream`: the stream started.
    Active(usize),
    /// `aclmdlRIAddCondTask`: the condition handle (`cond`).
    Cond(usize),
}

impl Control {
    /// The call's name, for messages.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Control::Label(_) => "aclrtSetLabel",
            Control::SwitchIndex { .. } => "aclrtSwitchLabelByIndex",
            Control::SwitchStream(_) => "aclrtSwitchStream",
            Control::Active(_) => "aclrtActiveStream",
            Control::Cond(_) => "aclmdlRIAddCondTask",
        }
    }
}

/// A step of a stream's program.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Op {
    /// The frame's task of this index.
    Task(usize),
    /// Go on at `targets[min(index, len - 1)]` (stream, step).
    Index {
        ptr: usize,
        targets: Vec<(usize, usize)>,
    },
    /// `target`: a stream of the program.
    Switch(Switch),
    Active(usize),
    /// Run one of `frames` (or none) as the word at `addr` picks, then go on.
    Cond {
        addr: usize,
        kind: CondKind,
        frames: Vec<usize>,
    },
}

/// One model of an execution: the root model, or a sub-model a conditional task runs.
#[derive(Debug, Default)]
pub(super) struct Frame {
    /// Its tasks: stream index, control task or `None` for a plain one.
    pub(super) tasks: Vec<(usize, Option<Control>)>,
    /// Per stream: it starts when the frame runs.
    pub(super) heads: Vec<bool>,
    /// The label handles of its switches' lists.
    pub(super) lists: Vec<Vec<usize>>,
    /// Its streams (C handles), for the control tasks that name one.
    pub(super) streams: Vec<usize>,
}

/// What a conditional task needs when it runs: its word, its type, the frames of its
/// sub-models (indices into the frames given to [`Program::new`]).
#[derive(Debug)]
pub(super) struct CondSpec {
    pub(super) addr: usize,
    pub(super) kind: CondKind,
    pub(super) frames: Vec<usize>,
}

/// An execution's models as one program: the steps of each stream (the frames' streams one
/// after the other), where each stream is, and the streams each frame starts with.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Program {
    streams: Vec<Vec<Op>>,
    /// Per stream: (frame, its index in the frame).
    place: Vec<(usize, usize)>,
    /// Per frame: the streams that start when it runs.
    starts: Vec<Vec<usize>>,
}

impl Program {
    /// The program of `frames` (frame 0 the model executed), `cond_of` the conditional task
    /// of a condition handle. 507000 (`ACL_ERROR_RT_INTERNAL_ERROR`, CANN's
    /// `RT_ERROR_LABEL_STREAM`/`_MODEL`, as its `ApiImpl::LabelListCpy` checks) for a label of
    /// a list set on no stream of its model.
    pub(super) fn new(
        frames: &[Frame],
        cond_of: &dyn Fn(usize) -> Result<CondSpec, CallError>,
    ) -> Result<Program, CallError> {
        let mut p = Program {
            streams: Vec::new(),
            place: Vec::new(),
            starts: Vec::new(),
        };
        for (f, frame) in frames.iter().enumerate() {
            p.add(f, frame, cond_of)?;
        }
        Ok(p)
    }

    /// Appends frame `f`'s streams.
    fn add(
        &mut self,
        f: usize,
        frame: &Frame,
        cond_of: &dyn Fn(usize) -> Result<CondSpec, CallError>,
    ) -> Result<(), CallError> {
        let base = self.streams.len();
        let stream_of = |s: usize| {
            frame
                .streams
                .iter()
                .position(|&x| x == s)
                .map(|i| base + i)
                .ok_or_else(|| {
                    CallError::new(
                        Error::StreamModel,
                        format!("stream {s:#x} is not a stream of the model"),
                    )
                })
        };
        let mut streams: Vec<Vec<Op>> = vec![Vec::new(); frame.heads.len()];
        let mut labels: Vec<(usize, (usize, usize))> = Vec::new();
        let mut switches = Vec::new();
        for (n, &(i, c)) in frame.tasks.iter().enumerate() {
            let here = streams[i].len();
            let op = match c {
                None => Op::Task(n),
                Some(Control::Label(l)) => {
                    labels.push((l, (base + i, here)));
                    continue;
                }
                Some(Control::SwitchIndex { ptr, max, list }) => {
                    switches.push((i, here, max, list));
                    Op::Index {
                        ptr,
                        targets: Vec::new(),
                    }
                }
                Some(Control::SwitchStream(s)) => Op::Switch(Switch {
                    target: stream_of(s.target)?,
                    ..s
                }),
                Some(Control::Active(t)) => Op::Active(stream_of(t)?),
                Some(Control::Cond(h)) => {
                    let c = cond_of(h)?;
                    Op::Cond {
                        addr: c.addr,
                        kind: c.kind,
                        frames: c.frames,
                    }
                }
            };
            streams[i].push(op);
        }
        for (i, at, max, list) in switches {
            let handles = frame.lists.get(list).map(Vec::as_slice).unwrap_or_default();
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
        self.starts.push(
            (0..frame.heads.len())
                .filter(|&i| frame.heads[i])
                .map(|i| base + i)
                .collect(),
        );
        self.place.extend((0..streams.len()).map(|i| (f, i)));
        self.streams.extend(streams);
        Ok(())
    }

    /// Whether an execution must interpret it (else every task is queued up front).
    pub(super) fn branches(&self) -> bool {
        self.starts.iter().map(Vec::len).sum::<usize>() != self.streams.len()
            || self
                .streams
                .iter()
                .flatten()
                .any(|op| !matches!(op, Op::Task(_)))
    }
}

/// What the driver asks of the C layer: queue a task of a frame, or a read of device words
/// whose values come back to the driver (`Sim::read_async`), on a stream of a frame (by its
/// index there); and stop every stream's queued tasks (the execution's stream was destroyed).
pub(super) trait Env {
    fn queue_task(&self, frame: usize, stream: usize, task: usize) -> Result<(), CallError>;
    fn queue_read(
        &self,
        frame: usize,
        stream: usize,
        words: Vec<(Word, &'static str)>,
        then: Reader,
    ) -> Result<(), CallError>;
    fn stop(&self);
}

/// A model's executions' shared state: one runs at a time; an abort stops those queued
/// before it (the one running included), by number.
#[derive(Debug, Default)]
pub(super) struct Runs {
    running: Mutex<bool>,
    turn: Condvar,
    /// Executions numbered so far ([`number`](Self::number)).
    queued: AtomicU64,
    /// Executions numbered below this were aborted ([`abort`](Self::abort)).
    abort_below: AtomicU64,
}

impl Runs {
    /// The number of an execution being queued (0, 1, ...): what [`abort`](Self::abort) and
    /// [`drive`] know it by.
    pub(super) fn number(&self) -> u64 {
        self.queued.fetch_add(1, Ordering::SeqCst)
    }

    /// `aclmdlRIAbort`: the executions numbered so far stop (the one running at its next
    /// control task or end, the queued ones at their start); those numbered later run. By
    /// number, not a flag the running one clears: a flag raised by an abort whose execution
    /// had just ended stayed up and stopped the next execution, queued after the abort
    /// returned (seen under memcheck: `tests/c/model_flow.c`'s clean execution after its
    /// aborting thread was joined answered 507023).
    pub(super) fn abort(&self) {
        self.abort_below
            .fetch_max(self.queued.load(Ordering::SeqCst), Ordering::SeqCst);
    }

    /// Whether execution `no` was aborted.
    fn aborted(&self, no: u64) -> bool {
        no < self.abort_below.load(Ordering::SeqCst)
    }
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

/// How long a cancelled execution waits for its streams' queued tasks to be dropped before
/// it gives up on them (a task that never ends: a wait nobody records).
const STOP_WAIT: Duration = Duration::from_secs(2);

/// Runs one execution of `program` through `env`: waits for the model's turn, starts the head
/// streams, follows each stream's control tasks as their reads report, and returns when no
/// stream runs (the first error seen, if any). `cancelled` is polled between waits.
pub(super) fn drive(
    program: &Program,
    runs: &Runs,
    no: u64,
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
    let r = Interp::new(program, env, no).run(runs, cancelled);
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

/// One execution's state.
struct Interp<'a> {
    program: &'a Program,
    env: &'a dyn Env,
    inbox: Arc<Inbox>,
    /// Reads queued and not heard from.
    live: usize,
    /// Per frame: its streams running (a stream stopped at a conditional task counts).
    running: Vec<usize>,
    /// Per frame: the stream and step of the conditional task that runs it.
    parked: Vec<Option<(usize, usize)>>,
    first: Option<CallError>,
    /// This execution's number ([`Runs::number`]).
    no: u64,
    /// Stopped for the cancellation of the execution's stream.
    stopping: bool,
}

impl<'a> Interp<'a> {
    fn new(program: &'a Program, env: &'a dyn Env, no: u64) -> Self {
        let frames = program.starts.len();
        Interp {
            program,
            env,
            inbox: Arc::new(Inbox::default()),
            live: 0,
            running: vec![0; frames],
            parked: vec![None; frames],
            first: None,
            no,
            stopping: false,
        }
    }

    fn note(&mut self, r: Result<(), CallError>) {
        if let Err(e) = r {
            self.first.get_or_insert(e);
        }
    }

    /// Starts streams at steps: their blocks' tasks queued in the model's task order (so a
    /// wait on one stream is queued after the record on another it pairs with), then each
    /// stream's read of its control task's operands.
    fn start(&mut self, at: &[(usize, usize)]) -> Result<(), CallError> {
        let p = self.program;
        let mut queue: Vec<(usize, usize, usize)> = Vec::new();
        let mut ends = Vec::with_capacity(at.len());
        for &(s, from) in at {
            let mut k = from;
            while let Some(Op::Task(n)) = p.streams[s].get(k) {
                queue.push((p.place[s].0, *n, s));
                k += 1;
            }
            ends.push((s, k));
        }
        queue.sort_unstable();
        for (f, n, s) in queue {
            self.env.queue_task(f, p.place[s].1, n)?;
        }
        for (s, k) in ends {
            let words = match p.streams[s].get(k) {
                Some(Op::Index { ptr, .. }) => vec![(Word::At32(*ptr), "label index")],
                Some(Op::Switch(sw)) => {
                    let w = |a: usize| {
                        if sw.wide {
                            Word::At(a, 0)
                        } else {
                            Word::At32(a)
                        }
                    };
                    vec![(w(sw.left), "left value"), (w(sw.right), "right value")]
                }
                Some(Op::Cond { addr, .. }) => vec![(Word::At(*addr, 0), "condition value")],
                _ => Vec::new(),
            };
            let notice = Notice {
                inbox: Arc::clone(&self.inbox),
                at: (s, k),
                sent: false,
            };
            let then: Reader = Box::new(move |r: Result<&[u64], &SimError>| {
                notice.send(
                    r.map(<[u64]>::to_vec)
                        .map_err(|e| CallError::backend(e.clone())),
                );
            });
            let (f, local) = p.place[s];
            self.env.queue_read(f, local, words, then)?;
            self.live += 1;
            self.running[f] += 1;
        }
        Ok(())
    }

    /// Starts `at`, noting a failure.
    fn go(&mut self, at: &[(usize, usize)]) {
        let r = self.start(at);
        self.note(r);
    }

    /// The next report, waiting for it; `None` when a cancelled execution gave up on its
    /// streams.
    fn next(&mut self, cancelled: &dyn Fn() -> bool) -> Option<Heard> {
        let mut q = self.inbox.lock();
        let mut given_up: Option<Instant> = None;
        loop {
            if let Some(h) = q.pop_front() {
                return Some(h);
            }
            if given_up.is_none() && cancelled() {
                // The streams' queued tasks are dropped: their reads' notices arrive.
                self.stopping = true;
                drop(q);
                self.env.stop();
                q = self.inbox.lock();
                given_up = Some(Instant::now() + STOP_WAIT);
                continue;
            }
            if given_up.is_some_and(|t| Instant::now() >= t) {
                return None;
            }
            q = self
                .inbox
                .ready
                .wait_timeout(q, SLICE)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    fn run(mut self, runs: &Runs, cancelled: &dyn Fn() -> bool) -> Result<(), CallError> {
        let p = self.program;
        let heads: Vec<(usize, usize)> = p.starts[0].iter().map(|&h| (h, 0)).collect();
        self.go(&heads);
        while self.live > 0 {
            let Some((s, at, r)) = self.next(cancelled) else {
                return Err(CallError::new(
                    Error::InternalError,
                    format!(
                        "the execution's stream was destroyed and {} of the model's streams \
                         did not stop within {STOP_WAIT:?} (a task that never ends)",
                        self.live
                    ),
                ));
            };
            self.live -= 1;
            let f = p.place[s].0;
            self.running[f] -= 1;
            let values = match r {
                Ok(v) => v,
                Err(e) => {
                    self.note(Err(e));
                    continue;
                }
            };
            if self.stopping || runs.aborted(self.no) || self.first.is_some() {
                continue;
            }
            match p.streams[s].get(at) {
                None | Some(Op::Task(_)) => {}
                Some(Op::Index { targets, .. }) => {
                    let i = (values[0] as usize).min(targets.len().saturating_sub(1));
                    let next: Vec<_> = targets.get(i).copied().into_iter().collect();
                    self.go(&next);
                }
                Some(Op::Switch(sw)) => {
                    let v = |x: u64| {
                        if sw.wide {
                            x as i64
                        } else {
                            i64::from(x as u32 as i32)
                        }
                    };
                    if sw.cond.holds(v(values[0]), v(values[1])) {
                        self.go(&[(sw.target, 0)]);
                    } else {
                        self.go(&[(s, at + 1)]);
                    }
                }
                Some(Op::Active(t)) => self.go(&[(*t, 0), (s, at + 1)]),
                Some(Op::Cond { kind, frames, .. }) => {
                    match kind.pick(values[0], frames.len()).map(|i| frames[i]) {
                        Some(g) => {
                            // The stream stays running (parked) until the sub-model ends.
                            self.running[f] += 1;
                            self.parked[g] = Some((s, at));
                            let heads: Vec<(usize, usize)> =
                                p.starts[g].iter().map(|&h| (h, 0)).collect();
                            self.go(&heads);
                            self.resume(g);
                        }
                        None => self.go(&[(s, at + 1)]),
                    }
                }
            }
            self.resume(f);
        }
        if (self.stopping || runs.aborted(self.no)) && self.first.is_none() {
            return Err(CallError::new(
                Error::ModelAbortNormal,
                "the execution was aborted (aclmdlRIAbort) before its end",
            ));
        }
        self.first.map_or(Ok(()), Err)
    }

    /// When frame `f` (a sub-model) has no stream running, the conditional task that ran it
    /// goes on: a while reads its word again, the others go to the next step. A frame with
    /// no stream to start ends at once, and so may the frames above it.
    fn resume(&mut self, mut f: usize) {
        while self.running[f] == 0 {
            let Some((s, at)) = self.parked[f].take() else {
                return;
            };
            let p = self.program;
            let pf = p.place[s].0;
            self.running[pf] -= 1;
            let again = matches!(
                p.streams[s].get(at),
                Some(Op::Cond {
                    kind: CondKind::While,
                    ..
                })
            );
            self.go(&[(s, if again { at } else { at + 1 })]);
            f = pf;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::collections::HashMap;

    use super::*;

    fn no_cond(h: usize) -> Result<CondSpec, CallError> {
        Err(param(format!("no condition {h:#x}")))
    }

    fn frame(tasks: &[(usize, Option<Control>)], heads: &[bool]) -> Frame {
        Frame {
            tasks: tasks.to_vec(),
            heads: heads.to_vec(),
            lists: vec![vec![0xA1, 0xA2]],
            streams: (0..heads.len()).map(|i| 0x100 + i).collect(),
        }
    }

    fn program(tasks: &[(usize, Option<Control>)], heads: &[bool]) -> Program {
        Program::new(&[frame(tasks, heads)], &no_cond).unwrap()
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
        assert_eq!(p.starts, vec![vec![0]]);
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
        let mut f = frame(
            &[(
                0,
                Some(Control::SwitchIndex {
                    ptr: 8,
                    max: 2,
                    list: 0,
                }),
            )],
            &[true],
        );
        f.lists = vec![vec![0xA1]];
        let e = Program::new(&[f], &no_cond).unwrap_err();
        assert_eq!(e.code(), Error::InternalError);
    }

    #[test]
    fn conditions_compare_signed_values() {
        assert!(Cond::Less.holds(-1, 0));
        assert!(Cond::GreaterOrEqual.holds(3, 3));
        assert!(!Cond::NotEqual.holds(3, 3));
        assert!(Cond::from_c(6).is_err());
    }

    #[test]
    fn conditional_tasks_pick_as_cann_s_branches_do() {
        use CondKind::{If, Switch, While};
        assert_eq!(If.pick(7, 2), Some(0));
        assert_eq!(If.pick(0, 2), Some(1));
        assert_eq!(If.pick(0, 1), None);
        assert_eq!(While.pick(1, 1), Some(0));
        assert_eq!(While.pick(0, 1), None);
        assert_eq!(Switch.pick(2, 3), Some(2));
        assert_eq!(Switch.pick(3, 3), None);
        assert_eq!(Switch.pick(u64::MAX, 3), None);
        assert!(If.check_size(3).is_err() && While.check_size(2).is_err());
        assert!(Switch.check_size(0).is_err() && Switch.check_size(9).is_ok());
        assert!(CondKind::from_c(3).is_err());
    }

    /// Runs tasks and reads at once, in queue order: a task of frame `f` numbered `n` adds
    /// `(f, n)` to the log and, when it is frame 1's task 0, takes 1 from the word at 0x10.
    struct Fake {
        log: RefCell<Vec<(usize, usize)>>,
        mem: RefCell<HashMap<usize, u64>>,
    }

    impl Env for Fake {
        fn queue_task(&self, frame: usize, _: usize, task: usize) -> Result<(), CallError> {
            self.log.borrow_mut().push((frame, task));
            if (frame, task) == (1, 0) {
                *self.mem.borrow_mut().entry(0x10).or_default() -= 1;
            }
            Ok(())
        }

        fn queue_read(
            &self,
            _: usize,
            _: usize,
            words: Vec<(Word, &'static str)>,
            then: Reader,
        ) -> Result<(), CallError> {
            let v: Vec<u64> = words
                .iter()
                .map(|(w, _)| match *w {
                    Word::At(a, _) | Word::At32(a) => self.mem.borrow()[&a],
                    Word::Given(v) => v,
                })
                .collect();
            then(Ok(&v));
            Ok(())
        }

        fn stop(&self) {}
    }

    /// Frame 0: task 0, a conditional task on the word at 0x10, task 2. Frame 1: task 0
    /// (takes 1 from the word), task 1; frame 2: task 0.
    fn run(kind: CondKind, word: u64) -> Vec<(usize, usize)> {
        let subs = if kind == CondKind::If {
            vec![1, 2]
        } else {
            vec![1]
        };
        let frames = [
            frame(
                &[(0, None), (0, Some(Control::Cond(0xC0))), (0, None)],
                &[true],
            ),
            frame(&[(0, None), (0, None)], &[true]),
            frame(&[(0, None)], &[true]),
        ];
        let cond_of = |_: usize| {
            Ok(CondSpec {
                addr: 0x10,
                kind,
                frames: subs.clone(),
            })
        };
        let p = Program::new(&frames, &cond_of).unwrap();
        assert!(p.branches());
        let env = Fake {
            log: RefCell::default(),
            mem: RefCell::new(HashMap::from([(0x10, word)])),
        };
        let runs = Runs::default();
        drive(&p, &runs, runs.number(), &env, &|| false).unwrap();
        env.log.into_inner()
    }

    #[test]
    fn a_while_runs_its_body_until_the_word_it_reads_is_0() {
        assert_eq!(run(CondKind::While, 0), vec![(0, 0), (0, 2)]);
        let three = run(CondKind::While, 3);
        assert_eq!(three.len(), 2 + 3 * 2);
        assert_eq!(
            three[1..7],
            [(1, 0), (1, 1), (1, 0), (1, 1), (1, 0), (1, 1)]
        );
        assert_eq!(three[7], (0, 2));
    }

    /// `aclmdlRIAbort` stops the executions queued before it and none queued after: an abort
    /// whose execution had already ended (the call raced the end: the model still counted
    /// as running until its stream's last task) leaves the next execution alone. With a flag
    /// the ended execution no longer cleared, the next one answered 507023
    /// (`tests/c/model_flow.c` under memcheck).
    #[test]
    fn an_abort_stops_the_executions_queued_before_it_and_none_after() {
        let frames = [
            frame(&[(0, None), (0, Some(Control::Cond(0xC0)))], &[true]),
            frame(&[(0, None)], &[true]),
        ];
        let cond_of = |_: usize| {
            Ok(CondSpec {
                addr: 0x10,
                kind: CondKind::If,
                frames: vec![1],
            })
        };
        let p = Program::new(&frames, &cond_of).unwrap();
        let env = || Fake {
            log: RefCell::default(),
            mem: RefCell::new(HashMap::from([(0x10, 1)])),
        };
        let runs = Runs::default();
        let (a, b) = (runs.number(), runs.number());
        drive(&p, &runs, a, &env(), &|| false).unwrap();
        // Called while b is queued (and a's end not yet counted): both are stopped.
        runs.abort();
        let e = drive(&p, &runs, b, &env(), &|| false).unwrap_err();
        assert_eq!(e.code(), Error::ModelAbortNormal, "{e:?}");
        // Queued after the abort returned: runs to its end.
        let c = runs.number();
        let fake = env();
        drive(&p, &runs, c, &fake, &|| false).unwrap();
        assert_eq!(fake.log.into_inner(), vec![(0, 0), (1, 0)]);
    }

    #[test]
    fn an_if_runs_one_branch_and_goes_on() {
        assert_eq!(run(CondKind::If, 5), vec![(0, 0), (1, 0), (1, 1), (0, 2)]);
        assert_eq!(run(CondKind::If, 0), vec![(0, 0), (2, 0), (0, 2)]);
        assert_eq!(run(CondKind::Switch, 1), vec![(0, 0), (0, 2)]);
    }
}
