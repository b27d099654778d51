/* host_register.c — aclrtHostRegister[V2], aclrtHostGetDevicePointer, aclrtHostUnregister and
 * aclrtHostMemMapCapabilities through the C ABI, on the SoC named by argv[1]:
 * - Ascend910B: CANN's argument checks and codes (NULL / size 0 → ACL_ERROR_INVALID_PARAM,
 *   bad V2 flags → ACL_ERROR_RT_PARAM_INVALID, reserved types and flags → 207000, overlapping
 *   and duplicate registrations → ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED, unregistering an
 *   unknown or inner pointer → ACL_ERROR_HOST_MEMORY_NOT_REGISTERED); registered malloc memory
 *   as the source and destination of synchronous and queued copies, bytes checked one by one;
 *   aclrtPointerGetAttributes says host; the device address is not the host address and copies
 *   refuse it; unregistering while a copy into the memory is queued (its stream held) fails
 *   that copy with nothing written, and the memory can be freed at once.
 * - Ascend310P: registration is unsupported (207000); the capability says not supported.
 * Exit 0 and "host_register <soc>: ok" when every check holds. */
#include "common.h"

/* A host function holding its stream until *(volatile int *)arg is set. */
static void hold_until(void *arg) {
    while (!*(volatile int *)arg) sleep_ms(1);
}

static void expect_bytes(const unsigned char *p, size_t len, unsigned seed) {
    for (size_t i = 0; i < len; i++) {
        unsigned char want = (unsigned char)(i * 31u + seed);
        REQUIRE(p[i] == want, "byte %zu is %#x, expected %#x", i, p[i], want);
    }
}

static void fill(unsigned char *p, size_t len, unsigned seed) {
    for (size_t i = 0; i < len; i++) p[i] = (unsigned char)(i * 31u + seed);
}

static void unsupported(void) {
    unsigned char *h = aligned_alloc(4096, 4096);
    REQUIRE(h != NULL, "aligned_alloc");
    void *dev = NULL;
    EXPECT_RC(aclrtHostRegister(h, 4096, ACL_HOST_REGISTER_MAPPED, &dev),
              ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    EXPECT_RC(aclrtHostRegisterV2(h, 4096, ACL_HOST_REG_MAPPED), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    EXPECT_RC(aclrtHostUnregister(h), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    aclrtHostMemMapCapability cap = ACL_RT_HOST_MEM_MAP_SUPPORTED;
    CHECK(aclrtHostMemMapCapabilities(0, ACL_RT_HAC_TYPE_AIC, &cap));
    REQUIRE(cap == ACL_RT_HOST_MEM_MAP_NOT_SUPPORTED, "capability %d", (int)cap);
    free(h);
}

int main(int argc, char **argv) {
    g_role = "host_register";
    const char *soc = argc > 1 ? argv[1] : "Ascend910B";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    if (strcmp(soc, "Ascend910B") != 0) {
        unsupported();
        CHECK(aclrtResetDevice(0));
        CHECK(aclFinalize());
        printf("host_register %s: ok\n", soc);
        return 0;
    }

    const size_t len = 3 * 4096;
    unsigned char *h = aligned_alloc(4096, len);
    REQUIRE(h != NULL, "aligned_alloc");
    memset(h, 0, len);
    void *dev = NULL;

    /* CANN's checks, in its order. */
    EXPECT_RC(aclrtHostRegister(NULL, len, ACL_HOST_REGISTER_MAPPED, &dev), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtHostRegister(h, len, ACL_HOST_REGISTER_MAPPED, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtHostRegister(h, 0, ACL_HOST_REGISTER_MAPPED, &dev), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtHostRegister(h, len, (aclrtHostRegisterType)1, &dev),
              ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    EXPECT_RC(aclrtHostRegister(h, len, ACL_HOST_REGISTER_READONLY, &dev),
              ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    EXPECT_RC(aclrtHostRegister(h + 1, 100, ACL_HOST_REGISTER_MAPPED, &dev),
              ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtHostRegisterV2(NULL, len, ACL_HOST_REG_MAPPED), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtHostRegisterV2(h, 0, ACL_HOST_REG_MAPPED), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtHostRegisterV2(h, len, 0), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtHostRegisterV2(h, len, 0x1), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtHostRegisterV2(h, len, ACL_HOST_REG_IOMEMORY), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    EXPECT_RC(aclrtHostUnregister(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtHostUnregister(h), ACL_ERROR_HOST_MEMORY_NOT_REGISTERED);
    EXPECT_RC(aclrtHostGetDevicePointer(h, &dev, 1), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtHostGetDevicePointer(h, NULL, 0), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtHostGetDevicePointer(h, &dev, 0), ACL_ERROR_RT_PARAM_INVALID);
    aclrtHostMemMapCapability cap = ACL_RT_HOST_MEM_MAP_NOT_SUPPORTED;
    EXPECT_RC(aclrtHostMemMapCapabilities(0, ACL_RT_HAC_TYPE_AIC, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtHostMemMapCapabilities(99, ACL_RT_HAC_TYPE_AIC, &cap),
              ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT_RC(aclrtHostMemMapCapabilities(0, (aclrtHacType)10, &cap), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclrtHostMemMapCapabilities(0, ACL_RT_HAC_TYPE_SDMA, &cap));
    REQUIRE(cap == ACL_RT_HOST_MEM_MAP_SUPPORTED, "capability %d", (int)cap);

    /* Registered: known host memory, with a device address of its own. */
    CHECK(aclrtHostRegister(h, len, ACL_HOST_REGISTER_MAPPED, &dev));
    REQUIRE(dev != NULL && dev != (void *)h, "device address %p for host %p", dev, (void *)h);
    void *again = NULL;
    CHECK(aclrtHostGetDevicePointer(h, &again, 0));
    REQUIRE(again == dev, "%p then %p", dev, again);
    aclrtPtrAttributes a;
    CHECK(aclrtPointerGetAttributes(h + 5000, &a));
    REQUIRE(a.location.type == ACL_MEM_LOCATION_TYPE_HOST, "type %d", (int)a.location.type);
    EXPECT_RC(aclrtHostRegisterV2(h + 4096, 4096, ACL_HOST_REG_PINNED),
              ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    EXPECT_RC(aclrtHostRegister(h, len, ACL_HOST_REGISTER_MAPPED, &again),
              ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    EXPECT_RC(aclrtHostUnregister(h + 4096), ACL_ERROR_HOST_MEMORY_NOT_REGISTERED);

    /* Copies to and from it, byte by byte. */
    void *d = NULL;
    CHECK(aclrtMalloc(&d, len, ACL_MEM_MALLOC_HUGE_FIRST));
    fill(h, len, 7);
    CHECK(aclrtMemcpy(d, len, h, len, ACL_MEMCPY_HOST_TO_DEVICE));
    memset(h, 0, len);
    aclrtStream s = NULL;
    CHECK(aclrtCreateStream(&s));
    CHECK(aclrtMemcpyAsync(h, len, d, len, ACL_MEMCPY_DEVICE_TO_HOST, s));
    CHECK(aclrtSynchronizeStream(s));
    expect_bytes(h, len, 7);
    /* The device address is for the device only: copies refuse it. */
    EXPECT_RC(aclrtMemcpy(d, len, dev, len, ACL_MEMCPY_DEVICE_TO_DEVICE), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtMemcpy(d, len, dev, len, ACL_MEMCPY_DEFAULT), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("device address", NULL);

    /* Unregistered while a copy into it is queued: the copy fails, nothing is written. */
    fill(h, len, 1);
    CHECK(aclrtMemset(d, len, 0xEE, len));
    volatile int go = 0;
    CHECK(aclrtLaunchHostFunc(s, hold_until, (void *)&go));
    CHECK(aclrtMemcpyAsync(h, len, d, len, ACL_MEMCPY_DEVICE_TO_HOST, s));
    CHECK(aclrtHostUnregister(h));
    EXPECT_RC(aclrtHostGetDevicePointer(h, &again, 0), ACL_ERROR_RT_PARAM_INVALID);
    go = 1;
    EXPECT_RC(aclrtSynchronizeStream(s), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("unregistered", NULL);
    expect_bytes(h, len, 1);
    free(h);

    /* V2: pinned only (no device address), then mapped again. */
    unsigned char *p = aligned_alloc(4096, 4096);
    REQUIRE(p != NULL, "aligned_alloc");
    CHECK(aclrtHostRegisterV2(p, 4096, ACL_HOST_REG_PINNED));
    EXPECT_RC(aclrtHostGetDevicePointer(p, &again, 0), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclrtHostUnregister(p));
    CHECK(aclrtHostRegisterV2(p, 4096, ACL_HOST_REG_MAPPED | ACL_HOST_REG_PINNED));
    CHECK(aclrtHostGetDevicePointer(p, &again, 0));
    fill(p, 4096, 3);
    CHECK(aclrtMemcpy(d, 4096, p, 4096, ACL_MEMCPY_HOST_TO_DEVICE));
    unsigned char back[4096];
    CHECK(aclrtMemcpy(back, 4096, d, 4096, ACL_MEMCPY_DEVICE_TO_HOST));
    expect_bytes(back, 4096, 3);
    CHECK(aclrtHostUnregister(p));
    EXPECT_RC(aclrtHostUnregister(p), ACL_ERROR_HOST_MEMORY_NOT_REGISTERED);
    free(p);

    /* PINNED of aclrtMallocHost memory (pinned already) is refused; MAPPED is not. */
    void *pinned = NULL;
    CHECK(aclrtMallocHost(&pinned, 4096));
    EXPECT_RC(aclrtHostRegisterV2(pinned, 4096, ACL_HOST_REG_PINNED), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclrtHostRegisterV2(pinned, 4096, ACL_HOST_REG_MAPPED));
    CHECK(aclrtHostUnregister(pinned));
    /* aclrtHostRegister takes aclrtMallocHost memory too: CANN's doc of its ptr
     * (docs/zh/api_ref/11-02_host_memory_management.md) asks for aclrtMallocHost memory on
     * older kernels and takes it or malloc'd memory on newer ones. */
    void *pinned_dev = NULL;
    CHECK(aclrtHostRegister(pinned, 4096, ACL_HOST_REGISTER_MAPPED, &pinned_dev));
    REQUIRE(pinned_dev != NULL, "no device address for registered aclrtMallocHost memory");
    CHECK(aclrtHostUnregister(pinned));
    CHECK(aclrtFreeHost(pinned));

    CHECK(aclrtDestroyStream(s));
    CHECK(aclrtFree(d));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("host_register %s: ok\n", soc);
    return 0;
}
