/* mem_usage.c — aclrtGetMemUsageInfo across allocations and frees of each kind, on Ascend910B
 * (hicann/runtime src/acl/aclrt_impl/memory.cpp, src/runtime/api/impl/api_error.cc,
 * src/runtime/driver/npu_driver_mem.cc).
 *
 * Checked: NULL memUsageInfo / outputNum 100000; inputNum 0 107000 with *outputNum set to 0; a
 * device the machine lacks 107001; each component's current figure moves by exactly the bytes
 * allocated and freed — the span aclrtGetMemInfo counts (aclrtMalloc, aclrtMemAllocManaged, aclrtMallocPhysical, a memory pool's
 * blocks, which stay counted while the pool keeps them after aclrtMemPoolFreeAsync below its
 * release threshold), its peak
 * is the most it held and stays when the current figure falls; only components holding memory
 * are listed, the largest first; inputNum 1 gives the largest alone; the owned components add
 * up to what aclrtGetMemInfo counts as used; after every free nothing is listed.
 *
 * usage: mem_usage SOC. Exit 0 and "mem_usage: ok". */
#include "common.h"
#include "acl/acl_rt_memory_soma.h"

#define MIB (1024u * 1024u)
#define MAXC 16

typedef struct {
    size_t n;
    aclrtMemUsageInfo e[MAXC];
} usage_t;

static usage_t query(void) {
    usage_t u;
    memset(&u, 0xAB, sizeof u);
    CHECK(aclrtGetMemUsageInfo(0, u.e, MAXC, &u.n));
    REQUIRE(u.n <= MAXC, "outputNum %zu", u.n);
    for (size_t i = 0; i < u.n; i++) {
        REQUIRE(memchr(u.e[i].name, 0, sizeof u.e[i].name) != NULL, "entry %zu unterminated", i);
        REQUIRE(u.e[i].curMemSize > 0, "%s listed holding nothing", u.e[i].name);
        REQUIRE(u.e[i].memPeakSize >= u.e[i].curMemSize, "%s: peak %llu < current %llu",
                u.e[i].name, (unsigned long long)u.e[i].memPeakSize,
                (unsigned long long)u.e[i].curMemSize);
        if (i > 0) {
            REQUIRE(u.e[i - 1].curMemSize >= u.e[i].curMemSize, "not largest first at %zu", i);
        }
    }
    return u;
}

/* The entry named `name`, or NULL when the component is not listed. */
static const aclrtMemUsageInfo *find(const usage_t *u, const char *name) {
    for (size_t i = 0; i < u->n; i++) {
        if (strcmp(u->e[i].name, name) == 0) return &u->e[i];
    }
    return NULL;
}

static void expect(const char *name, uint64_t cur, uint64_t peak) {
    usage_t u = query();
    const aclrtMemUsageInfo *e = find(&u, name);
    if (cur == 0) {
        REQUIRE(e == NULL, "%s listed with %llu bytes, expected none", name,
                (unsigned long long)(e ? e->curMemSize : 0));
        return;
    }
    REQUIRE(e != NULL, "%s not listed (%zu entries), expected %llu bytes", name, u.n,
            (unsigned long long)cur);
    REQUIRE(e->curMemSize == cur && e->memPeakSize == peak,
            "%s: current %llu peak %llu, expected %llu and %llu", name,
            (unsigned long long)e->curMemSize, (unsigned long long)e->memPeakSize,
            (unsigned long long)cur, (unsigned long long)peak);
}

/* Bytes of device 0 aclrtGetMemInfo counts as used. */
static uint64_t used(void) {
    size_t free_b = 0, total = 0;
    CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &free_b, &total));
    return total - free_b;
}

/* The owned components add up to what aclrtGetMemInfo counts as used on device 0. */
static void expect_sum_is_used(void) {
    usage_t u = query();
    uint64_t sum = 0;
    for (size_t i = 0; i < u.n; i++) sum += u.e[i].curMemSize;
    REQUIRE(sum == used(), "components add up to %llu, aclrtGetMemInfo says %llu used",
            (unsigned long long)sum, (unsigned long long)used());
}

int main(int argc, char **argv) {
    g_role = "mem_usage";
    REQUIRE(argc == 2, "usage: mem_usage SOC");
    (void)argv;
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));

    /* CANN's checks, in its order. */
    aclrtMemUsageInfo one[1];
    size_t n = 7;
    EXPECT_RC(aclrtGetMemUsageInfo(0, NULL, 1, &n), ACL_ERROR_INVALID_PARAM);
    expect_msg("memUsageInfo", NULL);
    EXPECT_RC(aclrtGetMemUsageInfo(0, one, 1, NULL), ACL_ERROR_INVALID_PARAM);
    expect_msg("outputNum", NULL);
    EXPECT_RC(aclrtGetMemUsageInfo(0, one, 0, &n), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("inputNum", NULL);
    REQUIRE(n == 0, "outputNum %zu after inputNum 0, expected 0", n);
    EXPECT_RC(aclrtGetMemUsageInfo(99, one, 1, &n), ACL_ERROR_RT_INVALID_DEVICEID);
    expect_msg("device 99", NULL);

    usage_t start = query();
    REQUIRE(start.n == 0, "%zu components before any allocation (first %s)", start.n,
            start.e[0].name);

    /* aclrtMalloc: 4 MiB and 2 MiB, then a free. Each takes the span aclrtGetMemInfo counts
     * (CANN's rounding of the size: a little more than asked). */
    void *a = NULL, *b = NULL;
    uint64_t u0 = used();
    CHECK(aclrtMalloc(&a, 4 * MIB, ACL_MEM_MALLOC_HUGE_FIRST));
    uint64_t sa = used() - u0;
    REQUIRE(sa >= 4 * MIB && sa < 4 * MIB + 4096, "4 MiB took %llu bytes", (unsigned long long)sa);
    expect("aclrtMalloc", sa, sa);
    CHECK(aclrtMalloc(&b, 2 * MIB, ACL_MEM_MALLOC_HUGE_FIRST));
    uint64_t sb = used() - u0 - sa;
    REQUIRE(sb >= 2 * MIB && sb < 2 * MIB + 4096, "2 MiB took %llu bytes", (unsigned long long)sb);
    expect("aclrtMalloc", sa + sb, sa + sb);
    CHECK(aclrtFree(a));
    expect("aclrtMalloc", sb, sa + sb);
    expect_sum_is_used();

    /* Managed memory: 2 MiB pages. */
    void *m = NULL;
    CHECK(aclrtMemAllocManaged(&m, 2 * MIB, ACL_RT_MEM_ATTACH_GLOBAL));
    expect("aclrtMemAllocManaged", 2 * MIB, 2 * MIB);

    /* Physical memory: its granularity. */
    aclrtPhysicalMemProp prop = device_prop(ACL_MEM_HUGE);
    size_t g = 0;
    CHECK(aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g));
    aclrtDrvMemHandle ph = NULL;
    CHECK(aclrtMallocPhysical(&ph, 3 * g, &prop, 0));
    expect("aclrtMallocPhysical", 3 * g, 3 * g);
    expect_sum_is_used();

    /* The largest first; inputNum 1 gives it alone. */
    usage_t u = query();
    REQUIRE(u.n == 3, "%zu components, expected 3", u.n);
    aclrtMemUsageInfo top;
    memset(&top, 0, sizeof top);
    CHECK(aclrtGetMemUsageInfo(0, &top, 1, &n));
    REQUIRE(n == 1 && strcmp(top.name, u.e[0].name) == 0 && top.curMemSize == u.e[0].curMemSize,
            "inputNum 1: %zu entries, %s", n, top.name);

    /* A pool's blocks: counted from the block's placement; kept by the pool after the free
     * (below its release threshold), so still counted; its destruction frees them. */
    aclrtMemPool pool = NULL;
    aclrtMemPoolProps pp = pool_props(0, 16 * MIB);
    CHECK(aclrtMemPoolCreate(&pool, &pp));
    uint64_t thr = 8 * MIB;
    CHECK(aclrtMemPoolSetAttr(pool, ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD, &thr));
    aclrtStream s = NULL;
    CHECK(aclrtCreateStream(&s));
    void *p = NULL;
    CHECK(aclrtMemPoolMallocAsync(&p, 2 * MIB, pool, s));
    expect("aclrtMemPoolMallocAsync", 2 * MIB, 2 * MIB);
    CHECK(aclrtMemPoolFreeAsync(p, s));
    CHECK(aclrtSynchronizeStream(s));
    expect("aclrtMemPoolMallocAsync", 2 * MIB, 2 * MIB);
    expect_sum_is_used();
    CHECK(aclrtMemPoolDestroy(pool));
    expect("aclrtMemPoolMallocAsync", 0, 0);
    CHECK(aclrtDestroyStream(s));

    /* Frees: each component leaves the list. */
    CHECK(aclrtFree(m));
    expect("aclrtMemAllocManaged", 0, 0);
    CHECK(aclrtFreePhysical(ph));
    expect("aclrtMallocPhysical", 0, 0);
    CHECK(aclrtFree(b));
    u = query();
    REQUIRE(u.n == 0, "%zu components after every free (first %s)", u.n, u.e[0].name);
    expect_sum_is_used();

    /* The peak stays: a new allocation shows the old peak beside the new current figure. */
    CHECK(aclrtMalloc(&a, 2 * MIB, ACL_MEM_MALLOC_HUGE_FIRST));
    expect("aclrtMalloc", sb, sa + sb);
    CHECK(aclrtFree(a));

    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("mem_usage: ok\n");
    return 0;
}
