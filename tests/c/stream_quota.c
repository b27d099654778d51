/* stream_quota.c — aclrtGetStreamAvailableNum and the stream accounting aclrtCreateStream
 * refuses by, after hicann/runtime src/acl/aclrt_impl/stream.cpp,
 * src/runtime/api/api_c_stream.cc (rtsStreamGetAvailableNum), api_impl.cc (GetFreeStreamNum)
 * and the chips' maxAllocStreamNum (src/runtime/config/<chip>/dev_info_reg.cc):
 *
 * - the count starts at the chip's streams per device (Ascend310B 480, Ascend910B 32768) and
 *   falls by one per created stream, on that device only;
 * - on Ascend310B, creating until none is left: exactly 480 succeed, the next is 207008 with a
 *   message and creates nothing, the count reads 0; a destroy gives one back; a device reset
 *   gives back all;
 * - NULL streamCount 100000; IPV350 207000.
 *
 * usage: stream_quota SOC. Exit 0 and "stream_quota: ok". */
#include "common.h"

static uint32_t avail(void) {
    uint32_t n = 0xdeadbeef;
    CHECK(aclrtGetStreamAvailableNum(&n));
    return n;
}

int main(int argc, char **argv) {
    g_role = "stream_quota";
    REQUIRE(argc == 2, "usage: stream_quota SOC");
    const char *soc = argv[1];
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    EXPECT_RC(aclrtGetStreamAvailableNum(NULL), ACL_ERROR_INVALID_PARAM);
    expect_msg("streamCount", NULL);
    if (strcmp(soc, "IPV350") == 0) {
        uint32_t n = 77;
        EXPECT_RC(aclrtGetStreamAvailableNum(&n), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        REQUIRE(n == 77, "a refused query wrote %u", n);
        CHECK(aclFinalize());
        printf("stream_quota: ok\n");
        return 0;
    }
    const uint32_t max = strcmp(soc, "Ascend310B") == 0 ? 480 : 32768;
    REQUIRE(avail() == max, "a fresh device: %u available, expected %u", avail(), max);

    aclrtStream s[3];
    for (int i = 0; i < 3; i++) {
        CHECK(aclrtCreateStream(&s[i]));
        REQUIRE(avail() == max - 1 - (uint32_t)i, "after %d streams: %u", i + 1, avail());
    }
    /* Another device's count is its own. */
    CHECK(aclrtSetDevice(1));
    REQUIRE(avail() == max, "device 1: %u", avail());
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtDestroyStream(s[1]));
    REQUIRE(avail() == max - 2, "after a destroy: %u", avail());
    CHECK(aclrtDestroyStream(s[0]));
    CHECK(aclrtDestroyStream(s[2]));
    REQUIRE(avail() == max, "all destroyed: %u", avail());

    if (max <= 1024) {
        aclrtStream *all = calloc(max, sizeof *all);
        REQUIRE(all != NULL, "calloc");
        for (uint32_t i = 0; i < max; i++) {
            CHECK(aclrtCreateStream(&all[i]));
        }
        REQUIRE(avail() == 0, "%u streams made: %u available", max, avail());
        aclrtStream extra = NULL;
        EXPECT_RC(aclrtCreateStream(&extra), ACL_ERROR_RT_NO_STREAM_RESOURCE);
        expect_msg("aclrtCreateStream", "no stream left", NULL);
        REQUIRE(extra == NULL, "a refused create wrote a stream");
        REQUIRE(avail() == 0, "after a refusal: %u", avail());
        CHECK(aclrtDestroyStream(all[7]));
        REQUIRE(avail() == 1, "one destroyed: %u", avail());
        CHECK(aclrtCreateStream(&all[7]));
        REQUIRE(avail() == 0, "made again: %u", avail());
        /* A reset releases the device's streams: all come back. */
        CHECK(aclrtResetDeviceForce(0));
        CHECK(aclrtSetDevice(0));
        REQUIRE(avail() == max, "after a reset: %u", avail());
        free(all);
    }
    CHECK(aclrtResetDeviceForce(0));
    CHECK(aclFinalize());
    printf("stream_quota: ok\n");
    return 0;
}
