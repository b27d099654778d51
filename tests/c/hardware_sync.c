/* hardware_sync.c — aclrtGetHardwareSyncAddr through the C ABI, with CANN's checks in its
 * order (hicann/runtime src/runtime/api/api_c_kernel.cc rtsGetHardwareSyncAddr; api_impl.cc
 * ApiImpl::GetC2cCtrlAddr; config/910_B_93/dev_info_reg.cc).
 *
 * Checked: NULL addr 107000 (before the chip); on Ascend910B and Ascend910_93 an address that
 * is the same at every call on a device, another device's its own, zeroed device memory that
 * copies write and read back; on any other chip 207000 naming it, the output left alone.
 *
 * usage: hardware_sync SOC. Exit 0 and "hardware_sync: ok". */
#include "common.h"

int main(int argc, char **argv) {
    g_role = "hardware_sync";
    REQUIRE(argc == 2, "usage: hardware_sync SOC");
    const char *soc = argv[1];
    int has = !strcmp(soc, "Ascend910B") || !strcmp(soc, "Ascend910_93");
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    EXPECT_RC(aclrtGetHardwareSyncAddr(NULL), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("addr", NULL);
    void *a = (void *)0x5a5a;
    if (!has) {
        EXPECT_RC(aclrtGetHardwareSyncAddr(&a), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        expect_msg(soc, "inter-core synchronization", NULL);
        REQUIRE(a == (void *)0x5a5a, "the output was written: %p", a);
    } else {
        CHECK(aclrtGetHardwareSyncAddr(&a));
        REQUIRE(a != NULL && a != (void *)0x5a5a, "address %p", a);
        void *again = NULL;
        CHECK(aclrtGetHardwareSyncAddr(&again));
        REQUIRE(again == a, "a second call answered %p, the first %p", again, a);
        /* Zeroed device memory that copies write and read back. */
        unsigned char got[64], put[64];
        memset(got, 0xee, sizeof got);
        CHECK(aclrtMemcpy(got, sizeof got, a, sizeof got, ACL_MEMCPY_DEVICE_TO_HOST));
        for (size_t i = 0; i < sizeof got; i++) REQUIRE(got[i] == 0, "byte %zu is %d", i, got[i]);
        for (size_t i = 0; i < sizeof put; i++) put[i] = (unsigned char)(i * 7 + 1);
        CHECK(aclrtMemcpy(a, sizeof put, put, sizeof put, ACL_MEMCPY_HOST_TO_DEVICE));
        CHECK(aclrtMemcpy(got, sizeof got, a, sizeof got, ACL_MEMCPY_DEVICE_TO_HOST));
        REQUIRE(memcmp(got, put, sizeof put) == 0, "the copy did not read back");
        /* Another device has its own. */
        CHECK(aclrtSetDevice(1));
        void *b = NULL;
        CHECK(aclrtGetHardwareSyncAddr(&b));
        REQUIRE(b != NULL && b != a, "device 1's address %p, device 0's %p", b, a);
        CHECK(aclrtResetDevice(1));
    }
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("hardware_sync: ok\n");
    return 0;
}
