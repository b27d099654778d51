/* managed.c — managed (unified) memory through the C ABI, on the SoC named by argv[1]:
 * - Ascend910B: aclrtMemAllocManaged rounds to 2 MiB and aclrtGetMemInfo counts it;
 *   aclrtPointerGetAttributes says MANAGED; the host writes two int32 arrays straight through
 *   the pointer, a stream prefetches them to the device (held by a host function, the last
 *   prefetch location reads -2 until the stream ran it) and then sums one into the other
 *   (aclrtReduceAsync), and the host reads the sums straight back; a set and a copy of a
 *   host kind work on it; advice (read mostly, preferred location, accessed by) reads back
 *   per 2 MiB page through aclrtMemManagedGetAttr[s], -2 where pages disagree; a batch
 *   prefetch sends each range to its location; CANN's codes for bad input (NULL, flags, size
 *   0, unknown advice or attribute, device ids, location types, dataSize, index arrays) and
 *   107000 with a message for memory that is not managed, sizes not whole pages, and an IPC
 *   export of managed memory; a forked child has no mapping of the managed range (it
 *   cannot write the parent's bytes); aclrtFree gives the memory back.
 * - Ascend310P: no managed memory (207000).
 * Exit 0 and "managed <soc>: ok" when every check holds. */
#include "common.h"

#include <errno.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define PAGE (2u << 20)

/* A host function holding its stream until *(volatile int *)arg is set. */
static void hold_until(void *arg) {
    while (!*(volatile int *)arg) sleep_ms(1);
}

static int32_t attr1(aclrtMemManagedRangeAttribute a, const void *p, size_t len) {
    int32_t v = 12345;
    CHECK(aclrtMemManagedGetAttr(a, p, len, &v, sizeof v));
    return v;
}

static void bad_input(char *m, aclrtStream s) {
    void *p = NULL;
    aclrtMemManagedLocation dev0 = {ACL_MEM_LOCATIONTYPE_DEVICE, 0};
    aclrtMemManagedLocation dev9 = {ACL_MEM_LOCATIONTYPE_DEVICE, 9};
    aclrtMemManagedLocation none = {ACL_MEM_LOCATIONTYPE_INVALID, 0};
    aclrtMemManagedLocation numa1 = {ACL_MEM_LOCATIONTYPE_HOST_NUMA, 1};
    EXPECT_RC(aclrtMemAllocManaged(NULL, 4096, ACL_RT_MEM_ATTACH_GLOBAL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemAllocManaged(&p, 4096, 0), ACL_ERROR_INVALID_PARAM);
    expect_msg("ACL_RT_MEM_ATTACH_GLOBAL", NULL);
    EXPECT_RC(aclrtMemAllocManaged(&p, 0, ACL_RT_MEM_ATTACH_GLOBAL), ACL_ERROR_RT_PARAM_INVALID);

    EXPECT_RC(aclrtMemManagedAdvise(NULL, PAGE, ACL_MEM_ADVISE_SET_READ_MOSTLY, dev0),
              ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemManagedAdvise(m, 0, ACL_MEM_ADVISE_SET_READ_MOSTLY, dev0),
              ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemManagedAdvise(m, PAGE, (aclrtMemManagedAdviseType)6, dev0),
              ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtMemManagedAdvise(m, PAGE, ACL_MEM_ADVISE_SET_PREFERRED_LOCATION, dev9),
              ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("location.id 9", NULL);
    EXPECT_RC(aclrtMemManagedAdvise(m, PAGE, ACL_MEM_ADVISE_SET_PREFERRED_LOCATION, none),
              ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtMemManagedAdvise(m, PAGE, ACL_MEM_ADVISE_SET_ACCESSED_BY, numa1),
              ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("NUMA", NULL);
    EXPECT_RC(aclrtMemManagedAdvise(m, 4096, ACL_MEM_ADVISE_SET_READ_MOSTLY, dev0),
              ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("2 MiB", NULL);
    EXPECT_RC(aclrtMemManagedAdvise(m, 3u * PAGE, ACL_MEM_ADVISE_SET_READ_MOSTLY, dev0),
              ACL_ERROR_RT_PARAM_INVALID);
    void *d = NULL;
    CHECK(aclrtMalloc(&d, PAGE, ACL_MEM_MALLOC_HUGE_FIRST));
    EXPECT_RC(aclrtMemManagedAdvise(d, PAGE, ACL_MEM_ADVISE_SET_READ_MOSTLY, dev0),
              ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("not managed memory", NULL);

    int32_t v = 0;
    void *datas[1] = {&v};
    size_t sizes[1] = {4};
    aclrtMemManagedRangeAttribute attrs[1] = {(aclrtMemManagedRangeAttribute)9};
    EXPECT_RC(aclrtMemManagedGetAttr(ACL_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, NULL, 4, &v, 4),
              ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemManagedGetAttr(ACL_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, m, 4, NULL, 4),
              ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemManagedGetAttr((aclrtMemManagedRangeAttribute)0, m, 4, &v, 4),
              ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtMemManagedGetAttr(ACL_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, m, 4, &v, 8),
              ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("dataSize 8", NULL);
    EXPECT_RC(aclrtMemManagedGetAttr(ACL_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, d, 4, &v, 4),
              ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtMemManagedGetAttr(ACL_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, &v, 4, &v, 4),
              ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("host memory", NULL);
    EXPECT_RC(aclrtMemManagedGetAttrs(attrs, 1, m, 4, datas, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemManagedGetAttrs(attrs, 1, m, 4, datas, sizes), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("attributes[0] 9", NULL);

    EXPECT_RC(aclrtMemManagedPrefetchAsync(m, PAGE, dev0, 1, s), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemManagedPrefetchAsync(m, 0, dev0, 0, s), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemManagedPrefetchAsync(m, PAGE, dev9, 0, s), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtMemManagedPrefetchAsync(m, PAGE, none, 0, s), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtMemManagedPrefetchAsync(d, PAGE, dev0, 0, s), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("not managed memory", NULL);
    EXPECT_RC(aclrtMemManagedPrefetchAsync(m, 100, dev0, 0, s), ACL_ERROR_RT_PARAM_INVALID);

    const void *ptrs[2] = {m, m + PAGE};
    size_t lens[2] = {PAGE, PAGE};
    aclrtMemManagedLocation locs[2] = {dev0, dev0};
    size_t idx[2] = {0, 0};
    EXPECT_RC(aclrtMemManagedPrefetchBatchAsync(ptrs, lens, 2, locs, idx, 2, 0, s),
              ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("prefetchLocIdxs[1]", NULL);
    idx[1] = 1;
    EXPECT_RC(aclrtMemManagedPrefetchBatchAsync(ptrs, lens, 1, locs, idx, 2, 0, s),
              ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemManagedPrefetchBatchAsync(ptrs, lens, 2, locs, idx, 2, 1, s),
              ACL_ERROR_INVALID_PARAM);
    lens[1] = 4096;
    EXPECT_RC(aclrtMemManagedPrefetchBatchAsync(ptrs, lens, 2, locs, idx, 2, 0, s),
              ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("sizes[1]", NULL);

    char key[65];
    EXPECT_RC(aclrtIpcMemGetExportKey(m, PAGE, key, sizeof key, 0), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("managed memory", NULL);
    CHECK(aclrtFree(d));
}

int main(int argc, char **argv) {
    g_role = "managed";
    const char *soc = argc > 1 ? argv[1] : "Ascend910B";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    if (strcmp(soc, "Ascend910B") != 0) {
        void *p = NULL;
        EXPECT_RC(aclrtMemAllocManaged(&p, 4096, ACL_RT_MEM_ATTACH_GLOBAL),
                  ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        CHECK(aclrtResetDevice(0));
        CHECK(aclFinalize());
        printf("managed %s: ok\n", soc);
        return 0;
    }
    size_t free0 = 0, total = 0, free1 = 0;
    CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &free0, &total));
    char *m = NULL;
    CHECK(aclrtMemAllocManaged((void **)&m, 2u * PAGE - 100, ACL_RT_MEM_ATTACH_GLOBAL));
    CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &free1, &total));
    REQUIRE(free0 - free1 == 2u * PAGE, "managed memory took %zu bytes, expected 4 MiB",
            free0 - free1);
    aclrtPtrAttributes pa;
    CHECK(aclrtPointerGetAttributes(m + 100, &pa));
    REQUIRE(pa.location.type == ACL_MEM_LOCATION_TYPE_MANAGED && pa.location.id == 0,
            "location type %d id %u", (int)pa.location.type, pa.location.id);

    aclrtStream s;
    CHECK(aclrtCreateStream(&s));
    bad_input(m, s);

    /* The host writes a[] and b[] straight through the pointer. */
    const size_t n = PAGE / sizeof(int32_t);
    int32_t *a = (int32_t *)m, *b = (int32_t *)(m + PAGE);
    for (size_t i = 0; i < n; i++) {
        a[i] = (int32_t)(i * 7 + 1);
        b[i] = (int32_t)(1000000 - i);
    }
    /* Prefetch to the device behind a held stream, then b += a there. */
    volatile int go = 0;
    CHECK(aclrtLaunchHostFunc(s, hold_until, (void *)&go));
    aclrtMemManagedLocation dev0 = {ACL_MEM_LOCATIONTYPE_DEVICE, 0};
    CHECK(aclrtMemManagedPrefetchAsync(m, 2u * PAGE, dev0, 0, s));
    CHECK(aclrtReduceAsync(b, a, PAGE, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_INT32, s, NULL));
    sleep_ms(20);
    REQUIRE(attr1(ACL_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, m, 2u * PAGE) == -2,
            "the prefetch shows before its stream ran it");
    REQUIRE(b[5] == 1000000 - 5, "the sum ran before its stream was released");
    go = 1;
    CHECK(aclrtSynchronizeStream(s));
    REQUIRE(attr1(ACL_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, m, 2u * PAGE) == 0,
            "last prefetch location");
    REQUIRE(attr1(ACL_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE, m, 4) ==
                ACL_MEM_LOCATIONTYPE_DEVICE,
            "last prefetch location type");
    for (size_t i = 0; i < n; i++) {
        int32_t want = (int32_t)(1000000 - i) + (int32_t)(i * 7 + 1);
        REQUIRE(b[i] == want, "b[%zu] is %d after the sum, expected %d", i, b[i], want);
    }
    /* A set on the stream, read by the host; a copy of a host kind reads managed memory. */
    CHECK(aclrtMemsetAsync(m + 64, 64, 0x5A, 64, s));
    CHECK(aclrtSynchronizeStream(s));
    for (int i = 0; i < 64; i++) REQUIRE((unsigned char)m[64 + i] == 0x5A, "set byte %d", i);
    int32_t back[4];
    CHECK(aclrtMemcpy(back, sizeof back, b, sizeof back, ACL_MEMCPY_HOST_TO_HOST));
    REQUIRE(back[3] == b[3], "host-to-host copy of managed memory");

    /* Advice per page. */
    aclrtMemManagedLocation host = {ACL_MEM_LOCATIONTYPE_HOST, 0};
    CHECK(aclrtMemManagedAdvise(m, 2u * PAGE, ACL_MEM_ADVISE_SET_READ_MOSTLY, host));
    REQUIRE(attr1(ACL_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, m, 2u * PAGE) == 1, "read mostly");
    CHECK(aclrtMemManagedAdvise(m + PAGE, PAGE, ACL_MEM_ADVISE_UNSET_READ_MOSTLY, host));
    REQUIRE(attr1(ACL_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, m, 2u * PAGE) == 0, "read mostly unset");
    CHECK(aclrtMemManagedAdvise(m, PAGE, ACL_MEM_ADVISE_SET_PREFERRED_LOCATION, dev0));
    CHECK(aclrtMemManagedAdvise(m + PAGE, PAGE, ACL_MEM_ADVISE_SET_PREFERRED_LOCATION, host));
    CHECK(aclrtMemManagedAdvise(m, PAGE, ACL_MEM_ADVISE_SET_ACCESSED_BY, host));
    CHECK(aclrtMemManagedAdvise(m, PAGE, ACL_MEM_ADVISE_SET_ACCESSED_BY, dev0));
    aclrtMemManagedRangeAttribute attrs[4] = {
        ACL_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, ACL_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE,
        ACL_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID, ACL_MEM_RANGE_ATTRIBUTE_ACCESSED_BY};
    int32_t loc = 9, type = 9, id = 9, by[3] = {9, 9, 9};
    void *datas[4] = {&loc, &type, &id, by};
    size_t sizes[4] = {4, 4, 4, sizeof by};
    CHECK(aclrtMemManagedGetAttrs(attrs, 4, m, PAGE, datas, sizes));
    REQUIRE(loc == 0 && type == ACL_MEM_LOCATIONTYPE_DEVICE && id == 0,
            "first page preferred %d type %d id %d", loc, type, id);
    REQUIRE(((by[0] == -1 && by[1] == 0) || (by[0] == 0 && by[1] == -1)) && by[2] == -2,
            "accessed by %d %d %d", by[0], by[1], by[2]);
    CHECK(aclrtMemManagedGetAttrs(attrs, 4, m + PAGE, PAGE, datas, sizes));
    REQUIRE(loc == -1 && type == ACL_MEM_LOCATIONTYPE_HOST && id == -2 && by[0] == -2,
            "second page preferred %d type %d id %d by %d", loc, type, id, by[0]);
    CHECK(aclrtMemManagedGetAttrs(attrs, 4, m, 2u * PAGE, datas, sizes));
    REQUIRE(loc == -2 && type == ACL_MEM_LOCATIONTYPE_INVALID && id == -2,
            "pages that disagree: preferred %d type %d id %d", loc, type, id);

    /* A batch: the first page to the host, the second to device 0. */
    const void *ptrs[2] = {m, m + PAGE};
    size_t lens[2] = {PAGE, PAGE};
    aclrtMemManagedLocation locs[2] = {host, dev0};
    size_t idx[2] = {0, 1};
    CHECK(aclrtMemManagedPrefetchBatchAsync(ptrs, lens, 2, locs, idx, 2, 0, s));
    CHECK(aclrtSynchronizeStream(s));
    REQUIRE(attr1(ACL_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, m, PAGE) == -1, "batch host");
    REQUIRE(attr1(ACL_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID, m + PAGE, PAGE) == 0,
            "batch device");

    /* A forked child does not inherit managed memory (CANN: a forked child is no AscendCL
     * caller of its own; the memory is the parent's, and a child writing through its copy of
     * the mapping reached the parent's bytes): the range is not mapped in the child. */
    m[5] = 0x21;
    pid_t child = fork();
    REQUIRE(child >= 0, "fork");
    if (child == 0) {
        unsigned char vec = 0;
        int rc = mincore(m, 4096, &vec);
        if (rc == 0) m[5] = 0x7e; /* what a shared mapping let a child do */
        _exit(rc == -1 && errno == ENOMEM ? 0 : 3);
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child, "waitpid");
    REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0,
            "the forked child has the managed range mapped (status %#x)", status);
    REQUIRE(m[5] == 0x21, "the forked child wrote the parent's managed memory (%#x)", m[5]);

    CHECK(aclrtFree(m));
    CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &free1, &total));
    REQUIRE(free1 == free0, "free %zu after aclrtFree, %zu before", free1, free0);
    EXPECT_RC(aclrtFree(m), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclrtDestroyStream(s));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("managed %s: ok\n", soc);
    return 0;
}
