//! The run's configuration and topology, computed identically by the coordinator and every
//! worker from the command line: which stream of which process talks to which, and in which
//! role.
//!
//! Every stream of every process is one *endpoint*; endpoints are paired across processes, and
//! each pair carries K *channels*. A channel is two notifies: the data notify D, owned by the
//! waiter side (waits run on the owner's device) and imported by the recorder side, and the
//! acknowledgement notify A, owned by the recorder side and imported by the waiter side.
//!
//! One handoff on a channel: the recorder counts `started`, records D; the waiter's wait on D
//! is released, it counts `released` and records A; the recorder's wait on A is released, and
//! only then does it record D again. So at most one record of D (and of A) is ever pending: two
//! records can never collapse into one, and `started == released` is exact.

use acl_notify_core::Soc;

/// Command-line configuration (the same for the coordinator and its workers).
#[derive(Clone, Debug)]
pub struct Cfg {
    /// Worker processes.
    pub procs: usize,
    /// Streams (endpoints) per process.
    pub streams: usize,
    /// Channels (notify pairs) per endpoint pair.
    pub notifies: usize,
    /// Handoffs (rounds) per channel.
    pub handoffs: u64,
    /// Processes to kill with SIGKILL.
    pub faults: usize,
    /// Random seed.
    pub seed: u64,
    /// SoC of the simulated machine.
    pub soc: Soc,
    /// Devices of the simulated machine.
    pub devices: u32,
    /// Simulator namespace.
    pub namespace: String,
    /// Hard limit on the whole run, seconds.
    pub timeout: u64,
    /// A round with a live partner that makes no progress for this long is a hang, seconds.
    pub round_limit: u64,
    /// Control experiment: one recorder silently skips one record (the run must fail).
    pub sabotage: bool,
}

impl Cfg {
    /// Arguments that reproduce this configuration in a worker.
    pub fn to_args(&self) -> Vec<String> {
        vec![
            format!("--processes={}", self.procs),
            format!("--streams={}", self.streams),
            format!("--notifies={}", self.notifies),
            format!("--handoffs={}", self.handoffs),
            format!("--faults={}", self.faults),
            format!("--seed={}", self.seed),
            format!("--soc={}", self.soc.name()),
            format!("--devices={}", self.devices),
            format!("--namespace={}", self.namespace),
            format!("--timeout={}", self.timeout),
            format!("--round-limit={}", self.round_limit),
            format!("--sabotage={}", u8::from(self.sabotage)),
        ]
    }

    /// The device process `p` works on.
    pub fn device_of(&self, p: usize) -> u32 {
        (p as u32) % self.devices
    }

    /// Path of the run's board file.
    pub fn board_path(&self) -> std::path::PathBuf {
        std::path::PathBuf::from(format!("/dev/shm/acl-notify-stress.{}", self.namespace))
    }

    /// Endpoint pairs.
    pub fn pairs(&self) -> Vec<Pair> {
        let mut list = Vec::new();
        for s in 0..self.streams {
            let rot = (mix(self.seed ^ ((s as u64) << 32)) % self.procs as u64) as usize;
            for p in 0..self.procs {
                list.push(End {
                    proc: (p + rot) % self.procs,
                    stream: s,
                });
            }
        }
        list.chunks_exact(2)
            .enumerate()
            .map(|(i, c)| {
                if mix(self.seed.wrapping_add(i as u64)) & 1 == 0 {
                    Pair {
                        waiter: c[0],
                        recorder: c[1],
                    }
                } else {
                    Pair {
                        waiter: c[1],
                        recorder: c[0],
                    }
                }
            })
            .collect()
    }

    /// Channels in all.
    pub fn channels(&self) -> usize {
        self.pairs().len() * self.notifies
    }
}

/// One stream of one process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct End {
    /// Worker index.
    pub proc: usize,
    /// Stream index within the worker.
    pub stream: usize,
}

/// Two endpoints in different roles.
#[derive(Clone, Copy, Debug)]
pub struct Pair {
    /// Owns the data notifies and waits on them; records the acknowledgements.
    pub waiter: End,
    /// Owns the acknowledgement notifies and waits on them; records the data notifies.
    pub recorder: End,
}

/// SplitMix64 step.
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A small deterministic generator.
#[derive(Clone, Debug)]
pub struct Rng(pub u64);

impl Rng {
    /// Next value.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }

    /// A value below `n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// `0..n` in random order.
    pub fn perm(&mut self, n: usize) -> Vec<usize> {
        let mut v: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
        v
    }
}
