/* overflow_status.c — the device's overflow status: aclrtGetOverflowStatus /
 * aclrtResetOverflowStatus, aclrtGetFloatOverflowStatus / aclrtResetFloatOverflowStatus,
 * aclrtNpuGetFloatOverFlowStatus / aclrtNpuClearFloatOverFlowStatus and
 * aclrtCtxGetFloatOverflowAddr, after hicann/runtime device.cpp, kernel.cpp, context.cpp,
 * api_error.cc and api_impl.cc (GetDeviceSatStatus, CleanDeviceSatStatus).
 *
 * Checked: the argument codes (a NULL output 100000 for aclrtGetOverflowStatus, 107000 for the
 * others; a size other than 64 107000; a NULL address pointer 107000); the status reads 0 until
 * a float aclrtReduceAsync overflows (3e38 + 3e38), then its first word is 1 through each query
 * and at aclrtCtxGetFloatOverflowAddr's address; each reset clears it; an integer reduce that
 * wraps does not set it.
 *
 * usage: overflow_status SOC. Exit 0 and "overflow_status: ok". */
#include "common.h"

static aclrtStream g_s;
static void *g_out, *g_dst, *g_src;

/* The first word of the status through `which` query (0: aclrtGetOverflowStatus, 1: Float, 2:
 * Npu), the other 60 bytes checked to be 0. */
static uint32_t status(int which) {
    CHECK(aclrtMemset(g_out, 64, 0xAB, 64));
    if (which == 0) CHECK(aclrtGetOverflowStatus(g_out, 64, g_s));
    if (which == 1) CHECK(aclrtGetFloatOverflowStatus(g_out, 64, g_s));
    if (which == 2) CHECK(aclrtNpuGetFloatOverFlowStatus(g_out, 64, 0, g_s));
    CHECK(aclrtSynchronizeStream(g_s));
    uint8_t host[64];
    CHECK(aclrtMemcpy(host, 64, g_out, 64, ACL_MEMCPY_DEVICE_TO_HOST));
    for (int i = 4; i < 64; i++) REQUIRE(host[i] == 0, "status byte %d is %u", i, host[i]);
    uint32_t w;
    memcpy(&w, host, 4);
    return w;
}

static void reduce_f32(float a, float b) {
    CHECK(aclrtMemcpy(g_dst, 4, &a, 4, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtMemcpy(g_src, 4, &b, 4, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtReduceAsync(g_dst, g_src, 4, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT, g_s,
                           NULL));
    CHECK(aclrtSynchronizeStream(g_s));
}

int main(int argc, char **argv) {
    g_role = "overflow_status";
    REQUIRE(argc == 2, "usage: overflow_status SOC");
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtCreateStream(&g_s));
    CHECK(aclrtMalloc(&g_out, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&g_dst, 4, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&g_src, 4, ACL_MEM_MALLOC_HUGE_FIRST));

    EXPECT_RC(aclrtGetOverflowStatus(NULL, 64, g_s), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtGetFloatOverflowStatus(NULL, 64, g_s), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtNpuGetFloatOverFlowStatus(NULL, 64, 0, g_s), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtGetOverflowStatus(g_out, 32, g_s), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtGetFloatOverflowStatus(g_out, 128, g_s), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("outputSize 128", NULL);
    EXPECT_RC(aclrtCtxGetFloatOverflowAddr(NULL), ACL_ERROR_RT_PARAM_INVALID);
    uint8_t on_host[64];
    REQUIRE(aclrtGetOverflowStatus(on_host, 64, g_s) != ACL_SUCCESS,
            "host memory taken as the status's destination");

    REQUIRE(status(0) == 0 && status(1) == 0 && status(2) == 0, "a status before any overflow");
    reduce_f32(1.0f, 2.0f);
    int32_t imax = INT32_MAX, one = 1;
    CHECK(aclrtMemcpy(g_dst, 4, &imax, 4, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtMemcpy(g_src, 4, &one, 4, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtReduceAsync(g_dst, g_src, 4, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_INT32, g_s,
                           NULL));
    CHECK(aclrtSynchronizeStream(g_s));
    REQUIRE(status(0) == 0, "no float overflow, yet the status is set");

    reduce_f32(3e38f, 3e38f);
    REQUIRE(status(0) == 1 && status(1) == 1 && status(2) == 1, "3e38 + 3e38 did not overflow");
    void *addr = NULL;
    CHECK(aclrtCtxGetFloatOverflowAddr(&addr));
    uint32_t w = 0;
    CHECK(aclrtMemcpy(&w, 4, addr, 4, ACL_MEMCPY_DEVICE_TO_HOST));
    REQUIRE(w == 1, "the overflow address holds %u", w);
    CHECK(aclrtResetOverflowStatus(g_s));
    REQUIRE(status(0) == 0, "aclrtResetOverflowStatus");

    reduce_f32(3e38f, 3e38f);
    CHECK(aclrtNpuClearFloatOverFlowStatus(0, g_s));
    REQUIRE(status(2) == 0, "aclrtNpuClearFloatOverFlowStatus");
    reduce_f32(-3e38f, -3e38f);
    REQUIRE(status(1) == 1, "-3e38 + -3e38 did not overflow");
    CHECK(aclrtResetFloatOverflowStatus(NULL)); /* the default stream */
    CHECK(aclrtSynchronizeDevice());
    REQUIRE(status(1) == 0, "aclrtResetFloatOverflowStatus on the default stream");

    CHECK(aclrtFree(g_out));
    CHECK(aclrtFree(g_dst));
    CHECK(aclrtFree(g_src));
    CHECK(aclrtDestroyStream(g_s));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("overflow_status: ok (%s)\n", argv[1]);
    return 0;
}
