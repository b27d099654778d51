/* op_timeout.c — aclrtSetOpExecuteTimeOut / WithMs / V2, aclrtGetOpExecuteTimeout and
 * aclrtGetOpTimeOutInterval, after hicann/runtime src/acl/aclrt_impl/event.cpp, device.cpp,
 * src/runtime/api/impl/api_impl.cc, runtime.cc and kernel_utils.cc, on the simulated
 * scheduler's kernel credit of 2^32 ns (Ascend910B's STARS; 254 credits at most).
 *
 * Checked: the default (254 credits, 1,090,922 ms); a value in seconds, in ms (capped at
 * 1,000,000 ms) and in µs each read back rounded up to whole credits, in ms; V2 answers the
 * µs the hardware uses (1 µs -> one credit, 4,294,967 µs; 0 -> 254 credits); the interval
 * 4,294,967 µs; NULL out-parameters 100000; V2 and the interval need a current device (107002
 * before aclrtSetDevice, no default device being configured).
 *
 * usage: op_timeout SOC. Exit 0 and "op_timeout: ok". */
#include "common.h"

#include <math.h>

/* Milliseconds the hardware uses for a timeout of `us` microseconds (CANN's rounding). */
static uint32_t want_ms(uint64_t us) {
    const double credit_us = 4294967.296;
    double credits = (us == 0 || (double)us > credit_us * 254) ? 254 : ceil((double)us / credit_us);
    return (uint32_t)ceil(credits * credit_us / 1000.0);
}

static uint32_t get_ms(void) {
    uint32_t ms = 0;
    CHECK(aclrtGetOpExecuteTimeout(&ms));
    return ms;
}

int main(int argc, char **argv) {
    g_role = "op_timeout";
    REQUIRE(argc == 2, "usage: op_timeout SOC");
    (void)argv;
    CHECK(aclInit(NULL));
    uint64_t actual = 0, interval = 0;
    EXPECT_RC(aclrtSetOpExecuteTimeOutV2(5, &actual), ACL_ERROR_RT_CONTEXT_NULL);
    EXPECT_RC(aclrtGetOpTimeOutInterval(&interval), ACL_ERROR_RT_CONTEXT_NULL);
    EXPECT_RC(aclrtGetOpExecuteTimeout(NULL), ACL_ERROR_INVALID_PARAM);
    expect_msg("aclrtGetOpExecuteTimeout", "timeoutMs", NULL);
    REQUIRE(get_ms() == 1090922, "default %u ms", get_ms());
    CHECK(aclrtSetDevice(0));
    EXPECT_RC(aclrtSetOpExecuteTimeOutV2(5, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtGetOpTimeOutInterval(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK(aclrtGetOpTimeOutInterval(&interval));
    REQUIRE(interval == 4294967u, "interval %llu us", (unsigned long long)interval);

    CHECK(aclrtSetOpExecuteTimeOut(10));
    REQUIRE(get_ms() == want_ms(10000000u) && get_ms() == 12885, "10 s read back as %u ms",
            get_ms());
    CHECK(aclrtSetOpExecuteTimeOutWithMs(2500));
    REQUIRE(get_ms() == 4295, "2500 ms read back as %u ms", get_ms());
    CHECK(aclrtSetOpExecuteTimeOutWithMs(2000000));
    REQUIRE(get_ms() == want_ms(1000000000u), "2,000,000 ms (capped) read back as %u ms",
            get_ms());
    CHECK(aclrtSetOpExecuteTimeOutV2(1, &actual));
    REQUIRE(actual == 4294967u, "V2(1 us) actual %llu", (unsigned long long)actual);
    REQUIRE(get_ms() == 4295, "1 us read back as %u ms", get_ms());
    CHECK(aclrtSetOpExecuteTimeOutV2(0, &actual));
    REQUIRE(actual == 1090921693u, "V2(0) actual %llu", (unsigned long long)actual);
    REQUIRE(get_ms() == 1090922, "0 read back as %u ms", get_ms());
    CHECK(aclrtSetOpExecuteTimeOutV2(3u * 4294967u, &actual));
    REQUIRE(actual == 12884901u, "V2(3 credits) actual %llu", (unsigned long long)actual);
    CHECK(aclrtSetOpExecuteTimeOut(0));
    REQUIRE(get_ms() == 1090922, "0 s read back as %u ms", get_ms());
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("op_timeout: ok\n");
    return 0;
}
