/* memory.c — device memory through the C ABI: aclrtMalloc with every policy, CANN's check
 * order (a 0-byte copy or set succeeds before anything else; NULL pointers, size 0 and an
 * unknown copy kind → ACL_ERROR_INVALID_PARAM), copies of every kind, memset, copies and
 * sets ordered on streams with notifies and host functions, aclrtGetMemInfo, checked ranges
 * (an overflowing or freed range → ACL_ERROR_RT_PARAM_INVALID with a message naming the
 * allocation, and nothing written), aclrtMallocAlign32 / aclrtMallocCached / aclrtMallocWithCfg
 * (their checks and rounding), fp16 and bf16 aclrtReduceAsync rounded to nearest even, a copy
 * between two devices' memory (aclrtMemcpy, aclrtMemcpyAsync, aclrtMemcpy2dAsync) before peer
 * access is enabled → ACL_ERROR_RT_NO_PERMISSION, nothing queued (a set of another device's
 * memory needs none), aclrtMemcpyAsync with malloc'd host memory done before the call returns
 * (the stream synchronized first; refused in a capture), host memory of aclrtMallocHost freed while queued copies and sets into or out of it wait (they fail
 * with ACL_ERROR_RT_PARAM_INVALID when they run, writing nothing), and out of memory →
 * ACL_ERROR_RT_MEMORY_ALLOCATION.
 * Run with ACL_NOTIFY_SIM_DEVICE_MEMORY=8M. Exit 0 and "memory: ok" when every check holds. */
#include <pthread.h>
#include <stdatomic.h>

#include "common.h"

/* aclrtMemcpyAsyncWithCondition is deprecated in CANN's header, as in ours; it is still checked here. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

typedef struct {
    float *host;
    size_t n;
} Scale;


/* Releases the wait g_rel holds its stream with, once the main thread is calling (in its own
 * thread, with the main thread's context). */
static aclrtNotify g_rel;
static aclrtContext g_rel_ctx;
static atomic_int g_calling;
static void *release_when_calling(void *arg) {
    (void)arg;
    CHECK(aclrtSetCurrentContext(g_rel_ctx));
    while (!atomic_load(&g_calling)) {
    }
    CHECK(aclrtRecordNotify(g_rel, NULL));
    return NULL;
}

/* A host function doing a kernel's work on host memory: doubles every element. */
static void scale_twice(void *arg) {
    Scale *s = (Scale *)arg;
    for (size_t i = 0; i < s->n; i++) s->host[i] *= 2.0f;
}

int main(void) {
    g_role = "memory";
    CHECK(aclInit(NULL));
    void *d = NULL;
    /* Before a device is set: no context. */
    EXPECT_RC(aclrtMalloc(&d, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK(aclrtSetDevice(0));

    /* Check order. */
    EXPECT_RC(aclrtMalloc(NULL, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMalloc(&d, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtFree(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMallocHost(NULL, 8), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtFreeHost(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemcpy(NULL, 0, NULL, 0, (aclrtMemcpyKind)99), ACL_SUCCESS);
    EXPECT_RC(aclrtMemset(NULL, 0, 0, 0), ACL_SUCCESS);
    EXPECT_RC(aclrtMemcpy(NULL, 8, &d, 8, ACL_MEMCPY_HOST_TO_HOST), ACL_ERROR_INVALID_PARAM);

    /* Every policy is accepted; pointers are at least 32-byte aligned. */
    const aclrtMemMallocPolicy policies[] = {
        ACL_MEM_MALLOC_HUGE_FIRST,      ACL_MEM_MALLOC_HUGE_ONLY,
        ACL_MEM_MALLOC_NORMAL_ONLY,     ACL_MEM_MALLOC_HUGE_FIRST_P2P,
        ACL_MEM_MALLOC_HUGE_ONLY_P2P,   ACL_MEM_MALLOC_NORMAL_ONLY_P2P,
        ACL_MEM_MALLOC_HUGE1G_ONLY,     ACL_MEM_MALLOC_HUGE1G_ONLY_P2P,
        ACL_MEM_TYPE_LOW_BAND_WIDTH,    ACL_MEM_TYPE_HIGH_BAND_WIDTH,
        ACL_MEM_ACCESS_USER_SPACE_READONLY,
    };
    for (size_t i = 0; i < sizeof policies / sizeof policies[0]; i++) {
        void *p = NULL;
        CHECK(aclrtMalloc(&p, 100 + i, policies[i]));
        REQUIRE(p != NULL && ((uintptr_t)p % 32) == 0, "policy %d gave %p", (int)policies[i], p);
        CHECK(aclrtFree(p));
    }

    /* Copies of every kind. */
    enum { N = 1024 };
    float *h = NULL, *h2 = NULL;
    CHECK(aclrtMallocHost((void **)&h, N * sizeof(float)));
    CHECK(aclrtMallocHost((void **)&h2, N * sizeof(float)));
    for (int i = 0; i < N; i++) h[i] = (float)i;
    void *a = NULL, *b = NULL;
    CHECK(aclrtMalloc(&a, N * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtSetDevice(1));
    CHECK(aclrtMalloc(&b, N * sizeof(float), ACL_MEM_MALLOC_NORMAL_ONLY));
    CHECK(aclrtMemcpy(a, N * sizeof(float), h, N * sizeof(float), ACL_MEMCPY_HOST_TO_DEVICE));
    /* From device 0's memory to device 1's: peer access from device 0 first (CANN's
       aclrtMemcpy constraint on Ascend910B; one way, enabled with the source's device current). */
    EXPECT_RC(aclrtMemcpy(b, N * sizeof(float), a, N * sizeof(float), ACL_MEMCPY_DEVICE_TO_DEVICE),
              ACL_ERROR_RT_NO_PERMISSION);
    /* The queued copies too, refused when queued (CANN's guide asks for peer access before
       aclrtMemcpy and aclrtMemcpyAsync alike: docs/zh/dev_guide/02-01_data_copy.md), with the
       way to enable it; nothing is queued, so the stream synchronizes clean. */
    aclrtStream sp = NULL;
    CHECK(aclrtCreateStream(&sp));
    CHECK(aclrtMemset(b, N * sizeof(float), 0x5A, N * sizeof(float)));
    EXPECT_RC(aclrtMemcpyAsync(b, N * sizeof(float), a, N * sizeof(float),
                               ACL_MEMCPY_DEVICE_TO_DEVICE, sp),
              ACL_ERROR_RT_NO_PERMISSION);
    expect_msg("from device 0", "to device 1", "aclrtDeviceEnablePeerAccess(1, 0)", NULL);
    EXPECT_RC(aclrtMemcpy2dAsync(b, 64, a, 64, 64, 4, ACL_MEMCPY_DEVICE_TO_DEVICE, sp),
              ACL_ERROR_RT_NO_PERMISSION);
    expect_msg("from device 0", "to device 1", NULL);
    CHECK(aclrtSynchronizeStream(sp));
    unsigned char kept[64];
    CHECK(aclrtMemcpy(kept, sizeof kept, b, sizeof kept, ACL_MEMCPY_DEVICE_TO_HOST));
    for (int i = 0; i < (int)sizeof kept; i++) REQUIRE(kept[i] == 0x5A, "refused copy wrote %d", i);
    /* A set of another device's memory needs none: CANN's runtime sets it with a copy from
       the host on the stream (src/runtime/core/src/launch/memory_common.cc, MemSetAsync). */
    CHECK(aclrtMemsetAsync(a, 64, 0x3C, 64, sp));
    CHECK(aclrtSynchronizeStream(sp));
    CHECK(aclrtMemcpy(kept, sizeof kept, a, sizeof kept, ACL_MEMCPY_DEVICE_TO_HOST));
    for (int i = 0; i < (int)sizeof kept; i++) REQUIRE(kept[i] == 0x3C, "set byte %d", i);
    CHECK(aclrtMemcpy(a, N * sizeof(float), h, N * sizeof(float), ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtDeviceEnablePeerAccess(0, 0));
    EXPECT_RC(aclrtMemcpy(b, N * sizeof(float), a, N * sizeof(float), ACL_MEMCPY_DEVICE_TO_DEVICE),
              ACL_ERROR_RT_NO_PERMISSION);
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtDeviceEnablePeerAccess(1, 0));
    CHECK(aclrtSetDevice(1));
    CHECK(aclrtMemcpyAsync(b, N * sizeof(float), a, N * sizeof(float),
                           ACL_MEMCPY_DEVICE_TO_DEVICE, sp));
    CHECK(aclrtSynchronizeStream(sp));
    CHECK(aclrtMemcpy(h2, N * sizeof(float), b, N * sizeof(float), ACL_MEMCPY_DEVICE_TO_HOST));
    REQUIRE(memcmp(h, h2, N * sizeof(float)) == 0, "H2D, queued D2D, D2H round trip differs");
    CHECK(aclrtMemset(b, N * sizeof(float), 0, N * sizeof(float)));
    CHECK(aclrtMemcpy(b, N * sizeof(float), a, N * sizeof(float), ACL_MEMCPY_DEVICE_TO_DEVICE));
    CHECK(aclrtMemcpy(h2, N * sizeof(float), b, N * sizeof(float), ACL_MEMCPY_DEVICE_TO_HOST));
    REQUIRE(memcmp(h, h2, N * sizeof(float)) == 0, "H2D, D2D, D2H round trip differs");
    CHECK(aclrtDestroyStream(sp));
    CHECK(aclrtMemset(b, N * sizeof(float), 0, N * sizeof(float)));
    CHECK(aclrtMemcpy(b, N * sizeof(float), h, 16, ACL_MEMCPY_DEFAULT));
    CHECK(aclrtMemcpy(h2, 16, b, 16, ACL_MEMCPY_DEFAULT));
    REQUIRE(memcmp(h, h2, 16) == 0, "ACL_MEMCPY_DEFAULT round trip differs");
    CHECK(aclrtMemcpy(h2, 16, h, 16, ACL_MEMCPY_HOST_TO_HOST));
    CHECK(aclrtMemcpy(b, 16, h, 16, ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE));
    /* The two kinds aclrtMemcpy's translation refuses. */
    EXPECT_RC(aclrtMemcpy(b, 16, a, 16, ACL_MEMCPY_INNER_DEVICE_TO_DEVICE), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemcpy(b, 16, a, 16, ACL_MEMCPY_INTER_DEVICE_TO_DEVICE), ACL_ERROR_INVALID_PARAM);
    /* A kind that contradicts the addresses: CANN's synchronous copy does not look at it and
     * copies as the addresses are (hicann/runtime api_error.cc, MemCopySync; tests/c/copy_kinds.c
     * has every pair). b holds h's first 16 bytes. */
    memset(h2, 0, 16);
    CHECK(aclrtMemcpy(h2, 16, b, 16, ACL_MEMCPY_HOST_TO_DEVICE));
    REQUIRE(memcmp(h, h2, 16) == 0, "a D2H copy named H2D did not copy");
    memset(h2, 0, 16);
    CHECK(aclrtMemcpy(h2, 16, b, 16, ACL_MEMCPY_HOST_TO_HOST));
    REQUIRE(memcmp(h, h2, 16) == 0, "a D2H copy named H2H did not copy");
    EXPECT_RC(aclrtMemcpy(b, 8, h, 16, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("destMax", NULL);

    /* Checked ranges: 16 bytes past the end of a, named in the message; nothing written. */
    char text[64];
    snprintf(text, sizeof text, "allocation %p (4096 bytes", a);
    CHECK(aclrtMemset(a, 4096, 0x11, 4096));
    EXPECT_RC(aclrtMemcpy((char *)a + 4080, 32, h, 32, ACL_MEMCPY_HOST_TO_DEVICE),
              ACL_ERROR_RT_PARAM_INVALID);
    expect_msg(text, "offset 4080", "16 bytes past", NULL);
    EXPECT_RC(aclrtMemset((char *)a + 4095, 2, 0, 2), ACL_ERROR_RT_PARAM_INVALID);
    unsigned char back[4096];
    CHECK(aclrtMemcpy(back, sizeof back, a, sizeof back, ACL_MEMCPY_DEVICE_TO_HOST));
    for (int i = 0; i < 4096; i++) REQUIRE(back[i] == 0x11, "byte %d changed to %#x", i, back[i]);

    /* aclrtMemset[Async] on host memory of aclrtMallocHost: CANN tells host from device by
     * the address (CANN's device/2_device_P2P sample clears its aclrtMallocHost buffer so). */
    CHECK(aclrtMemset(h2, N * sizeof(float), 0x22, N * sizeof(float)));
    for (int i = 0; i < N * (int)sizeof(float); i++) {
        REQUIRE(((unsigned char *)h2)[i] == 0x22, "host byte %d is %#x", i, ((unsigned char *)h2)[i]);
    }
    EXPECT_RC(aclrtMemset((char *)h2 + 8, N * sizeof(float), 0, N * sizeof(float)),
              ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("leaves host allocation", "by 8 bytes", NULL);
    REQUIRE(((unsigned char *)h2)[8] == 0x22, "a refused host set wrote");
    /* Other host memory: CANN calls it undefined, yet its sample 12 clears a stack variable
     * so (and it works on hardware): set when it is writable memory of the process; an
     * address no writable mapping holds is still refused. */
    unsigned char not_acl[16];
    memset(not_acl, 0x33, sizeof not_acl);
    CHECK(aclrtMemset(not_acl, sizeof not_acl, 0, sizeof not_acl));
    for (int i = 0; i < (int)sizeof not_acl; i++) REQUIRE(not_acl[i] == 0, "stack byte %d", i);
    EXPECT_RC(aclrtMemset((void *)(uintptr_t)4096, 16, 0, 16), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("nor memory of aclrtMallocHost", NULL);
    {
        aclrtStream hs;
        CHECK(aclrtCreateStream(&hs));
        CHECK(aclrtMemsetAsync((char *)h2 + 4, 8, 0x33, 8, hs));
        CHECK(aclrtSynchronizeStream(hs));
        const unsigned char *hb = (const unsigned char *)h2;
        REQUIRE(hb[3] == 0x22 && hb[4] == 0x33 && hb[11] == 0x33 && hb[12] == 0x22,
                "async host set: %#x %#x %#x %#x", hb[3], hb[4], hb[11], hb[12]);
        CHECK(aclrtDestroyStream(hs));
    }

    /* Memory information: the capacity set by ACL_NOTIFY_SIM_DEVICE_MEMORY. */
    size_t fr = 0, total = 0;
    CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &fr, &total));
    REQUIRE(total == 8u << 20, "total %zu", total);
    REQUIRE(fr < total && fr >= total - 8192, "free %zu of %zu with one 4 KiB allocation", fr, total);
    EXPECT_RC(aclrtGetMemInfo(ACL_HBM_MEM, NULL, &total), ACL_ERROR_INVALID_PARAM);

    /* Stream order: set, copy in, a host function standing for a kernel, copy out, record;
     * another stream waits for the record and copies the result on. */
    aclrtStream s1, s2;
    aclrtNotify n;
    CHECK(aclrtCreateStream(&s1));
    CHECK(aclrtCreateStream(&s2));
    CHECK(aclrtCreateNotify(&n, 0));
    void *c = NULL;
    CHECK(aclrtMalloc(&c, N * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtWaitAndResetNotify(n, s2, 5));
    CHECK(aclrtMemcpyAsync(c, N * sizeof(float), b, N * sizeof(float),
                           ACL_MEMCPY_DEVICE_TO_DEVICE, s2));
    CHECK(aclrtMemsetAsync(b, N * sizeof(float), 0, N * sizeof(float), s1));
    CHECK(aclrtMemcpyAsync(b, N * sizeof(float), h, N * sizeof(float),
                           ACL_MEMCPY_HOST_TO_DEVICE, s1));
    CHECK(aclrtMemcpyAsync(h2, N * sizeof(float), b, N * sizeof(float),
                           ACL_MEMCPY_DEVICE_TO_HOST, s1));
    Scale sc = {h2, N};
    CHECK(aclrtLaunchHostFunc(s1, scale_twice, &sc));
    CHECK(aclrtMemcpyAsync(b, N * sizeof(float), h2, N * sizeof(float),
                           ACL_MEMCPY_HOST_TO_DEVICE, s1));
    CHECK(aclrtRecordNotify(n, s1));
    CHECK(aclrtSynchronizeStream(s2));
    CHECK(aclrtSynchronizeStream(s1));
    memset(h2, 0, N * sizeof(float));
    CHECK(aclrtMemcpy(h2, N * sizeof(float), c, N * sizeof(float), ACL_MEMCPY_DEVICE_TO_HOST));
    for (int i = 0; i < N; i++) REQUIRE(h2[i] == 2.0f * i, "c[%d] = %f", i, h2[i]);

    /* Freed memory is named as freed; double free is refused. */
    CHECK(aclrtFree(c));
    EXPECT_RC(aclrtMemcpy(h2, 64, (char *)c + 64, 64, ACL_MEMCPY_DEVICE_TO_HOST),
              ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("offset 64", "freed", NULL);
    EXPECT_RC(aclrtFree(c), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtFreeHost(a), ACL_ERROR_RT_PARAM_INVALID);

    /* aclrtMallocAlign32 / aclrtMallocCached / aclrtMallocWithCfg: same checks, freed by
     * aclrtFree; Align32 and WithCfg take no padding (512 bytes take 512, not 1024). */
    {
        void *v = NULL;
        size_t f0 = 0, f1 = 0, t = 0;
        EXPECT_RC(aclrtMallocAlign32(NULL, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
        EXPECT_RC(aclrtMallocAlign32(&v, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
        EXPECT_RC(aclrtMallocCached(NULL, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
        EXPECT_RC(aclrtMallocCached(&v, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
        CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &f0, &t));
        CHECK(aclrtMallocAlign32(&v, 512, ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &f1, &t));
        REQUIRE(f0 - f1 == 512, "aclrtMallocAlign32(512) took %zu bytes", f0 - f1);
        CHECK(aclrtMemset(v, 512, 1, 512));
        EXPECT_RC(aclrtMemset(v, 513, 1, 513), ACL_ERROR_RT_PARAM_INVALID);
        CHECK(aclrtFree(v));
        CHECK(aclrtMallocCached(&v, 512, ACL_MEM_MALLOC_NORMAL_ONLY));
        CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &f1, &t));
        REQUIRE(f0 - f1 == 1024, "aclrtMallocCached(512) took %zu bytes", f0 - f1);
        CHECK(aclrtFree(v));

        aclrtMallocAttribute attrs[3];
        memset(attrs, 0, sizeof attrs);
        attrs[0].attr = ACL_RT_MEM_ATTR_MODULE_ID;
        attrs[0].value.moduleId = 7;
        attrs[1].attr = ACL_RT_MEM_ATTR_DEVICE_ID;
        attrs[1].value.deviceId = 1; /* the current device */
        aclrtMallocConfig cfg = {attrs, 2}, no_attrs = {NULL, 1};
        EXPECT_RC(aclrtMallocWithCfg(NULL, 64, ACL_MEM_MALLOC_HUGE_FIRST, &cfg), ACL_ERROR_INVALID_PARAM);
        EXPECT_RC(aclrtMallocWithCfg(&v, 64, ACL_MEM_MALLOC_HUGE_FIRST, &no_attrs),
                  ACL_ERROR_INVALID_PARAM);
        EXPECT_RC(aclrtMallocWithCfg(&v, 0, ACL_MEM_MALLOC_HUGE_FIRST, &cfg), ACL_ERROR_INVALID_PARAM);
        CHECK(aclrtMallocWithCfg(&v, 512, ACL_MEM_MALLOC_HUGE_FIRST, &cfg));
        CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &f1, &t));
        REQUIRE(f0 - f1 == 512, "aclrtMallocWithCfg(512) took %zu bytes", f0 - f1);
        CHECK(aclrtFree(v));
        CHECK(aclrtMallocWithCfg(&v, 64, ACL_MEM_MALLOC_HUGE_FIRST, NULL));
        CHECK(aclrtFree(v));
        attrs[1].value.deviceId = 0; /* not the current device */
        EXPECT_RC(aclrtMallocWithCfg(&v, 64, ACL_MEM_MALLOC_HUGE_FIRST, &cfg),
                  ACL_ERROR_RT_PARAM_INVALID);
        attrs[1].attr = ACL_RT_MEM_ATTR_VA_FLAG;
        EXPECT_RC(aclrtMallocWithCfg(&v, 64, ACL_MEM_MALLOC_HUGE_FIRST, &cfg),
                  ACL_ERROR_RT_PARAM_INVALID);
    }

    /* aclrtReduceAsync in fp16 and bf16: rounded to nearest even. */
    {
        uint16_t d16[3] = {0x3c01, 0x7bff, 0x3f81}, s16[3] = {0x1000, 0x4c00, 0x3b80}, out[3];
        void *dd = NULL, *ds = NULL;
        CHECK(aclrtMalloc(&dd, sizeof d16, ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK(aclrtMalloc(&ds, sizeof s16, ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK(aclrtMemcpy(dd, sizeof d16, d16, 4, ACL_MEMCPY_HOST_TO_DEVICE));
        CHECK(aclrtMemcpy(ds, sizeof s16, s16, 4, ACL_MEMCPY_HOST_TO_DEVICE));
        CHECK(aclrtReduceAsync(dd, ds, 4, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT16, s1, NULL));
        CHECK(aclrtSynchronizeStream(s1));
        CHECK(aclrtMemcpy(out, sizeof out, dd, 4, ACL_MEMCPY_DEVICE_TO_HOST));
        REQUIRE(out[0] == 0x3c02 && out[1] == 0x7c00, "fp16 sums %#x %#x", out[0], out[1]);
        CHECK(aclrtMemcpy((char *)dd + 4, 2, &d16[2], 2, ACL_MEMCPY_HOST_TO_DEVICE));
        CHECK(aclrtMemcpy((char *)ds + 4, 2, &s16[2], 2, ACL_MEMCPY_HOST_TO_DEVICE));
        CHECK(aclrtReduceAsync((char *)dd + 4, (char *)ds + 4, 2, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM,
                               ACL_BF16, s1, NULL));
        CHECK(aclrtSynchronizeStream(s1));
        CHECK(aclrtMemcpy(out, sizeof out, dd, sizeof out, ACL_MEMCPY_DEVICE_TO_HOST));
        REQUIRE(out[2] == 0x3f82, "bf16 sum %#x", out[2]);
        EXPECT_RC(aclrtReduceAsync(dd, ds, 2, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_INT4, s1, NULL),
                  ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        CHECK(aclrtFree(dd));
        CHECK(aclrtFree(ds));
    }

    /* aclrtMallocHost memory freed (aclrtFreeHost) while a queued copy and set into it, and a
     * copy out of it, wait behind a host function: the tasks fail when they run (107000,
     * reported by the synchronize), never writing freed memory. 1 MiB: glibc maps it apart
     * and unmaps it at the free, so a write there would fault. */
    {
        void *src_dev = NULL, *pinned = NULL;
        const size_t mib = 1u << 20;
        CHECK(aclrtMalloc(&src_dev, mib, ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK(aclrtMemset(src_dev, mib, 0x5a, mib));
        for (int round = 0; round < 3; round++) {
            CHECK(aclrtMallocHost(&pinned, mib));
            gate_t g = {0};
            CHECK(aclrtLaunchHostFunc(s1, gate_hold, &g));
            if (round == 0) {
                CHECK(aclrtMemcpyAsync(pinned, mib, src_dev, mib, ACL_MEMCPY_DEVICE_TO_HOST, s1));
            } else if (round == 1) {
                CHECK(aclrtMemsetAsync(pinned, mib, 1, mib, s1));
            } else {
                CHECK(aclrtMemcpyAsync(src_dev, mib, pinned, mib, ACL_MEMCPY_HOST_TO_DEVICE, s1));
            }
            CHECK(aclrtFreeHost(pinned));
            gate_open(&g);
            EXPECT_RC(aclrtSynchronizeStream(s1), ACL_ERROR_RT_PARAM_INVALID);
            expect_msg("aclrtMallocHost", "freed (aclrtFreeHost) before the queued task ran", NULL);
            EXPECT_RC(aclrtFreeHost(pinned), ACL_ERROR_RT_PARAM_INVALID);
        }
        /* The device memory the last copy would have read into is untouched. */
        unsigned char back[64];
        CHECK(aclrtMemcpy(back, sizeof back, (char *)src_dev + mib - 64, 64,
                          ACL_MEMCPY_DEVICE_TO_HOST));
        for (int i = 0; i < 64; i++) REQUIRE(back[i] == 0x5a, "byte %d is %#x", i, back[i]);
        CHECK(aclrtFree(src_dev));
    }

    /* Pageable host memory (malloc's) with aclrtMemcpyAsync: CANN's runtime synchronizes the
       stream and copies before the call returns (api_error.cc, ApiErrorDecorator::MemcpyAsync;
       its page: with host memory that is not page-locked the call returns once the copy is
       done), so the buffer may be reused, or read, at once. The stream is held by a wait that
       another thread releases once the call has begun. */
    {
        enum { PN = 256 * 1024 };
        unsigned char *pg = malloc(PN);
        REQUIRE(pg != NULL, "malloc");
        void *pd = NULL;
        CHECK(aclrtMalloc(&pd, PN, ACL_MEM_MALLOC_HUGE_FIRST));
        aclrtStream sq = NULL;
        CHECK(aclrtCreateStream(&sq));
        CHECK(aclrtGetCurrentContext(&g_rel_ctx));
        CHECK(aclrtCreateNotify(&g_rel, ACL_NOTIFY_DEFAULT));
        /* Host to device: the bytes the buffer held at the call. */
        CHECK(aclrtWaitAndResetNotify(g_rel, sq, 0));
        memset(pg, 0x11, PN);
        pthread_t t;
        atomic_store(&g_calling, 0);
        REQUIRE(pthread_create(&t, NULL, release_when_calling, NULL) == 0, "pthread_create");
        atomic_store(&g_calling, 1);
        CHECK(aclrtMemcpyAsync(pd, PN, pg, PN, ACL_MEMCPY_HOST_TO_DEVICE, sq));
        memset(pg, 0x22, PN);
        REQUIRE(pthread_join(t, NULL) == 0, "pthread_join");
        CHECK(aclrtSynchronizeStream(sq));
        CHECK(aclrtMemcpy(pg, PN, pd, PN, ACL_MEMCPY_DEVICE_TO_HOST));
        for (int i = 0; i < PN; i += 4093) REQUIRE(pg[i] == 0x11, "pageable H2D byte %d: %#x", i, pg[i]);
        /* Device to host, behind a queued set: read as soon as the call returns. */
        CHECK(aclrtWaitAndResetNotify(g_rel, sq, 0));
        CHECK(aclrtMemsetAsync(pd, PN, 0x33, PN, sq));
        memset(pg, 0, PN);
        atomic_store(&g_calling, 0);
        REQUIRE(pthread_create(&t, NULL, release_when_calling, NULL) == 0, "pthread_create");
        atomic_store(&g_calling, 1);
        CHECK(aclrtMemcpyAsync(pg, PN, pd, PN, ACL_MEMCPY_DEVICE_TO_HOST, sq));
        for (int i = 0; i < PN; i += 4093) REQUIRE(pg[i] == 0x33, "pageable D2H byte %d: %#x", i, pg[i]);
        REQUIRE(pthread_join(t, NULL) == 0, "pthread_join");
        /* ACL_MEMCPY_DEFAULT: the sides found by their addresses, the same copy. */
        CHECK(aclrtWaitAndResetNotify(g_rel, sq, 0));
        CHECK(aclrtMemsetAsync(pd, PN, 0x44, PN, sq));
        memset(pg, 0, PN);
        atomic_store(&g_calling, 0);
        REQUIRE(pthread_create(&t, NULL, release_when_calling, NULL) == 0, "pthread_create");
        atomic_store(&g_calling, 1);
        CHECK(aclrtMemcpyAsync(pg, PN, pd, PN, ACL_MEMCPY_DEFAULT, sq));
        for (int i = 0; i < PN; i += 4093) REQUIRE(pg[i] == 0x44, "pageable default byte %d: %#x", i, pg[i]);
        REQUIRE(pthread_join(t, NULL) == 0, "pthread_join");
        /* Within the host (both sides host memory): CANN's runtime, on a host with its devices
           attached, refuses an asynchronous copy (207000: api_error.cc,
           ApiErrorDecorator::MemcpyAsync; aclrtMemcpyAsync's page), whatever the memory, and
           ACL_MEMCPY_DEFAULT with two host addresses is one. The synchronous copy makes it. */
        {
            unsigned char *pin = NULL;
            CHECK(aclrtMallocHost((void **)&pin, 128));
            EXPECT_RC(aclrtMemcpyAsync(pg, 64, pin, 64, ACL_MEMCPY_HOST_TO_HOST, sq),
                      ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
            expect_msg("does not copy within the host", "aclrtMemcpy", NULL);
            EXPECT_RC(aclrtMemcpyAsync(pin, 64, pg, 64, ACL_MEMCPY_DEFAULT, sq),
                      ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
            expect_msg("ACL_MEMCPY_DEFAULT makes a host-to-host copy", NULL);
            EXPECT_RC(aclrtMemcpyAsync(pin, 64, pin + 64, 64, ACL_MEMCPY_DEFAULT, NULL),
                      ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
            EXPECT_RC(aclrtMemcpyAsyncWithCondition(pg, 64, pg + 64, 64, ACL_MEMCPY_DEFAULT, sq),
                      ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
            memset(pin, 0x66, 64);
            CHECK(aclrtMemcpy(pg, 64, pin, 64, ACL_MEMCPY_HOST_TO_HOST));
            REQUIRE(pg[0] == 0x66 && pg[63] == 0x66, "synchronous host copy: %#x", pg[0]);
            CHECK(aclrtFreeHost(pin));
        }
        /* Not a task a capture can take: CANN refuses it (107000), saying why. */
        aclmdlRI m = NULL;
        CHECK(aclmdlRICaptureBegin(sq, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
        EXPECT_RC(aclrtMemcpyAsync(pd, PN, pg, PN, ACL_MEMCPY_HOST_TO_DEVICE, sq),
                  ACL_ERROR_RT_PARAM_INVALID);
        expect_msg("is capturing", "pageable host memory", "aclrtMallocHost", NULL);
        /* Within the host: refused before the capture, which goes on. */
        EXPECT_RC(aclrtMemcpyAsync(pg, 64, pg + 64, 64, ACL_MEMCPY_HOST_TO_HOST, sq),
                  ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        /* Meanwhile another stream, not capturing, takes the same copy as before. */
        aclrtStream sq2 = NULL;
        CHECK(aclrtCreateStream(&sq2));
        CHECK(aclrtWaitAndResetNotify(g_rel, sq2, 0));
        CHECK(aclrtMemsetAsync(pd, PN, 0x55, PN, sq2));
        memset(pg, 0, PN);
        atomic_store(&g_calling, 0);
        REQUIRE(pthread_create(&t, NULL, release_when_calling, NULL) == 0, "pthread_create");
        atomic_store(&g_calling, 1);
        CHECK(aclrtMemcpyAsync(pg, PN, pd, PN, ACL_MEMCPY_DEVICE_TO_HOST, sq2));
        for (int i = 0; i < PN; i += 4093)
            REQUIRE(pg[i] == 0x55, "pageable D2H beside a capture, byte %d: %#x", i, pg[i]);
        REQUIRE(pthread_join(t, NULL) == 0, "pthread_join");
        CHECK(aclrtDestroyStream(sq2));
        CHECK(aclmdlRICaptureEnd(sq, &m));
        CHECK(aclmdlRIDestroy(m));
        CHECK(aclrtDestroyNotify(g_rel));
        CHECK(aclrtDestroyStream(sq));
        CHECK(aclrtFree(pd));
        free(pg);
    }

    /* Out of memory: 8 MiB per device. */
    void *big = NULL;
    EXPECT_RC(aclrtMalloc(&big, 16u << 20, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_RT_MEMORY_ALLOCATION);
    expect_msg("ACL_NOTIFY_SIM_DEVICE_MEMORY", NULL);
    CHECK(aclrtMalloc(&big, 6u << 20, ACL_MEM_MALLOC_HUGE_FIRST));
    void *more = NULL;
    EXPECT_RC(aclrtMalloc(&more, 4u << 20, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_RT_MEMORY_ALLOCATION);
    CHECK(aclrtFree(big));
    CHECK(aclrtMalloc(&more, 4u << 20, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtFree(more));

    CHECK(aclrtFree(b));
    CHECK(aclrtFree(a));
    CHECK(aclrtFreeHost(h));
    CHECK(aclrtFreeHost(h2));
    CHECK(aclrtDestroyNotify(n));
    CHECK(aclrtDestroyStream(s1));
    CHECK(aclrtDestroyStream(s2));
    CHECK(aclFinalize());
    printf("memory: ok\n");
    return 0;
}
