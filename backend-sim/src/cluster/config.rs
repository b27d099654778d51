//! Where a process finds its SuperPod's etcd cluster: `ACL_NOTIFY_SIM_CLUSTER` (the endpoint
//! list and the pod's name), `ACL_NOTIFY_SIM_CLUSTER_TTL` (its lease) and
//! `ACL_NOTIFY_SIM_CLUSTER_TIMEOUT` (one etcd call's bound), parsed into a [`ClusterConfig`].

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use super::etcd;

/// The cluster endpoint list (`etcd://host:port,host:port[/pod]`).
pub const ENV_CLUSTER: &str = "ACL_NOTIFY_SIM_CLUSTER";
/// Seconds a process's lease lives without renewal (1 to 3600; default 10).
pub const ENV_CLUSTER_TTL: &str = "ACL_NOTIFY_SIM_CLUSTER_TTL";
/// Seconds one etcd call may take, its tries of every member included, before it fails with
/// 507022 (1 to 600; default 3, [`etcd::DEFAULT_TIMEOUT`]).
pub const ENV_CLUSTER_TIMEOUT: &str = "ACL_NOTIFY_SIM_CLUSTER_TIMEOUT";

const DEFAULT_TTL: u32 = 10;

/// Where a process finds its SuperPod's etcd cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterConfig {
    pub(super) endpoints: Vec<SocketAddr>,
    pub(super) pod: String,
    pub(super) ttl: u32,
    pub(super) timeout: Duration,
}

impl ClusterConfig {
    /// Parses `etcd://host:port,host:port[/pod]` (host names are resolved now; `pod` names the
    /// SuperPod, letters, digits, `-`, `_`, `.`, default `default`).
    pub fn parse(text: &str) -> Result<ClusterConfig, String> {
        let rest = text.trim().strip_prefix("etcd://").ok_or_else(|| {
            format!("{text:?}: expected etcd://host:port,host:port[/pod] (plain HTTP endpoints)")
        })?;
        let (list, pod) = rest.split_once('/').unwrap_or((rest, "default"));
        let pod = if pod.is_empty() { "default" } else { pod };
        if pod.len() > 64
            || !pod
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(format!(
                "{text:?}: SuperPod name {pod:?} must be 1-64 letters, digits, '-', '_' or '.'"
            ));
        }
        let mut endpoints = Vec::new();
        for ep in list.split(',') {
            let addr = ep
                .to_socket_addrs()
                .map_err(|e| format!("{text:?}: endpoint {ep:?}: {e} (expected host:port)"))?
                .next()
                .ok_or_else(|| format!("{text:?}: endpoint {ep:?} resolves to no address"))?;
            endpoints.push(addr);
        }
        Ok(ClusterConfig {
            endpoints,
            pod: pod.to_owned(),
            ttl: DEFAULT_TTL,
            timeout: etcd::DEFAULT_TIMEOUT,
        })
    }

    /// Sets the lease TTL in seconds (1 to 3600).
    pub fn with_ttl(mut self, secs: u32) -> Result<ClusterConfig, String> {
        if !(1..=3600).contains(&secs) {
            return Err(format!("{secs} s: expected 1 to 3600 seconds"));
        }
        self.ttl = secs;
        Ok(self)
    }

    /// Sets the bound of one etcd call in seconds (1 to 600).
    pub fn with_timeout(mut self, secs: u32) -> Result<ClusterConfig, String> {
        if !(1..=600).contains(&secs) {
            return Err(format!("{secs} s: expected 1 to 600 seconds"));
        }
        self.timeout = Duration::from_secs(secs.into());
        Ok(self)
    }

    /// Reads `ACL_NOTIFY_SIM_CLUSTER`, `ACL_NOTIFY_SIM_CLUSTER_TTL` and
    /// `ACL_NOTIFY_SIM_CLUSTER_TIMEOUT`; `None` when the first is not set (single-host mode).
    pub fn from_env() -> Result<Option<ClusterConfig>, String> {
        let Some(url) = std::env::var_os(ENV_CLUSTER) else {
            return Ok(None);
        };
        let url = url
            .into_string()
            .map_err(|_| format!("{ENV_CLUSTER}: the value is not valid UTF-8"))?;
        let mut c = ClusterConfig::parse(&url).map_err(|e| format!("{ENV_CLUSTER}={e}"))?;
        if let Some(secs) = env_secs(ENV_CLUSTER_TTL, "1 to 3600")? {
            c = c
                .with_ttl(secs)
                .map_err(|e| format!("{ENV_CLUSTER_TTL}: {e}"))?;
        }
        if let Some(secs) = env_secs(ENV_CLUSTER_TIMEOUT, "1 to 600")? {
            c = c
                .with_timeout(secs)
                .map_err(|e| format!("{ENV_CLUSTER_TIMEOUT}: {e}"))?;
        }
        Ok(Some(c))
    }

    /// The SuperPod's name.
    pub fn pod(&self) -> &str {
        &self.pod
    }
}

/// Variable `name`'s whole number of seconds (`range` says which, for the message); `None`
/// when it is not set.
fn env_secs(name: &str, range: &str) -> Result<Option<u32>, String> {
    let Some(t) = std::env::var_os(name) else {
        return Ok(None);
    };
    let t = t.to_string_lossy().into_owned();
    t.trim()
        .parse::<u32>()
        .map(Some)
        .map_err(|_| format!("{name}={t:?} is not a number of seconds ({range})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_urls_parse_and_bad_ones_say_why() {
        let c = ClusterConfig::parse("etcd://127.0.0.1:2379,127.0.0.1:2380/pod-1").unwrap();
        assert_eq!(c.endpoints.len(), 2);
        assert_eq!(c.pod(), "pod-1");
        assert_eq!(
            ClusterConfig::parse("etcd://127.0.0.1:2379").unwrap().pod(),
            "default"
        );
        for bad in [
            "http://127.0.0.1:2379",
            "etcd://127.0.0.1",
            "etcd://127.0.0.1:2379/a b",
            "etcd://",
        ] {
            assert!(ClusterConfig::parse(bad).is_err(), "{bad}");
        }
        assert!(c.clone().with_ttl(0).is_err());
        assert_eq!(c.clone().with_ttl(2).unwrap().ttl, 2);
        assert_eq!(c.timeout, etcd::DEFAULT_TIMEOUT);
        assert!(c.clone().with_timeout(0).is_err());
        assert!(c.clone().with_timeout(601).is_err());
        assert_eq!(c.with_timeout(12).unwrap().timeout, Duration::from_secs(12));
    }
}
