//! Tests of the typed API over a test backend: devices, the notify typestates (export,
//! import, whitelist, batch reset), `NotifyAny`, streams and host functions.

use super::*;
use crate::backend::Backend;
use crate::flags::PidValidation;
use crate::key::KeyFields;
use crate::lifecycle::Op;
use crate::pool::IdPool;
use crate::soc::{Ascend310B, Ascend310P, Ascend910_93, Ascend910B};
use crate::whitelist::Whitelist;
use core::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::vec::Vec;

type R<T> = core::result::Result<T, Error>;

struct MockNotify {
    id: u32,
    device: u32,
    owner_device: u32,
    state: Lifecycle,
    flags: CreateFlags,
}

/// What the owner side of one notify id knows (shared by owner and importers).
struct Shared {
    refs: u32,
    flag: bool,
    validation: PidValidation,
    whitelist: Whitelist,
    key: Option<ExportKey>,
}

struct MockStream {
    device: u32,
    default: bool,
    /// The notify (device, id) this stream is stalled on.
    waiting: Option<(u32, u32)>,
}

#[derive(Default)]
struct MockState {
    next: u64,
    notifies: BTreeMap<u64, MockNotify>,
    shared: BTreeMap<(u32, u32), Shared>,
    streams: BTreeMap<u64, MockStream>,
    destroyed_streams: Vec<u64>,
}

/// An in-memory backend: one "machine", several devices, a current process id that tests
/// change to play the importer. It follows [`Lifecycle::apply`] and uses the core's pools
/// and whitelists, so it answers the SPEC's codes.
struct Mock {
    soc: Soc,
    devices: u32,
    pid: Cell<i32>,
    pools: RefCell<Vec<IdPool<4>>>,
    st: RefCell<MockState>,
}

impl Mock {
    fn new(soc: Soc) -> Mock {
        let mut st = MockState {
            next: 1,
            ..MockState::default()
        };
        for d in 0..2 {
            let h = st.next;
            st.next += 1;
            st.streams.insert(
                h,
                MockStream {
                    device: d,
                    default: true,
                    waiting: None,
                },
            );
        }
        Mock {
            soc,
            devices: 2,
            pid: Cell::new(100),
            pools: RefCell::new((0..2).map(|_| IdPool::new()).collect()),
            st: RefCell::new(st),
        }
    }

    fn live_notifies(&self) -> usize {
        self.st.borrow().notifies.len()
    }

    fn ids_in_use(&self, device: u32) -> u32 {
        self.pools.borrow()[device as usize].in_use()
    }

    fn flag(&self, device: u32, id: u32) -> bool {
        self.st.borrow().shared[&(device, id)].flag
    }

    fn with_notify<T>(&self, n: RawNotify, f: impl FnOnce(&mut MockState, u64) -> R<T>) -> R<T> {
        let mut st = self.st.borrow_mut();
        if !st.notifies.contains_key(&n.0) {
            return Err(Error::InvalidHandle);
        }
        f(&mut st, n.0)
    }

    fn key_of(st: &MockState, h: u64) -> (u32, u32) {
        let n = &st.notifies[&h];
        (n.owner_device, n.id)
    }
}

impl Backend for Mock {
    type Error = Error;
    fn soc(&self) -> Soc {
        self.soc
    }
    fn device_count(&self) -> u32 {
        self.devices
    }
    fn bare_tgid(&self) -> i32 {
        self.pid.get()
    }
    fn server_id(&self) -> u32 {
        0
    }
}

impl NotifyResources for Mock {
    fn create_notify(&self, device: u32, flags: CreateFlags) -> R<RawNotify> {
        self.soc.require(Feature::Notify)?;
        if flags.contains(CreateFlags::DEVICE_USE_ONLY) {
            self.soc.require(Feature::DeviceOnly)?;
        }
        let id = self
            .pools
            .borrow_mut()
            .get_mut(device as usize)
            .ok_or(Error::InvalidDeviceId)?
            .alloc()?;
        let mut st = self.st.borrow_mut();
        let h = st.next;
        st.next += 1;
        st.notifies.insert(
            h,
            MockNotify {
                id,
                device,
                owner_device: device,
                state: Lifecycle::Created,
                flags,
            },
        );
        st.shared.insert(
            (device, id),
            Shared {
                refs: 1,
                flag: false,
                validation: PidValidation::Enforced,
                whitelist: Whitelist::new(),
                key: None,
            },
        );
        Ok(RawNotify(h))
    }

    fn destroy_notify(&self, n: RawNotify) -> R<()> {
        let freed = self.with_notify(n, |st, h| {
            let k = Mock::key_of(st, h);
            st.notifies.remove(&h);
            let s = st.shared.get_mut(&k).ok_or(Error::InternalError)?;
            s.refs -= 1;
            if s.refs == 0 {
                st.shared.remove(&k);
                return Ok(Some(k));
            }
            Ok(None)
        })?;
        if let Some((device, id)) = freed {
            self.pools.borrow_mut()[device as usize].free(id)?;
        }
        Ok(())
    }

    fn notify_info(&self, n: RawNotify) -> R<NotifyInfo> {
        self.with_notify(n, |st, h| {
            let m = &st.notifies[&h];
            Ok(NotifyInfo {
                id: m.id,
                device: m.device,
                owner_device: m.owner_device,
                owner_server: 0,
                state: m.state,
                flags: m.flags,
            })
        })
    }

    fn export_key(&self, n: RawNotify, flags: ExportFlags) -> R<ExportKey> {
        self.soc.require(Feature::Ipc)?;
        self.with_notify(n, |st, h| {
            let v = flags.pid_validation();
            let next = st.notifies[&h].state.apply(Op::Export(v))?;
            let k = Mock::key_of(st, h);
            let key = ExportKey::encode(&KeyFields {
                server: 0,
                device: k.0 as u8,
                id: k.1 as u16,
                generation: 0,
                nonce: [h as u8; 16],
            });
            let s = st.shared.get_mut(&k).ok_or(Error::InternalError)?;
            s.validation = v;
            s.key = Some(key);
            st.notifies.get_mut(&h).ok_or(Error::InternalError)?.state = next;
            Ok(key)
        })
    }

    fn set_import_pids(&self, n: RawNotify, pids: &[i32]) -> R<()> {
        self.soc.require(Feature::Ipc)?;
        self.with_notify(n, |st, h| {
            if pids.is_empty() {
                return Err(Error::ParamInvalid);
            }
            let next = st.notifies[&h].state.apply(Op::SetImportPid)?;
            let k = Mock::key_of(st, h);
            let s = st.shared.get_mut(&k).ok_or(Error::InternalError)?;
            s.whitelist.add_pids(0, pids)?;
            st.notifies.get_mut(&h).ok_or(Error::InternalError)?.state = next;
            Ok(())
        })
    }

    fn set_import_server_pids(&self, n: RawNotify, entries: &[ServerPid]) -> R<()> {
        if entries.is_empty() {
            return Err(Error::ParamInvalid);
        }
        self.with_notify(n, |st, h| {
            self.soc.require(Feature::InterServer)?;
            // Entry by entry: the ones before a failure stay applied.
            for e in entries {
                let next = st.notifies[&h].state.apply(Op::SetImportPid)?;
                let k = Mock::key_of(st, h);
                let s = st.shared.get_mut(&k).ok_or(Error::InternalError)?;
                s.whitelist.add((*e).into())?;
                st.notifies.get_mut(&h).ok_or(Error::InternalError)?.state = next;
            }
            Ok(())
        })
    }

    fn import_key(&self, device: u32, key: &ExportKey, flags: ImportFlags) -> R<RawNotify> {
        self.soc.require(Feature::Ipc)?;
        let _ = flags;
        if device >= self.devices {
            return Err(Error::InvalidDeviceId);
        }
        let key = *key;
        let f = key.fields().ok_or(Error::ParamInvalid)?;
        let k = (u32::from(f.device), u32::from(f.id));
        let mut st = self.st.borrow_mut();
        let s = st.shared.get_mut(&k).ok_or(Error::InvalidHandle)?;
        if s.key != Some(key) {
            return Err(Error::InvalidHandle);
        }
        if s.validation == PidValidation::Enforced && !s.whitelist.matches(0, self.pid.get(), 0, 0)
        {
            return Err(Error::NoPermission);
        }
        s.refs += 1;
        let h = st.next;
        st.next += 1;
        st.notifies.insert(
            h,
            MockNotify {
                id: k.1,
                device,
                owner_device: k.0,
                state: Lifecycle::Imported,
                flags: CreateFlags::empty(),
            },
        );
        Ok(RawNotify(h))
    }

    fn can_access_peer(&self, device: u32, peer: u32) -> R<bool> {
        if device >= self.devices || peer >= self.devices {
            return Err(Error::InvalidDeviceId);
        }
        Ok(device != peer)
    }

    fn enable_peer_access(&self, device: u32, peer: u32) -> R<()> {
        if self.can_access_peer(device, peer)? {
            Ok(())
        } else {
            Err(Error::InvalidParam)
        }
    }
}

impl StreamOps for Mock {
    fn create_stream(&self, device: u32) -> R<RawStream> {
        if device >= self.devices {
            return Err(Error::InvalidDeviceId);
        }
        let mut st = self.st.borrow_mut();
        let h = st.next;
        st.next += 1;
        st.streams.insert(
            h,
            MockStream {
                device,
                default: false,
                waiting: None,
            },
        );
        Ok(RawStream(h))
    }

    fn default_stream(&self, device: u32) -> R<RawStream> {
        let st = self.st.borrow();
        st.streams
            .iter()
            .find(|(_, s)| s.default && s.device == device)
            .map(|(h, _)| RawStream(*h))
            .ok_or(Error::InvalidDeviceId)
    }

    fn stream_device(&self, s: RawStream) -> R<u32> {
        let st = self.st.borrow();
        st.streams
            .get(&s.0)
            .map(|s| s.device)
            .ok_or(Error::InvalidHandle)
    }

    fn destroy_stream(&self, s: RawStream, _: StreamDestroy) -> R<()> {
        let mut st = self.st.borrow_mut();
        match st.streams.get(&s.0) {
            Some(m) if !m.default => {
                st.streams.remove(&s.0);
                st.destroyed_streams.push(s.0);
                Ok(())
            }
            _ => Err(Error::InvalidHandle),
        }
    }

    fn record(&self, n: RawNotify, s: RawStream) -> R<()> {
        self.with_notify(n, |st, h| {
            if !st.streams.contains_key(&s.0) {
                return Err(Error::InvalidHandle);
            }
            let k = Mock::key_of(st, h);
            // Release the first stream waiting on it, else set the flag.
            if let Some(w) = st.streams.values_mut().find(|w| w.waiting == Some(k)) {
                w.waiting = None;
            } else {
                st.shared.get_mut(&k).ok_or(Error::InternalError)?.flag = true;
            }
            Ok(())
        })
    }

    fn wait_and_reset(&self, n: RawNotify, s: RawStream, _: Timeout) -> R<()> {
        self.with_notify(n, |st, h| {
            let k = Mock::key_of(st, h);
            let dev = st.streams.get(&s.0).ok_or(Error::InvalidHandle)?.device;
            if dev != k.0 {
                return Err(Error::ParamInvalid);
            }
            let sh = st.shared.get_mut(&k).ok_or(Error::InternalError)?;
            if sh.flag {
                sh.flag = false;
            } else if let Some(w) = st.streams.get_mut(&s.0) {
                w.waiting = Some(k);
            }
            Ok(())
        })
    }

    fn batch_reset(&self, ns: &[RawNotify]) -> R<()> {
        if ns.is_empty() {
            return Err(Error::ParamInvalid);
        }
        for n in ns {
            self.soc.require(Feature::BatchReset)?;
            self.with_notify(*n, |st, h| {
                st.notifies[&h]
                    .state
                    .apply(Op::BatchReset(self.soc.caps().ipc_batch_reset))?;
                let k = Mock::key_of(st, h);
                st.shared.get_mut(&k).ok_or(Error::InternalError)?.flag = false;
                Ok(())
            })?;
        }
        Ok(())
    }

    fn synchronize(&self, s: RawStream, wait: SyncWait) -> R<()> {
        match self.query(s)? {
            StreamStatus::Complete => Ok(()),
            // The mock cannot block: a stalled stream "times out" at once.
            StreamStatus::NotReady => {
                let _ = wait;
                Err(Error::StreamSyncTimeout)
            }
        }
    }

    fn query(&self, s: RawStream) -> R<StreamStatus> {
        let st = self.st.borrow();
        match st.streams.get(&s.0) {
            Some(m) if m.waiting.is_some() => Ok(StreamStatus::NotReady),
            Some(_) => Ok(StreamStatus::Complete),
            None => Err(Error::InvalidHandle),
        }
    }

    fn launch_host_func(&self, s: RawStream, call: HostCall) -> R<()> {
        self.stream_device(s)?;
        call.call();
        Ok(())
    }

    fn set_op_wait_timeout(&self, _: u32) -> R<()> {
        Ok(())
    }
}

#[test]
fn device_checks_soc_and_device_number() {
    let m = Mock::new(Soc::Ascend310B);
    assert_eq!(
        Device::<Ascend910B, _>::new(&m, 0).err(),
        Some(Error::ParamInvalid)
    );
    let d = Device::<Ascend310B, _>::new(&m, 1).unwrap();
    assert_eq!((d.id(), d.soc()), (1, Soc::Ascend310B));
    assert_eq!(
        Device::<Ascend310B, _>::new(&m, 2).err(),
        Some(Error::InvalidDeviceId)
    );
    let any = Device::<AnySoc, _>::new(&m, 0).unwrap();
    assert_eq!(any.soc(), Soc::Ascend310B);
}

#[test]
fn kinds_mirror_the_lifecycle() {
    assert_eq!(Created::KIND, Lifecycle::Created);
    assert_eq!(Exported::KIND, Lifecycle::Exported);
    assert_eq!(ExportedOpen::KIND, Lifecycle::ExportedOpen);
    assert_eq!(Whitelisted::KIND, Lifecycle::Whitelisted);
    assert_eq!(Imported::KIND, Lifecycle::Imported);
    assert_eq!(
        Notify::<'static, Ascend910B, Imported, Mock>::KIND,
        Lifecycle::Imported
    );
}

/// SPEC §7, the whitelist variant: owner creates, exports, whitelists the importer's PID
/// and waits; the importer imports and records; the owner's stream completes.
#[test]
fn two_party_flow_with_whitelist() {
    let m = Mock::new(Soc::Ascend910B);
    let owner_dev = Device::<Ascend910B, _>::new(&m, 0).unwrap();
    let owner_stream = owner_dev.create_stream().unwrap();

    let n = owner_dev.create_notify().unwrap();
    assert_eq!(n.state(), Lifecycle::Created);
    let (n, key) = n.export().unwrap();
    assert_eq!(n.info().unwrap().state, Lifecycle::Exported);

    // The importer (pid 200) is not whitelisted yet.
    m.pid.set(200);
    let imp_dev = Device::<Ascend910B, _>::new(&m, 1).unwrap();
    assert_eq!(
        imp_dev.import(&key, ImportFlags::ENABLE_PEER_ACCESS).err(),
        Some(Error::NoPermission)
    );
    m.pid.set(100);

    let n = n.allow_pids(&[200]).unwrap();
    assert_eq!(n.info().unwrap().state, Lifecycle::Whitelisted);
    n.allow_pids(&[201, 202]).unwrap();

    n.wait_and_reset(&owner_stream, Timeout::Forever).unwrap();
    assert_eq!(owner_stream.query(), Ok(StreamStatus::NotReady));

    m.pid.set(200);
    let imported = imp_dev
        .import(&key, ImportFlags::ENABLE_PEER_ACCESS)
        .unwrap();
    assert_eq!(imported.id(), n.id(), "an importer sees the owner's id");
    assert_eq!(imported.info().unwrap().state, Lifecycle::Imported);
    let imp_stream = imp_dev.default_stream().unwrap();
    imported.record(&imp_stream).unwrap();
    assert_eq!(owner_stream.query(), Ok(StreamStatus::Complete));
    assert_eq!(owner_stream.synchronize(), Ok(()));

    // The id lives until both holders are gone.
    let id = n.id().unwrap();
    assert_eq!(m.ids_in_use(0), 1);
    imported.destroy().unwrap();
    assert_eq!(m.ids_in_use(0), 1);
    drop(n);
    assert_eq!(m.ids_in_use(0), 0);
    assert_eq!(m.live_notifies(), 0);
    let _ = id;
}

#[test]
fn open_export_lets_anyone_import() {
    let m = Mock::new(Soc::Ascend310P);
    let d = Device::<Ascend310P, _>::new(&m, 0).unwrap();
    let (n, key) = d.create_notify().unwrap().export_open().unwrap();
    assert_eq!(n.info().unwrap().state, Lifecycle::ExportedOpen);
    m.pid.set(4242);
    let imp = d.import(&key, ImportFlags::empty()).unwrap();
    let s = d.default_stream().unwrap();
    // Record first, wait later: the flag stays set for the wait.
    imp.record(&s).unwrap();
    n.wait_and_reset(&s, Timeout::Forever).unwrap();
    assert_eq!(s.query(), Ok(StreamStatus::Complete));
    assert!(!m.flag(0, n.id().unwrap()));
}

#[test]
fn failed_transition_gives_the_handle_back() {
    let m = Mock::new(Soc::Ascend910B);
    let d = Device::<Ascend910B, _>::new(&m, 0).unwrap();
    let (n, _key) = d.create_notify().unwrap().export().unwrap();
    let pids: Vec<i32> = (1..=65).collect();
    let (left, e) = n.allow_pids(&pids).unwrap_err();
    assert_eq!(e, Error::OverLimit);
    let AllowFailed::Exported(n) = left else {
        panic!("nothing was applied, so the handle is still Exported: {left:?}")
    };
    assert_eq!(n.info().unwrap().state, Lifecycle::Exported);
    // Empty list: 107000, handle back.
    let (left, e) = n.allow_pids(&[]).unwrap_err();
    assert_eq!(e, Error::ParamInvalid);
    let n = match left {
        AllowFailed::Exported(n) => n,
        AllowFailed::Whitelisted(_) => panic!("nothing applied"),
    };
    let n = n.allow_pids(&pids[..64]).unwrap();
    assert_eq!(n.allow_pids(&[999]), Err(Error::OverLimit));
    drop(n);
    assert_eq!(m.live_notifies(), 0);
}

#[test]
fn inter_server_partial_application_is_whitelisted() {
    let m = Mock::new(Soc::Ascend910_93);
    let d = Device::<Ascend910_93, _>::new(&m, 0).unwrap();
    let (n, _key) = d.create_notify().unwrap().export().unwrap();
    let entries: Vec<ServerPid> = (0..65).map(|pid| ServerPid { sdid: 3, pid }).collect();
    let (left, e) = n.allow_server_pids(&entries).unwrap_err();
    assert_eq!(e, Error::OverLimit);
    let AllowFailed::Whitelisted(n) = left else {
        panic!("64 entries were applied: {left:?}")
    };
    assert_eq!(n.info().unwrap().state, Lifecycle::Whitelisted);
    // Re-adding applied entries does not count twice.
    assert_eq!(n.allow_server_pids(&entries[..10]), Ok(()));
    assert_eq!(n.allow_server_pids(&[]), Err(Error::ParamInvalid));
}

#[test]
fn any_soc_answers_feature_not_supported_at_run_time() {
    let m = Mock::new(Soc::Ascend310B);
    let d = Device::<AnySoc, _>::new(&m, 0).unwrap();
    assert_eq!(
        d.create_device_only_notify().err(),
        Some(Error::FeatureNotSupport)
    );
    let n = d.create_notify().unwrap();
    assert_eq!(n.reset(), Err(Error::FeatureNotSupport));
    assert_eq!(
        d.batch_reset(&[n.reset_ref()]),
        Err(Error::FeatureNotSupport)
    );
    let (n, e) = n.export().unwrap_err();
    assert_eq!(e, Error::FeatureNotSupport);
    // The handle came back and still works.
    let s = d.default_stream().unwrap();
    n.record(&s).unwrap();
    let key = ExportKey::encode(&KeyFields {
        server: 0,
        device: 0,
        id: 0,
        generation: 0,
        nonce: [0; 16],
    });
    assert_eq!(
        d.import(&key, ImportFlags::empty()).err(),
        Some(Error::FeatureNotSupport)
    );
    drop(n);
    assert_eq!(m.live_notifies(), 0);

    // Without notifies at all.
    let ipv = Mock::new(Soc::IPV350);
    let d = Device::<AnySoc, _>::new(&ipv, 0).unwrap();
    assert_eq!(d.create_notify().err(), Some(Error::FeatureNotSupport));
}

#[test]
fn any_soc_on_a_superpod_has_everything() {
    let m = Mock::new(Soc::Ascend910_93);
    let d = Device::<Ascend910_93, _>::new(&m, 0)
        .unwrap()
        .into_any_soc();
    let n = d.create_device_only_notify().unwrap();
    assert_eq!(n.info().unwrap().flags, CreateFlags::DEVICE_USE_ONLY);
    let (n, _key) = n.export().unwrap();
    let n = n
        .allow_server_pids(&[ServerPid { sdid: 1, pid: 7 }])
        .unwrap();
    n.reset().unwrap();
}

#[test]
fn batch_reset_clears_flags_in_order() {
    let m = Mock::new(Soc::Ascend910B);
    let d = Device::<Ascend910B, _>::new(&m, 0).unwrap();
    let s = d.default_stream().unwrap();
    let a = d.create_notify().unwrap();
    let (b, _k) = d.create_notify().unwrap().export_open().unwrap();
    a.record(&s).unwrap();
    b.record(&s).unwrap();
    assert!(m.flag(0, a.id().unwrap()) && m.flag(0, b.id().unwrap()));
    d.batch_reset(&[a.reset_ref(), b.reset_ref()]).unwrap();
    assert!(!m.flag(0, a.id().unwrap()) && !m.flag(0, b.id().unwrap()));
    // After the reset a wait stalls.
    a.wait_and_reset(&s, Timeout::Forever).unwrap();
    assert_eq!(s.query(), Ok(StreamStatus::NotReady));
    assert_eq!(s.synchronize(), Err(Error::StreamSyncTimeout));
    assert_eq!(d.batch_reset(&[]), Err(Error::ParamInvalid));
    // A batch longer than one internal chunk.
    let refs: Vec<ResetRef<'_, Mock>> = (0..70).map(|_| a.reset_ref()).collect();
    assert_eq!(d.batch_reset(&refs), Ok(()));
}

#[test]
fn ipc_notifies_in_a_batch_reset_follow_the_soc() {
    // Ascend910B: an imported notify resets like any other (the type allows it).
    let m = Mock::new(Soc::Ascend910B);
    let d = Device::<Ascend910B, _>::new(&m, 0).unwrap();
    let s = d.default_stream().unwrap();
    let (n, key) = d.create_notify().unwrap().export_open().unwrap();
    m.pid.set(4242);
    let imp = d.import(&key, ImportFlags::empty()).unwrap();
    imp.record(&s).unwrap();
    assert!(m.flag(0, n.id().unwrap()));
    imp.reset().unwrap();
    assert!(!m.flag(0, n.id().unwrap()));
    // The 950 family refuses them: with AnySoc the methods exist and answer 507009; a
    // notify never exported is reset.
    let m = Mock::new(Soc::Ascend950PR);
    let d = Device::<AnySoc, _>::new(&m, 0).unwrap();
    let a = d.create_notify().unwrap();
    a.reset().unwrap();
    let (n, key) = a.export_open().unwrap();
    assert_eq!(n.reset(), Err(Error::TaskTypeNotSupport));
    m.pid.set(4242);
    let imp = d.import(&key, ImportFlags::empty()).unwrap();
    assert_eq!(imp.reset(), Err(Error::TaskTypeNotSupport));
}

#[test]
fn wait_on_another_device_is_rejected() {
    let m = Mock::new(Soc::Ascend910B);
    let d0 = Device::<Ascend910B, _>::new(&m, 0).unwrap();
    let d1 = Device::<Ascend910B, _>::new(&m, 1).unwrap();
    let n = d0.create_notify().unwrap();
    let s1 = d1.create_stream().unwrap();
    assert_eq!(
        n.wait_and_reset(&s1, Timeout::Forever),
        Err(Error::ParamInvalid)
    );
}

#[test]
fn drop_destroys_and_raw_round_trip_is_checked() {
    let m = Mock::new(Soc::Ascend910B);
    let d = Device::<Ascend910B, _>::new(&m, 0).unwrap();
    {
        let _a = d.create_notify().unwrap();
        let _b = d.create_device_only_notify().unwrap();
        assert_eq!(m.live_notifies(), 2);
    }
    assert_eq!(m.live_notifies(), 0);
    assert_eq!(m.ids_in_use(0), 0);

    let (n, _key) = d.create_notify().unwrap().export().unwrap();
    let raw = n.into_raw();
    assert_eq!(m.live_notifies(), 1, "into_raw does not destroy");
    // Wrong state, wrong device.
    assert_eq!(
        Notify::<_, Created, _>::from_raw(d, raw).err(),
        Some(Error::ParamInvalid)
    );
    let d1 = Device::<Ascend910B, _>::new(&m, 1).unwrap();
    assert_eq!(
        Notify::<_, Exported, _>::from_raw(d1, raw).err(),
        Some(Error::ParamInvalid)
    );
    let n = Notify::<_, Exported, _>::from_raw(d, raw).unwrap();
    assert_eq!(n.raw(), raw);
    n.destroy().unwrap();
    assert_eq!(
        Notify::<_, Exported, _>::from_raw(d, raw).err(),
        Some(Error::InvalidHandle)
    );
    assert_eq!(m.live_notifies(), 0);
}

#[test]
fn out_of_ids_is_207009() {
    let m = Mock::new(Soc::Ascend910B);
    let d = Device::<Ascend910B, _>::new(&m, 0).unwrap();
    let held: Vec<_> = (0..4).map(|_| d.create_notify().unwrap()).collect();
    assert_eq!(d.create_notify().err(), Some(Error::NoNotifyResource));
    drop(held);
    assert!(d.create_notify().is_ok());
}

#[test]
fn notify_any_converts_back_only_to_its_state() {
    let m = Mock::new(Soc::Ascend910B);
    let d = Device::<Ascend910B, _>::new(&m, 0).unwrap();
    let any = d.create_notify().unwrap().into_any();
    assert_eq!(any.state(), Lifecycle::Created);
    let (any, e) = any.into_typed::<Imported>().unwrap_err();
    assert_eq!(e, Error::ParamInvalid);
    let n = any.into_typed::<Created>().unwrap();
    let raw = n.into_raw();
    let any = NotifyAny::from_raw(d, raw).unwrap();
    let s = d.default_stream().unwrap();
    any.record(&s).unwrap();
    assert_eq!(any.id(), Ok(0));
    drop(any);
    assert_eq!(m.live_notifies(), 0);
    assert_eq!(
        NotifyAny::from_raw(d, raw).err(),
        Some(Error::InvalidHandle)
    );
}

#[test]
fn streams_destroy_themselves_but_not_the_default() {
    let m = Mock::new(Soc::Ascend910B);
    let d = Device::<Ascend910B, _>::new(&m, 0).unwrap();
    let def = d.default_stream().unwrap();
    assert!(def.is_default());
    let raw_def = def.raw();
    drop(def);
    assert_eq!(m.stream_device(raw_def), Ok(0), "default stream survives");

    let s = d.create_stream().unwrap();
    let raw = s.raw();
    drop(s);
    assert_eq!(m.st.borrow().destroyed_streams, [raw.0]);

    let s = Stream::create(&m, 1).unwrap();
    let raw = s.into_raw();
    let s = Stream::from_raw(&m, raw).unwrap();
    assert_eq!((s.device(), s.is_default()), (1, false));
    s.destroy_discarding().unwrap();
    assert_eq!(m.stream_device(raw), Err(Error::InvalidHandle));
    let def = Stream::from_raw(&m, raw_def).unwrap();
    assert!(def.is_default());
    def.destroy().unwrap();
    assert_eq!(m.stream_device(raw_def), Ok(0));
    assert_eq!(Stream::create(&m, 9).err(), Some(Error::InvalidDeviceId));
}

#[test]
fn host_functions_run() {
    use core::sync::atomic::{AtomicU32, Ordering};
    static RAN: AtomicU32 = AtomicU32::new(0);
    extern "C" fn bump(_: *mut core::ffi::c_void) {
        RAN.fetch_add(1, Ordering::SeqCst);
    }
    let m = Mock::new(Soc::Ascend910B);
    let s = Stream::default_for(&m, 0).unwrap();
    // SAFETY: `bump` ignores its argument and is callable from any thread.
    let call = unsafe { HostCall::new(bump, core::ptr::null_mut()) };
    s.launch_host_func(call).unwrap();
    assert_eq!(RAN.load(Ordering::SeqCst), 1);
}
