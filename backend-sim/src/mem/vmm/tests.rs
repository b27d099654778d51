//! Tests of virtual memory management: reserve, map and unmap, access, and copies, sets,
//! value tasks and reduces through reserved ranges.

use super::*;
use crate::NamespaceGuard as Ns;
use crate::mem::tests::{d2h, h2d};
use crate::mem::{MemcpyKind, ValueCondition};
use acl_notify_core::{BackendError as _, StreamOps as _, SyncWait};

const MB2: usize = 2 << 20;

fn open(tag: &str) -> (Sim, Ns) {
    crate::mem::tests::test_sim("vmm", tag, Soc::Ascend910B, 2, 64 << 20)
}

fn copy(sim: &Sim, dst: usize, src: usize, n: usize, kind: MemcpyKind) -> Result<(), SimError> {
    // SAFETY: the tests' host sides are live vectors of at least `n` bytes.
    unsafe { sim.memcpy(dst, n, src, n, kind) }
}

/// CANN's sample: reserve, two physical allocations mapped back to back, one copy in
/// across both, one copy out, every byte checked; then unmap, free, release.
#[test]
fn two_allocations_mapped_back_to_back_take_one_copy() {
    let (sim, _ns) = open("sample");
    let g = sim.vmm_granularity(0, PageSize::Huge).unwrap() as usize;
    assert_eq!(g, MB2);
    let va = sim.vmm_reserve(2 * g, 0, None).unwrap();
    assert_eq!(va % g, 0);
    let a = sim
        .vmm_malloc_physical(0, g, PageSize::Huge, Props::default())
        .unwrap();
    let b = sim
        .vmm_malloc_physical(0, g, PageSize::Huge, Props::default())
        .unwrap();
    sim.vmm_map(va, g, 0, a).unwrap();
    sim.vmm_map(va + g, g, 0, b).unwrap();
    let data: Vec<u8> = (0..2 * g).map(|i| (i * 31 + i / 4093) as u8).collect();
    h2d(&sim, va, &data).unwrap();
    let mut out = vec![0u8; 2 * g];
    d2h(&sim, &mut out, va).unwrap();
    assert!(out == data, "the bytes read back differ");
    // A copy inside the range that crosses the seam, device to device, queued.
    let s = sim.create_stream(0).unwrap();
    // SAFETY: device to device.
    unsafe { sim.memcpy_async(va + g - 100, 200, va, 200, MemcpyKind::Default, s) }.unwrap();
    sim.memset_async(va + 2 * g - 10, 10, 0xee, 10, s).unwrap();
    sim.synchronize(s, SyncWait::Forever).unwrap();
    d2h(&sim, &mut out, va).unwrap();
    assert_eq!(&out[g - 100..g + 100], &data[..200]);
    assert_eq!(&out[2 * g - 10..], &[0xee; 10]);
    sim.destroy_stream(s, acl_notify_core::StreamDestroy::Drain)
        .unwrap();
    // Releasing a range that maps something is refused; unmap, free, release works.
    assert_eq!(sim.vmm_release(va).unwrap_err().kind(), Error::ParamInvalid);
    sim.vmm_unmap(va).unwrap();
    sim.vmm_unmap(va + g).unwrap();
    sim.vmm_free_physical(a).unwrap();
    sim.vmm_free_physical(b).unwrap();
    sim.vmm_release(va).unwrap();
    assert_eq!(
        sim.mem_info(0).unwrap().0,
        64 << 20,
        "every page given back"
    );
}

#[test]
fn misuse_is_refused_with_cann_codes() {
    let (sim, _ns) = open("misuse");
    let g = PageSize::Huge.bytes() as usize;
    let va = sim.vmm_reserve(3 * g, 0, None).unwrap();
    let a = sim
        .vmm_malloc_physical(0, g, PageSize::Huge, Props::default())
        .unwrap();
    let code = |r: Result<(), SimError>| r.unwrap_err().kind();
    // Nothing mapped yet: a copy into the range is 107000, not a fault.
    let host = [1u8; 64];
    assert_eq!(code(h2d(&sim, va, &host)), Error::ParamInvalid);
    assert_eq!(
        code(sim.vmm_map(va + 4096, g, 0, a)),
        Error::ParamInvalid,
        "unaligned"
    );
    assert_eq!(
        code(sim.vmm_map(va, g / 2, 0, a)),
        Error::ParamInvalid,
        "not its size"
    );
    assert_eq!(
        code(sim.vmm_map(va, g, 4096, a)),
        Error::ParamInvalid,
        "offset"
    );
    assert_eq!(
        code(sim.vmm_map(va + 3 * g, g, 0, a)),
        Error::ParamInvalid,
        "past the range"
    );
    assert_eq!(
        code(sim.vmm_unmap(va)),
        Error::ParamInvalid,
        "nothing mapped"
    );
    sim.vmm_map(va, g, 0, a).unwrap();
    assert_eq!(
        code(sim.vmm_map(va, g, 0, a)),
        Error::ParamInvalid,
        "overlap"
    );
    // Another device's memory in the same range is refused.
    let other = sim
        .vmm_malloc_physical(1, g, PageSize::Huge, Props::default())
        .unwrap();
    assert_eq!(code(sim.vmm_map(va + g, g, 0, other)), Error::ParamInvalid);
    sim.vmm_free_physical(other).unwrap();
    assert_eq!(
        code(sim.vmm_free_physical(other)),
        Error::InvalidHandle,
        "double free"
    );
    // A copy that runs past the mapping is refused before any byte moves.
    let big = vec![7u8; 2 * g];
    assert_eq!(code(h2d(&sim, va, &big)), Error::ParamInvalid);
    let mut out = vec![0u8; 16];
    d2h(&sim, &mut out, va).unwrap();
    assert_eq!(out, vec![0u8; 16], "nothing written by the refused copy");
    // A host kind on a reserved address: a synchronous copy goes by the addresses, as
    // CANN's does (`direction`).
    copy(&sim, va, host.as_ptr().addr(), 64, MemcpyKind::HostToHost).unwrap();
    // Freed while mapped: still usable until its unmap, which frees it.
    sim.vmm_free_physical(a).unwrap();
    h2d(&sim, va, &host).unwrap();
    assert!(sim.mem_info(0).unwrap().0 < 64 << 20);
    sim.vmm_unmap(va).unwrap();
    assert_eq!(sim.mem_info(0).unwrap().0, 64 << 20);
    assert_eq!(code(sim.vmm_map(va, g, 0, a)), Error::InvalidHandle);
    assert_eq!(
        code(sim.vmm_release(va + 4096)),
        Error::ParamInvalid,
        "not its start"
    );
    sim.vmm_release(va).unwrap();
    assert_eq!(
        code(sim.vmm_release(va)),
        Error::ParamInvalid,
        "released twice"
    );
    assert_eq!(
        sim.vmm_reserve(0, 0, None).unwrap_err().kind(),
        Error::ParamInvalid
    );
    assert_eq!(
        sim.vmm_reserve(g, 4096, None).unwrap_err().kind(),
        Error::ParamInvalid
    );
}

#[test]
fn value_tasks_take_an_address_of_a_mapping() {
    let (sim, _ns) = open("value");
    let g = PageSize::Normal.bytes() as usize;
    let va = sim.vmm_reserve(2 * g, 0, None).unwrap();
    let a = sim
        .vmm_malloc_physical(0, g, PageSize::Normal, Props::default())
        .unwrap();
    sim.vmm_map(va + g, g, 0, a).unwrap();
    let s = sim.create_stream(0).unwrap();
    sim.value_write(va + g + 8, 0x1234_5678_9abc, s).unwrap();
    sim.value_wait(va + g + 8, 0x1234_5678_9abc, ValueCondition::Equal, s)
        .unwrap();
    sim.synchronize(s, SyncWait::Forever).unwrap();
    let mut out = [0u8; 8];
    d2h(&sim, &mut out, va + g + 8).unwrap();
    assert_eq!(u64::from_ne_bytes(out), 0x1234_5678_9abc);
    // Nothing mapped at the range's first page.
    let e = sim.value_write(va + 8, 1, s).unwrap_err();
    assert_eq!(e.kind(), Error::ParamInvalid, "{}", e.message());
    assert!(e.message().contains("nothing is mapped"), "{}", e.message());
    sim.destroy_stream(s, acl_notify_core::StreamDestroy::Drain)
        .unwrap();
    sim.vmm_unmap(va + g).unwrap();
    sim.vmm_free_physical(a).unwrap();
    sim.vmm_release(va).unwrap();
}

/// A copy or a set queued into a mapping that is unmapped before it runs fails its task
/// (hardware would fault on the unmapped address) and leaves the physical memory alone.
#[test]
fn a_task_queued_into_a_mapping_unmapped_before_it_runs_fails_and_writes_nothing() {
    let (sim, _ns) = open("unmapped");
    let g = PageSize::Normal.bytes() as usize;
    let va = sim.vmm_reserve(2 * g, 0, None).unwrap();
    let a = sim
        .vmm_malloc_physical(0, g, PageSize::Normal, Props::default())
        .unwrap();
    sim.vmm_map(va, g, 0, a).unwrap();
    let s = sim.create_stream(0).unwrap();
    let (st, _) = sim.stream(s).unwrap();
    let gate = std::sync::Arc::new(std::sync::Barrier::new(2));
    let src = vec![9u8; g];
    for how in [
        "copy",
        "set",
        "2-D copy",
        "value write",
        "value wait",
        "reduce",
    ] {
        let held = std::sync::Arc::clone(&gate);
        st.enqueue(move |_: &crate::stream::TaskCtx| {
            held.wait();
            Ok(())
        })
        .unwrap();
        let (h, k) = (src.as_ptr().addr(), MemcpyKind::HostToDevice);
        let rows = crate::mem::pitched::Pitched {
            dpitch: 64,
            spitch: 64,
            width: 64,
            height: 1,
        };
        use crate::mem::reduce::{ReduceOp, ReduceType};
        match how {
            "set" => sim.memset_async(va + 16, 64, 7, 64, s),
            "value write" => sim.value_write(va + 16, 7, s),
            "value wait" => sim.value_wait(va + 16, 7, ValueCondition::Equal, s),
            "reduce" => sim.reduce_async(va + 16, va + 1024, 64, ReduceOp::Sum, ReduceType::I32, s),
            // SAFETY: `src` lives until the stream is synchronized below.
            "copy" => unsafe { sim.memcpy_async(va + 16, 64, h, 64, k, s) },
            // SAFETY: as for the copy.
            _ => unsafe { sim.memcpy2d_async(va + 16, h, rows, k, s) },
        }
        .unwrap();
        sim.vmm_unmap(va).unwrap();
        gate.wait();
        let e = sim.synchronize(s, SyncWait::Forever).unwrap_err();
        assert_eq!(e.kind(), Error::ParamInvalid, "{}", e.message());
        let end = if how.starts_with("value") {
            va + 24
        } else {
            va + 80
        };
        let want = format!(
            "[{:#x}, {end:#x}) was in the mapping at {va:#x} ({g} bytes), which was unmapped \
             (aclrtUnmapMem) before the queued task ran",
            va + 16,
        );
        assert!(e.message().contains(&want), "{}", e.message());
        // Mapped again: the physical memory kept its zeros.
        sim.vmm_map(va, g, 0, a).unwrap();
        let mut out = vec![1u8; g];
        d2h(&sim, &mut out, va).unwrap();
        assert!(out.iter().all(|&b| b == 0), "{how}: the task wrote");
    }
    // A task queued while mapped and run while mapped still copies.
    // SAFETY: `src` lives until the stream is synchronized.
    unsafe { sim.memcpy_async(va, g, src.as_ptr().addr(), g, MemcpyKind::HostToDevice, s) }
        .unwrap();
    sim.synchronize(s, SyncWait::Forever).unwrap();
    let mut out = vec![0u8; g];
    d2h(&sim, &mut out, va).unwrap();
    assert_eq!(out, src);
    sim.destroy_stream(s, acl_notify_core::StreamDestroy::Drain)
        .unwrap();
    sim.vmm_unmap(va).unwrap();
    sim.vmm_free_physical(a).unwrap();
    sim.vmm_release(va).unwrap();
}

/// A size that is not a multiple of the granularity is rounded up to it, as CANN
/// documents (hicann/runtime `docs/zh/api_ref/25-02_Enumerations.md`, aclrtMemAttr: "not
/// a multiple of 2M, aligned up to 2M"; aclrtMallocPhysical asks for aligned sizes "to
/// save memory"): the allocation is that large, and it is mapped with that size.
#[test]
fn a_physical_size_off_the_granularity_is_rounded_up_and_mapped_whole() {
    let (sim, _ns) = open("roundup");
    let g = PageSize::Normal.bytes() as usize;
    let va = sim.vmm_reserve(2 * g, 0, None).unwrap();
    let a = sim
        .vmm_malloc_physical(0, g + 1, PageSize::Normal, Props::default())
        .unwrap();
    let e = sim.vmm_map(va, g + 1, 0, a).unwrap_err();
    assert_eq!(e.kind(), Error::ParamInvalid, "{}", e.message());
    sim.vmm_map(va, 2 * g, 0, a).unwrap();
    assert_eq!(sim.vmm_address_range(va + g + 8).unwrap(), (va, 2 * g));
    let data = vec![4u8; 2 * g];
    h2d(&sim, va, &data).unwrap();
    sim.vmm_unmap(va).unwrap();
    sim.vmm_free_physical(a).unwrap();
    sim.vmm_release(va).unwrap();
}

#[test]
fn access_is_kept_per_mapping_and_read_back() {
    let (sim, _ns) = open("access");
    let g = PageSize::Normal.bytes() as usize;
    let va = sim.vmm_reserve(2 * g, 0, None).unwrap();
    let a = sim
        .vmm_malloc_physical(0, g, PageSize::Normal, Props::default())
        .unwrap();
    let b = sim
        .vmm_malloc_physical(0, g, PageSize::Normal, Props::default())
        .unwrap();
    sim.vmm_map(va, g, 0, a).unwrap();
    sim.vmm_map(va + g, g, 0, b).unwrap();
    let get = |at: usize, loc| sim.vmm_get_access(at, loc).unwrap();
    // The owner device reads and writes from the mapping on; nothing else is set.
    assert_eq!(get(va + 100, AccessLoc::Device(0)), Some(Access::ReadWrite));
    assert_eq!(get(va, AccessLoc::Host), None);
    sim.vmm_set_access(va + g, g, &[(AccessLoc::Host, Access::Read)])
        .unwrap();
    assert_eq!(get(va + g + 8, AccessLoc::Host), Some(Access::Read));
    assert_eq!(
        get(va + 8, AccessLoc::Host),
        None,
        "the other mapping's own"
    );
    // The same again is accepted; another access for a set location is 507899, and
    // nothing of a refused call is kept.
    sim.vmm_set_access(va + g, g, &[(AccessLoc::Host, Access::Read)])
        .unwrap();
    let code = |r: Result<(), SimError>| r.unwrap_err().kind();
    assert_eq!(
        code(sim.vmm_set_access(va, g, &[(AccessLoc::Device(0), Access::Read)])),
        Error::DrvInternalError
    );
    assert_eq!(
        code(sim.vmm_set_access(
            va,
            g,
            &[
                (AccessLoc::Host, Access::None),
                (AccessLoc::Host, Access::Read)
            ]
        )),
        Error::DrvInternalError
    );
    assert_eq!(get(va, AccessLoc::Host), None);
    // Not a mapping's whole range, no descriptor, a device it does not have: 107000.
    for r in [
        sim.vmm_set_access(va, 2 * g, &[(AccessLoc::Host, Access::Read)]),
        sim.vmm_set_access(va + 8, g, &[(AccessLoc::Host, Access::Read)]),
        sim.vmm_set_access(va, g, &[]),
        sim.vmm_set_access(va, g, &[(AccessLoc::Device(2), Access::Read)]),
    ] {
        assert_eq!(code(r), Error::ParamInvalid);
    }
    sim.vmm_unmap(va + g).unwrap();
    assert_eq!(
        sim.vmm_get_access(va + g, AccessLoc::Host)
            .unwrap_err()
            .kind(),
        Error::ParamInvalid
    );
    // A new mapping starts afresh.
    sim.vmm_map(va + g, g, 0, b).unwrap();
    assert_eq!(get(va + g, AccessLoc::Host), None);
    sim.vmm_unmap(va).unwrap();
    sim.vmm_unmap(va + g).unwrap();
    sim.vmm_free_physical(a).unwrap();
    sim.vmm_free_physical(b).unwrap();
    sim.vmm_release(va).unwrap();
}

#[test]
fn a_reduce_takes_ranges_of_a_mapping() {
    use crate::mem::reduce::{ReduceOp, ReduceType};
    let (sim, _ns) = open("reduce");
    let g = PageSize::Normal.bytes() as usize;
    let va = sim.vmm_reserve(2 * g, 0, None).unwrap();
    let a = sim
        .vmm_malloc_physical(0, 2 * g, PageSize::Normal, Props::default())
        .unwrap();
    sim.vmm_map(va, 2 * g, 0, a).unwrap();
    let s = sim.create_stream(0).unwrap();
    let words = |v: [i32; 4]| v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
    let (dst, src) = (words([1, 2, 3, 4]), words([10, 20, 30, 40]));
    h2d(&sim, va + 64, &dst).unwrap();
    h2d(&sim, va + g + 128, &src).unwrap();
    sim.reduce_async(va + 64, va + g + 128, 16, ReduceOp::Sum, ReduceType::I32, s)
        .unwrap();
    sim.synchronize(s, SyncWait::Forever).unwrap();
    let mut out = vec![0u8; 16];
    d2h(&sim, &mut out, va + 64).unwrap();
    assert_eq!(out, words([11, 22, 33, 44]));
    // Nothing mapped: after the unmap the same reduce is refused.
    sim.vmm_unmap(va).unwrap();
    let e = sim
        .reduce_async(va + 64, va + g + 128, 16, ReduceOp::Sum, ReduceType::I32, s)
        .unwrap_err();
    assert_eq!(e.kind(), Error::ParamInvalid, "{}", e.message());
    assert!(e.message().contains("nothing is mapped"), "{}", e.message());
    sim.destroy_stream(s, acl_notify_core::StreamDestroy::Drain)
        .unwrap();
    sim.vmm_free_physical(a).unwrap();
    sim.vmm_release(va).unwrap();
}

#[test]
fn an_asked_address_is_taken_when_free_and_aligned() {
    let (sim, _ns) = open("expect");
    let at = 17usize << 40;
    let va = sim.vmm_reserve(MB2, 0, Some(at)).unwrap();
    assert_eq!(va, at);
    let again = sim.vmm_reserve(MB2, 0, Some(at)).unwrap_err();
    assert_eq!(again.kind(), Error::ParamInvalid, "{}", again.message());
    assert_eq!(
        sim.vmm_reserve(MB2, 0, Some(at + 4096)).unwrap_err().kind(),
        Error::ParamInvalid
    );
    assert_eq!(
        sim.vmm_reserve(MB2, 0, Some(1 << 40)).unwrap_err().kind(),
        Error::ParamInvalid
    );
    sim.vmm_release(va).unwrap();
}

#[test]
fn a_retained_handle_keeps_the_allocation_until_each_handle_is_freed() {
    let (sim, _ns) = open("retain");
    let g = PageSize::Normal.bytes() as usize;
    let va = sim.vmm_reserve(2 * g, 0, None).unwrap();
    let a = sim
        .vmm_malloc_physical(1, 2 * g, PageSize::Normal, Props(7))
        .unwrap();
    sim.vmm_map(va, 2 * g, 0, a).unwrap();
    assert_eq!(
        sim.vmm_properties(a).unwrap(),
        (1, PageSize::Normal, Props(7))
    );
    assert_eq!(
        sim.vmm_retain(va + g).unwrap_err().kind(),
        Error::ParamInvalid
    );
    assert_eq!(sim.vmm_retain(va).unwrap(), a);
    // The address range of any address in the mapping is the mapping.
    assert_eq!(sim.vmm_address_range(va + g + 5).unwrap(), (va, 2 * g));
    let d = sim.malloc(0, 100, 0).unwrap();
    assert_eq!(sim.vmm_address_range(d + 99).unwrap(), (d, 100));
    assert_eq!(
        sim.vmm_address_range(d + 100).unwrap_err().kind(),
        Error::ParamInvalid
    );
    sim.vmm_unmap(va).unwrap();
    assert_eq!(
        sim.vmm_address_range(va).unwrap_err().kind(),
        Error::ParamInvalid
    );
    // Two handles: the first free leaves it allocated, the second frees it.
    let used = |sim: &Sim| (64 << 20) - sim.mem_info(1).unwrap().0;
    sim.vmm_free_physical(a).unwrap();
    assert_eq!(used(&sim), 2 * g as u64);
    sim.vmm_free_physical(a).unwrap();
    assert_eq!(used(&sim), 0);
    assert_eq!(
        sim.vmm_free_physical(a).unwrap_err().kind(),
        Error::InvalidHandle
    );
    sim.vmm_release(va).unwrap();
}
