/* device_query.c — what a program asks about the simulated devices, as CANN answers it
 * (hicann/runtime src/acl/aclrt_impl/device.cpp, context.cpp, memory.cpp for the NULL checks;
 * src/runtime/api/api_c_device.cc, impl/api_error.cc, impl/api_impl.cc, core/src/runtime.cc
 * for the rest), on a machine of 4 devices:
 * - aclrtDeviceGetStreamPriorityRange: least 7, greatest 0, either pointer may be NULL;
 * - the six device id mappings: the identity over devices 0..3 (the simulator has no
 *   ASCEND_RT_VISIBLE_DEVICES renumbering), 107000 for a negative id, 107001 past the last;
 * - aclrtGetPrimaryCtxState: active while an aclrtSetDevice is not reset; flags must be NULL;
 * - aclrtQueryDeviceStatus: NORMAL; aclrtDeviceGetUuid: distinct per device (printed, so the
 *   test compares two runs in one namespace and a run in another);
 * - aclrtDevicePeerAccessStatus: follows aclrtDeviceEnablePeerAccess / Disable, one way;
 * - aclrtGetDeviceSatMode / aclrtSetDeviceSatMode: INFNAN from the start on Ascend910B,
 *   SATURATION on Ascend310P (argv[1] names the chip), 107000 for an unknown mode;
 * - the system parameters (context.cpp, api_c.cc): the process's 0 until set; a context's
 *   107021 until set in it, its own per context, a context set setting the process's too;
 *   100000 for an unknown option, 107000 for a value out of its range.
 * Exit 0 and "device_query: ok". */
#include "common.h"

/* ACL_OPT_STRONG_CONSISTENCY is deprecated in CANN's header, as in ours; it is still checked here. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

static void priority_range(void) {
    int32_t least = -1, greatest = -1;
    CHECK(aclrtDeviceGetStreamPriorityRange(&least, &greatest));
    REQUIRE(least == 7 && greatest == 0, "range [%d, %d]", least, greatest);
    least = -1;
    CHECK(aclrtDeviceGetStreamPriorityRange(&least, NULL));
    REQUIRE(least == 7, "least %d", least);
    CHECK(aclrtDeviceGetStreamPriorityRange(NULL, NULL));
}

typedef aclError (*map_fn)(const int32_t, int32_t *const);

static void id_mappings(void) {
    static const struct {
        const char *name;
        map_fn f;
    } maps[] = {
        {"aclrtGetLogicDevIdByPhyDevId", aclrtGetLogicDevIdByPhyDevId},
        {"aclrtGetPhyDevIdByLogicDevId", aclrtGetPhyDevIdByLogicDevId},
        {"aclrtGetLogicDevIdByUserDevId", aclrtGetLogicDevIdByUserDevId},
        {"aclrtGetUserDevIdByLogicDevId", aclrtGetUserDevIdByLogicDevId},
        {"aclrtGetPhyDevIdByUserDevId", aclrtGetPhyDevIdByUserDevId},
        {"aclrtGetUserDevIdByPhyDevId", aclrtGetUserDevIdByPhyDevId},
    };
    for (size_t m = 0; m < sizeof maps / sizeof maps[0]; m++) {
        for (int32_t d = 0; d < 4; d++) {
            int32_t out = -1;
            CHECK(maps[m].f(d, &out));
            REQUIRE(out == d, "%s(%d) = %d", maps[m].name, d, out);
        }
        int32_t out = 77;
        EXPECT_RC(maps[m].f(4, &out), ACL_ERROR_RT_INVALID_DEVICEID);
        EXPECT_RC(maps[m].f(-1, &out), ACL_ERROR_RT_PARAM_INVALID);
        expect_msg(maps[m].name, "expected 0 or more", NULL);
        EXPECT_RC(maps[m].f(0, NULL), ACL_ERROR_INVALID_PARAM);
        REQUIRE(out == 77, "%s wrote on failure", maps[m].name);
    }
}

static int32_t active_of(int32_t d) {
    int32_t active = -1;
    CHECK(aclrtGetPrimaryCtxState(d, NULL, &active));
    return active;
}

static void primary_ctx_state(void) {
    REQUIRE(active_of(2) == 0, "device 2 was never set");
    CHECK(aclrtSetDevice(2));
    REQUIRE(active_of(2) == 1, "device 2 is set");
    REQUIRE(active_of(3) == 0, "device 3 is not");
    CHECK(aclrtResetDevice(2));
    REQUIRE(active_of(2) == 0, "device 2 was reset");
    uint32_t flags = 0;
    int32_t active = 0;
    EXPECT_RC(aclrtGetPrimaryCtxState(0, &flags, &active), ACL_ERROR_INVALID_PARAM);
    expect_msg("reserved", NULL);
    EXPECT_RC(aclrtGetPrimaryCtxState(0, NULL, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtGetPrimaryCtxState(4, NULL, &active), ACL_ERROR_RT_INVALID_DEVICEID);
}

static void status_and_uuid(void) {
    aclrtDeviceStatus st = ACL_RT_DEVICE_STATUS_END;
    CHECK(aclrtQueryDeviceStatus(3, &st));
    REQUIRE(st == ACL_RT_DEVICE_STATUS_NORMAL, "status %d", (int)st);
    EXPECT_RC(aclrtQueryDeviceStatus(4, &st), ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT_RC(aclrtQueryDeviceStatus(0, NULL), ACL_ERROR_INVALID_PARAM);

    aclrtUuid u[4];
    for (int d = 0; d < 4; d++) {
        CHECK(aclrtDeviceGetUuid(d, &u[d]));
        aclrtUuid again;
        CHECK(aclrtDeviceGetUuid(d, &again));
        REQUIRE(memcmp(&u[d], &again, sizeof again) == 0, "device %d's uuid changed", d);
        for (int e = 0; e < d; e++) {
            REQUIRE(memcmp(&u[d], &u[e], sizeof u[d]) != 0, "devices %d and %d share a uuid", d, e);
        }
        printf("uuid %d ", d);
        for (int i = 0; i < 16; i++) printf("%02x", (unsigned char)u[d].bytes[i]);
        printf("\n");
    }
    EXPECT_RC(aclrtDeviceGetUuid(-1, &u[0]), ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT_RC(aclrtDeviceGetUuid(4, &u[0]), ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT_RC(aclrtDeviceGetUuid(0, NULL), ACL_ERROR_INVALID_PARAM);
}

static int32_t peer_status(int32_t d, int32_t p) {
    int32_t s = -1;
    CHECK(aclrtDevicePeerAccessStatus(d, p, &s));
    return s;
}

static void peer_access(void) {
    CHECK(aclrtSetDevice(0));
    REQUIRE(peer_status(0, 1) == 0, "not enabled yet");
    CHECK(aclrtDeviceEnablePeerAccess(1, 0));
    REQUIRE(peer_status(0, 1) == 1, "enabled");
    REQUIRE(peer_status(1, 0) == 0, "enabled one way only");
    CHECK(aclrtDeviceDisablePeerAccess(1));
    REQUIRE(peer_status(0, 1) == 0, "disabled");
    int32_t s = 0;
    EXPECT_RC(aclrtDevicePeerAccessStatus(0, 4, &s), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtDevicePeerAccessStatus(-1, 0, &s), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtDevicePeerAccessStatus(0, 1, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK(aclrtResetDevice(0));
}

static void sat_mode(const char *chip) {
    aclrtFloatOverflowMode m = ACL_RT_OVERFLOW_MODE_UNDEF;
    CHECK(aclrtGetDeviceSatMode(&m));
    aclrtFloatOverflowMode want =
        strcmp(chip, "Ascend910B") == 0 ? ACL_RT_OVERFLOW_MODE_INFNAN : ACL_RT_OVERFLOW_MODE_SATURATION;
    REQUIRE(m == want, "%s starts in mode %d, expected %d", chip, (int)m, (int)want);
    CHECK(aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_SATURATION));
    CHECK(aclrtGetDeviceSatMode(&m));
    REQUIRE(m == ACL_RT_OVERFLOW_MODE_SATURATION, "mode %d", (int)m);
    CHECK(aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_INFNAN));
    CHECK(aclrtGetDeviceSatMode(&m));
    REQUIRE(m == ACL_RT_OVERFLOW_MODE_INFNAN, "mode %d", (int)m);
    EXPECT_RC(aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_UNDEF), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtGetDeviceSatMode(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK(aclrtGetDeviceSatMode(&m));
    REQUIRE(m == ACL_RT_OVERFLOW_MODE_INFNAN, "a refused set changed the mode to %d", (int)m);
}

static void sys_params(void) {
    int64_t v = -1;
    CHECK(aclrtGetSysParamOpt(ACL_OPT_ENABLE_DEBUG_KERNEL, &v));
    REQUIRE(v == 0, "the process's value starts at 0, not %lld", (long long)v);
    CHECK(aclrtSetDevice(1));
    EXPECT_RC(aclrtCtxGetSysParamOpt(ACL_OPT_DETERMINISTIC, &v), ACL_ERROR_RT_SYSPARAMOPT_NOT_SET);
    expect_msg("aclrtCtxGetSysParamOpt", "never set", NULL);
    CHECK(aclrtCtxSetSysParamOpt(ACL_OPT_DETERMINISTIC, 3));
    CHECK(aclrtCtxGetSysParamOpt(ACL_OPT_DETERMINISTIC, &v));
    REQUIRE(v == 3, "context value %lld", (long long)v);
    CHECK(aclrtGetSysParamOpt(ACL_OPT_DETERMINISTIC, &v));
    REQUIRE(v == 3, "a context set sets the process's value too: %lld", (long long)v);
    aclrtContext other = NULL;
    CHECK(aclrtCreateContext(&other, 1));
    EXPECT_RC(aclrtCtxGetSysParamOpt(ACL_OPT_DETERMINISTIC, &v), ACL_ERROR_RT_SYSPARAMOPT_NOT_SET);
    CHECK(aclrtDestroyContext(other));
    CHECK(aclrtSetDevice(1));
    CHECK(aclrtCtxGetSysParamOpt(ACL_OPT_DETERMINISTIC, &v));
    REQUIRE(v == 3, "the primary context kept its value: %lld", (long long)v);
    CHECK(aclrtSetSysParamOpt(ACL_OPT_STRONG_CONSISTENCY, 1));
    CHECK(aclrtGetSysParamOpt(ACL_OPT_STRONG_CONSISTENCY, &v));
    REQUIRE(v == 1, "process value %lld", (long long)v);
    EXPECT_RC(aclrtSetSysParamOpt(ACL_OPT_STRONG_CONSISTENCY, 2), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtCtxSetSysParamOpt(ACL_OPT_DETERMINISTIC, 4), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtSetSysParamOpt((aclSysParamOpt)7, 0), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtCtxGetSysParamOpt((aclSysParamOpt)-1, &v), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtGetSysParamOpt(ACL_OPT_DETERMINISTIC, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK(aclrtResetDevice(1));
    CHECK(aclrtResetDevice(1));
}

int main(int argc, char **argv) {
    g_role = "device_query";
    const char *chip = argc > 1 ? argv[1] : "Ascend910B";
    CHECK(aclInit(NULL));
    priority_range();
    id_mappings();
    primary_ctx_state();
    status_and_uuid();
    if (strcmp(chip, "Ascend910B") == 0) peer_access();
    sat_mode(chip);
    sys_params();
    CHECK(aclFinalize());
    printf("device_query: ok\n");
    return 0;
}
