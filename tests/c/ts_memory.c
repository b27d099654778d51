/* ts_memory.c — aclrtMallocForTaskScheduler through the C ABI, on the SoC named by argv[1]:
 * - Ascend910B: device memory as aclrtMallocWithCfg gives it (CANN's checks: devPtr NULL and
 *   size 0 → ACL_ERROR_INVALID_PARAM, another device in the configuration →
 *   ACL_ERROR_RT_PARAM_INVALID), counted in aclrtGetMemInfo, bytes in and out, freed by
 *   aclrtFree;
 * - IPV350: ACL_ERROR_RT_FEATURE_NOT_SUPPORT, as CANN documents.
 * Exit 0 and "ts_memory <soc>: ok" when every check holds. */
#include "common.h"

int main(int argc, char **argv) {
    g_role = "ts_memory";
    const char *soc = argc > 1 ? argv[1] : "Ascend910B";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    void *d = NULL;
    EXPECT_RC(aclrtMallocForTaskScheduler(NULL, 64, ACL_MEM_MALLOC_HUGE_FIRST, NULL), ACL_ERROR_INVALID_PARAM);
    if (strcmp(soc, "IPV350") == 0) {
        EXPECT_RC(aclrtMallocForTaskScheduler(&d, 64, ACL_MEM_MALLOC_HUGE_FIRST, NULL),
                  ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    } else {
        EXPECT_RC(aclrtMallocForTaskScheduler(&d, 0, ACL_MEM_MALLOC_HUGE_FIRST, NULL), ACL_ERROR_INVALID_PARAM);
        aclrtMallocAttribute attr;
        memset(&attr, 0, sizeof attr);
        attr.attr = ACL_RT_MEM_ATTR_DEVICE_ID;
        attr.value.deviceId = 1;
        aclrtMallocConfig cfg = {&attr, 1};
        EXPECT_RC(aclrtMallocForTaskScheduler(&d, 64, ACL_MEM_MALLOC_HUGE_FIRST, &cfg), ACL_ERROR_RT_PARAM_INVALID);
        size_t f0 = 0, f1 = 0, t = 0;
        CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &f0, &t));
        attr.value.deviceId = 0;
        CHECK(aclrtMallocForTaskScheduler(&d, 1 << 20, ACL_MEM_MALLOC_HUGE_FIRST, &cfg));
        CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &f1, &t));
        REQUIRE(f0 - f1 >= (1u << 20), "free memory %zu -> %zu", f0, f1);
        unsigned char in[256], out[256];
        for (int i = 0; i < 256; i++) in[i] = (unsigned char)(255 - i);
        CHECK(aclrtMemcpy((char *)d + 1000, 256, in, 256, ACL_MEMCPY_HOST_TO_DEVICE));
        CHECK(aclrtMemcpy(out, 256, (char *)d + 1000, 256, ACL_MEMCPY_DEVICE_TO_HOST));
        REQUIRE(memcmp(in, out, 256) == 0, "bytes differ");
        CHECK(aclrtFree(d));
        CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &f1, &t));
        REQUIRE(f1 == f0, "free memory %zu after aclrtFree, %zu before", f1, f0);
    }
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("ts_memory %s: ok\n", soc);
    return 0;
}
