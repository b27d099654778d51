//! Tasks the C layer composes itself: a closure queued on a stream like any other task, for
//! work whose steps belong to the C layer rather than to one device operation (the driver
//! of a model execution with run-time control flow, `aclmdlRI`). The closure gets the
//! stream's [`TaskCtx`]: one that blocks must wake on its cancellation (the stream module's
//! rules).

use acl_notify_core::RawStream;

use crate::Sim;
use crate::error::SimError;
use crate::job::SimJob;
use crate::stream::Task;

impl Sim {
    /// Queues `task` on `stream`; its error, if any, is the stream's as any task's is.
    ///
    /// Errors: the stream's (107017 a bad stream, 507002 a queue full for too long).
    pub fn run_async(&self, stream: RawStream, task: Task<SimError>) -> Result<(), SimError> {
        self.enqueue_checked(stream, SimJob::Other(task), |_, _| Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use acl_notify_core::{BackendError as _, Error, StreamOps, SyncWait};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn a_composed_task_runs_in_stream_order_and_its_error_is_the_streams() {
        let ns = format!("unit-composed-{}", std::process::id());
        let _ = Sim::remove_namespace(&ns);
        let _guard = crate::NamespaceGuard(ns.clone());
        let sim = Sim::builder().devices(1).namespace(&ns).open().unwrap();
        let s = sim.create_stream(0).unwrap();
        let n = Arc::new(AtomicU32::new(0));
        for i in 0..3 {
            let n = Arc::clone(&n);
            sim.run_async(
                s,
                Box::new(move |_| {
                    assert_eq!(n.fetch_add(1, Ordering::SeqCst), i);
                    Ok(())
                }),
            )
            .unwrap();
        }
        sim.run_async(
            s,
            Box::new(|_| Err(SimError::new(Error::ParamInvalid, "composed"))),
        )
        .unwrap();
        let e = sim.synchronize(s, SyncWait::Forever).unwrap_err();
        assert_eq!(e.kind(), Error::ParamInvalid);
        assert_eq!(n.load(Ordering::SeqCst), 3);
        sim.synchronize(s, SyncWait::Forever).unwrap();
    }
}
