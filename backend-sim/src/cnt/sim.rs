//! The count-notify calls of a [`Sim`] ([`CntNotifyOps`]): the file opened on first use,
//! handle lookups, create, destroy, record and wait queued as stream jobs, and `cnt_gc`.

use acl_notify_core::{CntNotifyOps, RawStream};

use super::*;
use crate::Sim;
use crate::job::SimJob;

impl Sim {
    fn cnt_require(&self) -> Result<(), SimError> {
        self.require(Feature::CntNotify, "count notifies (aclrtCntNotify*)")
    }

    /// The count-notify file of this machine (created on first use).
    fn cnt_file(&self) -> Result<Arc<CntFile>, SimError> {
        let st = &self.inner.cnt;
        let mut f = lock(&st.file);
        if let Some(f) = &*f {
            f.intact()?;
            return Ok(Arc::clone(f));
        }
        let opened = CntFile::open(
            &self.inner.namespace,
            self.inner.server_id,
            self.inner.soc,
            self.inner.devices,
            CntOpen::CreateOrOpen,
        )?
        .ok_or_else(|| SimError::new(Error::DrvInternalError, "count-notify file vanished"))?;
        *f = Some(Arc::clone(&opened));
        Ok(opened)
    }

    pub(crate) fn cnt(&self, h: RawCntNotify) -> Result<Arc<CntRef>, SimError> {
        let t = self
            .inner
            .cnt
            .handles
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let r = t
            .get(h.0)
            .map(|e| Arc::clone(&e.r))
            .ok_or_else(|| bad_cnt(h))?;
        r.file.intact()?;
        Ok(r)
    }

    /// Releases the count notifies of dead processes (see [`CntFile::gc`]) and returns how
    /// many ids were freed; opens the machine's count-notify file for that if it exists (and
    /// does not create it). 0 when this machine's SoC has none or there is no file.
    pub fn cnt_gc(&self) -> u32 {
        if let Some(f) = self.inner.cnt.opened() {
            return f.gc();
        }
        if !self.inner.soc.has(Feature::CntNotify)
            || !cnt_file_path(&self.inner.namespace, self.inner.server_id).exists()
        {
            return 0;
        }
        // Opening collects once already; count what that pass freed too.
        match self.cnt_file() {
            Ok(f) => f.freed_on_open.swap(0, SeqCst) + f.gc(),
            Err(_) => 0,
        }
    }
}

impl CntNotifyOps for Sim {
    fn cnt_create(&self, device: u32) -> Result<RawCntNotify, SimError> {
        self.checked(|| {
            self.cnt_require()?;
            self.device_ok(device)?;
            let file = self.cnt_file()?;
            let r = match CntRef::create(&file, device) {
                Ok(r) => r,
                Err(CreateFail::Other(e)) => return Err(e),
                Err(CreateFail::Exhausted) => {
                    file.gc();
                    match CntRef::create(&file, device) {
                        Ok(r) => r,
                        Err(CreateFail::Other(e)) => return Err(e),
                        Err(CreateFail::Exhausted) => {
                            return Err(SimError::new(
                                Error::NoNotifyResource,
                                cnt_exhausted_message(&file, device),
                            ));
                        }
                    }
                }
            };
            self.inner
                .cnt
                .handles
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(CntEntry { r })
                .ok()
                .map(RawCntNotify)
                .ok_or_else(|| {
                    SimError::new(
                        Error::ResourceAllocFail,
                        "count notify handle table is full",
                    )
                })
        })
    }

    fn cnt_destroy(&self, cnt: RawCntNotify) -> Result<(), SimError> {
        self.checked(|| {
            self.cnt_require()?;
            let e = self
                .inner
                .cnt
                .handles
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(cnt.0)
                .ok_or_else(|| bad_cnt(cnt))?;
            drop(e);
            Ok(())
        })
    }

    fn cnt_id(&self, cnt: RawCntNotify) -> Result<u32, SimError> {
        self.checked(|| {
            self.cnt_require()?;
            Ok(self.cnt(cnt)?.id)
        })
    }

    fn cnt_record(
        &self,
        cnt: RawCntNotify,
        stream: RawStream,
        record: CntRecord,
    ) -> Result<(), SimError> {
        self.checked(|| {
            self.cnt_require()?;
            let r = self.cnt(cnt)?;
            let (s, _) = self.stream(stream)?;
            let pid = self.inner.pid;
            self.enqueue_job(&s, stream, SimJob::CntRecord(Box::new((r, record, pid))))
        })
    }

    fn cnt_wait(
        &self,
        cnt: RawCntNotify,
        stream: RawStream,
        wait: CntWait,
    ) -> Result<(), SimError> {
        self.checked(|| {
            self.cnt_require()?;
            let r = self.cnt(cnt)?;
            let (s, sdev) = self.stream(stream)?;
            if sdev != r.dev {
                return Err(SimError::new(
                    Error::ParamInvalid,
                    format!(
                        "count notify {} lives on device {}; it can only be waited on from that \
                     device, not from a stream of device {sdev}",
                        r.id, r.dev
                    ),
                ));
            }
            let wait = wait.with_timeout(
                wait.timeout.resolve(
                    self.inner
                        .op_wait_timeout
                        .load(std::sync::atomic::Ordering::Relaxed),
                ),
            );
            self.enqueue_job(&s, stream, SimJob::CntWait(Box::new((r, wait))))
        })
    }

    fn cnt_reset(&self, cnt: RawCntNotify, stream: RawStream) -> Result<(), SimError> {
        self.checked(|| self.cnt_record(cnt, stream, CntRecord::set(0)))
    }

    fn cnt_notifies_free(&self, device: u32) -> Result<u32, SimError> {
        self.checked(|| {
            self.cnt_require()?;
            self.device_ok(device)?;
            let file = self.cnt_file()?;
            // Ids that only dead owners hold are as good as free: a create would reclaim them.
            file.reclaim_dead(device..device + 1);
            let pool = file
                .pool(device)
                .ok_or_else(|| SimError::new(Error::DrvInternalError, "no count-notify id pool"))?;
            Ok(pool.capacity().saturating_sub(pool.in_use()))
        })
    }
}

/// Explains an exhausted count-notify pool: who holds the ids (live owners with counts).
fn cnt_exhausted_message(file: &CntFile, device: u32) -> String {
    let mut owners: HashMap<i32, (u32, bool)> = HashMap::new();
    for id in 0..file.high_water(device) {
        let Some(slot) = file.slot(device, id) else {
            break;
        };
        if slot.state() == Some(SlotState::Live) {
            let o = slot.owner();
            let e = owners
                .entry(o.pid)
                .or_insert((0, sys::pid_alive(o.pid, o.start_time)));
            e.0 += 1;
        }
    }
    let mut v: Vec<_> = owners.into_iter().collect();
    v.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.0.cmp(&b.0)));
    let list: Vec<String> = v
        .iter()
        .take(8)
        .map(|(pid, (n, alive))| {
            format!(
                "pid {pid} ({}) holds {n}",
                crate::diag::state_of(*pid, *alive)
            )
        })
        .collect();
    format!(
        "device {device} has no count-notify id left: all {MAX_CNT_NOTIFIES} are in use ({})",
        if list.is_empty() {
            "no live owner found".to_owned()
        } else {
            list.join(", ")
        }
    )
}
