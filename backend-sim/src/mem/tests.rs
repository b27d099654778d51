//! Tests of device memory: allocation, checked copies and sets, out of memory, host access.

use super::*;
use acl_notify_core::{BackendError as _, Error, StreamOps, SyncWait};

use super::alloc::span_of;
use crate::stream::TaskCtx;

use crate::NamespaceGuard as Ns;

/// The memory tests' `Sim` (each module's tests call it): `devices` devices of `capacity`
/// bytes on `soc`, in a namespace of its own, `unit-{module}-{tag}-{pid}` (emptied first,
/// removed when the guard drops).
pub(in crate::mem) fn test_sim(
    module: &str,
    tag: &str,
    soc: acl_notify_core::Soc,
    devices: u32,
    capacity: u64,
) -> (Sim, Ns) {
    let ns = format!("unit-{module}-{tag}-{}", std::process::id());
    let _ = Sim::remove_namespace(&ns);
    let sim = Sim::builder()
        .soc(soc)
        .devices(devices)
        .namespace(&ns)
        .device_memory(capacity)
        .open()
        .unwrap();
    (sim, Ns(ns))
}

fn open(tag: &str, capacity: u64) -> (Sim, Ns) {
    test_sim("mem", tag, acl_notify_core::Soc::Ascend910B, 2, capacity)
}

/// Another process's `Sim` on namespace `ns`: two devices of 64 MiB, as the tests' [`open`]
/// makes them (a forked child calls it).
fn reopen(ns: &str) -> Result<Sim, SimError> {
    Sim::builder()
        .devices(2)
        .namespace(ns)
        .device_memory(64 << 20)
        .open()
}

/// Runs `body` in a forked child with a `Sim` of its own on `ns` ([`reopen`]); `Err` unless
/// it opened and `body` returned `true`. The child's `Sim` is forgotten, never dropped: what
/// it holds is left as a process that dies leaves it.
pub(in crate::mem) fn in_other_process(
    ns: &Ns,
    body: impl FnOnce(&Sim) -> bool,
) -> Result<(), i32> {
    let name = ns.0.clone();
    crate::fork::run_in_child(move || {
        let Ok(child) = reopen(&name) else {
            return false;
        };
        let ok = body(&child);
        std::mem::forget(child);
        ok
    })
}

/// Copies `src` to device memory at `dst` (each module's tests use it).
pub(in crate::mem) fn h2d(sim: &Sim, dst: usize, src: &[u8]) -> Result<(), SimError> {
    // SAFETY: `src` is a live slice of `src.len()` bytes.
    unsafe {
        sim.memcpy(
            dst,
            src.len(),
            src.as_ptr().addr(),
            src.len(),
            MemcpyKind::HostToDevice,
        )
    }
}

/// Copies `dst.len()` bytes of device memory at `src` to `dst` (each module's tests use it).
pub(in crate::mem) fn d2h(sim: &Sim, dst: &mut [u8], src: usize) -> Result<(), SimError> {
    // SAFETY: `dst` is a live slice of `dst.len()` bytes.
    unsafe {
        sim.memcpy(
            dst.as_mut_ptr().addr(),
            dst.len(),
            src,
            dst.len(),
            MemcpyKind::DeviceToHost,
        )
    }
}

#[test]
fn copies_and_sets_move_bytes_between_host_and_devices() {
    let (sim, _ns) = open("copy", 64 << 20);
    let a = sim.malloc(0, 1000, 0).unwrap();
    let b = sim.malloc(1, 1000, 2).unwrap();
    assert_eq!(a % ALLOC_ALIGN as usize, 0);
    let data: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
    h2d(&sim, a, &data).unwrap();
    // Between devices: peer access first, as CANN documents.
    acl_notify_core::NotifyResources::enable_peer_access(&sim, 0, 1).unwrap();
    // SAFETY: device to device, no host side.
    unsafe { sim.memcpy(b, 1000, a, 1000, MemcpyKind::Default) }.unwrap();
    sim.memset(b, 1000, 0xab, 10).unwrap();
    let mut out = vec![0u8; 1000];
    d2h(&sim, &mut out, b).unwrap();
    assert_eq!(&out[..10], &[0xab; 10]);
    assert_eq!(&out[10..], &data[10..]);
    // Overlapping copy inside one allocation behaves as memmove.
    // SAFETY: device to device.
    unsafe { sim.memcpy(a + 1, 999, a, 999, MemcpyKind::DeviceToDevice) }.unwrap();
    d2h(&sim, &mut out, a).unwrap();
    assert_eq!(&out[1..], &data[..999]);
    let (free, total) = sim.mem_info(0).unwrap();
    assert_eq!(total, 64 << 20);
    assert_eq!(total - free, span_of(1000, Rounding::Padded).unwrap());
    sim.free(a).unwrap();
    assert_eq!(sim.mem_info(0).unwrap().0, 64 << 20);
}

#[test]
fn out_of_range_and_freed_ranges_are_errors_naming_the_allocation() {
    let (sim, _ns) = open("range", 64 << 20);
    let a = sim.malloc(0, 100, 0).unwrap();
    let data = [1u8; 64];
    // 64 bytes at offset 50 of a 100-byte allocation: 14 past its end.
    let e = h2d(&sim, a + 50, &data).unwrap_err();
    assert_eq!(e.kind(), Error::ParamInvalid);
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("allocation {a:#x} (100 bytes"))
            && msg.contains("offset 50")
            && msg.contains("14 bytes past")
            && msg.contains(&format!("[{:#x}, {:#x})", a + 50, a + 114)),
        "{msg}"
    );
    let e = sim.memset(a, 200, 0, 101).unwrap_err().to_string();
    assert!(e.contains("1 bytes past"), "{e}");
    // Nothing was written past the end: the allocation is all zero still.
    let mut out = [9u8; 100];
    d2h(&sim, &mut out, a).unwrap();
    assert_eq!(out, [0u8; 100]);
    sim.free(a).unwrap();
    let e = h2d(&sim, a + 8, &data[..8]).unwrap_err().to_string();
    assert!(e.contains("offset 8") && e.contains("was freed"), "{e}");
    let e = sim.free(a).unwrap_err().to_string();
    assert!(e.contains("was freed"), "{e}");
    // A synchronous copy goes by the addresses, whatever the kind says (CANN's does not
    // look at it: `direction`).
    let b = sim.malloc(0, 64, 0).unwrap();
    h2d(&sim, b, &data[..8]).unwrap();
    let c = sim.malloc(0, 64, 0).unwrap();
    // SAFETY: both are device ranges of 8 bytes.
    unsafe { sim.memcpy(c, 64, b, 8, MemcpyKind::HostToHost) }.unwrap();
    let mut back = [0u8; 8];
    d2h(&sim, &mut back, c).unwrap();
    assert_eq!(back, data[..8]);
    // Host memory that is not `aclrtMallocHost`'s is set when this process can write it
    // (CANN's sample 12 clears a stack variable so: `plain_host`); an address in no writable
    // mapping is refused.
    let mut plain = [0x33u8; 8];
    sim.memset(plain.as_mut_ptr().addr(), 8, 0, 8).unwrap();
    assert_eq!(plain, [0u8; 8]);
    let e = sim.memset(4096, 8, 0, 8).unwrap_err();
    assert!(
        e.to_string()
            .contains("neither a device address of this process nor memory of aclrtMallocHost"),
        "{e}"
    );
}

#[test]
fn out_of_memory_is_207001_and_a_free_gives_the_space_back() {
    let (sim, _ns) = open("oom", 1 << 20);
    let a = sim.malloc(0, 600 << 10, 0).unwrap();
    let e = sim.malloc(0, 600 << 10, 0).unwrap_err();
    assert_eq!(e.kind(), Error::MemoryAllocation);
    assert!(e.to_string().contains(crate::ENV_DEVICE_MEMORY), "{e}");
    assert_eq!(
        sim.malloc(0, 2 << 20, 0).unwrap_err().kind(),
        Error::MemoryAllocation
    );
    sim.free(a).unwrap();
    let b = sim.malloc(0, 600 << 10, 0).unwrap();
    sim.free(b).unwrap();
}

#[test]
fn async_copies_run_in_stream_order_and_recheck_their_ranges() {
    let (sim, _ns) = open("async", 64 << 20);
    let s = sim.create_stream(0).unwrap();
    let a = sim.malloc(0, 4096, 0).unwrap();
    let b = sim.malloc(0, 4096, 0).unwrap();
    let src = vec![5u8; 4096];
    let mut out = vec![0u8; 4096];
    // SAFETY: `src` and `out` outlive the synchronize below.
    unsafe {
        sim.memcpy_async(
            a,
            4096,
            src.as_ptr().addr(),
            4096,
            MemcpyKind::HostToDevice,
            s,
        )
        .unwrap();
        sim.memset_async(a, 4096, 7, 16, s).unwrap();
        sim.memcpy_async(b, 4096, a, 4096, MemcpyKind::DeviceToDevice, s)
            .unwrap();
        sim.memcpy_async(
            out.as_mut_ptr().addr(),
            4096,
            b,
            4096,
            MemcpyKind::DeviceToHost,
            s,
        )
        .unwrap();
    }
    sim.synchronize(s, SyncWait::Forever).unwrap();
    assert_eq!(&out[..16], &[7u8; 16]);
    assert!(out[16..].iter().all(|&x| x == 5));
    // A range freed between enqueue and run fails the task, not the memory.
    let gate = std::sync::Arc::new(std::sync::Barrier::new(2));
    let g = std::sync::Arc::clone(&gate);
    let (st, _) = sim.stream(s).unwrap();
    st.enqueue(move |_: &TaskCtx| {
        g.wait();
        Ok(())
    })
    .unwrap();
    sim.memset_async(b, 4096, 1, 4096, s).unwrap();
    sim.free(b).unwrap();
    gate.wait();
    let e = sim.synchronize(s, SyncWait::Forever).unwrap_err();
    assert!(
        e.to_string().contains("freed before the queued task ran"),
        "{e}"
    );
    // The same for a copy: the message names the allocation, its size and the range.
    let c = sim.malloc(0, 4096, 0).unwrap();
    let g = std::sync::Arc::clone(&gate);
    st.enqueue(move |_: &TaskCtx| {
        g.wait();
        Ok(())
    })
    .unwrap();
    // SAFETY: device to device.
    unsafe { sim.memcpy_async(a, 4096, c + 64, 128, MemcpyKind::DeviceToDevice, s) }.unwrap();
    sim.free(c).unwrap();
    gate.wait();
    let e = sim.synchronize(s, SyncWait::Forever).unwrap_err();
    let want = format!(
        "source [{:#x}, {:#x}) is in allocation {c:#x} (4096 bytes, device 0), which was freed \
         before the queued task ran",
        c + 64,
        c + 192
    );
    assert!(e.to_string().contains(&want), "{e}");
}

/// A range checked through this thread's cache of recent allocations (`recent`) is still
/// refused once freed, and after a free and a new, smaller allocation at the same address it
/// is checked against the new one: the same errors as a lookup in the table gives.
#[test]
fn a_freed_or_reallocated_address_is_checked_afresh_after_a_cached_lookup() {
    let (sim, _ns) = open("recent", 64 << 20);
    let s = sim.create_stream(0).unwrap();
    let a = sim.malloc(0, 4096, 0).unwrap();
    let b = sim.malloc(0, 4096, 0).unwrap();
    let data = [3u8; 4096];
    // Twice: the second lookup of each side is a hit of the cache.
    for _ in 0..2 {
        h2d(&sim, a, &data).unwrap();
        // SAFETY: device to device.
        unsafe { sim.memcpy(b, 4096, a, 4096, MemcpyKind::DeviceToDevice) }.unwrap();
    }
    sim.free(a).unwrap();
    let e = h2d(&sim, a + 8, &data[..8]).unwrap_err();
    assert_eq!(e.kind(), Error::ParamInvalid);
    assert!(
        e.to_string().contains("offset 8") && e.to_string().contains("was freed"),
        "{e}"
    );
    // SAFETY: fails before touching memory.
    let e = unsafe { sim.memcpy_async(b, 4096, a, 64, MemcpyKind::DeviceToDevice, s) }.unwrap_err();
    assert!(e.to_string().contains("was freed"), "{e}");
    // First fit: the new allocation takes the freed range's address, 100 bytes long now.
    let c = sim.malloc(0, 100, 0).unwrap();
    assert_eq!(c, a, "first fit reuses the address");
    let e = h2d(&sim, c, &data[..4096]).unwrap_err().to_string();
    assert!(
        e.contains(&format!("leaves allocation {c:#x} (100 bytes, device 0)"))
            && e.contains("3996 bytes past"),
        "{e}"
    );
    // SAFETY: fails before touching memory.
    let e = unsafe { sim.memcpy_async(c, 4096, b, 4096, MemcpyKind::DeviceToDevice, s) }
        .unwrap_err()
        .to_string();
    assert!(e.contains("3996 bytes past"), "{e}");
    let e = sim.memset(c + 50, 64, 0, 64).unwrap_err().to_string();
    assert!(
        e.contains("offset 50") && e.contains("14 bytes past"),
        "{e}"
    );
    // An address of the device that no allocation covers (past both) is no host memory.
    let e = sim
        .memset(b + (1 << 20), 64, 0, 64)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no allocation of this process covers"), "{e}");
    // The new allocation itself works, on the cached path as on the first.
    for _ in 0..2 {
        // SAFETY: device to device.
        unsafe { sim.memcpy(c, 100, b, 100, MemcpyKind::DeviceToDevice) }.unwrap();
    }
    let mut out = [0u8; 100];
    d2h(&sim, &mut out, c).unwrap();
    assert_eq!(out, [3u8; 100]);
    sim.synchronize(s, SyncWait::Forever).unwrap();
}

/// A free on another thread makes this thread's cached allocation miss: no copy into it
/// after the free has returned.
#[test]
fn a_free_on_another_thread_is_seen_by_a_cached_lookup() {
    let (sim, _ns) = open("recent-mt", 64 << 20);
    let a = sim.malloc(0, 4096, 0).unwrap();
    let data = [1u8; 64];
    let (to_main, from_worker) = std::sync::mpsc::channel();
    let (to_worker, from_main) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|sc| {
        let (sim, data) = (&sim, &data);
        sc.spawn(move || {
            // Cached by the first copy, hit by the second.
            h2d(sim, a, data).unwrap();
            h2d(sim, a + 64, data).unwrap();
            to_main.send(Ok(())).unwrap();
            from_main.recv().unwrap();
            to_main.send(h2d(sim, a + 128, data)).unwrap();
        });
        from_worker.recv().unwrap().unwrap();
        sim.free(a).unwrap();
        to_worker.send(()).unwrap();
        let e = from_worker.recv().unwrap().unwrap_err();
        assert_eq!(e.kind(), Error::ParamInvalid);
        assert!(
            e.to_string().contains("offset 128") && e.to_string().contains("was freed"),
            "{e}"
        );
    });
}

/// Host code that dereferences a device pointer faults, as on hardware.
#[test]
fn host_access_to_a_device_pointer_faults() {
    let (sim, _ns) = open("fault", 64 << 20);
    let a = sim.malloc(0, 64, 0).unwrap();
    let status = crate::fork::run_in_child(|| {
        // SAFETY: deliberately reads a PROT_NONE address in a child, to show it faults.
        let v = unsafe { std::ptr::read_volatile(std::ptr::with_exposed_provenance::<u8>(a)) };
        v == 0
    })
    .unwrap_err();
    assert!(
        libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGSEGV,
        "status {status:#x}"
    );
}

#[test]
fn sizes_parse_with_binary_suffixes() {
    assert_eq!(parse_size("16G").unwrap(), 16 << 30);
    assert_eq!(parse_size(" 512m ").unwrap(), 512 << 20);
    assert_eq!(parse_size("1048576").unwrap(), 1 << 20);
    assert!(parse_size("1K").is_err());
    assert!(parse_size("12X").is_err());
    assert!(parse_size("").is_err());
    assert!(parse_size("2T").is_err());
}

/// A pipe (read end, write end) of plain descriptors (for a forked child).
fn pipe() -> (i32, i32) {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid out-array of two descriptors.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    (fds[0], fds[1])
}

fn put(fd: i32, b: u8) {
    // SAFETY: writes one byte from a live local.
    assert_eq!(unsafe { libc::write(fd, (&raw const b).cast(), 1) }, 1);
}

fn get(fd: i32) -> u8 {
    let mut b = 0u8;
    // SAFETY: reads one byte into a live local.
    let n = unsafe { libc::read(fd, (&raw mut b).cast(), 1) };
    if n == 1 { b } else { 0xff }
}

/// The same bytes through the owner's and the importer's pointers; the whitelist decides who
/// imports; the importer's range is the exported one; once the owner frees the memory, the
/// importer's copies and sets through it fail (SPEC §8) until it closes. The importer is a
/// forked child.
#[test]
fn ipc_memory_maps_the_same_bytes_for_whitelisted_importers() {
    let (sim, ns) = open("ipc", 64 << 20);
    let a = sim.malloc(0, 8192, 0).unwrap();
    // Export the second half only.
    let key = sim.ipc_mem_export(a + 4096, 4096, false).unwrap();
    assert_eq!(
        sim.ipc_mem_export(a + 4096, 4096, false).unwrap(),
        key,
        "same range, same key"
    );
    let e = sim.ipc_mem_export(a, 4096, false).unwrap_err();
    assert!(e.to_string().contains("already exported"), "{e}");
    // The owner cannot import its own export (its own pointer maps the bytes).
    assert_eq!(
        sim.ipc_mem_import(0, &key, true).unwrap_err().kind(),
        Error::ParamInvalid
    );
    h2d(&sim, a + 4096, &[42u8; 100]).unwrap();
    // (read end, write end)
    let (from_parent, to_child) = pipe();
    let (from_child, to_parent) = pipe();
    let name = ns.0.clone();
    // SAFETY: the child opens a Sim of its own and `_exit`s; it uses nothing of the parent's.
    let child = unsafe { libc::fork() };
    assert!(child >= 0);
    if child == 0 {
        let step = |ok: bool| put(to_parent, u8::from(ok));
        let Ok(c) = reopen(&name) else {
            step(false);
            // SAFETY: ends the child.
            unsafe { libc::_exit(1) };
        };
        // 1: not whitelisted yet; 2: whitelisted but no peer access; 3: imported and read.
        let e = c.ipc_mem_import(1, &key, true).unwrap_err();
        step(e.kind() == Error::NoPermission && e.to_string().contains("not whitelisted"));
        get(from_parent);
        let e = c.ipc_mem_import(1, &key, false).unwrap_err();
        step(e.to_string().contains("no peer access"));
        // Imported onto device 1 from device 0: device-to-device copies only (CANN's rule),
        // through a buffer of the child's own.
        let mine = c.malloc(1, 4096, 0).unwrap_or(0);
        let d2d = |dst: usize, src: usize, n: usize| {
            // SAFETY: device to device, no host side.
            unsafe { c.memcpy(dst, n, src, n, MemcpyKind::DeviceToDevice) }
        };
        let ok = c.ipc_mem_import(1, &key, true).is_ok_and(|b| {
            let mut out = [0u8; 100];
            d2h(&c, &mut out, b).is_err_and(|e| e.to_string().contains("device to device"))
                && d2d(mine, b, 100).is_ok()
                && d2h(&c, &mut out, mine).is_ok()
                && out == [42u8; 100]
                && d2d(b + 4000, mine, 100).is_err_and(|e| e.to_string().contains("4 bytes past"))
                && h2d(&c, mine, &[43u8; 10]).is_ok()
                && d2d(b, mine, 10).is_ok()
        });
        step(ok);
        get(from_parent);
        // The owner freed: the importer's mapping stays until it closes, but using it is an
        // error (SPEC §8) that names the owner's free, in both directions.
        let b = *lock(&c.mem().imports).get(&key).unwrap_or(&0);
        let refused = |r: Result<(), SimError>| {
            r.is_err_and(|e| {
                e.kind() == Error::ParamInvalid && e.to_string().contains("its owner freed")
            })
        };
        // SAFETY: device to device.
        let read = unsafe { c.memcpy(mine + 100, 10, b, 10, MemcpyKind::DeviceToDevice) };
        // SAFETY: device to device.
        let write = unsafe { c.memcpy(b, 10, mine, 10, MemcpyKind::DeviceToDevice) };
        let ok = refused(read) && refused(write) && refused(c.memset(b, 10, 0, 10));
        // Closed here: the message says so, not "freed" (which sent the user after the owner).
        let closed = c.ipc_mem_close(&key).is_ok() && {
            // SAFETY: device to device.
            unsafe { c.memcpy(mine, 10, b, 10, MemcpyKind::DeviceToDevice) }.is_err_and(|e| {
                e.to_string()
                    .contains("which this process closed (aclrtIpcMemClose ended its import)")
            })
        };
        step(ok && closed);
        std::mem::forget(c);
        // SAFETY: ends the child.
        unsafe { libc::_exit(0) };
    }
    assert_eq!(get(from_child), 1, "import before the whitelist");
    sim.ipc_mem_set_pids(&key, &[child]).unwrap();
    put(to_child, 1);
    assert_eq!(get(from_child), 1, "import without peer access");
    assert_eq!(get(from_child), 1, "import, read, range check, write");
    let mut out = [0u8; 10];
    d2h(&sim, &mut out, a + 4096).unwrap();
    assert_eq!(out, [43u8; 10], "the child's write");
    sim.free(a).unwrap();
    assert!(
        h2d(&sim, a + 4096, &[1]).is_err(),
        "the owner's pointer is dead"
    );
    assert!(
        sim.mem_info(0).unwrap().0 < 64 << 20,
        "still held by the importer"
    );
    put(to_child, 1);
    assert_eq!(
        get(from_child),
        1,
        "after the owner's free the importer was refused (copies both ways, set), then closed, and a copy after its close said closed, not freed"
    );
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
    assert_eq!(
        sim.mem_info(0).unwrap().0,
        64 << 20,
        "released at the last close"
    );
    assert!(sim.ipc_mem_close(&key).is_err());
    for fd in [to_child, from_parent, to_parent, from_child] {
        // SAFETY: our descriptors, closed once.
        unsafe { libc::close(fd) };
    }
}

/// A process that imports and dies is treated as having closed; the bytes it wrote stay.
#[test]
fn an_importer_that_dies_counts_as_closed() {
    let (sim, ns) = open("ipcdie", 64 << 20);
    let a = sim.malloc(0, 4096, 0).unwrap();
    let key = sim.ipc_mem_export(a, 4096, true).unwrap();
    in_other_process(&ns, |child| {
        // On the owner's device: host copies allowed.
        let Ok(p) = child.ipc_mem_import(0, &key, false) else {
            return false;
        };
        h2d(child, p, &[7u8; 4096]).is_ok()
    })
    .unwrap();
    let mut out = [0u8; 4096];
    d2h(&sim, &mut out, a).unwrap();
    assert_eq!(out, [7u8; 4096]);
    let slot = sim.mem_file(0, 0, false).unwrap().unwrap();
    let s = slot.slot(0).unwrap();
    assert_eq!(
        super::file::importer_count(s),
        1,
        "the dead child is still listed"
    );
    sim.mem_gc();
    assert_eq!(super::file::importer_count(s), 0, "reclaimed");
    sim.free(a).unwrap();
    assert_eq!(sim.mem_info(0).unwrap().0, 64 << 20);
}

/// Memory of a process that died without freeing it counts as free in `aclrtGetMemInfo` (a
/// device's driver frees it at the death), also when the process that asks never allocated:
/// the next job in a namespace sees its devices whole.
#[test]
fn memory_of_a_dead_process_counts_as_free() {
    let (sim, ns) = open("deadinfo", 64 << 20);
    in_other_process(&ns, |child| {
        child.malloc(1, 1 << 20, 0).is_ok() && child.malloc(1, 4096, 0).is_ok()
    })
    .unwrap();
    assert_eq!(sim.mem_info(1).unwrap(), (64 << 20, 64 << 20));
    assert_eq!(sim.mem_info(0).unwrap(), (64 << 20, 64 << 20));
}

/// `Sim::gc` (what `acl-notify-inspect gc` runs) releases the device memory of dead processes
/// on devices this process never touched.
#[test]
fn gc_releases_the_memory_of_dead_processes_on_every_device() {
    let (sim, ns) = open("deadgc", 64 << 20);
    in_other_process(&ns, |child| {
        child.malloc(0, 4096, 0).is_ok() && child.malloc(1, 4096, 0).is_ok()
    })
    .unwrap();
    assert_eq!(sim.gc().unwrap().mem_freed, 2);
    assert_eq!(sim.gc().unwrap().mem_freed, 0, "nothing left");
}

#[test]
fn ipc_memory_is_207000_where_cann_has_none() {
    let ns = format!("unit-mem-310b-{}", std::process::id());
    let _ = Sim::remove_namespace(&ns);
    let sim = Sim::builder()
        .soc(acl_notify_core::Soc::Ascend310B)
        .devices(1)
        .namespace(&ns)
        .device_memory(8 << 20)
        .open()
        .unwrap();
    let _g = Ns(ns);
    let a = sim.malloc(0, 64, 0).unwrap();
    let e = sim.ipc_mem_export(a, 64, false).unwrap_err();
    assert_eq!(e.kind(), Error::FeatureNotSupport);
}

/// The typed API over the simulator: a buffer moves bytes, exports, whitelists, and frees on
/// drop (an export withdrawn first).
#[test]
fn typed_device_buffers_follow_the_lifecycle() {
    use acl_notify_core::soc::Ascend910B;
    use acl_notify_core::typed::Device;
    let (sim, _ns) = open("typed", 64 << 20);
    let dev = Device::<Ascend910B, _>::new(&sim, 0).unwrap();
    let b = dev.alloc(4096).unwrap();
    b.write(100, &[9u8; 16]).unwrap();
    let mut out = [0u8; 16];
    b.read(100, &mut out).unwrap();
    assert_eq!(out, [9u8; 16]);
    assert!(b.write(4090, &[0u8; 16]).is_err(), "past the end");
    let (exported, key) = b.export().map_err(|(_, e)| e).unwrap();
    let shared = exported
        .allow_pids(&[std::process::id() as i32 + 1])
        .map_err(|(_, e)| e)
        .unwrap();
    shared.allow_more_pids(&[1]).unwrap();
    assert!(sim.mem_info(0).unwrap().0 < 64 << 20);
    drop(shared);
    assert_eq!(sim.mem_info(0).unwrap().0, 64 << 20, "freed on drop");
    // The export was withdrawn: its key names nothing now.
    assert!(sim.ipc_mem_set_pids(&key, &[1]).is_err());
    let c = dev.alloc(64).unwrap();
    c.free().unwrap();
    assert_eq!(sim.mem_info(0).unwrap().0, 64 << 20);
}

#[test]
fn align32_and_huge1g_allocations_take_no_padding() {
    let (sim, _ns) = open("align32", 64 << 20);
    let used = |sim: &Sim| {
        let (free, total) = sim.mem_info(0).unwrap();
        total - free
    };
    // 512 bytes: padded to 544, so two 512-byte blocks; unpadded, one.
    let a = sim.malloc(0, 512, 0).unwrap();
    assert_eq!(used(&sim), 1024);
    let b = sim.malloc_rounded(0, 512, 0, Rounding::Align32).unwrap();
    assert_eq!(used(&sim), 1536);
    let c = sim.malloc(0, 512, 6).unwrap();
    assert_eq!(used(&sim), 2048);
    for p in [a, b, c] {
        sim.free(p).unwrap();
    }
    // The checked size is the one asked for, whatever the rounding.
    let d = sim.malloc_rounded(0, 500, 0, Rounding::Align32).unwrap();
    assert_eq!(
        h2d(&sim, d + 499, &[1, 2]).unwrap_err().kind(),
        Error::ParamInvalid
    );
}

/// `aclrtReduceAsync` on every simulated type, with results checked bit for bit: integers
/// wrap; fp16 and bf16 round to nearest even (ties both ways, overflow to infinity,
/// subnormals); max and min.
#[test]
fn reduce_gives_exact_results_for_every_type() {
    use super::half::{bf16_to_f32, f16_to_f32};
    use super::reduce::{ReduceOp, ReduceType};
    let (sim, _ns) = open("reduce", 64 << 20);
    let s = sim.create_stream(0).unwrap();
    let run = |ty: ReduceType, op: ReduceOp, dst: &[u8], src: &[u8]| -> Vec<u8> {
        let (d, x) = (
            sim.malloc(0, dst.len(), 0).unwrap(),
            sim.malloc(0, src.len(), 0).unwrap(),
        );
        h2d(&sim, d, dst).unwrap();
        h2d(&sim, x, src).unwrap();
        sim.reduce_async(d, x, dst.len(), op, ty, s).unwrap();
        sim.synchronize(s, SyncWait::Forever).unwrap();
        let mut out = vec![0u8; dst.len()];
        d2h(&sim, &mut out, d).unwrap();
        sim.free(d).unwrap();
        sim.free(x).unwrap();
        out
    };
    let h = |v: &[u16]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let back = |b: Vec<u8>| {
        b.chunks(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect::<Vec<u16>>()
    };
    // fp16: 1 + 2^-11 ties to 1; (1 + 2^-10) + 2^-11 ties to 1 + 2^-9; 65504 + 16 ties to
    // infinity, 65504 + 8 to 65504; 2^-24 + 2^-24 = 2^-23; 1.5 + -0.5 = 1; -2 + -2 = -4.
    let d16 = [0x3c00, 0x3c01, 0x7bff, 0x7bff, 0x0001, 0x3e00, 0xc000];
    let s16 = [0x1000, 0x1000, 0x4c00, 0x4800, 0x0001, 0xb800, 0xc000];
    assert_eq!(
        back(run(ReduceType::F16, ReduceOp::Sum, &h(&d16), &h(&s16))),
        [0x3c00, 0x3c02, 0x7c00, 0x7bff, 0x0002, 0x3c00, 0xc400]
    );
    assert_eq!(f16_to_f32(0x1000), 2f32.powi(-11));
    assert_eq!(
        back(run(ReduceType::F16, ReduceOp::Max, &h(&d16), &h(&s16))),
        [0x3c00, 0x3c01, 0x7bff, 0x7bff, 0x0001, 0x3e00, 0xc000]
    );
    assert_eq!(
        back(run(ReduceType::F16, ReduceOp::Min, &h(&d16), &h(&s16))),
        [0x1000, 0x1000, 0x4c00, 0x4800, 0x0001, 0xb800, 0xc000]
    );
    // bf16: 1 + 2^-8 ties to 1; (1 + 2^-7) + 2^-8 ties to 1 + 2^-6; 3 + 1 = 4.
    let db = [0x3f80, 0x3f81, 0x4040];
    let sb = [0x3b80, 0x3b80, 0x3f80];
    assert_eq!(bf16_to_f32(0x3b80), 2f32.powi(-8));
    assert_eq!(
        back(run(ReduceType::BF16, ReduceOp::Sum, &h(&db), &h(&sb))),
        [0x3f80, 0x3f82, 0x4080]
    );
    // Integers wrap; max and min are signed.
    assert_eq!(
        run(
            ReduceType::I8,
            ReduceOp::Sum,
            &[127, 0x80, 7],
            &[1, 0xff, 9]
        ),
        [0x80, 0x7f, 16]
    );
    assert_eq!(
        back(run(
            ReduceType::I16,
            ReduceOp::Sum,
            &h(&[0x7fff, 3]),
            &h(&[2, 4])
        )),
        [0x8001, 7]
    );
    assert_eq!(
        back(run(
            ReduceType::I16,
            ReduceOp::Max,
            &h(&[0xffff, 3]),
            &h(&[2, 4])
        )),
        [2, 4]
    );
    let f = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    assert_eq!(
        run(
            ReduceType::F32,
            ReduceOp::Sum,
            &f(&[1.5, -2.0]),
            &f(&[0.25, 2.0])
        ),
        f(&[1.75, 0.0])
    );
    assert_eq!(
        run(ReduceType::I8, ReduceOp::Min, &[5, 0x80, 3], &[7, 1, 0xff]),
        [5, 0x80, 0xff]
    );
}

/// Each SoC reduces the types CANN documents for its product (hicann/runtime
/// `docs/zh/api_ref/12_execution_control.md`): uint32 on the 950 family only, bf16 not on
/// Atlas 200I/500 A2, int8 not on the inference series, fp32 only on the training series;
/// another type is 207000 and leaves the destination as it was.
#[test]
fn a_soc_reduces_only_the_types_cann_lists_for_it() {
    use super::reduce::{ReduceOp, ReduceType};
    use acl_notify_core::Soc;
    let cases = [
        (Soc::Ascend950PR, ReduceType::U32, true),
        (Soc::Ascend910B, ReduceType::U32, false),
        (Soc::Ascend910B, ReduceType::BF16, true),
        (Soc::Ascend310B, ReduceType::BF16, false),
        (Soc::Ascend310B, ReduceType::I8, true),
        (Soc::Ascend310P, ReduceType::I8, false),
        (Soc::Ascend310P, ReduceType::I16, true),
        (Soc::Ascend910, ReduceType::I32, false),
        (Soc::Ascend910, ReduceType::F32, true),
    ];
    for (soc, ty, ok) in cases {
        let ns = format!("unit-mem-reducesoc-{}-{}", soc.name(), std::process::id());
        let _ = Sim::remove_namespace(&ns);
        let _guard = Ns(ns.clone());
        let sim = Sim::builder()
            .soc(soc)
            .devices(1)
            .namespace(&ns)
            .device_memory(16 << 20)
            .open()
            .unwrap();
        let s = sim.create_stream(0).unwrap();
        let (d, x) = (sim.malloc(0, 8, 0).unwrap(), sim.malloc(0, 8, 0).unwrap());
        h2d(&sim, d, &[1, 0, 0, 0, 1, 0, 0, 0]).unwrap();
        h2d(&sim, x, &[2, 0, 0, 0, 2, 0, 0, 0]).unwrap();
        let r = sim.reduce_async(d, x, 8, ReduceOp::Sum, ty, s);
        sim.synchronize(s, SyncWait::Forever).unwrap();
        let mut out = [0u8; 8];
        d2h(&sim, &mut out, d).unwrap();
        match r {
            Ok(()) => assert!(ok, "{soc:?} reduced {ty:?}"),
            Err(e) => {
                assert!(!ok, "{soc:?} {ty:?}: {e}");
                assert_eq!(e.kind(), Error::FeatureNotSupport, "{e}");
                assert_eq!(out, [1, 0, 0, 0, 1, 0, 0, 0], "{soc:?} {ty:?} wrote");
            }
        }
        if ok {
            assert_ne!(
                out,
                [1, 0, 0, 0, 1, 0, 0, 0],
                "{soc:?} {ty:?} reduced nothing"
            );
        }
    }
}

/// CANN's rule for `aclrtMemcpy` between two devices' memory (hicann/runtime
/// `docs/zh/api_ref/11-03_memory_copy_and_set.md`: on the 950 family, Atlas A2, the training
/// and the inference series, peer access is enabled first; `04_device_management.md`: access
/// enabled on device 0 for device 1 is the direction device 0 to device 1 only): refused
/// (207006) until the source's device enabled access to the destination's; Atlas A3 is not
/// on the list.
#[test]
fn a_copy_between_two_devices_needs_peer_access_from_the_source_s_device() {
    use acl_notify_core::NotifyResources as _;
    let (sim, _ns) = open("peercopy", 64 << 20);
    let (a, b) = (
        sim.malloc(0, 4096, 0).unwrap(),
        sim.malloc(1, 4096, 0).unwrap(),
    );
    h2d(&sim, a, &[6u8; 4096]).unwrap();
    // SAFETY: device to device.
    let d2d = |dst, src| unsafe { sim.memcpy(dst, 4096, src, 4096, MemcpyKind::DeviceToDevice) };
    let e = d2d(b, a).unwrap_err();
    assert_eq!(e.kind(), Error::NoPermission, "{}", e.message());
    assert!(
        e.message().contains("aclrtDeviceEnablePeerAccess"),
        "{}",
        e.message()
    );
    // Access the other way does not do.
    sim.enable_peer_access(1, 0).unwrap();
    assert_eq!(d2d(b, a).unwrap_err().kind(), Error::NoPermission);
    sim.enable_peer_access(0, 1).unwrap();
    d2d(b, a).unwrap();
    let mut out = [0u8; 4096];
    d2h(&sim, &mut out, b).unwrap();
    assert!(out.iter().all(|&x| x == 6));
    // Device 1 enabled access to device 0 above: its memory copies there.
    d2d(a, b).unwrap();
    // Within one device, and on Atlas A3, no access is needed.
    let c = sim.malloc(0, 4096, 0).unwrap();
    d2d(c, a).unwrap();
    let ns = format!("unit-mem-peercopy93-{}", std::process::id());
    let _ = Sim::remove_namespace(&ns);
    let _guard = Ns(ns.clone());
    let a3 = Sim::builder()
        .soc(acl_notify_core::Soc::Ascend910_93)
        .devices(2)
        .namespace(&ns)
        .device_memory(64 << 20)
        .open()
        .unwrap();
    let (x, y) = (
        a3.malloc(0, 4096, 0).unwrap(),
        a3.malloc(1, 4096, 0).unwrap(),
    );
    // SAFETY: device to device.
    unsafe { a3.memcpy(y, 4096, x, 4096, MemcpyKind::DeviceToDevice) }.unwrap();
}

/// A float reduce whose result is infinite or NaN from finite operands notes an overflow in
/// the device's status area (first word 1); integer wraps, finite results and non-finite
/// operands do not; a reset (a set of the area to 0) clears it (`overflow`).
#[test]
fn a_float_reduce_that_overflows_sets_the_devices_overflow_status() {
    use super::reduce::{ReduceOp, ReduceType};
    let (sim, _ns) = open("overflow", 64 << 20);
    let s = sim.create_stream(1).unwrap();
    let status = |sim: &Sim| -> u32 {
        let a = sim.overflow_addr(1).unwrap();
        let mut out = [0u8; overflow::STATUS];
        d2h(sim, &mut out, a).unwrap();
        assert!(out[4..].iter().all(|&b| b == 0), "{out:?}");
        u32::from_le_bytes(out[..4].try_into().unwrap())
    };
    let reduce = |ty: ReduceType, dst: &[u8], src: &[u8]| {
        let (d, x) = (
            sim.malloc(1, dst.len(), 0).unwrap(),
            sim.malloc(1, src.len(), 0).unwrap(),
        );
        h2d(&sim, d, dst).unwrap();
        h2d(&sim, x, src).unwrap();
        sim.reduce_async(d, x, dst.len(), ReduceOp::Sum, ty, s)
            .unwrap();
        sim.synchronize(s, SyncWait::Forever).unwrap();
        sim.free(d).unwrap();
        sim.free(x).unwrap();
    };
    let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    assert_eq!(status(&sim), 0, "a new status");
    reduce(
        ReduceType::F32,
        &f32s(&[1.0, 3.0e38]),
        &f32s(&[2.0, -3.0e38]),
    );
    reduce(
        ReduceType::I32,
        &i32::MAX.to_le_bytes(),
        &1i32.to_le_bytes(),
    );
    reduce(ReduceType::F32, &f32s(&[f32::INFINITY]), &f32s(&[1.0]));
    assert_eq!(status(&sim), 0, "no overflow, yet the status is set");
    reduce(
        ReduceType::F32,
        &f32s(&[1.0, 3.0e38]),
        &f32s(&[2.0, 3.0e38]),
    );
    assert_eq!(status(&sim), 1, "3e38 + 3e38 overflowed");
    let a = sim.overflow_addr(1).unwrap();
    sim.memset_async(a, overflow::AREA, 0, overflow::AREA, s)
        .unwrap();
    sim.synchronize(s, SyncWait::Forever).unwrap();
    assert_eq!(status(&sim), 0, "the reset");
    // fp16: 65504 + 65504 is infinite.
    reduce(
        ReduceType::F16,
        &0x7bffu16.to_le_bytes(),
        &0x7bffu16.to_le_bytes(),
    );
    assert_eq!(status(&sim), 1, "fp16 65504 + 65504 overflowed");
    assert_eq!(sim.overflow_addr(1).unwrap(), a, "one area per device");
    assert_ne!(sim.overflow_addr(0).unwrap(), a, "device 0 has its own");
}
