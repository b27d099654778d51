/* peer_map.c — aclrtMemP2PMap and aclrtMemMapSelectedLink through the C ABI, on the SoC named
 * by argv[1]:
 * - Ascend910_93 (Atlas A3): aclrtMemP2PMap's codes (NULL, size 0, flags → 100000; a device
 *   index → 107001; host, managed memory or a range leaving its allocation → 107000; peer
 *   access not enabled → 207006), then it succeeds once aclrtDeviceEnablePeerAccess ran;
 *   aclrtMemMapSelectedLink maps a reserved range onto the two physical allocations mapped
 *   behind another, block by block: bytes written through one range read back through the
 *   other, both ways; each block is unmapped on its own; a link past HCCS, a source that is not
 *   the start of a mapping and an already mapped destination are refused.
 * - Ascend910B: aclrtMemMapSelectedLink is A3 only (207000); aclrtMemP2PMap works.
 * - Ascend310B: no peer access (207000).
 * Exit 0 and "peer_map <soc>: ok" when every check holds. */
#include "common.h"

static void p2p_map(int managed) {
    void *d = NULL;
    CHECK(aclrtMalloc(&d, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    char host[64];
    EXPECT_RC(aclrtMemP2PMap(NULL, 4096, 1, 0), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemP2PMap(d, 0, 1, 0), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemP2PMap(d, 4096, 1, 1), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemP2PMap(d, 4096, 9, 0), ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT_RC(aclrtMemP2PMap(host, 64, 1, 0), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("not device memory", NULL);
    EXPECT_RC(aclrtMemP2PMap(d, 4097, 1, 0), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("leaves its allocation", NULL);
    if (managed) {
        void *m = NULL;
        CHECK(aclrtMemAllocManaged(&m, 4096, ACL_RT_MEM_ATTACH_GLOBAL));
        EXPECT_RC(aclrtMemP2PMap(m, 4096, 1, 0), ACL_ERROR_RT_PARAM_INVALID);
        expect_msg("managed memory", NULL);
        CHECK(aclrtFree(m));
    }
    EXPECT_RC(aclrtMemP2PMap(d, 4096, 1, 0), ACL_ERROR_RT_NO_PERMISSION);
    expect_msg("aclrtDeviceEnablePeerAccess", NULL);
    CHECK(aclrtMemP2PMap(d, 4096, 0, 0));
    CHECK(aclrtDeviceEnablePeerAccess(1, 0));
    CHECK(aclrtMemP2PMap(d, 4096, 1, 0));
    CHECK(aclrtMemP2PMap((char *)d + 1024, 1024, 1, 0));
    CHECK(aclrtDeviceDisablePeerAccess(1));
    CHECK(aclrtFree(d));
}

static void fill(unsigned char *p, size_t len, unsigned seed) {
    for (size_t i = 0; i < len; i++) p[i] = (unsigned char)(i * 13u + seed);
}

static void check_bytes(const unsigned char *p, size_t len, unsigned seed, const char *what) {
    for (size_t i = 0; i < len; i++) {
        unsigned char want = (unsigned char)(i * 13u + seed);
        REQUIRE(p[i] == want, "%s: byte %zu is %d, expected %d", what, i, p[i], want);
    }
}

static void selected_link(void) {
    aclrtPhysicalMemProp prop = device_prop(ACL_MEM_HUGE);
    size_t g = 0;
    CHECK(aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g));
    void *src = NULL, *dst = NULL;
    CHECK(aclrtReserveMemAddress(&src, 2 * g, 0, NULL, 0));
    CHECK(aclrtReserveMemAddress(&dst, 2 * g, 0, NULL, 0));
    aclrtDrvMemHandle a = NULL, b = NULL;
    CHECK(aclrtMallocPhysical(&a, g, &prop, 0));
    CHECK(aclrtMallocPhysical(&b, g, &prop, 0));
    CHECK(aclrtMapMem(src, g, 0, a, 0));
    CHECK(aclrtMapMem((char *)src + g, g, 0, b, 0));

    EXPECT_RC(aclrtMemMapSelectedLink(NULL, 2 * g, src, ACL_RT_MEM_LINK_IDX_1),
              ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemMapSelectedLink(dst, 0, src, ACL_RT_MEM_LINK_IDX_1), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemMapSelectedLink(dst, 2 * g, src, 2), ACL_ERROR_INVALID_PARAM);
    expect_msg("linkIdx 2", NULL);
    EXPECT_RC(aclrtMemMapSelectedLink(dst, g, (char *)src + 4096, ACL_RT_MEM_LINK_IDX_0),
              ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("not the start of its block", NULL);

    CHECK(aclrtMemMapSelectedLink(dst, 2 * g, src, ACL_RT_MEM_LINK_IDX_1));
    unsigned char *in = malloc(2 * g), *out = malloc(2 * g);
    REQUIRE(in && out, "malloc");
    fill(in, 2 * g, 7);
    CHECK(aclrtMemcpy(src, 2 * g, in, 2 * g, ACL_MEMCPY_HOST_TO_DEVICE));
    memset(out, 0, 2 * g);
    CHECK(aclrtMemcpy(out, 2 * g, dst, 2 * g, ACL_MEMCPY_DEVICE_TO_HOST));
    check_bytes(out, 2 * g, 7, "read through the linked range");
    fill(in, 2 * g, 99);
    CHECK(aclrtMemcpy(dst, 2 * g, in, 2 * g, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtMemcpy(out, 2 * g, src, 2 * g, ACL_MEMCPY_DEVICE_TO_HOST));
    check_bytes(out, 2 * g, 99, "written through the linked range");
    /* Mapped already: refused. */
    EXPECT_RC(aclrtMemMapSelectedLink(dst, 2 * g, src, ACL_RT_MEM_LINK_IDX_0),
              ACL_ERROR_RT_PARAM_INVALID);
    /* Two mappings, each unmapped by its own call. */
    CHECK(aclrtUnmapMem(dst));
    CHECK(aclrtUnmapMem((char *)dst + g));
    EXPECT_RC(aclrtUnmapMem(dst), ACL_ERROR_RT_PARAM_INVALID);
    /* The source's handles were released: freeing ours and unmapping frees the memory. */
    CHECK(aclrtUnmapMem(src));
    CHECK(aclrtUnmapMem((char *)src + g));
    CHECK(aclrtFreePhysical(a));
    CHECK(aclrtFreePhysical(b));
    CHECK(aclrtReleaseMemAddress(src));
    CHECK(aclrtReleaseMemAddress(dst));
    free(in);
    free(out);
}

int main(int argc, char **argv) {
    g_role = "peer_map";
    const char *soc = argc > 1 ? argv[1] : "Ascend910_93";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    if (strcmp(soc, "Ascend310B") == 0) {
        void *d = NULL;
        CHECK(aclrtMalloc(&d, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
        EXPECT_RC(aclrtMemP2PMap(d, 4096, 1, 0), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        CHECK(aclrtFree(d));
    } else if (strcmp(soc, "Ascend910_93") == 0) {
        p2p_map(1);
        selected_link();
    } else {
        p2p_map(1);
        void *x = (void *)(uintptr_t)0x1000;
        EXPECT_RC(aclrtMemMapSelectedLink(x, 4096, x, ACL_RT_MEM_LINK_IDX_0),
                  ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        expect_msg("Atlas A3", NULL);
    }
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("peer_map %s: ok\n", soc);
    return 0;
}
