/* memcpy_variants.c — aclrtMemcpyAsyncWithCondition, aclrtMemcpyAsyncWithOffset,
 * aclrtGetMemcpyDescSize, aclrtSetMemcpyDesc and aclrtMemcpyAsyncWithDesc through the C ABI, on
 * the SoC named by argv[1]:
 * - Ascend910B: WithCondition returns only after its copy ran when the host side is malloc'd
 *   (not page-locked) memory, and at once (the copy still queued behind a held stream) when it
 *   is aclrtMallocHost memory; host to host is refused. WithOffset and WithDesc read their
 *   addresses (and the descriptor's count) from device memory when the copy runs, in stream
 *   order: words and descriptors rewritten after the call but before the copy ran are the
 *   ones used. Every byte checked; CANN's argument checks and codes; a range read past its
 *   allocation fails the stream's task.
 * - Ascend310P: no descriptors and no WithOffset there (207000); WithCondition works.
 * Exit 0 and "memcpy_variants <soc>: ok" when every check holds. */
#include "common.h"

/* aclrtMemcpyAsyncWithCondition is deprecated in CANN's header, as in ours; it is still checked here. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"


static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 13 + seed);
}

static void with_condition(aclrtStream s) {
    enum { N = 4096 };
    void *d = NULL;
    CHECK(aclrtMalloc(&d, N, ACL_MEM_MALLOC_HUGE_FIRST));
    unsigned char *src = malloc(N), *plain = malloc(N);
    REQUIRE(src && plain, "malloc");
    fill(src, N, 1);
    CHECK(aclrtMemcpy(d, N, src, N, ACL_MEMCPY_HOST_TO_DEVICE));
    EXPECT_RC(aclrtMemcpyAsyncWithCondition(plain, N, src, N, ACL_MEMCPY_HOST_TO_HOST, s),
              ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    /* ACL_MEMCPY_DEFAULT with two host addresses is a copy within the host too (CANN's
       MemcpyKindAutoCorrect makes it one before the same refusal). */
    EXPECT_RC(aclrtMemcpyAsyncWithCondition(plain, N, src, N, ACL_MEMCPY_DEFAULT, s),
              ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    expect_msg("does not copy within the host", NULL);
    EXPECT_RC(aclrtMemcpyAsyncWithCondition(NULL, N, d, N, ACL_MEMCPY_DEVICE_TO_HOST, s),
              ACL_ERROR_INVALID_PARAM);
    CHECK(aclrtMemcpyAsyncWithCondition(NULL, 0, NULL, 0, ACL_MEMCPY_DEVICE_TO_HOST, s));

    /* Malloc'd destination: the call waits for the copy behind the held stream. */
    int hold = 200;
    memset(plain, 0, N);
    CHECK(aclrtLaunchHostFunc(s, hold_ms, &hold));
    CHECK(aclrtMemcpyAsyncWithCondition(plain, N, d, N, ACL_MEMCPY_DEVICE_TO_HOST, s));
    REQUIRE(memcmp(plain, src, N) == 0, "malloc'd memory not yet written when the call returned");

    /* Page-locked destination: asynchronous, written only once the stream gets there. */
    unsigned char *pinned = NULL;
    CHECK(aclrtMallocHost((void **)&pinned, N));
    memset(pinned, 0, N);
    gate_t g1 = {0};
    CHECK(aclrtLaunchHostFunc(s, gate_hold, &g1));
    CHECK(aclrtMemcpyAsyncWithCondition(pinned, N, d, N, ACL_MEMCPY_DEVICE_TO_HOST, s));
    REQUIRE(pinned[1] == 0 && pinned[N - 1] == 0, "the page-locked copy ran before its stream got there");
    gate_open(&g1);
    CHECK(aclrtSynchronizeStream(s));
    REQUIRE(memcmp(pinned, src, N) == 0, "page-locked copy's bytes");
    CHECK(aclrtFreeHost(pinned));
    CHECK(aclrtFree(d));
    free(src);
    free(plain);
}

static void unsupported(aclrtStream s) {
    size_t size = 0;
    EXPECT_RC(aclrtGetMemcpyDescSize(ACL_MEMCPY_INNER_DEVICE_TO_DEVICE, &size),
              ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    void *a = NULL, *b = NULL;
    CHECK(aclrtMalloc(&a, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&b, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    EXPECT_RC(aclrtSetMemcpyDesc(a, ACL_MEMCPY_INNER_DEVICE_TO_DEVICE, a, b, 8, NULL),
              ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    EXPECT_RC(aclrtMemcpyAsyncWithOffset((void **)a, 8, 0, (const void **)b, 8, 0,
                                         ACL_MEMCPY_INNER_DEVICE_TO_DEVICE, s),
              ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK(aclrtFree(a));
    CHECK(aclrtFree(b));
}

int main(int argc, char **argv) {
    g_role = "memcpy_variants";
    const char *soc = argc > 1 ? argv[1] : "Ascend910B";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream s = NULL;
    CHECK(aclrtCreateStream(&s));
    with_condition(s);
    if (strcmp(soc, "Ascend910B") != 0) {
        unsupported(s);
        CHECK(aclrtDestroyStream(s));
        CHECK(aclrtResetDevice(0));
        CHECK(aclFinalize());
        printf("memcpy_variants %s: ok\n", soc);
        return 0;
    }

    enum { N = 1024 };
    void *a = NULL, *b = NULL, *c = NULL, *words = NULL;
    CHECK(aclrtMalloc(&a, N, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&b, N, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&c, N, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&words, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    unsigned char *ha = malloc(N), *hc = malloc(N), *back = malloc(N), zero[N];
    REQUIRE(ha && hc && back, "malloc");
    memset(zero, 0, N);
    fill(ha, N, 5);
    fill(hc, N, 77);
    CHECK(aclrtMemcpy(a, N, ha, N, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtMemcpy(c, N, hc, N, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtMemcpy(b, N, zero, N, ACL_MEMCPY_HOST_TO_DEVICE));

    /* ---- WithOffset: words [dst base, src base] in device memory. */
    uint64_t *pw = NULL;
    CHECK(aclrtMallocHost((void **)&pw, 16));
    pw[0] = (uint64_t)(uintptr_t)b;
    pw[1] = (uint64_t)(uintptr_t)a;
    CHECK(aclrtMemcpy(words, 16, pw, 16, ACL_MEMCPY_HOST_TO_DEVICE));
    void **dw = (void **)words;
    const void **sw = (const void **)((char *)words + 8);
    EXPECT_RC(aclrtMemcpyAsyncWithOffset(dw, N, 0, sw, 16, 0, ACL_MEMCPY_DEVICE_TO_DEVICE, s),
              ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclrtMemcpyAsyncWithOffset(dw, N, 0, sw, 0, 0, 99, s)); /* count 0 first */
    EXPECT_RC(aclrtMemcpyAsyncWithOffset(dw, 100, 0, sw, 101, 0, ACL_MEMCPY_INNER_DEVICE_TO_DEVICE, s),
              ACL_ERROR_RT_PARAM_INVALID);
    /* The source word is rewritten (a queued copy) after the call, before the copy runs. */
    gate_t g2 = {0};
    CHECK(aclrtLaunchHostFunc(s, gate_hold, &g2));
    CHECK(aclrtMemcpyAsyncWithOffset(dw, 900, 100, sw, 200, 30, ACL_MEMCPY_INNER_DEVICE_TO_DEVICE, s));
    pw[1] = (uint64_t)(uintptr_t)c;
    CHECK(aclrtMemcpy(sw, 8, &pw[1], 8, ACL_MEMCPY_HOST_TO_DEVICE));
    gate_open(&g2);
    CHECK(aclrtSynchronizeStream(s));
    CHECK(aclrtMemcpy(back, N, b, N, ACL_MEMCPY_DEVICE_TO_HOST));
    for (size_t i = 0; i < N; i++) {
        unsigned char want = (i >= 100 && i < 300) ? hc[i - 100 + 30] : 0;
        REQUIRE(back[i] == want, "WithOffset: byte %zu is %u, expected %u", i, back[i], want);
    }
    /* A range read past its allocation fails the stream's task. */
    CHECK(aclrtMemcpyAsyncWithOffset(dw, 4096, N - 8, sw, 16, 0, ACL_MEMCPY_INNER_DEVICE_TO_DEVICE, s));
    EXPECT_RC(aclrtSynchronizeStream(s), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("leaves allocation", NULL);
    CHECK(aclrtFreeHost(pw));

    /* ---- Descriptors. */
    size_t dsize = 0;
    EXPECT_RC(aclrtGetMemcpyDescSize(ACL_MEMCPY_INNER_DEVICE_TO_DEVICE, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtGetMemcpyDescSize((aclrtMemcpyKind)8, &dsize), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtGetMemcpyDescSize(ACL_MEMCPY_DEVICE_TO_DEVICE, &dsize), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK(aclrtGetMemcpyDescSize(ACL_MEMCPY_INNER_DEVICE_TO_DEVICE, &dsize));
    REQUIRE(dsize == 32, "descriptor size %zu", dsize);
    void *desc = NULL;
    CHECK(aclrtMalloc(&desc, dsize, ACL_MEM_MALLOC_HUGE_FIRST));
    const aclrtMemcpyKind K = ACL_MEMCPY_INNER_DEVICE_TO_DEVICE;
    EXPECT_RC(aclrtSetMemcpyDesc(NULL, K, a, b, 8, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtSetMemcpyDesc(desc, K, a, b, 0, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtSetMemcpyDesc(desc, K, a, b, 8, desc), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtSetMemcpyDesc(desc, ACL_MEMCPY_DEVICE_TO_DEVICE, a, b, 8, NULL),
              ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    EXPECT_RC(aclrtSetMemcpyDesc((char *)desc + 8, K, a, b, 8, NULL), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("64-byte aligned", NULL);
    EXPECT_RC(aclrtSetMemcpyDesc(desc, K, ha, b, 8, NULL), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("not device memory", NULL);
    EXPECT_RC(aclrtMemcpyAsyncWithDesc(desc, K, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemcpyAsyncWithDesc(ha, K, s), ACL_ERROR_RT_PARAM_INVALID);

    CHECK(aclrtMemcpy(b, N, zero, N, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtSetMemcpyDesc(desc, K, a, b, 500, NULL));
    CHECK(aclrtMemcpyAsyncWithDesc(desc, K, s));
    CHECK(aclrtSynchronizeStream(s));
    CHECK(aclrtMemcpy(back, N, b, N, ACL_MEMCPY_DEVICE_TO_HOST));
    REQUIRE(memcmp(back, ha, 500) == 0 && memcmp(back + 500, zero, N - 500) == 0, "WithDesc's bytes");
    /* The descriptor is read when the copy runs: rewritten after the call, before it ran. */
    gate_t g3 = {0};
    CHECK(aclrtLaunchHostFunc(s, gate_hold, &g3));
    CHECK(aclrtMemcpyAsyncWithDesc(desc, K, s));
    CHECK(aclrtSetMemcpyDesc(desc, K, c, b, 40, NULL));
    gate_open(&g3);
    CHECK(aclrtSynchronizeStream(s));
    CHECK(aclrtMemcpy(back, N, b, N, ACL_MEMCPY_DEVICE_TO_HOST));
    REQUIRE(memcmp(back, hc, 40) == 0 && memcmp(back + 40, ha + 40, 460) == 0,
            "the descriptor was not read when the copy ran");

    CHECK(aclrtFree(desc));
    CHECK(aclrtFree(a));
    CHECK(aclrtFree(b));
    CHECK(aclrtFree(c));
    CHECK(aclrtFree(words));
    free(ha);
    free(hc);
    free(back);
    CHECK(aclrtDestroyStream(s));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("memcpy_variants %s: ok\n", soc);
    return 0;
}
