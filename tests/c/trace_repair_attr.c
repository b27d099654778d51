/* trace_repair_attr.c — aclrtProfTrace, aclrtMemUceRepair and aclmdlRIKernelTaskGetAttribute
 * on Ascend910B, with CANN's checks in its order (hicann/runtime src/acl/aclrt_impl/dfx.cpp,
 * event.cpp, kernel.cpp; src/runtime/api/api_c.cc rtsProfTrace; api_error.cc MemUceRepair;
 * src/runtime/core/src/kernel/kernel_utils.cc GetKernelAttribute).
 *
 * Checked:
 * - aclrtProfTrace: NULL userdata 100000; length 0, -1 and 19 107000; 1 and 18 accepted; a
 *   stream of another device 107003; a destroyed stream 107017; NULL is the default stream; the
 *   trace point is queued in stream order behind a held host function (the call returns while
 *   the stream is held; a host function queued after it runs after the hold) and does nothing.
 * - aclrtMemUceRepair: NULL 100000; 129 entries 100000; a non-zero reserved word 100000 naming
 *   the entry; a device the machine lacks 107001; no current context on the device 107002; an
 *   empty array succeeds (nothing to repair: aclrtGetMemUceInfo lists no error); an address
 *   without an error 207000 saying so.
 * - aclmdlRIKernelTaskGetAttribute: NULL task, NULL attrValue 100000; every task of a captured
 *   model 107000 (none is a kernel task), the value left unwritten; a handle that is no task
 *   107017.
 *
 * usage: trace_repair_attr SOC. Exit 0 and "trace_repair_attr: ok". */
#include "common.h"

static int g_order[4];
static int g_at;

static void note(void *arg) { g_order[__atomic_fetch_add(&g_at, 1, __ATOMIC_SEQ_CST)] = (int)(intptr_t)arg; }

static void prof_trace(void) {
    char data[32];
    memset(data, 7, sizeof data);
    aclrtStream s = NULL;
    CHECK(aclrtCreateStream(&s));
    EXPECT_RC(aclrtProfTrace(NULL, 18, s), ACL_ERROR_INVALID_PARAM);
    expect_msg("userdata", NULL);
    EXPECT_RC(aclrtProfTrace(data, 0, s), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("length 0", NULL);
    EXPECT_RC(aclrtProfTrace(data, -1, s), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtProfTrace(data, 19, s), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclrtProfTrace(data, 1, s));
    CHECK(aclrtProfTrace(data, 18, NULL));

    /* In stream order, behind a held host function; the call does not wait for the hold. */
    gate_t gate = {0};
    CHECK(aclrtLaunchHostFunc(s, gate_hold, &gate));
    CHECK(aclrtLaunchHostFunc(s, note, (void *)1));
    CHECK(aclrtProfTrace(data, 18, s));
    /* Returned with the host function still held (a time under 5 s stood here until
     * 2026-12-07). */
    gate_not_waited_for(&gate, "aclrtProfTrace");
    CHECK(aclrtLaunchHostFunc(s, note, (void *)2));
    REQUIRE(__atomic_load_n(&g_at, __ATOMIC_SEQ_CST) == 0, "the stream ran past its hold");
    gate_open(&gate);
    CHECK(aclrtSynchronizeStream(s));
    REQUIRE(g_at == 2 && g_order[0] == 1 && g_order[1] == 2, "order %d: %d %d", g_at, g_order[0],
            g_order[1]);

    /* A stream of another device, a destroyed one. */
    CHECK(aclrtSetDevice(1));
    EXPECT_RC(aclrtProfTrace(data, 18, s), ACL_ERROR_RT_STREAM_CONTEXT);
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtDestroyStream(s));
    EXPECT_RC(aclrtProfTrace(data, 18, s), ACL_ERROR_RT_INVALID_HANDLE);
}

static void uce_repair(void) {
    static aclrtMemUceInfo info[129];
    memset(info, 0, sizeof info);
    EXPECT_RC(aclrtMemUceRepair(0, NULL, 1), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemUceRepair(0, info, 129), ACL_ERROR_INVALID_PARAM);
    expect_msg("128", NULL);
    info[2].reserved[5] = 1;
    EXPECT_RC(aclrtMemUceRepair(0, info, 3), ACL_ERROR_INVALID_PARAM);
    expect_msg("memUceInfoArray[2].reserved", NULL);
    info[2].reserved[5] = 0;
    EXPECT_RC(aclrtMemUceRepair(9, info, 1), ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT_RC(aclrtMemUceRepair(1, info, 0), ACL_ERROR_RT_CONTEXT_NULL);

    /* Nothing to repair: aclrtGetMemUceInfo lists no error, an empty repair succeeds. */
    size_t listed = 5;
    CHECK(aclrtGetMemUceInfo(0, info, 128, &listed));
    REQUIRE(listed == 0, "%zu UCE errors listed", listed);
    CHECK(aclrtMemUceRepair(0, info, 0));
    void *d = NULL;
    CHECK(aclrtMalloc(&d, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    info[0].addr = d;
    info[0].len = 4096;
    EXPECT_RC(aclrtMemUceRepair(0, info, 1), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    expect_msg("no memory with an uncorrectable error", NULL);
    CHECK(aclrtFree(d));
}

static void kernel_task_attr(void) {
    aclrtStream s = NULL;
    CHECK(aclrtCreateStream(&s));
    void *d = NULL;
    CHECK(aclrtMalloc(&d, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    CHECK(aclrtMemsetAsync(d, 64, 0, 64, s));
    CHECK(aclrtValueWrite(d, 11, 0, s));
    aclmdlRI m;
    CHECK(aclmdlRICaptureEnd(s, &m));
    aclrtStream ms;
    uint32_t ns = 1;
    CHECK(aclmdlRIGetStreams(m, &ms, &ns));
    aclmdlRITask t[4];
    uint32_t n = 4;
    CHECK(aclmdlRIGetTasksByStream(ms, t, &n));
    REQUIRE(n == 2, "%u tasks", n);

    aclrtLaunchKernelAttrValue v;
    memset(&v, 0x5A, sizeof v);
    EXPECT_RC(aclmdlRIKernelTaskGetAttribute(NULL, ACL_RT_LAUNCH_KERNEL_ATTR_SCHEM_MODE, &v),
              ACL_ERROR_INVALID_PARAM);
    expect_msg("task", NULL);
    EXPECT_RC(aclmdlRIKernelTaskGetAttribute(t[0], ACL_RT_LAUNCH_KERNEL_ATTR_SCHEM_MODE, NULL),
              ACL_ERROR_INVALID_PARAM);
    expect_msg("attrValue", NULL);
    for (uint32_t i = 0; i < n; i++) {
        EXPECT_RC(aclmdlRIKernelTaskGetAttribute(t[i], ACL_RT_LAUNCH_KERNEL_ATTR_SCHEM_MODE, &v),
                  ACL_ERROR_RT_PARAM_INVALID);
        expect_msg("not a compute task", "aclmdlRITaskGetType", NULL);
    }
    unsigned char *b = (unsigned char *)&v;
    for (size_t i = 0; i < sizeof v; i++) REQUIRE(b[i] == 0x5A, "attrValue byte %zu written", i);
    EXPECT_RC(aclmdlRIKernelTaskGetAttribute((aclmdlRITask)(uintptr_t)0x12345678,
                                             ACL_RT_LAUNCH_KERNEL_ATTR_SCHEM_MODE, &v),
              ACL_ERROR_RT_INVALID_HANDLE);
    CHECK(aclmdlRIDestroy(m));
    CHECK(aclrtFree(d));
    CHECK(aclrtDestroyStream(s));
}

int main(int argc, char **argv) {
    g_role = "trace_repair_attr";
    REQUIRE(argc == 2, "usage: trace_repair_attr SOC");
    (void)argv;
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    prof_trace();
    uce_repair();
    kernel_task_attr();
    CHECK(aclrtResetDevice(1));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("trace_repair_attr: ok\n");
    return 0;
}
