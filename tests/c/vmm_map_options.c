/* vmm_map_options.c — aclrtMemMapNoAccess and aclrtMemMapSetLink, after hicann/runtime
 * src/acl/aclrt_impl/memory.cpp and src/runtime/api/impl/api_error.cc / api_impl.cc.
 *
 * Checked: the NULL / zero-size / non-zero-flags codes (100000) of aclrtMemMapNoAccess; a mapping
 * it makes gives no location access (aclrtMemGetAccess answers 0x7FFFFFFF for the memory's own
 * device, where aclrtMapMem gives read-write) until aclrtMemSetAccess gives it, after which the
 * device reads and writes it (a copy in and out); it unmaps like any mapping; a second map over
 * it is refused. aclrtMemMapSetLink: NULL handle 100000, a link above 3 107000, a freed handle
 * 107017, each of the four links accepted. On IPV350 (no VMM) aclrtMemMapSetLink is 207000 and
 * aclrtMemMapNoAccess answers a handle as aclrtMapMem does (none can be live there).
 *
 * usage: vmm_map_options SOC. Exit 0 and "vmm_map_options: ok". */
#include "common.h"

int main(int argc, char **argv) {
    g_role = "vmm_map_options";
    REQUIRE(argc == 2, "usage: vmm_map_options SOC");
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtPhysicalMemProp prop = device_prop(ACL_MEM_HUGE);
    const size_t g = 2u << 20;
    if (strcmp(argv[1], "IPV350") == 0) {
        int x = 0;
        aclrtDrvMemHandle h = NULL;
        EXPECT_RC(aclrtMallocPhysical(&h, g, &prop, 0), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        /* No handle can be live: the same code as aclrtMapMem's. */
        aclError mapped = aclrtMapMem(&x, g, 0, (aclrtDrvMemHandle)&x, 0);
        EXPECT_RC(aclrtMemMapNoAccess(&x, g, 0, (aclrtDrvMemHandle)&x, 0), mapped);
        EXPECT_RC(aclrtMemMapSetLink((aclrtDrvMemHandle)&x, ACL_RT_MEM_ACCESS_LINK_HCCS),
                  ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        CHECK(aclrtResetDevice(0));
        CHECK(aclFinalize());
        printf("vmm_map_options: ok\n");
        return 0;
    }
    void *va = NULL;
    CHECK(aclrtReserveMemAddress(&va, 2 * g, 0, NULL, 0));
    aclrtDrvMemHandle a = NULL, b = NULL;
    CHECK(aclrtMallocPhysical(&a, g, &prop, 0));
    CHECK(aclrtMallocPhysical(&b, g, &prop, 0));

    EXPECT_RC(aclrtMemMapNoAccess(NULL, g, 0, a, 0), ACL_ERROR_INVALID_PARAM);
    expect_msg("aclrtMemMapNoAccess", "virPtr", NULL);
    EXPECT_RC(aclrtMemMapNoAccess(va, g, 0, NULL, 0), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemMapNoAccess(va, 0, 0, a, 0), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemMapNoAccess(va, g, 0, a, 1), ACL_ERROR_INVALID_PARAM);
    expect_msg("flags", NULL);

    CHECK(aclrtMemMapNoAccess(va, g, 0, a, 0));
    CHECK(aclrtMapMem((char *)va + g, g, 0, b, 0));
    EXPECT_RC(aclrtMemMapNoAccess((char *)va + g, g, 0, a, 0), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("overlaps", NULL);
    aclrtMemLocation dev0 = {0, ACL_MEM_LOCATION_TYPE_DEVICE};
    uint64_t flag = 0;
    CHECK(aclrtMemGetAccess(va, &dev0, &flag));
    REQUIRE(flag == 0x7FFFFFFF, "the device's access after aclrtMemMapNoAccess: %#llx",
            (unsigned long long)flag);
    CHECK(aclrtMemGetAccess((char *)va + g, &dev0, &flag));
    REQUIRE(flag == ACL_RT_MEM_ACCESS_FLAGS_READWRITE, "after aclrtMapMem: %#llx",
            (unsigned long long)flag);
    aclrtMemAccessDesc d;
    memset(&d, 0, sizeof d);
    d.flags = ACL_RT_MEM_ACCESS_FLAGS_READWRITE;
    d.location = dev0;
    CHECK(aclrtMemSetAccess(va, g, &d, 1));
    CHECK(aclrtMemGetAccess(va, &dev0, &flag));
    REQUIRE(flag == ACL_RT_MEM_ACCESS_FLAGS_READWRITE, "after aclrtMemSetAccess: %#llx",
            (unsigned long long)flag);
    unsigned char in[4096], out[4096];
    for (size_t i = 0; i < sizeof in; i++) in[i] = (unsigned char)(i * 7u + 3u);
    CHECK(aclrtMemcpy(va, g, in, sizeof in, ACL_MEMCPY_HOST_TO_DEVICE));
    memset(out, 0, sizeof out);
    CHECK(aclrtMemcpy(out, sizeof out, va, sizeof out, ACL_MEMCPY_DEVICE_TO_HOST));
    REQUIRE(memcmp(in, out, sizeof in) == 0, "the mapping did not keep what was copied in");
    CHECK(aclrtUnmapMem(va));
    CHECK(aclrtUnmapMem((char *)va + g));

    EXPECT_RC(aclrtMemMapSetLink(NULL, ACL_RT_MEM_ACCESS_LINK_SIO), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemMapSetLink(a, (aclrtMemLinkType)4), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("adviceLink 4", NULL);
    CHECK(aclrtMemMapSetLink(a, ACL_RT_MEM_ACCESS_LINK_SIO));
    CHECK(aclrtMemMapSetLink(a, ACL_RT_MEM_ACCESS_LINK_HCCS));
    CHECK(aclrtMemMapSetLink(a, ACL_RT_MEM_ACCESS_UB_ONE_PORT_PATH));
    CHECK(aclrtMemMapSetLink(b, ACL_RT_MEM_ACCESS_UB_MULTI_PORT_PATH));
    CHECK(aclrtFreePhysical(a));
    CHECK(aclrtFreePhysical(b));
    EXPECT_RC(aclrtMemMapSetLink(a, ACL_RT_MEM_ACCESS_LINK_HCCS), ACL_ERROR_RT_INVALID_HANDLE);
    CHECK(aclrtReleaseMemAddress(va));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("vmm_map_options: ok\n");
    return 0;
}
