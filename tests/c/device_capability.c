/* device_capability.c — aclrtGetDeviceCapability, after hicann/runtime
 * src/acl/aclrt_impl/device.cpp, src/runtime/api/api_c_device.cc (rtsDeviceGetCapability) and
 * api_error.cc / api_impl.cc (GetDeviceCapability).
 *
 * Checked: NULL value 100000 (before the feature); both ACL features answer 0 on each device
 * (no kernel task update, no memory-queue events in the simulator), written over a sentinel; a
 * feature outside CANN's list (0, 2, -1, 20002) is 107000 and writes nothing; the runtime-only
 * features 10001 and 20001 are 207000; a device the machine lacks is 107001.
 *
 * usage: device_capability SOC. Exit 0 and "device_capability: ok". */
#include "common.h"

int main(int argc, char **argv) {
    g_role = "device_capability";
    REQUIRE(argc == 2, "usage: device_capability SOC");
    (void)argv;
    CHECK(aclInit(NULL));
    EXPECT_RC(aclrtGetDeviceCapability(0, (aclrtDevFeatureType)2, NULL), ACL_ERROR_INVALID_PARAM);
    expect_msg("aclrtGetDeviceCapability", "value", NULL);
    uint32_t count = 0;
    CHECK(aclrtGetDeviceCount(&count));
    for (int32_t d = 0; d < (int32_t)count; d++) {
        int32_t v = 77;
        CHECK(aclrtGetDeviceCapability(d, ACL_FEATURE_TSCPU_TASK_UPDATE_SUPPORT_AIC_AIV, &v));
        REQUIRE(v == 0, "device %d task update: %d", d, v);
        v = 77;
        CHECK(aclrtGetDeviceCapability(d, ACL_FEATURE_SYSTEM_MEMQ_EVENT_CROSS_DEV, &v));
        REQUIRE(v == 0, "device %d memq events: %d", d, v);
    }
    const int bad[] = {0, 2, -1, 20002};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int32_t v = 77;
        EXPECT_RC(aclrtGetDeviceCapability(0, (aclrtDevFeatureType)bad[i], &v),
                  ACL_ERROR_RT_PARAM_INVALID);
        REQUIRE(v == 77, "a refused feature %d wrote %d", bad[i], v);
    }
    expect_msg("devFeatureType", NULL);
    int32_t v = 0;
    EXPECT_RC(aclrtGetDeviceCapability(0, (aclrtDevFeatureType)10001, &v),
              ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    EXPECT_RC(aclrtGetDeviceCapability(0, (aclrtDevFeatureType)20001, &v),
              ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    EXPECT_RC(aclrtGetDeviceCapability((int32_t)count, ACL_FEATURE_SYSTEM_MEMQ_EVENT_CROSS_DEV, &v),
              ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT_RC(aclrtGetDeviceCapability(-1, ACL_FEATURE_SYSTEM_MEMQ_EVENT_CROSS_DEV, &v),
              ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK(aclFinalize());
    printf("device_capability: ok\n");
    return 0;
}
