//! `acl-notify-sim`: the software device — CANN notify semantics on Linux, with device state in
//! shared memory so that real processes opening the same namespace see the same machine.
//!
//! Entry points: [`Sim::from_env`] (the `ACL_NOTIFY_SIM_*` variables) and [`Sim::builder`].
//! [`Sim`] implements the core's [`Backend`], [`NotifyResources`], [`StreamOps`] and
//! [`HostOps`] traits with [`SimError`] as the error type.

mod error;
pub mod stream;

use std::sync::Arc;
use std::time::Duration;

use acl_notify_core::{
    Backend, CreateFlags, Error, ExportFlags, ExportKey, HostCall, HostOps, ImportFlags,
    NotifyInfo, NotifyResources, RawNotify, RawStream, ServerPid, Soc, StreamDestroy, StreamOps,
    StreamStatus, SyncWait, Timeout,
};

pub use error::SimError;

/// Environment variable naming the SoC family (default `Ascend910B`).
pub const ENV_SOC: &str = "ACL_NOTIFY_SIM_SOC";
/// Environment variable giving the number of devices (default 8).
pub const ENV_DEVICES: &str = "ACL_NOTIFY_SIM_DEVICES";
/// Environment variable naming the namespace (default `acl-notify-<uid>-default`).
pub const ENV_NAMESPACE: &str = "ACL_NOTIFY_SIM_NAMESPACE";
/// Environment variable giving this process's SuperPod server id (default 0).
pub const ENV_SERVER_ID: &str = "ACL_NOTIFY_SIM_SERVER_ID";

/// Configuration of a [`Sim`] before it is opened.
#[derive(Clone, Debug)]
pub struct SimBuilder {
    soc: Soc,
    devices: u32,
    namespace: Option<String>,
    server_id: u32,
}

impl SimBuilder {
    /// The SoC family (default `Ascend910B`).
    pub fn soc(mut self, soc: Soc) -> Self {
        self.soc = soc;
        self
    }

    /// The number of devices (default 8).
    pub fn devices(mut self, devices: u32) -> Self {
        self.devices = devices;
        self
    }

    /// The namespace (default `acl-notify-<uid>-default`).
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = Some(namespace.to_owned());
        self
    }

    /// This process's SuperPod server id (default 0).
    pub fn server_id(mut self, server_id: u32) -> Self {
        self.server_id = server_id;
        self
    }

    /// Opens (creating if needed) the namespace's shared state.
    pub fn open(self) -> Result<Sim, SimError> {
        Err(SimError::new(
            Error::DrvInternalError,
            format!("simulator not implemented yet (config {self:?})"),
        ))
    }
}

impl Default for SimBuilder {
    fn default() -> Self {
        SimBuilder {
            soc: Soc::Ascend910B,
            devices: 8,
            namespace: None,
            server_id: 0,
        }
    }
}

/// A process's connection to one simulated machine (a namespace). Cheap to clone.
#[derive(Clone, Debug)]
pub struct Sim {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    soc: Soc,
    devices: u32,
    server_id: u32,
}

impl Sim {
    /// A builder with the defaults.
    pub fn builder() -> SimBuilder {
        SimBuilder::default()
    }

    /// Opens the machine the `ACL_NOTIFY_SIM_*` variables describe.
    pub fn from_env() -> Result<Sim, SimError> {
        Sim::builder().open()
    }

    /// Deletes a namespace's shared files.
    pub fn remove_namespace(name: &str) -> Result<(), SimError> {
        let _ = name;
        Ok(())
    }

    /// Reclaims what dead processes held.
    pub fn gc(&self) -> Result<(), SimError> {
        Ok(())
    }
}

fn todo_err() -> SimError {
    SimError::new(Error::DrvInternalError, "simulator not implemented yet")
}

impl Backend for Sim {
    type Error = SimError;

    fn soc(&self) -> Soc {
        self.inner.soc
    }

    fn device_count(&self) -> u32 {
        self.inner.devices
    }

    fn bare_tgid(&self) -> i32 {
        std::process::id() as i32
    }

    fn server_id(&self) -> u32 {
        self.inner.server_id
    }
}

impl NotifyResources for Sim {
    fn create_notify(&self, _device: u32, _flags: CreateFlags) -> Result<RawNotify, SimError> {
        Err(todo_err())
    }
    fn destroy_notify(&self, _notify: RawNotify) -> Result<(), SimError> {
        Err(todo_err())
    }
    fn notify_info(&self, _notify: RawNotify) -> Result<NotifyInfo, SimError> {
        Err(todo_err())
    }
    fn export_key(&self, _notify: RawNotify, _flags: ExportFlags) -> Result<ExportKey, SimError> {
        Err(todo_err())
    }
    fn set_import_pids(&self, _notify: RawNotify, _pids: &[i32]) -> Result<(), SimError> {
        Err(todo_err())
    }
    fn set_import_server_pids(
        &self,
        _notify: RawNotify,
        _entries: &[ServerPid],
    ) -> Result<(), SimError> {
        Err(todo_err())
    }
    fn import_by_key(
        &self,
        _device: u32,
        _key: &str,
        _flags: ImportFlags,
    ) -> Result<RawNotify, SimError> {
        Err(todo_err())
    }
    fn can_access_peer(&self, _device: u32, _peer: u32) -> Result<bool, SimError> {
        Err(todo_err())
    }
    fn enable_peer_access(&self, _device: u32, _peer: u32) -> Result<(), SimError> {
        Err(todo_err())
    }
}

impl StreamOps for Sim {
    fn create_stream(&self, _device: u32) -> Result<RawStream, SimError> {
        Err(todo_err())
    }
    fn default_stream(&self, _device: u32) -> Result<RawStream, SimError> {
        Err(todo_err())
    }
    fn stream_device(&self, _stream: RawStream) -> Result<u32, SimError> {
        Err(todo_err())
    }
    fn destroy_stream(&self, _stream: RawStream, _mode: StreamDestroy) -> Result<(), SimError> {
        Err(todo_err())
    }
    fn record(&self, _notify: RawNotify, _stream: RawStream) -> Result<(), SimError> {
        Err(todo_err())
    }
    fn wait_and_reset(
        &self,
        _notify: RawNotify,
        _stream: RawStream,
        _timeout: Timeout,
    ) -> Result<(), SimError> {
        Err(todo_err())
    }
    fn batch_reset(&self, _notifies: &[RawNotify]) -> Result<(), SimError> {
        Err(todo_err())
    }
    fn synchronize(&self, _stream: RawStream, _wait: SyncWait) -> Result<(), SimError> {
        Err(todo_err())
    }
    fn query(&self, _stream: RawStream) -> Result<StreamStatus, SimError> {
        Err(todo_err())
    }
    fn launch_host_func(&self, _stream: RawStream, _call: HostCall) -> Result<(), SimError> {
        Err(todo_err())
    }
    fn set_op_wait_timeout(&self, _seconds: u32) -> Result<(), SimError> {
        Err(todo_err())
    }
}

impl HostOps for Sim {
    fn host_wait(&self, _notify: RawNotify, _timeout: Duration) -> Result<(), SimError> {
        Err(todo_err())
    }
    fn try_consume(&self, _notify: RawNotify) -> Result<bool, SimError> {
        Err(todo_err())
    }
    fn notifies_free(&self, _device: u32) -> Result<u32, SimError> {
        Err(todo_err())
    }
}
