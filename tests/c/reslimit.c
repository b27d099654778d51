/* reslimit.c — the chip's cores through aclrtGetDeviceInfo and the core resource limits
 * (aclrtSetDeviceResLimit, aclrtSetStreamResLimit, aclrtUseStreamResInCurrentThread,
 * aclrtGetResInCurrentThread and their neighbours), as CANN's runtime answers them
 * (hicann/runtime src/runtime/api/impl/api_impl.cc and api_error.cc): a device starts at its
 * chip's AI Core and Vector Core counts (src/platform/platform_config/<chip>.ini), a stream's
 * limit wins over the device's for a thread that uses the stream, and each limit is bounded
 * by the chip's count, not by the other limits.
 * Run once per chip: Ascend910B3 (20 Cube Cores, 40 Vector Cores, 6 AI CPUs), Ascend310P3 (8
 * AI Cores not split into Cube Cores, 7 Vector Cores, 7 AI CPUs) and IPV350 (no cores known:
 * 207000). Exit 0 and "reslimit: ok". */
#include "common.h"

#include <pthread.h>

#define CUBE ACL_RT_DEV_RES_CUBE_CORE
#define VEC ACL_RT_DEV_RES_VECTOR_CORE

static uint32_t res_in_thread(aclrtDevResLimitType type) {
    uint32_t v = 0;
    CHECK(aclrtGetResInCurrentThread(type, &v));
    return v;
}

/* Another thread, on device 0 with no stream of its own in use, sees the device's limit. */
static void *other_thread(void *arg) {
    uint32_t *out = arg;
    CHECK(aclrtSetDevice(0));
    out[0] = res_in_thread(CUBE);
    out[1] = res_in_thread(VEC);
    return NULL;
}

static void limits(uint32_t cube, uint32_t vec) {
    uint32_t v = 0;
    /* Before aclrtSetDevice: the device is not set up (507033), the thread has no device. */
    EXPECT_RC(aclrtGetDeviceResLimit(0, CUBE, &v), ACL_ERROR_RT_DEV_SETUP_ERROR);
    EXPECT_RC(aclrtSetDeviceResLimit(0, CUBE, 1), ACL_ERROR_RT_DEV_SETUP_ERROR);
    EXPECT_RC(aclrtResetDeviceResLimit(0), ACL_ERROR_RT_DEV_SETUP_ERROR);
    EXPECT_RC(aclrtGetResInCurrentThread(CUBE, &v), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK(aclrtSetDevice(0));

    /* Argument checks: NULL output first (the ACL layer), then the device, then the type. */
    EXPECT_RC(aclrtGetDeviceResLimit(-1, (aclrtDevResLimitType)7, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtGetResInCurrentThread((aclrtDevResLimitType)7, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtGetDeviceResLimit(-1, (aclrtDevResLimitType)7, &v), ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT_RC(aclrtGetDeviceResLimit(0, (aclrtDevResLimitType)2, &v), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtGetDeviceResLimit(0, (aclrtDevResLimitType)-1, &v), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtGetDeviceResLimit(99, CUBE, &v), ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT_RC(aclrtGetResInCurrentThread((aclrtDevResLimitType)2, &v), ACL_ERROR_RT_PARAM_INVALID);
    /* Device 1 exists but is not set up. */
    EXPECT_RC(aclrtGetDeviceResLimit(1, CUBE, &v), ACL_ERROR_RT_DEV_SETUP_ERROR);

    /* The chip's counts, until a limit is set. */
    CHECK(aclrtGetDeviceResLimit(0, CUBE, &v));
    REQUIRE(v == cube, "device Cube Core limit %u, want %u", v, cube);
    CHECK(aclrtGetDeviceResLimit(0, VEC, &v));
    REQUIRE(v == vec, "device Vector Core limit %u, want %u", v, vec);
    REQUIRE(res_in_thread(CUBE) == cube && res_in_thread(VEC) == vec, "thread's cores");

    /* A device limit: at most the chip's count. */
    EXPECT_RC(aclrtSetDeviceResLimit(0, CUBE, cube + 1), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtSetDeviceResLimit(0, (aclrtDevResLimitType)2, 1), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtSetDeviceResLimit(-3, CUBE, 1), ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK(aclrtSetDeviceResLimit(0, CUBE, cube / 2));
    CHECK(aclrtGetDeviceResLimit(0, CUBE, &v));
    REQUIRE(v == cube / 2, "device Cube Core limit %u after setting %u", v, cube / 2);
    CHECK(aclrtGetDeviceResLimit(0, VEC, &v));
    REQUIRE(v == vec, "the Vector Core limit moved with the Cube Core one: %u", v);
    REQUIRE(res_in_thread(CUBE) == cube / 2, "thread sees the device limit");

    /* A stream limit: its own, bounded by the chip's count, not by the device's limit. */
    aclrtStream s = NULL;
    CHECK(aclrtCreateStream(&s));
    CHECK(aclrtGetStreamResLimit(s, CUBE, &v));
    REQUIRE(v == cube / 2, "a stream without a limit answers its device's: %u", v);
    EXPECT_RC(aclrtGetStreamResLimit(s, CUBE, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtSetStreamResLimit(s, VEC, vec + 1), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtSetStreamResLimit(s, (aclrtDevResLimitType)2, 1), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclrtSetStreamResLimit(s, CUBE, cube));
    CHECK(aclrtGetStreamResLimit(s, CUBE, &v));
    REQUIRE(v == cube, "stream Cube Core limit %u, want %u (above the device's)", v, cube);
    CHECK(aclrtGetStreamResLimit(s, VEC, &v));
    REQUIRE(v == vec, "stream Vector Core limit %u: the device's", v);
    /* Only once the thread uses the stream does it see the stream's limit, and only of the
     * type the stream limits. */
    REQUIRE(res_in_thread(CUBE) == cube / 2, "thread before using the stream");
    CHECK(aclrtUseStreamResInCurrentThread(s));
    REQUIRE(res_in_thread(CUBE) == cube, "thread using the stream");
    REQUIRE(res_in_thread(VEC) == vec, "thread using the stream, Vector Cores");
    uint32_t seen[2] = {0, 0};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, other_thread, seen) == 0, "pthread_create");
    pthread_join(t, NULL);
    REQUIRE(seen[0] == cube / 2 && seen[1] == vec, "other thread sees %u/%u", seen[0], seen[1]);
    /* The default stream (NULL): a stream of its own; unusing another stream changes nothing. */
    CHECK(aclrtSetStreamResLimit(NULL, CUBE, 1));
    CHECK(aclrtGetStreamResLimit(NULL, CUBE, &v));
    REQUIRE(v == 1, "default stream limit %u", v);
    CHECK(aclrtUnuseStreamResInCurrentThread(NULL));
    REQUIRE(res_in_thread(CUBE) == cube, "unusing another stream kept this one");
    CHECK(aclrtUnuseStreamResInCurrentThread(s));
    REQUIRE(res_in_thread(CUBE) == cube / 2, "unused: the device's again");
    CHECK(aclrtUseStreamResInCurrentThread(NULL));
    REQUIRE(res_in_thread(CUBE) == 1, "using the default stream");
    CHECK(aclrtResetStreamResLimit(NULL));
    REQUIRE(res_in_thread(CUBE) == cube / 2, "the default stream's limit reset");
    CHECK(aclrtResetStreamResLimit(s));
    CHECK(aclrtGetStreamResLimit(s, CUBE, &v));
    REQUIRE(v == cube / 2, "stream limit reset: %u", v);

    /* A destroyed stream's handle is refused. */
    CHECK(aclrtSetStreamResLimit(s, CUBE, 2));
    CHECK(aclrtUseStreamResInCurrentThread(s));
    CHECK(aclrtDestroyStream(s));
    EXPECT_RC(aclrtGetStreamResLimit(s, CUBE, &v), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT_RC(aclrtSetStreamResLimit(s, CUBE, 1), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT_RC(aclrtUseStreamResInCurrentThread(s), ACL_ERROR_RT_INVALID_HANDLE);
    REQUIRE(res_in_thread(CUBE) == cube / 2, "a destroyed stream's limit is gone");

    /* Reset: the chip's counts again; a device reset forgets the limits too. */
    CHECK(aclrtResetDeviceResLimit(0));
    CHECK(aclrtGetDeviceResLimit(0, CUBE, &v));
    REQUIRE(v == cube, "after the reset %u", v);
    CHECK(aclrtSetDeviceResLimit(0, VEC, 0));
    /* Force: the other thread's aclrtSetDevice holds the device too. */
    CHECK(aclrtResetDeviceForce(0));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtGetDeviceResLimit(0, VEC, &v));
    REQUIRE(v == vec, "a device reset kept the Vector Core limit: %u", v);
    CHECK(aclrtResetDevice(0));
}

int main(void) {
    g_role = "reslimit";
    CHECK(aclInit(NULL));
    const char *chip = aclrtGetSocName();
    REQUIRE(chip != NULL, "aclrtGetSocName");
    int64_t v = 0;
    EXPECT_RC(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_AICORE_CORE_NUM, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtGetDeviceInfo(99, ACL_DEV_ATTR_AICORE_CORE_NUM, &v),
              ACL_ERROR_RT_INVALID_DEVICEID);
    if (strcmp(chip, "IPV350") == 0) {
        EXPECT_RC(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_AICORE_CORE_NUM, &v),
                  ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        CHECK(aclrtSetDevice(0));
        uint32_t u = 0;
        EXPECT_RC(aclrtGetResInCurrentThread(ACL_RT_DEV_RES_CUBE_CORE, &u),
                  ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        EXPECT_RC(aclrtSetDeviceResLimit(0, ACL_RT_DEV_RES_CUBE_CORE, 1),
                  ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        CHECK(aclrtResetDevice(0));
    } else {
        int split = strcmp(chip, "Ascend910B3") == 0;
        REQUIRE(split || strcmp(chip, "Ascend310P3") == 0, "run on an unexpected chip %s", chip);
        const int64_t ai_core = split ? 20 : 8, vector = split ? 40 : 7, ai_cpu = split ? 6 : 7;
        CHECK(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_AICORE_CORE_NUM, &v));
        REQUIRE(v == ai_core, "%s: %lld AI Cores", chip, (long long)v);
        CHECK(aclrtGetDeviceInfo(1, ACL_DEV_ATTR_VECTOR_CORE_NUM, &v));
        REQUIRE(v == vector, "%s: %lld Vector Cores", chip, (long long)v);
        CHECK(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_AICPU_CORE_NUM, &v));
        REQUIRE(v == ai_cpu, "%s: %lld AI CPUs", chip, (long long)v);
        if (split) {
            CHECK(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_CUBE_CORE_NUM, &v));
            REQUIRE(v == ai_core, "%s: %lld Cube Cores", chip, (long long)v);
        } else {
            EXPECT_RC(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_CUBE_CORE_NUM, &v),
                      ACL_ERROR_RT_PARAM_INVALID);
        }
        EXPECT_RC(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_L2_CACHE_SIZE, &v),
                  ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        limits((uint32_t)ai_core, (uint32_t)vector);
    }
    CHECK(aclFinalize());
    printf("reslimit: ok\n");
    return 0;
}
