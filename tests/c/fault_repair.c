/* fault_repair.c — aclrtGetMemUceInfo and aclrtRepairError on simulated devices, which have no
 * faults, after hicann/runtime event.cpp, api_error.cc and api_impl.cc (GetMemUceInfo,
 * RepairError).
 *
 * Checked: the NULL checks (100000); on a SoC with fast recovery (the argument, e.g.
 * Ascend910B): an empty UCE list (retSize 0, the array untouched), 107001 for a device that
 * does not exist, 107002 without a current context on the device; aclrtGetErrorVerbose's answer
 * (no error) repaired with success; tryRepair 0 107000; an unknown error type 107000; a memory
 * error 207000 (nothing to repair, the driver's answer not public). Without fast recovery (e.g.
 * Ascend310P) aclrtGetMemUceInfo is 207000.
 *
 * usage: fault_repair SOC. Exit 0 and "fault_repair: ok". */
#include "common.h"

int main(int argc, char **argv) {
    g_role = "fault_repair";
    REQUIRE(argc == 2, "usage: fault_repair SOC");
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtMemUceInfo uce[4];
    memset(uce, 0x5A, sizeof(uce));
    size_t n = 99;
    EXPECT_RC(aclrtGetMemUceInfo(0, NULL, 4, &n), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtGetMemUceInfo(0, uce, 4, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtRepairError(0, NULL), ACL_ERROR_INVALID_PARAM);
    if (strcmp(argv[1], "Ascend910B") != 0) {
        EXPECT_RC(aclrtGetMemUceInfo(0, uce, 4, &n), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    } else {
        CHECK(aclrtGetMemUceInfo(0, uce, 4, &n));
        REQUIRE(n == 0, "%zu UCE ranges on a simulated device", n);
        const unsigned char *b = (const unsigned char *)uce;
        for (size_t i = 0; i < sizeof(uce); i++) REQUIRE(b[i] == 0x5A, "the array was written");
        EXPECT_RC(aclrtGetMemUceInfo(99, uce, 4, &n), ACL_ERROR_RT_INVALID_DEVICEID);
        EXPECT_RC(aclrtGetMemUceInfo(1, uce, 4, &n), ACL_ERROR_RT_CONTEXT_NULL);
    }

    aclrtErrorInfo info;
    memset(&info, 0x77, sizeof(info));
    CHECK(aclrtGetErrorVerbose(0, &info));
    REQUIRE(info.errorType == ACL_RT_NO_ERROR && info.tryRepair == 0, "a fault on a sim device");
    EXPECT_RC(aclrtRepairError(0, &info), ACL_ERROR_RT_PARAM_INVALID); /* tryRepair 0 */
    info.tryRepair = 1;
    CHECK(aclrtRepairError(0, &info));
    EXPECT_RC(aclrtRepairError(99, &info), ACL_ERROR_RT_INVALID_DEVICEID);
    info.errorType = ACL_RT_ERROR_AICORE;
    EXPECT_RC(aclrtRepairError(0, &info), ACL_ERROR_RT_PARAM_INVALID);
    info.errorType = ACL_RT_ERROR_MEMORY;
    EXPECT_RC(aclrtRepairError(0, &info), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    expect_msg("aclrtRepairError", "not public", NULL);

    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("fault_repair: ok (%s)\n", argv[1]);
    return 0;
}
