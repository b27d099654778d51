/* ts_device.c — aclrtSetTsDevice, after hicann/runtime src/acl/aclrt_impl/device.cpp
 * (aclrtSetTsDeviceImpl) and src/runtime/api/api_c_device.cc (rtSetTSDevice): an id other
 * than ACL_TS_ID_AICORE / ACL_TS_ID_AIVECTOR is 100000 with a message naming it; either id
 * succeeds, before aclInit and in a session, and the device still runs a stream's tasks.
 *
 * usage: ts_device SOC. Exit 0 and "ts_device: ok". */
#include "common.h"

int main(int argc, char **argv) {
    g_role = "ts_device";
    REQUIRE(argc == 2, "usage: ts_device SOC");
    CHECK(aclrtSetTsDevice(ACL_TS_ID_AICORE));
    EXPECT_RC(aclrtSetTsDevice(ACL_TS_ID_RESERVED), ACL_ERROR_INVALID_PARAM);
    expect_msg("tsId 2", NULL);
    EXPECT_RC(aclrtSetTsDevice((aclrtTsId)-1), ACL_ERROR_INVALID_PARAM);
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtSetTsDevice(ACL_TS_ID_AIVECTOR));
    CHECK(aclrtSetTsDevice(ACL_TS_ID_AICORE));
    aclrtStream s = NULL;
    aclrtNotify n = NULL;
    CHECK(aclrtCreateStream(&s));
    CHECK(aclrtCreateNotify(&n, ACL_NOTIFY_DEFAULT));
    CHECK(aclrtRecordNotify(n, s));
    CHECK(aclrtWaitAndResetNotify(n, s, 5));
    CHECK(aclrtSynchronizeStream(s));
    CHECK(aclrtDestroyNotify(n));
    CHECK(aclrtDestroyStream(s));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("ts_device: ok (%s)\n", argv[1]);
    return 0;
}
