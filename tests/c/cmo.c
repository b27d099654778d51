/* cmo.c — the cache maintenance calls (aclrtCmoAsync, aclrtCmoAsyncWithBarrier,
 * aclrtCmoWaitBarrier, aclrtCmoGetDescSize, aclrtCmoSetDesc, aclrtCmoAsyncWithDesc) through the
 * C ABI, on the SoC named by argv[1]:
 * - Ascend910B: CANN's argument checks and codes; an operation is a task of its stream whose
 *   range is checked when queued and again when it runs (memory freed before it ran fails the
 *   stream's task); the descriptor (32 bytes) is read when the task runs (rewritten after the
 *   call to a bad range, the task fails); the barrier calls are Ascend310B's only (207000).
 * - Ascend310B: a barrier really orders: a stream waiting for barrier 5 does not copy until
 *   the invalidation with barrier 5, queued on another stream behind a held host function and
 *   a copy, has run; the plain calls are unsupported there (207000).
 * - Ascend310P: every call 207000.
 * Exit 0 and "cmo <soc>: ok" when every check holds. */
#include "common.h"


static void plain_and_desc(aclrtStream s) {
    void *d = NULL;
    CHECK(aclrtMalloc(&d, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    EXPECT_RC(aclrtCmoAsync(NULL, 64, ACL_RT_CMO_TYPE_PREFETCH, s), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtCmoAsync(d, 0, ACL_RT_CMO_TYPE_PREFETCH, s), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtCmoAsync(d, 64, (aclrtCmoType)4, s), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    EXPECT_RC(aclrtCmoAsync(d, 4097, ACL_RT_CMO_TYPE_PREFETCH, s), ACL_ERROR_RT_PARAM_INVALID);
    char host[64];
    EXPECT_RC(aclrtCmoAsync(host, 64, ACL_RT_CMO_TYPE_PREFETCH, s), ACL_ERROR_RT_PARAM_INVALID);
    for (int t = 0; t < 4; t++) CHECK(aclrtCmoAsync(d, 4096, (aclrtCmoType)t, s));
    CHECK(aclrtCmoAsync(d, 100, ACL_RT_CMO_TYPE_FLUSH, NULL));
    CHECK(aclrtSynchronizeStream(s));
    CHECK(aclrtSynchronizeDevice());

    /* Memory freed before the queued operation ran fails the stream's task. */
    void *gone = NULL;
    CHECK(aclrtMalloc(&gone, 256, ACL_MEM_MALLOC_HUGE_FIRST));
    gate_t g1 = {0};
    CHECK(aclrtLaunchHostFunc(s, gate_hold, &g1));
    CHECK(aclrtCmoAsync(gone, 256, ACL_RT_CMO_TYPE_INVALID, s));
    CHECK(aclrtFree(gone));
    gate_open(&g1);
    EXPECT_RC(aclrtSynchronizeStream(s), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("freed before", NULL);

    /* The barrier calls are Ascend310B's. */
    EXPECT_RC(aclrtCmoAsyncWithBarrier(d, 64, ACL_RT_CMO_TYPE_INVALID, 1, s),
              ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    aclrtBarrierTaskInfo info;
    memset(&info, 0, sizeof info);
    info.barrierNum = 1;
    info.cmoInfo[0].cmoType = ACL_RT_CMO_TYPE_INVALID;
    info.cmoInfo[0].barrierId = 1;
    EXPECT_RC(aclrtCmoWaitBarrier(&info, s, 0), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);

    /* Descriptors. */
    size_t n = 0;
    CHECK(aclrtCmoGetDescSize(&n));
    REQUIRE(n == 32, "descriptor size %zu", n);
    EXPECT_RC(aclrtCmoGetDescSize(NULL), ACL_ERROR_RT_PARAM_INVALID);
    void *desc = NULL;
    CHECK(aclrtMalloc(&desc, n, ACL_MEM_MALLOC_HUGE_FIRST));
    EXPECT_RC(aclrtCmoSetDesc(NULL, d, 64), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtCmoSetDesc(desc, d, 0), ACL_ERROR_RT_PARAM_INVALID);
    /* Written by CANN's synchronous copy, which goes by the addresses (ApiImpl::SetCmoDesc):
     * a descriptor in host memory is written, and refused when used (below). */
    CHECK(aclrtCmoSetDesc(host, d, 64));
    CHECK(aclrtCmoSetDesc(desc, d, 4096));
    EXPECT_RC(aclrtCmoAsyncWithDesc(desc, ACL_RT_CMO_TYPE_PREFETCH, s, desc), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtCmoAsyncWithDesc(NULL, ACL_RT_CMO_TYPE_PREFETCH, s, NULL), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtCmoAsyncWithDesc(host, ACL_RT_CMO_TYPE_PREFETCH, s, NULL), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclrtCmoAsyncWithDesc(desc, ACL_RT_CMO_TYPE_PREFETCH, s, NULL));
    CHECK(aclrtSynchronizeStream(s));
    /* The descriptor is read when the task runs: rewritten to a range past d's end after the
     * call, the task fails. */
    gate_t g2 = {0};
    CHECK(aclrtLaunchHostFunc(s, gate_hold, &g2));
    CHECK(aclrtCmoAsyncWithDesc(desc, ACL_RT_CMO_TYPE_PREFETCH, s, NULL));
    CHECK(aclrtCmoSetDesc(desc, (char *)d + 4000, 200));
    gate_open(&g2);
    EXPECT_RC(aclrtSynchronizeStream(s), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("leaves allocation", NULL);
    /* ... and rewritten back, it passes again. */
    CHECK(aclrtCmoSetDesc(desc, (char *)d + 4000, 96));
    CHECK(aclrtCmoAsyncWithDesc(desc, ACL_RT_CMO_TYPE_PREFETCH, s, NULL));
    CHECK(aclrtSynchronizeStream(s));
    CHECK(aclrtFree(desc));
    CHECK(aclrtFree(d));
}

static void barriers(void) {
    aclrtStream a = NULL, b = NULL;
    CHECK(aclrtCreateStream(&a));
    CHECK(aclrtCreateStream(&b));
    enum { N = 256 };
    void *x = NULL;
    CHECK(aclrtMalloc(&x, N, ACL_MEM_MALLOC_HUGE_FIRST));
    unsigned char *in = NULL, *out = NULL;
    CHECK(aclrtMallocHost((void **)&in, N));
    CHECK(aclrtMallocHost((void **)&out, N));
    memset(in, 0, N);
    CHECK(aclrtMemcpy(x, N, in, N, ACL_MEMCPY_HOST_TO_DEVICE));
    for (int i = 0; i < N; i++) in[i] = (unsigned char)(i ^ 0x5A);

    EXPECT_RC(aclrtCmoAsync(x, N, ACL_RT_CMO_TYPE_PREFETCH, a), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    EXPECT_RC(aclrtCmoAsyncWithBarrier(NULL, N, ACL_RT_CMO_TYPE_INVALID, 5, a), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtCmoAsyncWithBarrier(x, 0, ACL_RT_CMO_TYPE_INVALID, 5, a), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtCmoAsyncWithBarrier(x, N, ACL_RT_CMO_TYPE_INVALID, 0, a), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtCmoAsyncWithBarrier(x, N, ACL_RT_CMO_TYPE_FLUSH, 5, a), ACL_ERROR_RT_PARAM_INVALID);
    aclrtBarrierTaskInfo info;
    memset(&info, 0, sizeof info);
    EXPECT_RC(aclrtCmoWaitBarrier(NULL, b, 0), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtCmoWaitBarrier(&info, b, 0), ACL_ERROR_INVALID_PARAM);
    info.barrierNum = 7;
    EXPECT_RC(aclrtCmoWaitBarrier(&info, b, 0), ACL_ERROR_INVALID_PARAM);
    info.barrierNum = 2;
    info.cmoInfo[0].cmoType = ACL_RT_CMO_TYPE_INVALID;
    info.cmoInfo[0].barrierId = 5;
    info.cmoInfo[1].cmoType = ACL_RT_CMO_TYPE_PREFETCH;
    info.cmoInfo[1].barrierId = 6;
    EXPECT_RC(aclrtCmoWaitBarrier(&info, b, 0), ACL_ERROR_RT_PARAM_INVALID);
    info.barrierNum = 1;

    /* Stream a: held, then the copy that writes x, then the invalidation with barrier 5.
     * Stream b: waits for barrier 5, then copies x out. */
    gate_t g = {0};
    CHECK(aclrtLaunchHostFunc(a, gate_hold, &g));
    CHECK(aclrtMemcpyAsync(x, N, in, N, ACL_MEMCPY_HOST_TO_DEVICE, a));
    CHECK(aclrtCmoAsyncWithBarrier(x, N, ACL_RT_CMO_TYPE_INVALID, 5, a));
    CHECK(aclrtCmoWaitBarrier(&info, b, 0));
    memset(out, 0xEE, N);
    CHECK(aclrtMemcpyAsync(out, N, x, N, ACL_MEMCPY_DEVICE_TO_HOST, b));
    gate_open(&g);
    CHECK(aclrtSynchronizeStream(b));
    REQUIRE(memcmp(out, in, N) == 0, "stream b copied before barrier 5's invalidation ran (byte 1 %u)",
            out[1]);
    /* A barrier id nothing used: no wait. */
    info.cmoInfo[0].barrierId = 9;
    CHECK(aclrtCmoWaitBarrier(&info, b, 0));
    CHECK(aclrtSynchronizeStream(b));
    CHECK(aclrtSynchronizeStream(a));
    CHECK(aclrtFreeHost(in));
    CHECK(aclrtFreeHost(out));
    CHECK(aclrtFree(x));
    CHECK(aclrtDestroyStream(a));
    CHECK(aclrtDestroyStream(b));
}

int main(int argc, char **argv) {
    g_role = "cmo";
    const char *soc = argc > 1 ? argv[1] : "Ascend910B";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream s = NULL;
    CHECK(aclrtCreateStream(&s));
    if (strcmp(soc, "Ascend910B") == 0) {
        plain_and_desc(s);
    } else if (strcmp(soc, "Ascend310B") == 0) {
        barriers();
    } else {
        void *d = NULL;
        size_t n = 0;
        CHECK(aclrtMalloc(&d, 64, ACL_MEM_MALLOC_HUGE_FIRST));
        EXPECT_RC(aclrtCmoAsync(d, 64, ACL_RT_CMO_TYPE_PREFETCH, s), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        EXPECT_RC(aclrtCmoGetDescSize(&n), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        EXPECT_RC(aclrtCmoAsyncWithBarrier(d, 64, ACL_RT_CMO_TYPE_INVALID, 1, s),
                  ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        CHECK(aclrtFree(d));
    }
    CHECK(aclrtDestroyStream(s));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("cmo %s: ok\n", soc);
    return 0;
}
