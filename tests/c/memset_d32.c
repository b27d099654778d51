/* memset_d32.c — aclrtMemsetD32 / aclrtMemsetD32Async, aclrtPointerGetAttributes and
 * aclrtCheckMemType through the C ABI, on the SoC named by argv[1]:
 * - Ascend910B: CANN's argument checks (N 0 first; NULL, unaligned, N * 4 > memSize, memory
 *   of neither aclrtMalloc nor aclrtMallocHost → ACL_ERROR_INVALID_PARAM), words written byte
 *   by byte as the device's little-endian words into device memory, aclrtMallocHost memory
 *   (the async form writes it at once, while the stream is still held), a range over two VMM
 *   mappings; a range past its allocation → ACL_ERROR_RT_PARAM_INVALID with nothing written;
 *   device memory freed before the queued set runs fails the stream's task; the location,
 *   device id and page size of every kind of pointer; aclrtCheckMemType's types and checks.
 * - Ascend310P: the calls are CANN's stub there, which its ACL layer turns into success:
 *   nothing is written, a warning is left.
 * - IPV350: aclrtPointerGetAttributes is unsupported (207000), and so D32's memory check.
 * Run with ACL_NOTIFY_SIM_DEVICE_MEMORY=16M. Exit 0 and "memset_d32: ok" when every check
 * holds. */
#include "common.h"


/* Requires that bytes [from, to) of buf are `word` as little-endian 32-bit words (starting
 * with its lowest byte at `from`), and every other byte of [0, len) is `fill`. */
static void expect_words(const unsigned char *buf, size_t len, size_t from, size_t to,
                         uint32_t word, unsigned char fill) {
    for (size_t i = 0; i < len; i++) {
        unsigned char want = fill;
        if (i >= from && i < to) want = (unsigned char)(word >> (8 * ((i - from) % 4)));
        REQUIRE(buf[i] == want, "byte %zu is %#x, expected %#x", i, buf[i], want);
    }
}

static aclrtPtrAttributes attrs_of(const void *p) {
    aclrtPtrAttributes a;
    memset(&a, 0x5A, sizeof a);
    CHECK(aclrtPointerGetAttributes(p, &a));
    return a;
}

static void unsupported_soc(const char *soc) {
    void *d = NULL;
    CHECK(aclrtMalloc(&d, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemset(d, 64, 0x11, 64));
    unsigned char back[64];
    if (strcmp(soc, "IPV350") == 0) {
        aclrtPtrAttributes a;
        EXPECT_RC(aclrtPointerGetAttributes(d, &a), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        EXPECT_RC(aclrtMemsetD32(d, 64, 7, 16), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    } else {
        /* CANN's ACL layer returns success when its runtime says "not supported". */
        EXPECT_RC(aclrtMemsetD32(d, 64, 0xCAFEF00Du, 16), ACL_SUCCESS);
        expect_msg("nothing was written", NULL);
        EXPECT_RC(aclrtMemsetD32Async(d, 64, 0xCAFEF00Du, 16, NULL), ACL_SUCCESS);
        CHECK(aclrtSynchronizeDevice());
        aclrtPtrAttributes a = attrs_of(d);
        REQUIRE(a.location.type == ACL_MEM_LOCATION_TYPE_DEVICE, "type %d", (int)a.location.type);
    }
    CHECK(aclrtMemcpy(back, 64, d, 64, ACL_MEMCPY_DEVICE_TO_HOST));
    expect_words(back, 64, 0, 0, 0, 0x11);
    CHECK(aclrtFree(d));
}

int main(int argc, char **argv) {
    g_role = "memset_d32";
    const char *soc = argc > 1 ? argv[1] : "Ascend910B";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    if (strcmp(soc, "Ascend910B") != 0) {
        unsupported_soc(soc);
        CHECK(aclrtResetDevice(0));
        CHECK(aclFinalize());
        printf("memset_d32 %s: ok\n", soc);
        return 0;
    }

    void *d = NULL;
    const size_t len = 4096;
    CHECK(aclrtMalloc(&d, len, ACL_MEM_MALLOC_HUGE_FIRST));
    unsigned char *back = malloc(len);
    REQUIRE(back != NULL, "malloc");

    /* CANN's check order. */
    EXPECT_RC(aclrtMemsetD32(NULL, 0, 1, 0), ACL_SUCCESS);
    EXPECT_RC(aclrtMemsetD32(NULL, 16, 1, 4), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemsetD32((char *)d + 2, 16, 1, 4), ACL_ERROR_INVALID_PARAM);
    expect_msg("4-byte aligned", NULL);
    EXPECT_RC(aclrtMemsetD32(d, 15, 1, 4), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemsetD32(d, SIZE_MAX, 1, SIZE_MAX / 2), ACL_ERROR_INVALID_PARAM);
    uint32_t *plain = malloc(64);
    REQUIRE(plain != NULL, "malloc");
    memset(plain, 0x22, 64);
    EXPECT_RC(aclrtMemsetD32(plain, 64, 1, 16), ACL_ERROR_INVALID_PARAM);
    expect_msg("aclrtMalloc or aclrtMallocHost", NULL);
    EXPECT_RC(aclrtMemsetD32Async(plain, 64, 1, 16, NULL), ACL_ERROR_INVALID_PARAM);
    for (int i = 0; i < 16; i++) REQUIRE(plain[i] == 0x22222222u, "plain[%d] written", i);

    /* Device memory, from offset 4 for 1000 words; the bytes around stay. */
    CHECK(aclrtMemset(d, len, 0x11, len));
    CHECK(aclrtMemsetD32((char *)d + 4, len - 4, 0xDEADBEEFu, 1000));
    CHECK(aclrtMemcpy(back, len, d, len, ACL_MEMCPY_DEVICE_TO_HOST));
    expect_words(back, len, 4, 4 + 4000, 0xDEADBEEFu, 0x11);

    /* Past its allocation: refused, nothing written. */
    void *small = NULL;
    CHECK(aclrtMalloc(&small, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemset(small, 64, 0x33, 64));
    EXPECT_RC(aclrtMemsetD32(small, 1 << 20, 5, 17), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("leaves allocation", NULL);
    CHECK(aclrtMemcpy(back, 64, small, 64, ACL_MEMCPY_DEVICE_TO_HOST));
    expect_words(back, 64, 0, 0, 0, 0x33);

    /* In stream order: queued behind a held stream, written when it runs. */
    aclrtStream s = NULL;
    CHECK(aclrtCreateStream(&s));
    gate_t held = {0};
    CHECK(aclrtLaunchHostFunc(s, gate_hold, &held));
    CHECK(aclrtMemsetD32Async(small, 64, 0x01020304u, 16, s));
    /* The same stream's copy after it sees the words. */
    unsigned char *pinned = NULL;
    CHECK(aclrtMallocHost((void **)&pinned, 4096));
    memset(pinned, 0x44, 4096);
    CHECK(aclrtMemcpyAsync(pinned, 64, small, 64, ACL_MEMCPY_DEVICE_TO_HOST, s));
    /* Host memory is written at once by the async form, as CANN's runtime does. */
    CHECK(aclrtMemsetD32Async(pinned + 64, 4096 - 64, 0xA1B2C3D4u, 8, s));
    expect_words(pinned + 64, 64, 0, 32, 0xA1B2C3D4u, 0x44);
    /* The queued copy has not run: the pinned bytes are still the fill. */
    expect_words(pinned, 64, 0, 0, 0, 0x44);
    gate_open(&held);
    CHECK(aclrtSynchronizeStream(s));
    expect_words(pinned, 64, 0, 64, 0x01020304u, 0);
    /* aclrtMallocHost memory, synchronously; its end checked. */
    CHECK(aclrtMemsetD32(pinned + 4000, 96, 0x0BADF00Du, 24));
    expect_words(pinned + 3968, 128, 32, 128, 0x0BADF00Du, 0x44);
    EXPECT_RC(aclrtMemsetD32(pinned + 4000, 100, 1, 25), ACL_ERROR_RT_PARAM_INVALID);

    /* Freed before the queued set ran: the task fails, nothing is written anywhere. */
    void *gone = NULL;
    CHECK(aclrtMalloc(&gone, 256, ACL_MEM_MALLOC_HUGE_FIRST));
    gate_t held2 = {0};
    CHECK(aclrtLaunchHostFunc(s, gate_hold, &held2));
    CHECK(aclrtMemsetD32Async(gone, 256, 9, 64, s));
    CHECK(aclrtFree(gone));
    gate_open(&held2);
    EXPECT_RC(aclrtSynchronizeStream(s), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("freed before the queued task ran", NULL);
    aclrtPtrAttributes at = attrs_of(gone);
    REQUIRE(at.location.type == ACL_MEM_LOCATION_TYPE_UNREGISTERED, "freed: %d",
            (int)at.location.type);

    /* Over two VMM mappings: the copy path splits it at the seam. */
    aclrtPhysicalMemProp prop = device_prop(ACL_HBM_MEM_HUGE);
    size_t g = 0;
    CHECK(aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g));
    void *va = NULL;
    CHECK(aclrtReserveMemAddress(&va, 3 * g, 0, NULL, 0));
    aclrtDrvMemHandle a = NULL, b = NULL;
    CHECK(aclrtMallocPhysical(&a, g, &prop, 0));
    CHECK(aclrtMallocPhysical(&b, g, &prop, 0));
    CHECK(aclrtMapMem(va, g, 0, a, 0));
    CHECK(aclrtMapMem((char *)va + g, g, 0, b, 0));
    char *seam = (char *)va + g - 64;
    CHECK(aclrtMemset(seam, 256, 0x55, 256));
    CHECK(aclrtMemsetD32Async(seam + 8, 248, 0x89ABCDEFu, 40, NULL));
    CHECK(aclrtSynchronizeDevice());
    CHECK(aclrtMemcpy(back, 256, seam, 256, ACL_MEMCPY_DEVICE_TO_HOST));
    expect_words(back, 256, 8, 8 + 160, 0x89ABCDEFu, 0x55);

    /* Where each pointer is. */
    at = attrs_of((char *)d + 100);
    REQUIRE(at.location.type == ACL_MEM_LOCATION_TYPE_DEVICE && at.location.id == 0 &&
                at.pageSize == 2u << 20,
            "aclrtMalloc memory: type %d id %u page %u", (int)at.location.type, at.location.id,
            at.pageSize);
    REQUIRE(at.rsv[0] == 0x5A5A5A5Au, "the reserved words are left alone");
    void *normal = NULL;
    CHECK(aclrtMalloc(&normal, 64, ACL_MEM_MALLOC_NORMAL_ONLY));
    REQUIRE(attrs_of(normal).pageSize == 4096, "normal pages");
    at = attrs_of(seam);
    REQUIRE(at.location.type == ACL_MEM_LOCATION_TYPE_DEVICE && at.pageSize == 2u << 20,
            "a mapping: type %d page %u", (int)at.location.type, at.pageSize);
    at = attrs_of((char *)va + 2 * g + 8);
    REQUIRE(at.location.type == ACL_MEM_LOCATION_TYPE_UNREGISTERED, "unmapped: %d",
            (int)at.location.type);
    at = attrs_of(pinned + 5);
    REQUIRE(at.location.type == ACL_MEM_LOCATION_TYPE_HOST && at.location.id == 0 &&
                at.pageSize == 4096,
            "aclrtMallocHost memory: type %d id %u page %u", (int)at.location.type,
            at.location.id, at.pageSize);
    at = attrs_of(plain);
    REQUIRE(at.location.type == ACL_MEM_LOCATION_TYPE_UNREGISTERED, "malloc: %d",
            (int)at.location.type);
    CHECK(aclrtSetDevice(1));
    void *on1 = NULL;
    CHECK(aclrtMalloc(&on1, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    at = attrs_of(on1);
    REQUIRE(at.location.type == ACL_MEM_LOCATION_TYPE_DEVICE && at.location.id == 1,
            "device 1: type %d id %u", (int)at.location.type, at.location.id);
    EXPECT_RC(aclrtPointerGetAttributes(NULL, &at), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtPointerGetAttributes(d, NULL), ACL_ERROR_INVALID_PARAM);

    /* aclrtCheckMemType. */
    uint32_t res = 7;
    void *devs[] = {d, on1, (char *)small + 8};
    CHECK(aclrtCheckMemType(devs, 3, ACL_RT_MEM_TYPE_DEV, &res, 0));
    REQUIRE(res == 1, "device memory is ACL_RT_MEM_TYPE_DEV: %u", res);
    /* The same list at an address not aligned for pointers: read as it is. */
    unsigned char packed[sizeof devs + 1];
    memcpy(packed + 1, devs, sizeof devs);
    res = 7;
    CHECK(aclrtCheckMemType((void **)(void *)(packed + 1), 3, ACL_RT_MEM_TYPE_DEV, &res, 0));
    REQUIRE(res == 1, "a misaligned list of device memory is ACL_RT_MEM_TYPE_DEV: %u", res);
    void *mixed[] = {d, pinned};
    CHECK(aclrtCheckMemType(mixed, 2, ACL_RT_MEM_TYPE_DEV | ACL_RT_MEM_TYPE_DVPP, &res, 0));
    REQUIRE(res == 0, "host memory is no device type: %u", res);
    void *reserved[] = {seam, (char *)va + 2 * g};
    CHECK(aclrtCheckMemType(reserved, 2, 0x20, &res, 0));
    REQUIRE(res == 1, "reserved addresses are the runtime's RSVD type (0x20): %u", res);
    CHECK(aclrtCheckMemType(reserved, 2, ACL_RT_MEM_TYPE_DEV, &res, 0));
    REQUIRE(res == 0, "reserved addresses are not DEV: %u", res);
    res = 7;
    EXPECT_RC(aclrtCheckMemType(devs, 3, ACL_RT_MEM_TYPE_RSVD, &res, 0),
              ACL_ERROR_RT_PARAM_INVALID);
    REQUIRE(res == 0, "checkResult cleared before the checks: %u", res);
    EXPECT_RC(aclrtCheckMemType(devs, 3, ACL_RT_MEM_TYPE_DEV, NULL, 0), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtCheckMemType(NULL, 3, ACL_RT_MEM_TYPE_DEV, &res, 0), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtCheckMemType(devs, 0, ACL_RT_MEM_TYPE_DEV, &res, 0), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtCheckMemType(devs, 3, ACL_RT_MEM_TYPE_DEV, &res, 1), ACL_ERROR_RT_PARAM_INVALID);

    CHECK(aclrtFree(on1));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtUnmapMem(va));
    CHECK(aclrtUnmapMem((char *)va + g));
    CHECK(aclrtFreePhysical(a));
    CHECK(aclrtFreePhysical(b));
    CHECK(aclrtReleaseMemAddress(va));
    CHECK(aclrtDestroyStream(s));
    CHECK(aclrtFreeHost(pinned));
    CHECK(aclrtFree(normal));
    CHECK(aclrtFree(small));
    CHECK(aclrtFree(d));
    free(plain);
    free(back);
    CHECK(aclrtResetDevice(1));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("memset_d32: ok\n");
    return 0;
}
