/* mem_pool.c — stream-ordered memory pools (acl/acl_rt_memory_soma.h) through the C ABI:
 * CANN's check order (NULL pointers and bad pool properties → ACL_ERROR_INVALID_PARAM, a
 * 0-byte MallocAsync succeeds and writes nothing), a block allocated on one stream, filled
 * there, read on a second stream ordered after the first by an event and freed there, the
 * data checked; the pool's figures (reserved and used memory, their high marks) before and
 * after a free runs, with the stream held by a gate so that "before" is certain; reuse of
 * kept memory under a release threshold; aclrtMemPoolTrimTo and its refusals; use of a block
 * after its free refused (copies, sets, aclrtFree, IPC export, a second free, an interior
 * pointer); aclrtMemPoolFreeAsync of aclrtMalloc memory freeing it when the stream gets
 * there; a full pool; destroying a pool with a block in use (ACL_ERROR_RT_INTERNAL_ERROR);
 * attribute checks; a pool left with kept memory at aclFinalize gives it back.
 * Argument: the SoC; on SoCs other than Ascend910B every pool is ACL_ERROR_RT_FEATURE_NOT_SUPPORT.
 * Run with ACL_NOTIFY_SIM_DEVICE_MEMORY=64M. Exit 0 and "mem_pool <soc>: ok". */
#include "common.h"
#include "acl/acl_rt_memory_soma.h"

#define MIB (1024UL * 1024UL)

/* A host function that holds its stream until the gate opens. */
static int g_gate;
static void wait_gate(void *arg) {
    (void)arg;
    while (!__atomic_load_n(&g_gate, __ATOMIC_ACQUIRE)) sleep_ms(1);
}
static void hold(aclrtStream s) {
    __atomic_store_n(&g_gate, 0, __ATOMIC_RELEASE);
    CHECK(aclrtLaunchHostFunc(s, wait_gate, NULL));
}
static void release_gate(void) { __atomic_store_n(&g_gate, 1, __ATOMIC_RELEASE); }

static uint64_t attr64(aclrtMemPool pool, aclrtMemPoolAttr a) {
    uint64_t v = 0xdeadbeef;
    CHECK(aclrtMemPoolGetAttr(pool, a, &v));
    return v;
}

static size_t device_free(void) {
    size_t free_b = 0, total = 0;
    CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &free_b, &total));
    return free_b;
}

int main(int argc, char **argv) {
    g_role = "mem_pool";
    const char *soc = argc > 1 ? argv[1] : "Ascend910B";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtMemPool pool = NULL;
    aclrtMemPoolProps pp = pool_props(0, 16 * MIB);
    if (strcmp(soc, "Ascend910B") != 0) {
        EXPECT_RC(aclrtMemPoolCreate(&pool, &pp), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        expect_msg("not supported", NULL);
        CHECK(aclFinalize());
        printf("mem_pool %s: ok\n", soc);
        return 0;
    }

    /* Check order of aclrtMemPoolCreate. */
    EXPECT_RC(aclrtMemPoolCreate(NULL, &pp), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemPoolCreate(&pool, NULL), ACL_ERROR_INVALID_PARAM);
    aclrtMemPoolProps bad = pp;
    bad.allocType = (aclrtMemAllocationType)1;
    EXPECT_RC(aclrtMemPoolCreate(&pool, &bad), ACL_ERROR_INVALID_PARAM);
    bad = pp;
    bad.location.type = ACL_MEM_LOCATION_TYPE_HOST;
    EXPECT_RC(aclrtMemPoolCreate(&pool, &bad), ACL_ERROR_INVALID_PARAM);
    bad = pp;
    bad.reserved[31] = 1;
    EXPECT_RC(aclrtMemPoolCreate(&pool, &bad), ACL_ERROR_INVALID_PARAM);
    bad = pp;
    bad.location.id = 99;
    EXPECT_RC(aclrtMemPoolCreate(&pool, &bad), ACL_ERROR_RT_INVALID_DEVICEID);
    bad = pp;
    bad.maxSize = 65 * MIB; /* more than the device's 64 MiB */
    EXPECT_RC(aclrtMemPoolCreate(&pool, &bad), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("maxSize", NULL);
    REQUIRE(pool == NULL, "a refused create wrote %p", pool);

    CHECK(aclrtMemPoolCreate(&pool, &pp));
    REQUIRE(pool != NULL, "no pool");
    aclrtStream s1, s2;
    CHECK(aclrtCreateStream(&s1));
    CHECK(aclrtCreateStream(&s2));
    aclrtEvent ev;
    CHECK(aclrtCreateEvent(&ev));

    /* Check order of aclrtMemPoolMallocAsync; a size of 0 writes nothing. */
    void *p = (void *)0x1234;
    EXPECT_RC(aclrtMemPoolMallocAsync(NULL, 64, pool, s1), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemPoolMallocAsync(&p, 64, NULL, s1), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemPoolMallocAsync(&p, 64, pool, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK(aclrtMemPoolMallocAsync(&p, 0, pool, s1));
    REQUIRE(p == (void *)0x1234, "a 0-byte allocation wrote %p", p);
    EXPECT_RC(aclrtMemPoolMallocAsync(&p, 64, (aclrtMemPool)0x5a5a5a5a5a5a5a5aULL, s1),
              ACL_ERROR_RT_INTERNAL_ERROR);
    EXPECT_RC(aclrtMemPoolFreeAsync(NULL, s1), ACL_ERROR_INVALID_PARAM);

    /* A block allocated and filled on s1, read on s2 after an event recorded on s1, freed on
     * s2. s1 is held at its start, so nothing has run when the figures are read. */
    enum { N = 1000 };
    /* Page-locked: a copy with malloc'd or static memory is not queued (CANN's runtime
       synchronizes the stream and copies at once), and s1 is held. */
    int32_t *in = NULL, *out = NULL;
    CHECK(aclrtMallocHost((void **)&in, N * sizeof(int32_t)));
    CHECK(aclrtMallocHost((void **)&out, N * sizeof(int32_t)));
    for (int i = 0; i < N; i++) in[i] = i * 7 + 1;
    size_t free0 = device_free();
    hold(s1);
    void *a = NULL;
    CHECK(aclrtMemPoolMallocAsync(&a, N * sizeof(int32_t), pool, s1));
    REQUIRE(a != NULL, "no block");
    CHECK(aclrtMemcpyAsync(a, N * sizeof(int32_t), in, N * sizeof(int32_t),
                           ACL_MEMCPY_HOST_TO_DEVICE, s1));
    CHECK(aclrtRecordEvent(ev, s1));
    CHECK(aclrtStreamWaitEvent(s2, ev));
    CHECK(aclrtMemcpyAsync(out, N * sizeof(int32_t), a, N * sizeof(int32_t),
                           ACL_MEMCPY_DEVICE_TO_HOST, s2));
    CHECK(aclrtMemPoolFreeAsync(a, s2));
    /* Blocks are 2 MiB; the free is queued behind the held s1. */
    REQUIRE(attr64(pool, ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT) == 0, "used after the free call");
    REQUIRE(attr64(pool, ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT) == 2 * MIB,
            "reserved before the free ran: %llu",
            (unsigned long long)attr64(pool, ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT));
    REQUIRE(attr64(pool, ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH) == 2 * MIB, "used high");
    REQUIRE(device_free() == free0 - 2 * MIB, "device memory while the free is queued");
    /* Issued after the free: refused, as use of freed memory. */
    EXPECT_RC(aclrtMemcpyAsync(a, 8, in, 8, ACL_MEMCPY_HOST_TO_DEVICE, s2),
              ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("freed", NULL);
    EXPECT_RC(aclrtMemPoolFreeAsync(a, s2), ACL_ERROR_RT_PARAM_INVALID);
    release_gate();
    CHECK(aclrtSynchronizeStream(s2));
    for (int i = 0; i < N; i++) REQUIRE(out[i] == in[i], "out[%d] = %d, not %d", i, out[i], in[i]);
    CHECK(aclrtFreeHost(in));
    CHECK(aclrtFreeHost(out));
    /* Threshold 0: the free's run gave the memory back. */
    REQUIRE(attr64(pool, ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT) == 0, "reserved after");
    REQUIRE(attr64(pool, ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_HIGH) == 2 * MIB, "reserved high");
    REQUIRE(device_free() == free0, "device memory after the free ran");

    /* A release threshold keeps freed memory; a later allocation on another stream reuses it. */
    uint64_t thr = 8 * MIB;
    CHECK(aclrtMemPoolSetAttr(pool, ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD, &thr));
    REQUIRE(attr64(pool, ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD) == thr, "threshold");
    void *b = NULL, *c = NULL;
    CHECK(aclrtMemPoolMallocAsync(&b, 3 * MIB, pool, s1));
    CHECK(aclrtMemsetAsync(b, 3 * MIB, 0x5a, 3 * MIB, s1));
    CHECK(aclrtMemPoolFreeAsync(b, s1));
    CHECK(aclrtSynchronizeStream(s1));
    REQUIRE(attr64(pool, ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT) == 4 * MIB, "kept");
    REQUIRE(attr64(pool, ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT) == 0, "used while kept");
    CHECK(aclrtMemPoolMallocAsync(&c, 1 * MIB, pool, s2));
    REQUIRE(c == b, "the kept block was not reused: %p, %p", c, b);
    REQUIRE(attr64(pool, ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT) == 4 * MIB, "reserved");
    /* The block's checked size is the one asked for now. */
    EXPECT_RC(aclrtMemsetAsync(c, 2 * MIB, 0, 2 * MIB, s2), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("leaves allocation", NULL);
    CHECK(aclrtMemsetAsync(c, MIB, 1, MIB, s2));

    /* What a pool block is not. */
    EXPECT_RC(aclrtFree(c), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("aclrtMemPoolFreeAsync", NULL);
    char key[65];
    EXPECT_RC(aclrtIpcMemGetExportKey(c, MIB, key, sizeof key, 0), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtMemPoolFreeAsync((char *)c + 64, s2), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("inside the pool block", NULL);

    /* Destroying a pool with a block in use is refused. */
    EXPECT_RC(aclrtMemPoolDestroy(pool), ACL_ERROR_RT_INTERNAL_ERROR);
    expect_msg("in use", NULL);

    /* Trim: above the pool's size or below its memory in use is refused. */
    EXPECT_RC(aclrtMemPoolTrimTo(pool, 32 * MIB), ACL_ERROR_RT_INTERNAL_ERROR);
    EXPECT_RC(aclrtMemPoolTrimTo(pool, MIB), ACL_ERROR_RT_INTERNAL_ERROR);
    EXPECT_RC(aclrtMemPoolTrimTo(NULL, 0), ACL_ERROR_INVALID_PARAM);
    CHECK(aclrtMemPoolFreeAsync(c, s2));
    CHECK(aclrtSynchronizeStream(s2));
    REQUIRE(attr64(pool, ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT) == 4 * MIB, "kept again");
    CHECK(aclrtMemPoolTrimTo(pool, 0));
    REQUIRE(attr64(pool, ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT) == 0, "trimmed");
    REQUIRE(device_free() == free0, "device memory after the trim");

    /* A full pool: 16 MiB holds four 4 MiB blocks, not a fifth. */
    void *blk[4];
    for (int i = 0; i < 4; i++) CHECK(aclrtMemPoolMallocAsync(&blk[i], 3 * MIB, pool, s1));
    void *x = NULL;
    EXPECT_RC(aclrtMemPoolMallocAsync(&x, 1, pool, s1), ACL_ERROR_RT_INTERNAL_ERROR);
    expect_msg("full", NULL);
    for (int i = 0; i < 4; i++) CHECK(aclrtMemPoolFreeAsync(blk[i], s1));
    CHECK(aclrtSynchronizeStream(s1));

    /* Attributes. */
    uint32_t flag = 5, got = 7;
    CHECK(aclrtMemPoolGetAttr(pool, ACL_RT_MEM_POOL_REUSE_ALLOW_OPPORTUNISTIC, &got));
    REQUIRE(got == 0, "default reuse flag %u", got);
    CHECK(aclrtMemPoolSetAttr(pool, ACL_RT_MEM_POOL_REUSE_ALLOW_OPPORTUNISTIC, &flag));
    CHECK(aclrtMemPoolGetAttr(pool, ACL_RT_MEM_POOL_REUSE_ALLOW_OPPORTUNISTIC, &got));
    REQUIRE(got == 1, "reuse flag %u", got);
    uint64_t v = 0;
    EXPECT_RC(aclrtMemPoolSetAttr(pool, ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT, &v),
              ACL_ERROR_RT_PARAM_INVALID);
    v = 5;
    EXPECT_RC(aclrtMemPoolSetAttr(pool, ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH, &v),
              ACL_ERROR_RT_INTERNAL_ERROR);
    v = 0;
    CHECK(aclrtMemPoolSetAttr(pool, ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH, &v));
    REQUIRE(attr64(pool, ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH) == 0, "used high reset");
    v = 17 * MIB;
    EXPECT_RC(aclrtMemPoolSetAttr(pool, ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD, &v),
              ACL_ERROR_RT_INTERNAL_ERROR);
    EXPECT_RC(aclrtMemPoolSetAttr(pool, (aclrtMemPoolAttr)99, &v), ACL_ERROR_RT_INTERNAL_ERROR);
    EXPECT_RC(aclrtMemPoolGetAttr(pool, ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH, NULL),
              ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtMemPoolGetAttr(NULL, ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH, &v),
              ACL_ERROR_INVALID_PARAM);

    /* aclrtMemPoolFreeAsync of aclrtMalloc memory frees it when the stream gets there. */
    void *d = NULL;
    CHECK(aclrtMalloc(&d, MIB, ACL_MEM_MALLOC_HUGE_FIRST));
    size_t with_d = device_free();
    hold(s1);
    CHECK(aclrtMemPoolFreeAsync(d, s1));
    EXPECT_RC(aclrtMemset(d, 8, 0, 8), ACL_ERROR_RT_PARAM_INVALID);
    REQUIRE(device_free() == with_d, "freed before the stream got there");
    release_gate();
    CHECK(aclrtSynchronizeStream(s1));
    REQUIRE(device_free() > with_d, "not freed when the stream got there");
    int host_word = 0;
    EXPECT_RC(aclrtMemPoolFreeAsync(&host_word, s1), ACL_ERROR_RT_PARAM_INVALID);

    /* Destroy; the handle is dead from then on. */
    CHECK(aclrtMemPoolDestroy(pool));
    EXPECT_RC(aclrtMemPoolDestroy(pool), ACL_ERROR_RT_INTERNAL_ERROR);
    EXPECT_RC(aclrtMemPoolMallocAsync(&x, 64, pool, s1), ACL_ERROR_RT_INTERNAL_ERROR);
    EXPECT_RC(aclrtMemPoolGetAttr(pool, ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH, &v),
              ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtMemPoolTrimTo(pool, 0), ACL_ERROR_RT_INTERNAL_ERROR);

    /* A pool left with kept memory at aclFinalize gives it back: a new session finds the
     * device's memory whole. */
    aclrtMemPoolProps p2 = pool_props(0, 0);
    aclrtMemPool kept;
    CHECK(aclrtMemPoolCreate(&kept, &p2));
    thr = 64 * MIB;
    CHECK(aclrtMemPoolSetAttr(kept, ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD, &thr));
    CHECK(aclrtMemPoolMallocAsync(&x, MIB, kept, s1));
    CHECK(aclrtMemPoolFreeAsync(x, s1));
    CHECK(aclrtSynchronizeStream(s1));
    REQUIRE(attr64(kept, ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT) == 2 * MIB, "kept at the end");
    CHECK(aclrtDestroyEvent(ev));
    CHECK(aclrtDestroyStream(s1));
    CHECK(aclrtDestroyStream(s2));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    size_t free_b = 0, total = 0;
    CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &free_b, &total));
    REQUIRE(free_b == total, "after the session: %zu of %zu bytes free", free_b, total);
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("mem_pool %s: ok\n", soc);
    return 0;
}
