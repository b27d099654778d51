/* device_limits.c — aclrtDeviceSetLimit / aclrtDeviceGetLimit, aclrtDeviceGetPCIBusId /
 * aclrtDeviceGetByPCIBusId and aclrtDeviceL2CacheFlush, after hicann/runtime
 * src/acl/aclrt_impl/device.cpp, src/runtime/api/impl/api_impl.cc (DeviceSetLimit,
 * DeviceGetLimit, GetDeviceByPCIBusId), api_error.cc (GetDevicePCIBusId), runtime.cc
 * (SetSimdPrintFifoSize) and api_impl_standard_soc.cc (DeviceL2CacheFlush).
 *
 * Checked: the stack size starts at 32 KiB, ignores values up to 32 KiB and rounds larger ones
 * up to 16 KiB; the printf buffer starts at 32 KiB, takes 1 KiB..64 MiB rounded up to 8 and
 * refuses others (107000, the value kept); the SIMT limits are 207000; a limit outside 0..4 or
 * a value above UINT32_MAX is 100000; NULL is 100000. Each device's PCI bus id is
 * 0000:XX:00.0 (XX = device + 1), round-trips through aclrtDeviceGetByPCIBusId, and is the same
 * in a second process; an unknown id is 107000; a short buffer 107000; a bad device 107001.
 * The L2 flush refuses a non-NULL rsv (100000) and succeeds with a current device.
 *
 * usage: device_limits SOC [child]. Exit 0 and "device_limits: ok". */
#include "common.h"

#include <sys/wait.h>

static size_t get_limit(aclrtDeviceLimit l) {
    size_t v = 0;
    CHECK(aclrtDeviceGetLimit(l, &v));
    return v;
}

static void limits(void) {
    REQUIRE(get_limit(ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE) == 32768, "first stack size %zu",
            get_limit(ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE));
    CHECK(aclrtDeviceSetLimit(ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE, 20000));
    REQUIRE(get_limit(ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE) == 32768, "a small stack size changed it");
    CHECK(aclrtDeviceSetLimit(ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE, 40000));
    REQUIRE(get_limit(ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE) == 49152, "stack 40000 read back as %zu",
            get_limit(ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE));

    REQUIRE(get_limit(ACL_RT_DEV_LIMIT_SIMD_PRINTF_FIFO_SIZE_PER_CORE) == 32768, "first fifo");
    CHECK(aclrtDeviceSetLimit(ACL_RT_DEV_LIMIT_SIMD_PRINTF_FIFO_SIZE_PER_CORE, 4099));
    REQUIRE(get_limit(ACL_RT_DEV_LIMIT_SIMD_PRINTF_FIFO_SIZE_PER_CORE) == 4104,
            "fifo 4099 read back as %zu", get_limit(ACL_RT_DEV_LIMIT_SIMD_PRINTF_FIFO_SIZE_PER_CORE));
    EXPECT_RC(aclrtDeviceSetLimit(ACL_RT_DEV_LIMIT_SIMD_PRINTF_FIFO_SIZE_PER_CORE, 1023),
              ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("1023", "1024", NULL);
    EXPECT_RC(aclrtDeviceSetLimit(ACL_RT_DEV_LIMIT_SIMD_PRINTF_FIFO_SIZE_PER_CORE,
                                  64u * 1024 * 1024 + 1),
              ACL_ERROR_RT_PARAM_INVALID);
    REQUIRE(get_limit(ACL_RT_DEV_LIMIT_SIMD_PRINTF_FIFO_SIZE_PER_CORE) == 4104,
            "a refused value changed the fifo");

    size_t v = 0;
    EXPECT_RC(aclrtDeviceSetLimit(ACL_RT_DEV_LIMIT_SIMT_STACK_SIZE, 4096),
              ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    expect_msg("SIMT", NULL);
    EXPECT_RC(aclrtDeviceGetLimit(ACL_RT_DEV_LIMIT_SIMT_PRINTF_FIFO_SIZE, &v),
              ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    EXPECT_RC(aclrtDeviceGetLimit(ACL_RT_DEV_LIMIT_SIMT_DVG_WARP_STACK_SIZE, &v),
              ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    EXPECT_RC(aclrtDeviceSetLimit((aclrtDeviceLimit)5, 1), ACL_ERROR_INVALID_PARAM);
    expect_msg("limit 5", NULL);
    EXPECT_RC(aclrtDeviceGetLimit((aclrtDeviceLimit)5, &v), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtDeviceGetLimit(ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE, NULL), ACL_ERROR_INVALID_PARAM);
    if (sizeof(size_t) > 4) {
        EXPECT_RC(aclrtDeviceSetLimit(ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE, (size_t)UINT32_MAX + 1),
                  ACL_ERROR_INVALID_PARAM);
        expect_msg("UINT32_MAX", NULL);
    }
}

/* Prints each device's id, one a line (what a second process compares). */
static void print_ids(uint32_t count) {
    for (uint32_t d = 0; d < count; d++) {
        char id[32];
        CHECK(aclrtDeviceGetPCIBusId((int32_t)d, id, (int32_t)sizeof id));
        printf("%s\n", id);
    }
}

static void pci(const char *self, const char *soc) {
    uint32_t count = 0;
    CHECK(aclrtGetDeviceCount(&count));
    REQUIRE(count >= 2, "%u devices", count);
    for (uint32_t d = 0; d < count; d++) {
        char id[13];
        memset(id, 'x', sizeof id);
        CHECK(aclrtDeviceGetPCIBusId((int32_t)d, id, (int32_t)sizeof id));
        char want[32];
        snprintf(want, sizeof want, "0000:%02x:00.0", d + 1);
        REQUIRE(strcmp(id, want) == 0, "device %u: \"%.13s\", expected %s", d, id, want);
        int32_t back = -1;
        CHECK(aclrtDeviceGetByPCIBusId(id, &back));
        REQUIRE(back == (int32_t)d, "%s found device %d, expected %u", id, back, d);
    }
    char id[32];
    EXPECT_RC(aclrtDeviceGetPCIBusId(0, id, 12), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("len 12", NULL);
    EXPECT_RC(aclrtDeviceGetPCIBusId(-1, id, 32), ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT_RC(aclrtDeviceGetPCIBusId((int32_t)count, id, 32), ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT_RC(aclrtDeviceGetPCIBusId(0, NULL, 32), ACL_ERROR_INVALID_PARAM);
    int32_t dev = 7;
    EXPECT_RC(aclrtDeviceGetByPCIBusId("0000:ff:00.0", &dev), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("0000:ff:00.0", NULL);
    EXPECT_RC(aclrtDeviceGetByPCIBusId("0000:01:00.0 ", &dev), ACL_ERROR_RT_PARAM_INVALID);
    REQUIRE(dev == 7, "a refused lookup wrote %d", dev);
    EXPECT_RC(aclrtDeviceGetByPCIBusId(NULL, &dev), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtDeviceGetByPCIBusId("0000:01:00.0", NULL), ACL_ERROR_INVALID_PARAM);

    /* A second process reads the same ids. */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s %s child", self, soc);
    FILE *p = popen(cmd, "r");
    REQUIRE(p != NULL, "popen %s", cmd);
    for (uint32_t d = 0; d < count; d++) {
        char line[64] = {0}, mine[32];
        REQUIRE(fgets(line, sizeof line, p) != NULL, "the child printed %u ids", d);
        line[strcspn(line, "\n")] = 0;
        CHECK(aclrtDeviceGetPCIBusId((int32_t)d, mine, (int32_t)sizeof mine));
        REQUIRE(strcmp(line, mine) == 0, "device %u: child %s, here %s", d, line, mine);
    }
    REQUIRE(pclose(p) == 0, "the child failed");
}

int main(int argc, char **argv) {
    g_role = "device_limits";
    REQUIRE(argc >= 2, "usage: device_limits SOC [child]");
    CHECK(aclInit(NULL));
    if (argc == 3) {
        uint32_t count = 0;
        CHECK(aclrtGetDeviceCount(&count));
        print_ids(count);
        CHECK(aclFinalize());
        return 0;
    }
    limits();
    pci(argv[0], argv[1]);
    EXPECT_RC(aclrtDeviceL2CacheFlush((void *)1), ACL_ERROR_INVALID_PARAM);
    expect_msg("aclrtDeviceL2CacheFlush", "rsv", NULL);
    CHECK(aclrtSetDevice(1));
    CHECK(aclrtDeviceL2CacheFlush(NULL));
    CHECK(aclrtResetDevice(1));
    CHECK(aclFinalize());
    /* The limits are the process's, beyond aclFinalize (CANN's Runtime instance). */
    REQUIRE(get_limit(ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE) == 49152, "stack after aclFinalize");
    printf("device_limits: ok\n");
    return 0;
}
