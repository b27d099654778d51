//! IPC memory (SPEC §8, CANN `aclrtIpcMem*`): argument checks before the SoC, 207000 on the
//! SoCs without IPC memory, export and whitelist rules, inter-server entries and attributes,
//! import errors; and with real processes: a whitelisted and an open import that map the same
//! bytes, the importer held to the exported range and to device-to-device copies across
//! devices, its use after close refused, its use after the owner's free refused, and the
//! liveness rules (a dead importer counts as closed, a dead owner's memory stays mapped and
//! usable for its importers until they close).
//!
//! Which SoCs share device memory follows CANN's documentation of these functions (hicann/runtime
//! `docs/zh/api_ref/11-07_IPC_memory_sharing.md`): all but Ascend310B and IPV350, so Ascend950DT
//! has IPC memory though not IPC notifies; the inter-server whitelist and
//! `aclrtIpcMemSetAttr` are Ascend910_93's only (its link values 2 and 3, the UB paths, are
//! Ascend950's: 207021 there).

use std::time::Duration;

use acl_notify_core::key::KeyFields;
use acl_notify_core::{
    Error, ExportKey, MEM_EXPORT_DISABLE_PID_VALIDATION as OPEN,
    MEM_IMPORT_ENABLE_PEER_ACCESS as PEER, ServerPid, Soc,
};

use super::mp::{T, mp, parse_pid};
use super::{case, inter_server};
use crate::check::CaseResult;
use crate::harness::{Case, Ctx, Role, TestBackend};

/// SoCs with IPC memory (see the module docs).
pub fn ipc_mem(s: Soc) -> bool {
    !matches!(s, Soc::Ascend310B | Soc::IPV350)
}
/// SoCs without IPC memory.
fn no_ipc_mem(s: Soc) -> bool {
    !ipc_mem(s)
}
/// SoCs with IPC memory but no inter-server whitelist.
fn ipc_mem_one_server(s: Soc) -> bool {
    ipc_mem(s) && !inter_server(s)
}

const SIZE: usize = 8192;
/// Device memory of the liveness cases' processes, and an allocation only one fits in.
const SMALL_DEVICE: &str = "4M";
const BIG: usize = 3 << 20;

pub fn cases<B: TestBackend>() -> Vec<Case<B>> {
    vec![
        case("ipc_mem::unsupported", no_ipc_mem, unsupported),
        case("ipc_mem::export_rules", ipc_mem, export_rules),
        case("ipc_mem::whitelist_rules", ipc_mem, whitelist_rules),
        case("ipc_mem::import_errors", ipc_mem, import_errors),
        case(
            "ipc_mem::one_server_207000",
            ipc_mem_one_server,
            one_server_207000,
        ),
        case(
            "ipc_mem::inter_server_rules",
            inter_server,
            inter_server_rules,
        ),
        mp("mp::ipc_mem_whitelist", ipc_mem, mp_whitelist),
        mp("mp::ipc_mem_open", ipc_mem, mp_open),
        mp("mp::ipc_mem_importer_dies", ipc_mem, mp_importer_dies),
        mp("mp::ipc_mem_owner_dies", ipc_mem, mp_owner_dies),
        mp("mp::ipc_mem_owner_frees", ipc_mem, mp_owner_frees),
        mp("mp::ipc_mem_inter_server", inter_server, mp_inter_server),
    ]
}

pub fn roles<B: TestBackend>() -> Vec<Role<B>> {
    vec![
        Role {
            name: "mem_importer",
            run: mem_importer,
        },
        Role {
            name: "mem_small_owner",
            run: mem_small_owner,
        },
        Role {
            name: "mem_small_holder",
            run: mem_small_holder,
        },
        Role {
            name: "mem_small_alloc",
            run: mem_small_alloc,
        },
        Role {
            name: "mem_server1",
            run: mem_server1,
        },
    ]
}

/// The byte at `i` of the test pattern.
fn pat(i: usize) -> u8 {
    (i * 7 + 3) as u8
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(pat).collect()
}

/// A well-formed key that names no export (device 0, id 0, generation 0).
fn stray_key() -> ExportKey {
    ExportKey::encode(&KeyFields {
        server: 0,
        device: 0,
        id: 0,
        generation: 0,
        nonce: [0x5a; 16],
    })
}

fn parse_key(text: &str) -> Result<ExportKey, String> {
    ExportKey::parse(text.trim().as_bytes()).map_err(|e| format!("bad key {text:?}: {e:?}"))
}

/// Checks that `len` bytes at device address `at` (on `device`) are the pattern from `from`.
fn expect_pattern<B: TestBackend>(
    b: &B,
    device: u32,
    at: u64,
    from: usize,
    len: usize,
) -> CaseResult {
    let mut got = vec![0u8; len];
    ok!(b.mem_read(device, at, &mut got));
    if let Some(i) = (0..len).find(|&i| got[i] != pat(from + i)) {
        return Err(format!(
            "byte {i} at {at:#x} is {:#x}, expected {:#x}",
            got[i],
            pat(from + i)
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// One process.

/// SoCs without IPC memory: arguments are still checked first (107000), then every call is
/// 207000; plain device memory works.
fn unsupported<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let a = ok!(b.mem_alloc(0, SIZE));
    let k = stray_key();
    fails!(b.mem_export(0, a, 0, 0), Error::ParamInvalid);
    fails!(b.mem_export(0, a, SIZE, 2), Error::ParamInvalid);
    fails!(b.mem_allow_pids(0, &k, &[]), Error::ParamInvalid);
    fails!(b.mem_allow_server_pids(0, &k, &[]), Error::ParamInvalid);
    fails!(b.mem_import(0, &k, 2), Error::ParamInvalid);
    fails!(b.mem_set_attr(0, &k, 1, 0), Error::ParamInvalid);
    fails!(b.mem_set_attr(0, &k, 0, 4), Error::ParamInvalid);
    fails!(b.mem_set_attr(0, &k, 0, u64::MAX), Error::ParamInvalid);
    fails!(b.mem_export(0, a, SIZE, 0), Error::FeatureNotSupport);
    fails!(b.mem_export(0, a, SIZE, OPEN), Error::FeatureNotSupport);
    fails!(b.mem_allow_pids(0, &k, &[1]), Error::FeatureNotSupport);
    let sp = ServerPid {
        sdid: crate::util::sdid(0, 0),
        pid: 1,
    };
    fails!(
        b.mem_allow_server_pids(0, &k, &[sp]),
        Error::FeatureNotSupport
    );
    fails!(b.mem_import(0, &k, 0), Error::FeatureNotSupport);
    fails!(b.mem_import(0, &k, PEER), Error::FeatureNotSupport);
    fails!(b.mem_close(0, &k), Error::FeatureNotSupport);
    for link in 0..=3 {
        fails!(b.mem_set_attr(0, &k, 0, link), Error::FeatureNotSupport);
    }
    ok!(b.mem_write(0, a, &pattern(SIZE)));
    expect_pattern(b, 0, a, 0, SIZE)?;
    ok!(b.mem_free(0, a));
    Ok(())
}

/// Export: size 0 and unknown flags → 107000; a range leaving the allocation, or in a freed
/// one → 107000; the same range exported the same way again → the same key; another range
/// or mode of an exported allocation → 107000; a process does not import its own export
/// (107000); the owner's close withdraws the export (its key is dead for every call), and a
/// new export gets a new key.
fn export_rules<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let a = ok!(b.mem_alloc(1, SIZE));
    let half = a + (SIZE / 2) as u64;
    fails!(b.mem_export(1, a, 0, 0), Error::ParamInvalid);
    fails!(b.mem_export(1, a, SIZE, 2), Error::ParamInvalid);
    fails!(b.mem_export(1, a, SIZE, 3), Error::ParamInvalid);
    fails!(b.mem_export(1, a, SIZE + 1, 0), Error::ParamInvalid);
    fails!(b.mem_export(1, half, SIZE / 2 + 1, 0), Error::ParamInvalid);
    let k = ok!(b.mem_export(1, half, SIZE / 2, 0));
    ensure_eq!(k.as_str().len(), 64, "key length ({k:?})");
    let Some(f) = k.fields() else {
        return Err(format!("a key with no readable fields: {k:?}"));
    };
    ensure_eq!(u32::from(f.device), 1, "the key's device");
    ensure_eq!(u32::from(f.server), 0, "the key's server");
    ensure!(f.nonce != [0; 16], "all-zero nonce in {k:?}");
    ensure_eq!(
        ok!(b.mem_export(1, half, SIZE / 2, 0)),
        k,
        "the key of a second export of the same range"
    );
    fails!(b.mem_export(1, a, SIZE / 2, 0), Error::ParamInvalid);
    fails!(b.mem_export(1, half, SIZE / 2, OPEN), Error::ParamInvalid);
    fails!(b.mem_import(1, &k, 0), Error::ParamInvalid);
    fails!(b.mem_import(2, &k, PEER), Error::ParamInvalid);

    let c = ok!(b.mem_alloc(1, SIZE));
    let kc = ok!(b.mem_export(1, c, SIZE, OPEN));
    ensure!(kc != k, "two allocations exported with the same key");
    ok!(b.mem_free(1, c));
    fails!(b.mem_export(1, c, SIZE, 0), Error::ParamInvalid);
    fails!(b.mem_allow_pids(1, &kc, &[1]), Error::ParamInvalid);

    ok!(b.mem_close(1, &k));
    fails!(b.mem_close(1, &k), Error::ParamInvalid);
    fails!(b.mem_allow_pids(1, &k, &[1]), Error::ParamInvalid);
    let k2 = ok!(b.mem_export(1, a, SIZE, 0));
    ensure!(k2 != k, "a new export after close reused the old key");
    ok!(b.mem_close(1, &k2));
    ok!(b.mem_free(1, a));
    fails!(b.mem_close(1, &stray_key()), Error::ParamInvalid);
    Ok(())
}

/// Whitelists: none given → 107000; an open export → 207006; at most 64 entries in all
/// (calls add up), more in one call → 207012 with nothing applied; a withdrawn export → 107000.
fn whitelist_rules<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let fake = |from: i32, n: i32| (from..from + n).collect::<Vec<i32>>();
    let a = ok!(b.mem_alloc(0, SIZE));
    let k = ok!(b.mem_export(0, a, SIZE, 0));
    fails!(b.mem_allow_pids(0, &k, &[]), Error::ParamInvalid);
    fails!(
        b.mem_allow_pids(0, &k, &fake(3_000_000, 65)),
        Error::OverLimit
    );
    ok!(b.mem_allow_pids(0, &k, &fake(3_000_000, 32)));
    ok!(b.mem_allow_pids(0, &k, &fake(3_000_100, 31)));
    ok!(b.mem_allow_pids(0, &k, &[b.bare_tgid()]));
    fails!(b.mem_allow_pids(0, &k, &[3_000_500]), Error::OverLimit);

    let o = ok!(b.mem_alloc(0, SIZE));
    let ko = ok!(b.mem_export(0, o, SIZE, OPEN));
    fails!(b.mem_allow_pids(0, &ko, &[1]), Error::NoPermission);
    fails!(b.mem_allow_pids(0, &ko, &[]), Error::ParamInvalid);

    ok!(b.mem_close(0, &k));
    fails!(b.mem_allow_pids(0, &k, &[1]), Error::ParamInvalid);
    ok!(b.mem_free(0, a));
    ok!(b.mem_free(0, o));
    Ok(())
}

/// Import: flags other than 0 and ENABLE_PEER_ACCESS → 107000; a stray key, the key of a
/// freed allocation or of a withdrawn export → 107000.
fn import_errors<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let a = ok!(b.mem_alloc(0, SIZE));
    let k = ok!(b.mem_export(0, a, SIZE, OPEN));
    fails!(b.mem_import(0, &k, 2), Error::ParamInvalid);
    fails!(b.mem_import(0, &k, 3), Error::ParamInvalid);
    fails!(b.mem_import(0, &stray_key(), 0), Error::ParamInvalid);
    let gone = ok!(b.mem_alloc(0, SIZE));
    let kg = ok!(b.mem_export(0, gone, SIZE, OPEN));
    ok!(b.mem_free(0, gone));
    fails!(b.mem_import(1, &kg, PEER), Error::ParamInvalid);
    ok!(b.mem_close(0, &k));
    fails!(b.mem_import(1, &k, PEER), Error::ParamInvalid);
    ok!(b.mem_free(0, a));
    Ok(())
}

/// Off Ascend910_93, the inter-server whitelist and the attributes are 207000 (after their
/// argument checks), even for a live export.
fn one_server_207000<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let a = ok!(b.mem_alloc(0, SIZE));
    let k = ok!(b.mem_export(0, a, SIZE, 0));
    let sp = ServerPid {
        sdid: crate::util::sdid(1, 0),
        pid: 1,
    };
    fails!(b.mem_allow_server_pids(0, &k, &[]), Error::ParamInvalid);
    fails!(
        b.mem_allow_server_pids(0, &k, &[sp]),
        Error::FeatureNotSupport
    );
    fails!(b.mem_set_attr(0, &k, 1, 0), Error::ParamInvalid);
    fails!(b.mem_set_attr(0, &k, 0, 4), Error::ParamInvalid);
    for link in 0..=3 {
        fails!(b.mem_set_attr(0, &k, 0, link), Error::FeatureNotSupport);
    }
    ok!(b.mem_close(0, &k));
    ok!(b.mem_free(0, a));
    Ok(())
}

/// Ascend910_93: (server, PID) entries count against the same 64, not on open exports; the
/// link attribute takes SIO or HCCS on a live export, answers 207021 for the UB paths (2, 3:
/// Ascend950's links, CANN's `rt_inner_mem.h`) and 107000 for values past them.
fn inter_server_rules<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let a = ok!(b.mem_alloc(0, SIZE));
    let k = ok!(b.mem_export(0, a, SIZE, 0));
    // `n` processes of server `server` (device 0), by their sdid.
    let entries = |server: u32, n: i32| {
        (0..n)
            .map(|i| ServerPid {
                sdid: crate::util::sdid(server, 0),
                pid: 3_000_000 + i,
            })
            .collect::<Vec<_>>()
    };
    fails!(b.mem_allow_server_pids(0, &k, &[]), Error::ParamInvalid);
    ok!(b.mem_allow_server_pids(0, &k, &entries(1, 40)));
    ok!(b.mem_allow_pids(0, &k, &[b.bare_tgid()]));
    ok!(b.mem_allow_server_pids(0, &k, &entries(2, 23)));
    fails!(
        b.mem_allow_server_pids(0, &k, &entries(3, 1)),
        Error::OverLimit
    );
    ok!(b.mem_set_attr(0, &k, 0, 0));
    ok!(b.mem_set_attr(0, &k, 0, 1));
    fails!(b.mem_set_attr(0, &k, 0, 2), Error::LinkTypeNotSupported);
    fails!(b.mem_set_attr(0, &k, 0, 3), Error::LinkTypeNotSupported);
    fails!(b.mem_set_attr(0, &k, 0, 4), Error::ParamInvalid);
    fails!(b.mem_set_attr(0, &k, 0, u64::MAX), Error::ParamInvalid);
    fails!(b.mem_set_attr(0, &k, 1, 0), Error::ParamInvalid);
    let o = ok!(b.mem_alloc(0, SIZE));
    let ko = ok!(b.mem_export(0, o, SIZE, OPEN));
    fails!(
        b.mem_allow_server_pids(0, &ko, &entries(1, 1)),
        Error::NoPermission
    );
    ok!(b.mem_close(0, &k));
    fails!(b.mem_set_attr(0, &k, 0, 1), Error::ParamInvalid);
    ok!(b.mem_close(0, &ko));
    ok!(b.mem_free(0, a));
    ok!(b.mem_free(0, o));
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Two processes on the same bytes.

/// The owner (device 0) exports the second half of a buffer with PID validation; the importer
/// (device 1) is refused until whitelisted and again without peer access, then maps the same
/// bytes, reads them and writes back; its use after close is refused; the owner sees the write.
fn mp_whitelist<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let a = ok!(b.mem_alloc(0, SIZE));
    ok!(b.mem_write(0, a, &pattern(SIZE)));
    let half = a + (SIZE / 2) as u64;
    let k = ok!(b.mem_export(0, half, SIZE / 2, 0));
    let mut r = ctx.spawn_role("mem_importer", "whitelist", &[])?;
    let pid = parse_pid(&ctx.take_from("mi.pid", T, &mut r)?)?;
    ensure_eq!(pid, r.pid, "the importer's bare_tgid");
    ctx.put("mi.key", k.as_str())?;
    ctx.take_from("mi.refused", T, &mut r)?;
    ok!(b.mem_allow_pids(0, &k, &[pid]));
    ctx.put("mi.listed", "")?;
    ctx.take_from("mi.closed", T, &mut r)?;
    let mut back = [0u8; 16];
    ok!(b.mem_read(0, half, &mut back));
    ensure_eq!(back, [0x5a; 16], "the importer's write, read by the owner");
    expect_pattern(b, 0, half + 16, SIZE / 2 + 16, SIZE / 2 - 16)?;
    ok!(b.mem_close(0, &k));
    ok!(b.mem_free(0, a));
    r.wait_ok(T)
}

/// Exported without PID validation: no whitelist (207006 to try), and an importer on the
/// owner's own device maps the bytes without peer access and reads them directly.
fn mp_open<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let a = ok!(b.mem_alloc(0, SIZE));
    ok!(b.mem_write(0, a, &pattern(SIZE)));
    let k = ok!(b.mem_export(0, a, SIZE, OPEN));
    fails!(b.mem_allow_pids(0, &k, &[1]), Error::NoPermission);
    let mut r = ctx.spawn_role("mem_importer", "open", &[])?;
    ctx.put("mi.key", k.as_str())?;
    ctx.take_from("mi.closed", T, &mut r)?;
    let mut back = [0u8; 16];
    ok!(b.mem_read(0, a, &mut back));
    ensure_eq!(back, [0x5a; 16], "the importer's write, read by the owner");
    ok!(b.mem_close(0, &k));
    ok!(b.mem_free(0, a));
    r.wait_ok(T)
}

fn mem_importer<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let open = ctx.arg == "open";
    let (dev, len, from) = if open {
        (0, SIZE, 0)
    } else {
        (1, SIZE / 2, SIZE / 2)
    };
    if !open {
        ctx.put("mi.pid", &b.bare_tgid().to_string())?;
    }
    let k = parse_key(&ctx.take("mi.key", T)?)?;
    if !open {
        fails!(b.mem_import(dev, &k, PEER), Error::NoPermission);
        ctx.put("mi.refused", "")?;
        ctx.take("mi.listed", T)?;
        // Device 0's memory onto device 1: peer access is needed.
        fails!(b.mem_import(dev, &k, 0), Error::NoPermission);
    }
    let p = ok!(b.mem_import(dev, &k, if open { 0 } else { PEER }));
    fails!(b.mem_import(dev, &k, PEER), Error::ParamInvalid);
    fails!(b.mem_free(dev, p), Error::ParamInvalid);
    fails!(b.mem_export(dev, p, len, OPEN), Error::ParamInvalid);
    let mine = ok!(b.mem_alloc(dev, len + 16));
    if open {
        expect_pattern(b, dev, p, from, len)?;
    } else {
        // Memory imported onto another device: device-to-device copies only.
        let mut buf = vec![0u8; 16];
        fails!(b.mem_read(dev, p, &mut buf), Error::ParamInvalid);
        fails!(b.mem_write(dev, p, &buf), Error::ParamInvalid);
    }
    ok!(b.mem_copy(dev, mine, p, len));
    expect_pattern(b, dev, mine, from, len)?;
    // Held to the exported range: one byte more is refused, and nothing is written.
    fails!(b.mem_copy(dev, p, mine, len + 1), Error::ParamInvalid);
    fails!(b.mem_copy(dev, p + 1, mine, len), Error::ParamInvalid);
    ok!(b.mem_write(dev, mine, &[0x5a; 16]));
    ok!(b.mem_copy(dev, p, mine, 16));
    ok!(b.mem_close(dev, &k));
    // Use after close: the address is no longer this process's.
    fails!(b.mem_copy(dev, mine, p, 16), Error::ParamInvalid);
    fails!(b.mem_copy(dev, p, mine, 16), Error::ParamInvalid);
    fails!(b.mem_close(dev, &k), Error::ParamInvalid);
    ok!(b.mem_free(dev, mine));
    ctx.put("mi.closed", "")
}

// ---------------------------------------------------------------------------------------------
// Liveness: every process here has SMALL_DEVICE of device memory, room for one BIG allocation.

fn small_env() -> [(&'static str, String); 1] {
    [(acl_notify_sim::ENV_DEVICE_MEMORY, SMALL_DEVICE.to_owned())]
}

/// An importer that dies counts as having closed: after the owner frees its BIG buffer, the
/// memory the dead importer still mapped is reclaimed, so the owner can allocate BIG again.
fn mp_importer_dies<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let mut owner = ctx.spawn_role("mem_small_owner", "free", &small_env())?;
    ctx.take_from("so.key", T, &mut owner)?;
    let mut holder = ctx.spawn_role("mem_small_holder", "die", &small_env())?;
    ctx.take_from("sh.imported", T, &mut holder)?;
    holder.kill()?;
    ctx.note("importer SIGKILLed while it held the memory");
    ctx.put("so.go", "")?;
    owner.wait_ok(T)
}

/// An owner that dies leaves its memory mapped for its importer, which still reads the bytes
/// and writes them, then closes; then the dead owner's memory is reclaimed (a new process
/// allocates BIG).
fn mp_owner_dies<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let mut owner = ctx.spawn_role("mem_small_owner", "die", &small_env())?;
    ctx.take_from("so.key", T, &mut owner)?;
    let mut holder = ctx.spawn_role("mem_small_holder", "survive", &small_env())?;
    ctx.take_from("sh.imported", T, &mut holder)?;
    owner.kill()?;
    ctx.note("owner SIGKILLed while its memory was imported");
    ctx.put("sh.go", "")?;
    holder.wait_ok(T)?;
    let mut fresh = ctx.spawn_role("mem_small_alloc", "", &small_env())?;
    fresh.wait_ok(T)
}

/// An owner that frees memory an importer still maps (SPEC §8): the importer's reads, writes
/// and sets through it fail with 107000 from then on; its close still succeeds, and after it
/// the owner can allocate BIG again.
fn mp_owner_frees<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let mut owner = ctx.spawn_role("mem_small_owner", "free_first", &small_env())?;
    ctx.take_from("so.key", T, &mut owner)?;
    let mut holder = ctx.spawn_role("mem_small_holder", "refused", &small_env())?;
    ctx.take_from("sh.imported", T, &mut holder)?;
    ctx.put("so.go", "")?;
    holder.wait_ok(T)?;
    owner.wait_ok(T)
}

/// Allocates BIG on device 0, fills and exports it (open); then `free`: after "so.go", frees
/// and allocates BIG again; `free_first`: after "so.go", frees it while it is imported, says
/// "so.freed", and after "sh.closed" allocates BIG again; `die`: waits to be killed.
fn mem_small_owner<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let a = ok!(b.mem_alloc(0, BIG));
    ok!(b.mem_write(0, a, &pattern(BIG)));
    fails!(b.mem_alloc(0, BIG), Error::MemoryAllocation);
    let k = ok!(b.mem_export(0, a, BIG, OPEN));
    ctx.put("so.key", k.as_str())?;
    if ctx.arg == "die" {
        std::thread::sleep(Duration::from_secs(60));
        return Err("the owner was not killed".to_owned());
    }
    ctx.take("so.go", T)?;
    if ctx.arg == "free_first" {
        ok!(b.mem_free(0, a));
        ctx.put("so.freed", "")?;
        ctx.take("sh.closed", T)?;
        let again = ok!(b.mem_alloc(0, BIG));
        ok!(b.mem_free(0, again));
        return Ok(());
    }
    ok!(b.mem_close(0, &k));
    ok!(b.mem_free(0, a));
    let again = ok!(b.mem_alloc(0, BIG));
    ok!(b.mem_free(0, again));
    Ok(())
}

/// Imports the small owner's BIG buffer on device 0 and checks it; then `die`: waits to be
/// killed; `survive`: after "sh.go" (the owner is dead) reads and writes it still, and closes.
fn mem_small_holder<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let k = parse_key(&ctx.take("so.key", T)?)?;
    let p = ok!(b.mem_import(0, &k, 0));
    expect_pattern(b, 0, p, 0, 4096)?;
    ctx.put("sh.imported", "")?;
    if ctx.arg == "die" {
        std::thread::sleep(Duration::from_secs(60));
        return Err("the importer was not killed".to_owned());
    }
    if ctx.arg == "refused" {
        ctx.take("so.freed", T)?;
        let mut back = [0u8; 16];
        fails!(b.mem_read(0, p, &mut back), Error::ParamInvalid);
        fails!(b.mem_write(0, p, &[0x5a; 16]), Error::ParamInvalid);
        ok!(b.mem_close(0, &k));
        ctx.put("sh.closed", "")?;
        return Ok(());
    }
    ctx.take("sh.go", T)?;
    expect_pattern(b, 0, p, BIG - 4096, 4096)?;
    ok!(b.mem_write(0, p, &[0x5a; 16]));
    let mut back = [0u8; 16];
    ok!(b.mem_read(0, p, &mut back));
    ensure_eq!(
        back,
        [0x5a; 16],
        "a write to the dead owner's memory, read back"
    );
    ok!(b.mem_close(0, &k));
    fails!(b.mem_read(0, p, &mut back), Error::ParamInvalid);
    Ok(())
}

fn mem_small_alloc<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let a = ok!(b.mem_alloc(0, BIG));
    ok!(b.mem_free(0, a));
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Across servers (Ascend910_93).

/// A same-server entry with the PID of a process on server 1 does not admit it; an (sdid, PID)
/// entry does (the sdid of the device it imports on, which it sent), and it maps the bytes.
fn mp_inter_server<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let a = ok!(b.mem_alloc(0, SIZE));
    ok!(b.mem_write(0, a, &pattern(SIZE)));
    let k = ok!(b.mem_export(0, a, SIZE, 0));
    let mut r = ctx.spawn_role(
        "mem_server1",
        "",
        &[(acl_notify_sim::ENV_SERVER_ID, "1".to_owned())],
    )?;
    let pid = parse_pid(&ctx.take_from("ms.pid", T, &mut r)?)?;
    let sdid = ctx.take_from("ms.sdid", T, &mut r)?;
    let sdid: u32 = sdid
        .trim()
        .parse()
        .map_err(|_| format!("ms.sdid: {sdid:?}"))?;
    ok!(b.mem_allow_pids(0, &k, &[pid]));
    ctx.put("ms.key", k.as_str())?;
    ctx.take_from("ms.refused", T, &mut r)?;
    ok!(b.mem_allow_server_pids(0, &k, &[ServerPid { sdid, pid }]));
    ctx.put("ms.listed", "")?;
    r.wait_ok(T)?;
    ok!(b.mem_close(0, &k));
    ok!(b.mem_free(0, a));
    Ok(())
}

fn mem_server1<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    ensure_eq!(
        b.server_id(),
        1,
        "server_id() with ACL_NOTIFY_SIM_SERVER_ID=1"
    );
    ctx.put("ms.pid", &b.bare_tgid().to_string())?;
    // The SuperPOD device id of the device it imports on, for the owner's entry.
    ctx.put("ms.sdid", &ok!(b.super_pod_device_id(0)).to_string())?;
    let k = parse_key(&ctx.take("ms.key", T)?)?;
    fails!(b.mem_import(0, &k, PEER), Error::NoPermission);
    ctx.put("ms.refused", "")?;
    ctx.take("ms.listed", T)?;
    let p = ok!(b.mem_import(0, &k, PEER));
    let mine = ok!(b.mem_alloc(0, SIZE));
    ok!(b.mem_copy(0, mine, p, SIZE));
    expect_pattern(b, 0, mine, 0, SIZE)?;
    ok!(b.mem_close(0, &k));
    ok!(b.mem_free(0, mine));
    Ok(())
}
