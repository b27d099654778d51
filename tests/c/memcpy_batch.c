/* memcpy_batch.c — aclrtMemcpyBatch / aclrtMemcpyBatchV2 / aclrtMemcpyBatchAsync /
 * aclrtMemcpyBatchAsyncV2 through the C ABI, on the SoC named by argv[1]:
 * - Ascend910B: host-to-device and device-to-host copies with per-copy attributes (an
 *   attribute applies from its index on), their bytes checked one by one; CANN's checks and
 *   codes in its order (ACL layer 100000, runtime 107000) and the failIndex of the failing copy
 *   (a location or device id that is not the attribute's, host to host); the async form queued
 *   behind a held stream, and with unregistered host memory synchronizing the stream and
 *   copying at once, as CANN's runtime does.
 * - Ascend310P: no batch copies there (207000).
 * Exit 0 and "memcpy_batch: ok" when every check holds. */
#include "common.h"


static aclrtMemcpyBatchAttr attr(aclrtMemLocationType dst, uint32_t dst_id,
                                 aclrtMemLocationType src, uint32_t src_id) {
    aclrtMemcpyBatchAttr a;
    memset(&a, 0, sizeof a);
    a.dstLoc.type = dst;
    a.dstLoc.id = dst_id;
    a.srcLoc.type = src;
    a.srcLoc.id = src_id;
    return a;
}

#define N 256

int main(int argc, char **argv) {
    g_role = "memcpy_batch";
    const char *soc = argc > 1 ? argv[1] : "Ascend910B";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    const aclrtMemLocationType H = ACL_MEM_LOCATION_TYPE_HOST, D = ACL_MEM_LOCATION_TYPE_DEVICE;
    void *d = NULL;
    CHECK(aclrtMalloc(&d, 2 * N, ACL_MEM_MALLOC_HUGE_FIRST));
    unsigned char *pinned = NULL;
    CHECK(aclrtMallocHost((void **)&pinned, 2 * N));
    unsigned char *plain = malloc(2 * N);
    REQUIRE(plain != NULL, "malloc");
    for (int i = 0; i < N; i++) {
        pinned[i] = (unsigned char)(i + 1);
        plain[i] = (unsigned char)(200 - i);
    }
    size_t fail = 7;
    aclrtMemcpyBatchAttr attrs[2] = {attr(D, 0, H, 0), attr(H, 0, D, 0)};
    size_t idx[2] = {0, 2};
    void *dsts[3] = {d, (char *)d + N, pinned + N};
    void *srcs[3] = {pinned, plain, d};
    size_t sizes[3] = {N, N, N};
    size_t maxs[3] = {N, N, N};

    if (strcmp(soc, "Ascend910B") != 0) {
        EXPECT_RC(aclrtMemcpyBatch(dsts, maxs, srcs, sizes, 3, attrs, idx, 2, &fail),
                  ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        EXPECT_RC(aclrtMemcpyBatchAsyncV2(dsts, maxs, srcs, sizes, 3, attrs, idx, 2, NULL),
                  ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    } else {
        /* Checks, in CANN's order. */
        EXPECT_RC(aclrtMemcpyBatch(dsts, maxs, srcs, sizes, 3, attrs, idx, 2, NULL),
                  ACL_ERROR_INVALID_PARAM);
        EXPECT_RC(aclrtMemcpyBatch(dsts, maxs, srcs, NULL, 3, attrs, idx, 2, &fail),
                  ACL_ERROR_INVALID_PARAM);
        EXPECT_RC(aclrtMemcpyBatch(dsts, maxs, srcs, sizes, 0, attrs, idx, 2, &fail),
                  ACL_ERROR_INVALID_PARAM);
        size_t zeros[3] = {0, 0, 0};
        EXPECT_RC(aclrtMemcpyBatch(NULL, NULL, NULL, zeros, 3, NULL, NULL, 0, &fail), ACL_SUCCESS);
        REQUIRE(fail == SIZE_MAX, "all sizes 0: failIndex %zu", fail);
        EXPECT_RC(aclrtMemcpyBatch(dsts, NULL, srcs, sizes, 3, attrs, idx, 2, &fail),
                  ACL_ERROR_INVALID_PARAM);
        size_t small[3] = {N, N - 1, N};
        EXPECT_RC(aclrtMemcpyBatch(dsts, small, srcs, sizes, 3, attrs, idx, 2, &fail),
                  ACL_ERROR_INVALID_PARAM);
        attrs[1].rsv[3] = 1;
        EXPECT_RC(aclrtMemcpyBatch(dsts, maxs, srcs, sizes, 3, attrs, idx, 2, &fail),
                  ACL_ERROR_INVALID_PARAM);
        attrs[1].rsv[3] = 0;
        size_t bad_idx[2] = {1, 2};
        EXPECT_RC(aclrtMemcpyBatch(dsts, maxs, srcs, sizes, 3, attrs, bad_idx, 2, &fail),
                  ACL_ERROR_RT_PARAM_INVALID);
        REQUIRE(fail == SIZE_MAX, "failIndex %zu", fail);
        EXPECT_RC(aclrtMemcpyBatch(dsts, maxs, srcs, sizes, 3, attrs, idx, 0, &fail),
                  ACL_ERROR_RT_PARAM_INVALID);
        size_t past[2] = {0, 3};
        EXPECT_RC(aclrtMemcpyBatch(dsts, maxs, srcs, sizes, 3, attrs, past, 2, &fail),
                  ACL_ERROR_RT_PARAM_INVALID);

        /* A pair that is not its attribute's: failIndex names it, nothing is copied. */
        memset(pinned + N, 0, N);
        aclrtMemcpyBatchAttr wrong[2] = {attr(D, 0, H, 0), attr(H, 0, D, 1)};
        EXPECT_RC(aclrtMemcpyBatch(dsts, maxs, srcs, sizes, 3, wrong, idx, 2, &fail),
                  ACL_ERROR_RT_PARAM_INVALID);
        REQUIRE(fail == 2, "failIndex %zu, expected 2", fail);
        expect_msg("copy 2", NULL);
        void *h2h_d[1] = {plain + N};
        void *h2h_s[1] = {pinned};
        aclrtMemcpyBatchAttr hh = attr(H, 0, H, 0);
        size_t zero = 0;
        EXPECT_RC(aclrtMemcpyBatch(h2h_d, maxs, h2h_s, sizes, 1, &hh, &zero, 1, &fail),
                  ACL_ERROR_RT_PARAM_INVALID);
        REQUIRE(fail == 0, "failIndex %zu", fail);
        expect_msg("host to device or device to host", NULL);

        /* The batch: two copies in (pinned and unregistered host memory), one out. */
        CHECK(aclrtMemcpyBatch(dsts, maxs, srcs, sizes, 3, attrs, idx, 2, &fail));
        REQUIRE(fail == SIZE_MAX, "failIndex %zu", fail);
        for (int i = 0; i < N; i++)
            REQUIRE(pinned[N + i] == (unsigned char)(i + 1), "byte %d: %#x", i, pinned[N + i]);
        unsigned char back[2 * N];
        CHECK(aclrtMemcpy(back, 2 * N, d, 2 * N, ACL_MEMCPY_DEVICE_TO_HOST));
        for (int i = 0; i < N; i++) {
            REQUIRE(back[i] == (unsigned char)(i + 1), "byte %d: %#x", i, back[i]);
            REQUIRE(back[N + i] == (unsigned char)(200 - i), "byte %d: %#x", N + i, back[N + i]);
        }
        /* A range past its allocation: the copy path's 107000, failIndex at it. */
        size_t big[3] = {N, N + 1, N};
        size_t bigmax[3] = {N, N + 1, N};
        EXPECT_RC(aclrtMemcpyBatchV2(dsts, bigmax, srcs, big, 3, attrs, idx, 2),
                  ACL_ERROR_RT_PARAM_INVALID);
        expect_msg("leaves allocation", NULL);

        /* Async: queued behind a held stream. */
        aclrtStream s = NULL;
        CHECK(aclrtCreateStream(&s));
        int hold = 150;
        for (int i = 0; i < N; i++) pinned[i] = (unsigned char)(3 * i);
        memset(pinned + N, 0, N);
        gate_t g = {0};
        CHECK(aclrtLaunchHostFunc(s, gate_hold, &g));
        void *adst[2] = {d, pinned + N};
        void *asrc[2] = {pinned, d};
        aclrtMemcpyBatchAttr aattrs[2] = {attr(D, 0, H, 0), attr(H, 0, D, 0)};
        size_t aidx[2] = {0, 1};
        CHECK(aclrtMemcpyBatchAsync(adst, maxs, asrc, sizes, 2, aattrs, aidx, 2, &fail, s));
        REQUIRE(fail == SIZE_MAX, "failIndex %zu", fail);
        REQUIRE(pinned[N + 5] == 0, "not copied before the stream ran");
        gate_open(&g);
        CHECK(aclrtSynchronizeStream(s));
        for (int i = 0; i < N; i++)
            REQUIRE(pinned[N + i] == (unsigned char)(3 * i), "byte %d: %#x", i, pinned[N + i]);
        /* Unregistered host memory: the stream is synchronized and the copy made at once. */
        memset(plain + N, 0, N);
        for (int i = 0; i < N; i++) pinned[i] = (unsigned char)(5 * i + 1);
        CHECK(aclrtLaunchHostFunc(s, hold_ms, &hold));
        void *udst[2] = {d, plain + N};
        CHECK(aclrtMemcpyBatchAsyncV2(udst, maxs, asrc, sizes, 2, aattrs, aidx, 2, s));
        for (int i = 0; i < N; i++)
            REQUIRE(plain[N + i] == (unsigned char)(5 * i + 1), "byte %d at once: %#x", i,
                    plain[N + i]);
        /* The async form refuses a size of 0 among others. */
        size_t some0[2] = {N, 0};
        EXPECT_RC(aclrtMemcpyBatchAsync(adst, maxs, asrc, some0, 2, aattrs, aidx, 2, &fail, s),
                  ACL_ERROR_RT_PARAM_INVALID);
        REQUIRE(fail == 1, "failIndex %zu", fail);
        CHECK(aclrtSynchronizeStream(s));
        CHECK(aclrtDestroyStream(s));
    }
    free(plain);
    CHECK(aclrtFreeHost(pinned));
    CHECK(aclrtFree(d));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("memcpy_batch %s: ok\n", soc);
    return 0;
}
