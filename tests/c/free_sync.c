/* free_sync.c — aclrtFreeWithDevSync / aclrtFreeHostWithDevSync, aclrtMallocHostWithCfg and
 * aclrtMemFlush / aclrtMemInvalidate through the C ABI (Ascend910B):
 * - a free with device sync lets the copies queued into and out of the memory (behind a held
 *   stream) run first: their bytes arrive, checked one by one, where a plain aclrtFree or
 *   aclrtFreeHost would have failed them; a stream whose task failed makes the free fail and
 *   free nothing (the memory is still usable and freed afterwards);
 * - aclrtMallocHostWithCfg: CANN's checks (ptr NULL, size 0 → ACL_ERROR_INVALID_PARAM; attrs
 *   NULL, an attribute other than the module id or VA flag → ACL_ERROR_RT_PARAM_INVALID),
 *   memory usable by copies and sets like aclrtMallocHost's, freed by aclrtFreeHost;
 * - aclrtMemFlush / aclrtMemInvalidate: NULL and size 0 refused, otherwise nothing to do.
 * Exit 0 and "free_sync: ok" when every check holds. */
#include "common.h"


int main(void) {
    g_role = "free_sync";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream s = NULL;
    CHECK(aclrtCreateStream(&s));
    int hold = 150;
    const size_t n = 8192;

    /* Checks first. */
    EXPECT_RC(aclrtFreeWithDevSync(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtFreeHostWithDevSync(NULL), ACL_ERROR_INVALID_PARAM);
    int local = 0;
    EXPECT_RC(aclrtFreeWithDevSync(&local), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtFreeHostWithDevSync(&local), ACL_ERROR_RT_PARAM_INVALID);

    /* aclrtMallocHostWithCfg. */
    void *h = NULL;
    aclrtMallocAttribute attrs[2];
    memset(attrs, 0, sizeof attrs);
    attrs[0].attr = ACL_RT_MEM_ATTR_MODULE_ID;
    attrs[0].value.moduleId = 7;
    attrs[1].attr = ACL_RT_MEM_ATTR_VA_FLAG;
    attrs[1].value.vaFlag = 1;
    aclrtMallocConfig cfg = {attrs, 2};
    EXPECT_RC(aclrtMallocHostWithCfg(NULL, 64, &cfg), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMallocHostWithCfg(&h, 0, &cfg), ACL_ERROR_INVALID_PARAM);
    aclrtMallocConfig no_attrs = {NULL, 0};
    EXPECT_RC(aclrtMallocHostWithCfg(&h, 64, &no_attrs), ACL_ERROR_RT_PARAM_INVALID);
    attrs[1].attr = ACL_RT_MEM_ATTR_DEVICE_ID;
    EXPECT_RC(aclrtMallocHostWithCfg(&h, 64, &cfg), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("attrs[1]", NULL);
    attrs[1].attr = ACL_RT_MEM_ATTR_VA_FLAG;
    unsigned char *pinned = NULL;
    CHECK(aclrtMallocHostWithCfg((void **)&pinned, n, &cfg));
    REQUIRE(((uintptr_t)pinned % 4096) == 0, "page aligned: %p", (void *)pinned);
    unsigned char *other = NULL;
    CHECK(aclrtMallocHostWithCfg((void **)&other, n, NULL));
    aclrtPtrAttributes at;
    CHECK(aclrtPointerGetAttributes(pinned + 10, &at));
    REQUIRE(at.location.type == ACL_MEM_LOCATION_TYPE_HOST, "host memory: %d",
            (int)at.location.type);
    CHECK(aclrtMemset(pinned, n, 0x5C, n)); /* aclrtMemset takes it, as aclrtMallocHost's */
    for (size_t i = 0; i < n; i++) REQUIRE(pinned[i] == 0x5C, "byte %zu", i);

    /* aclrtFreeWithDevSync: the queued copies into and out of the memory run first. */
    void *d = NULL;
    CHECK(aclrtMalloc(&d, n, ACL_MEM_MALLOC_HUGE_FIRST));
    for (size_t i = 0; i < n; i++) pinned[i] = (unsigned char)(i * 7 + 3);
    CHECK(aclrtLaunchHostFunc(s, hold_ms, &hold));
    CHECK(aclrtMemcpyAsync(d, n, pinned, n, ACL_MEMCPY_HOST_TO_DEVICE, s));
    CHECK(aclrtMemcpyAsync(other, n, d, n, ACL_MEMCPY_DEVICE_TO_HOST, s));
    CHECK(aclrtFreeWithDevSync(d));
    for (size_t i = 0; i < n; i++)
        REQUIRE(other[i] == (unsigned char)(i * 7 + 3), "byte %zu is %#x", i, other[i]);
    EXPECT_RC(aclrtFree(d), ACL_ERROR_RT_PARAM_INVALID); /* freed */

    /* aclrtFreeHostWithDevSync: a queued copy out of host memory runs before the free. */
    CHECK(aclrtMalloc(&d, n, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemset(d, n, 0, n));
    CHECK(aclrtLaunchHostFunc(s, hold_ms, &hold));
    CHECK(aclrtMemcpyAsync(d, n, pinned, n, ACL_MEMCPY_HOST_TO_DEVICE, s));
    CHECK(aclrtFreeHostWithDevSync(pinned));
    memset(other, 0, n);
    CHECK(aclrtMemcpy(other, n, d, n, ACL_MEMCPY_DEVICE_TO_HOST));
    for (size_t i = 0; i < n; i++)
        REQUIRE(other[i] == (unsigned char)(i * 7 + 3), "byte %zu is %#x", i, other[i]);
    EXPECT_RC(aclrtFreeHost(pinned), ACL_ERROR_RT_PARAM_INVALID); /* freed */

    /* A failed task makes the synchronize, and so the free, fail: nothing is freed. */
    void *gone = NULL;
    CHECK(aclrtMalloc(&gone, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    gate_t g = {0};
    CHECK(aclrtLaunchHostFunc(s, gate_hold, &g));
    CHECK(aclrtMemsetAsync(gone, 64, 1, 64, s));
    CHECK(aclrtFree(gone));
    gate_open(&g);
    EXPECT_RC(aclrtFreeWithDevSync(d), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("freed before the queued task ran", NULL);
    CHECK(aclrtMemset(d, n, 0x77, 16)); /* still allocated */
    CHECK(aclrtFreeWithDevSync(d));

    /* Cache maintenance: checked, nothing else to do. */
    CHECK(aclrtMalloc(&d, 256, ACL_MEM_MALLOC_HUGE_FIRST));
    EXPECT_RC(aclrtMemFlush(NULL, 16), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemFlush(d, 0), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemInvalidate(NULL, 16), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemInvalidate(d, 0), ACL_ERROR_INVALID_PARAM);
    CHECK(aclrtMemFlush(d, 256));
    CHECK(aclrtMemInvalidate(d, 256));
    CHECK(aclrtFree(d));

    CHECK(aclrtFreeHost(other));
    CHECK(aclrtDestroyStream(s));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("free_sync: ok\n");
    return 0;
}
