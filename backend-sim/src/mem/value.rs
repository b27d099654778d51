//! Memory-semantics synchronisation (`aclrtValueWrite`, `aclrtValueWait`): a stream task that
//! writes a 64-bit value into device memory, and one that stalls its stream until the 64-bit
//! value at a device address meets a condition — the same ordering as a notify, through an
//! address any stream (or, with IPC memory, any process) may write.
//!
//! The 8 bytes are aligned (CANN requires `devAddr` 8-byte aligned) and read and written as one
//! atomic word, so a wait never sees half a write and what its stream ran before a value write
//! is seen by the tasks after the wait it releases. A value wait polls the word (its writers
//! store from any process: there is no flag word to sleep on), first spinning briefly, then sleeping with a backoff up to
//! [`MAX_NAP`]; it ends when the condition holds, or fails when the memory is freed or its
//! stream is destroyed with its tasks discarded (or aborted). It waits for ever otherwise, as
//! CANN's does, and says so in the stream's notes: a synchronize that expires names it, and
//! `aclFinalize` treats it as a wait with no timeout.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use acl_notify_core::{Error, RawStream};

use super::Side;
use super::queued::{self, QueuedSide};
use crate::Sim;
use crate::blocked::Blocked;
use crate::error::SimError;
use crate::job::SimJob;
use crate::stream::TaskCtx;

/// The longest nap between two looks at a waited word.
const MAX_NAP: Duration = Duration::from_millis(1);

/// The condition of an `aclrtValueWait` (`ACL_STREAM_WAIT_VALUE_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueCondition {
    /// `GEQ` (0): `(int64_t)(*addr - value) >= 0`.
    GreaterOrEqual,
    /// `EQ` (1): `*addr == value`.
    Equal,
    /// `AND` (2): `(*addr & value) != 0`.
    And,
    /// `NOR` (3): `~(*addr | value) != 0`.
    Nor,
}

impl ValueCondition {
    /// From CANN's flag; `None` for any other value.
    pub fn from_flag(flag: u32) -> Option<Self> {
        Some(match flag {
            0 => ValueCondition::GreaterOrEqual,
            1 => ValueCondition::Equal,
            2 => ValueCondition::And,
            3 => ValueCondition::Nor,
            _ => return None,
        })
    }

    /// Whether word `word` meets the condition against `value`.
    pub fn holds(self, word: u64, value: u64) -> bool {
        match self {
            ValueCondition::GreaterOrEqual => word.wrapping_sub(value) as i64 >= 0,
            ValueCondition::Equal => word == value,
            ValueCondition::And => word & value != 0,
            ValueCondition::Nor => !(word | value) != 0,
        }
    }
}

impl Sim {
    /// The device side of a value task: the 8 bytes at `addr`, which must be 8-byte aligned
    /// (CANN's `aclrtValueWrite` requires it; the simulator reads and writes them as one atomic
    /// word for both calls) and lie in a live allocation of this process (its own or
    /// imported); 107000 naming it otherwise.
    pub(super) fn value_side(&self, addr: usize, what: &str) -> Result<Side<'_>, SimError> {
        if !addr.is_multiple_of(8) {
            return Err(SimError::new(
                Error::ParamInvalid,
                format!("{what} {addr:#x} is not 8-byte aligned: a value task's word is"),
            ));
        }
        if let Some(c) = self.inner.cluster.as_ref()
            && c.mem_import_at(addr, what)?.is_some()
        {
            return Err(SimError::new(
                Error::ParamInvalid,
                format!(
                    "{what} {addr:#x} is in memory imported from another host (a remote \
                     mapping): value tasks are not simulated across hosts; order the hosts \
                     with a notify instead"
                ),
            ));
        }
        match self.range_ref(addr, 8, what)? {
            Some(r) => Ok(Side::Device(r)),
            None => Err(SimError::new(
                Error::ParamInvalid,
                format!(
                    "{what} {addr:#x} is not device memory of this process (host memory?): \
                     a value task reads and writes device memory"
                ),
            )),
        }
    }

    /// `aclrtValueWrite`: queues on `stream` a task that stores `value` in the 8 bytes at
    /// `addr` (device memory). Checked when queued and again when it runs, as a copy is.
    ///
    /// Codes: 107000 a range outside a live allocation; 107017 a bad stream.
    pub fn value_write(&self, addr: usize, value: u64, stream: RawStream) -> Result<(), SimError> {
        self.mem_checked(|| {
            let word = self.vmm_word(addr)?;
            let addr = word.at;
            let side = self.value_side(addr, "devAddr")?;
            let file = queued::file_of(&side);
            let q = QueuedSide::new(&side, &self.mem().host).through(word.mark);
            let task = Box::new(move |_: &TaskCtx| {
                let args = || serde_json::json!({"dst": addr, "value": value});
                let done = crate::trace::span("memory", "value write", args, || {
                    q.still(addr, 8, "devAddr")?;
                    let to = q.ptr(addr, 8)?;
                    // SAFETY: 8 aligned bytes (`value_side`; arena offsets keep the device
                    // address's alignment) of a mapped allocation, checked just now, which other
                    // threads and processes access only atomically while a value task runs.
                    unsafe { AtomicU64::from_ptr(to.cast::<u64>()) }
                        .store(value, Ordering::Release);
                    Ok(())
                });
                q.intact()?;
                done
            });
            self.enqueue_checked(stream, SimJob::Bulk(task), |e, _| {
                file.map_or(Ok(()), |f| self.keep_file(&e.stream, f))
            })
        })
    }

    /// `aclrtValueWait`: queues on `stream` a task that stalls it until the 8 bytes at `addr`
    /// (device memory) meet `cond` against `value`.
    ///
    /// Codes: 107000 a range outside a live allocation; 107017 a bad stream. The task fails
    /// the stream (107000) if the memory is freed while it waits, and ends (107023) when its
    /// stream is destroyed with its tasks discarded or aborted.
    pub fn value_wait(
        &self,
        addr: usize,
        value: u64,
        cond: ValueCondition,
        stream: RawStream,
    ) -> Result<(), SimError> {
        self.mem_checked(|| {
            let word = self.vmm_word(addr)?;
            let addr = word.at;
            let side = self.value_side(addr, "devAddr")?;
            let device = match &side {
                Side::Device(r) => r.alloc.file.device(),
                Side::Host(_) => 0,
            };
            let file = queued::file_of(&side);
            let q = QueuedSide::new(&side, &self.mem().host).through(word.mark);
            let task = Box::new(move |ctx: &TaskCtx| {
                let args = || serde_json::json!({"addr": addr, "value": value});
                let done = crate::trace::span("memory", "value wait", args, || {
                    wait_for_value(ctx, &q, addr, value, cond, device)
                });
                q.intact()?;
                done
            });
            self.enqueue_checked(stream, SimJob::Bulk(task), |e, _| {
                file.map_or(Ok(()), |f| self.keep_file(&e.stream, f))
            })
        })
    }
}

/// The body of a value wait (see the module doc).
fn wait_for_value(
    ctx: &TaskCtx,
    q: &QueuedSide,
    addr: usize,
    value: u64,
    cond: ValueCondition,
    device: u32,
) -> Result<(), SimError> {
    struct Noted<'c>(&'c TaskCtx);
    impl Drop for Noted<'_> {
        fn drop(&mut self) {
            self.0.set_blocked_on(0);
        }
    }
    let mut noted = None;
    let mut nap = Duration::from_micros(1);
    let mut spins = 0u32;
    loop {
        q.still(addr, 8, "devAddr")?;
        let p = q.ptr(addr, 8)?;
        // SAFETY: 8 aligned bytes (`value_side`) of a mapped allocation, checked just now;
        // other streams and processes store to them.
        let word = unsafe { AtomicU64::from_ptr(p.cast::<u64>()) }.load(Ordering::Acquire);
        if cond.holds(word, value) {
            return Ok(());
        }
        if ctx.is_cancelled() {
            return Err(SimError::new(
                Error::StreamAbort,
                format!(
                    "value wait on {addr:#x} ended unmet: its stream was aborted or destroyed \
                     with its tasks discarded"
                ),
            ));
        }
        if spins < 64 {
            spins += 1;
            std::hint::spin_loop();
            continue;
        }
        if noted.is_none() {
            ctx.set_blocked_on(
                Blocked::ValueWait {
                    dev: device,
                    low: addr as u32,
                }
                .note(),
            );
            noted = Some(Noted(ctx));
        }
        std::thread::sleep(nap);
        nap = (nap * 2).min(MAX_NAP);
    }
}
