/* memcpy2d.c — aclrtMemcpy2d / aclrtMemcpy2dAsync as CANN's samples use them: a tile of a
 * host matrix whose rows are padded (pitch > width) copied into device memory of another
 * pitch and back, and between device buffers on a stream, every byte checked — the rows
 * copied and the gaps between them left alone. Also CANN's rules (hicann/runtime
 * memory.cpp CheckMemcpy2dParam, api_error.cc MemCopy2DCheckParam / MemCopy2DSync /
 * MemCopy2DAsync): nothing to copy is 0 before any check; NULL, a width past a pitch or a
 * kind other than H2D / D2H / D2D / DEFAULT is 100000; more than 5,242,880 rows or
 * 5,000,000 bytes a row is 107000; the synchronous copy has no device to device (207000),
 * and a default kind the addresses make host to host is 107000; a device side leaving its
 * allocation is 107000 naming it, nothing written; memory freed before a queued copy ran
 * fails the stream's synchronize. Also across two physical allocations mapped back to back in
 * a reserved range (aclrtReserveMemAddress / aclrtMapMem). With pageable host memory the async
 * copy is made before the call returns (MemCopy2DAsync synchronizes the stream first).
 *
 * usage: memcpy2d; exit 0 and "memcpy2d: ok" when every check holds. */
#include "common.h"

/* The host matrix: ROWS rows of HPITCH bytes; the tile is COLS bytes of each. */
#define ROWS 48
#define HPITCH 200
#define COLS 120
#define DPITCH 128 /* a device pitch CANN's samples align rows to */

static unsigned char pattern(int row, int col) { return (unsigned char)(row * 7 + col * 3 + 1); }


int main(void) {
    g_role = "memcpy2d";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream s;
    CHECK(aclrtCreateStream(&s));

    unsigned char *host, *back;
    CHECK(aclrtMallocHost((void **)&host, ROWS * HPITCH));
    CHECK(aclrtMallocHost((void **)&back, ROWS * HPITCH));
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < HPITCH; c++) host[r * HPITCH + c] = pattern(r, c);
    void *dev, *dev2;
    CHECK(aclrtMalloc(&dev, ROWS * DPITCH, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&dev2, ROWS * DPITCH, ACL_MEM_MALLOC_HUGE_FIRST));

    /* Host tile -> device rows of DPITCH: the device's padding keeps its 0xee. */
    CHECK(aclrtMemset(dev, ROWS * DPITCH, 0xee, ROWS * DPITCH));
    CHECK(aclrtMemcpy2d(dev, DPITCH, host, HPITCH, COLS, ROWS, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtMemcpy(back, ROWS * DPITCH, dev, ROWS * DPITCH, ACL_MEMCPY_DEVICE_TO_HOST));
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < DPITCH; c++) {
            unsigned char want = c < COLS ? pattern(r, c) : 0xee;
            REQUIRE(back[r * DPITCH + c] == want, "H2D 2-D: row %d byte %d is %#x, expected %#x",
                    r, c, back[r * DPITCH + c], want);
        }

    /* Device rows -> a host tile of another pitch (every other row: pitch 2 * DPITCH). */
    memset(back, 0x55, ROWS * HPITCH);
    CHECK(aclrtMemcpy2d(back, HPITCH, dev, 2 * DPITCH, COLS - 8, ROWS / 2,
                        ACL_MEMCPY_DEVICE_TO_HOST));
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < HPITCH; c++) {
            unsigned char want = r < ROWS / 2 && c < COLS - 8 ? pattern(2 * r, c) : 0x55;
            REQUIRE(back[r * HPITCH + c] == want, "D2H 2-D: row %d byte %d is %#x, expected %#x",
                    r, c, back[r * HPITCH + c], want);
        }

    /* ACL_MEMCPY_DEFAULT: the addresses say which way. */
    CHECK(aclrtMemcpy2d(dev2, DPITCH, host, HPITCH, COLS, ROWS, ACL_MEMCPY_DEFAULT));
    memset(back, 0, ROWS * HPITCH);
    CHECK(aclrtMemcpy2d(back, COLS, dev2, DPITCH, COLS, ROWS, ACL_MEMCPY_DEFAULT));
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++)
            REQUIRE(back[r * COLS + c] == pattern(r, c), "DEFAULT 2-D: row %d byte %d", r, c);

    /* On a stream, in order: set dev2, then a device-to-device 2-D copy of the tile's right
     * half (columns 64.. of dev) into dev2's left columns, behind a host function holding the
     * stream, then back to the host. One task: every row or none. */
    gate_t g1 = {0};
    CHECK(aclrtLaunchHostFunc(s, gate_hold, &g1));
    CHECK(aclrtMemsetAsync(dev2, ROWS * DPITCH, 0, ROWS * DPITCH, s));
    CHECK(aclrtMemcpy2dAsync(dev2, DPITCH, (char *)dev + 64, DPITCH, COLS - 64, ROWS,
                             ACL_MEMCPY_DEVICE_TO_DEVICE, s));
    memset(back, 0x77, ROWS * HPITCH);
    CHECK(aclrtMemcpy2dAsync(back, HPITCH, dev2, DPITCH, DPITCH, ROWS, ACL_MEMCPY_DEVICE_TO_HOST,
                             s));
    gate_open(&g1);
    CHECK(aclrtSynchronizeStream(s));
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < HPITCH; c++) {
            unsigned char want = c >= DPITCH ? 0x77 : c < COLS - 64 ? pattern(r, c + 64) : 0;
            REQUIRE(back[r * HPITCH + c] == want, "async 2-D: row %d byte %d is %#x, expected %#x",
                    r, c, back[r * HPITCH + c], want);
        }
    /* Async host to device with the default kind. */
    CHECK(aclrtMemcpy2dAsync(dev2, DPITCH, host + 5 * HPITCH, HPITCH, 16, 3, ACL_MEMCPY_DEFAULT,
                             s));
    CHECK(aclrtMemcpyAsync(back, 3 * DPITCH, dev2, 3 * DPITCH, ACL_MEMCPY_DEVICE_TO_HOST, s));
    CHECK(aclrtSynchronizeStream(s));
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 16; c++)
            REQUIRE(back[r * DPITCH + c] == pattern(r + 5, c), "async DEFAULT: row %d byte %d", r,
                    c);
    /* Pageable host memory (malloc's): CANN synchronizes the stream and copies before the call
       returns (api_error.cc, ApiErrorDecorator::MemCopy2DAsync), so the rows read are the
       queued tasks' and may be read at once, and a source may be reused at once. The stream
       is held behind a 200 ms host function when the call is made. */
    {
        unsigned char *pg = malloc(ROWS * HPITCH);
        REQUIRE(pg != NULL, "malloc");
        int hold = 200;
        CHECK(aclrtLaunchHostFunc(s, hold_ms, &hold));
        CHECK(aclrtMemsetAsync(dev2, ROWS * DPITCH, 0x42, ROWS * DPITCH, s));
        memset(pg, 0, ROWS * HPITCH);
        CHECK(aclrtMemcpy2dAsync(pg, HPITCH, dev2, DPITCH, COLS, ROWS, ACL_MEMCPY_DEVICE_TO_HOST,
                                 s));
        for (int r = 0; r < ROWS; r++)
            REQUIRE(pg[r * HPITCH] == 0x42 && pg[r * HPITCH + COLS - 1] == 0x42 &&
                        pg[r * HPITCH + COLS] == 0,
                    "pageable 2-D out, row %d: %#x %#x %#x", r, pg[r * HPITCH],
                    pg[r * HPITCH + COLS - 1], pg[r * HPITCH + COLS]);
        /* In, with the default kind: the bytes the buffer held at the call. */
        CHECK(aclrtLaunchHostFunc(s, hold_ms, &hold));
        memset(pg, 0x11, ROWS * HPITCH);
        CHECK(aclrtMemcpy2dAsync(dev2, DPITCH, pg, HPITCH, COLS, ROWS, ACL_MEMCPY_DEFAULT, s));
        memset(pg, 0x22, ROWS * HPITCH);
        CHECK(aclrtMemcpy(back, ROWS * DPITCH, dev2, ROWS * DPITCH, ACL_MEMCPY_DEVICE_TO_HOST));
        for (int r = 0; r < ROWS; r++)
            REQUIRE(back[r * DPITCH] == 0x11 && back[r * DPITCH + COLS - 1] == 0x11,
                    "pageable 2-D in, row %d: %#x", r, back[r * DPITCH]);
        free(pg);
    }

    /* Nothing to copy: 0 before any check, NULL pointers and a bad kind included. */
    CHECK(aclrtMemcpy2d(NULL, 0, NULL, 0, 0, 5, (aclrtMemcpyKind)99));
    CHECK(aclrtMemcpy2d(NULL, 0, NULL, 0, 5, 0, (aclrtMemcpyKind)99));
    CHECK(aclrtMemcpy2dAsync(NULL, 0, NULL, 0, 0, 5, (aclrtMemcpyKind)99, s));
    /* The ACL layer's checks: 100000. */
    EXPECT_RC(aclrtMemcpy2d(NULL, DPITCH, host, HPITCH, 8, 2, ACL_MEMCPY_HOST_TO_DEVICE),
              ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemcpy2d(dev, DPITCH, NULL, HPITCH, 8, 2, ACL_MEMCPY_HOST_TO_DEVICE),
              ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemcpy2d(dev, DPITCH, host, HPITCH, DPITCH + 1, 2, ACL_MEMCPY_HOST_TO_DEVICE),
              ACL_ERROR_INVALID_PARAM);
    expect_msg("width 129", NULL);
    EXPECT_RC(aclrtMemcpy2d(dev, DPITCH, host, 16, 32, 2, ACL_MEMCPY_HOST_TO_DEVICE),
              ACL_ERROR_INVALID_PARAM);
    /* The message names the pitch that is too small, not the other. */
    expect_msg("width 32 is more than spitch 16: a row must fit in its pitch", NULL);
    EXPECT_RC(aclrtMemcpy2d(back, HPITCH, host, HPITCH, 8, 2, ACL_MEMCPY_HOST_TO_HOST),
              ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemcpy2d(dev, DPITCH, host, HPITCH, 8, 2, ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE),
              ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtMemcpy2dAsync(dev, DPITCH, host, HPITCH, 8, 2, ACL_MEMCPY_HOST_TO_HOST, s),
              ACL_ERROR_INVALID_PARAM);
    /* The runtime's: limits 107000, no synchronous device to device 207000, directions. */
    EXPECT_RC(aclrtMemcpy2d(dev, DPITCH, host, HPITCH, 8, 5 * 1024 * 1024 + 1,
                            ACL_MEMCPY_HOST_TO_DEVICE),
              ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("height 5242881", NULL);
    EXPECT_RC(aclrtMemcpy2d(dev, 5000001, host, 5000001, 5000001, 1, ACL_MEMCPY_HOST_TO_DEVICE),
              ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtMemcpy2d(dev2, DPITCH, dev, DPITCH, 8, 2, ACL_MEMCPY_DEVICE_TO_DEVICE),
              ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    expect_msg("aclrtMemcpy2dAsync", NULL);
    EXPECT_RC(aclrtMemcpy2d(dev2, DPITCH, dev, DPITCH, 8, 2, ACL_MEMCPY_DEFAULT),
              ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("ACL_MEMCPY_DEVICE_TO_DEVICE", NULL);
    EXPECT_RC(aclrtMemcpy2d(back, HPITCH, host, HPITCH, 8, 2, ACL_MEMCPY_DEFAULT),
              ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtMemcpy2dAsync(back, HPITCH, host, HPITCH, 8, 2, ACL_MEMCPY_DEFAULT, s),
              ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("ACL_MEMCPY_HOST_TO_HOST", NULL);
    /* Between device and page-locked memory CANN corrects the kind (MemcpyKindAutoCorrect):
     * a D2H kind from aclrtMallocHost memory to the device is made host to device; beside
     * pageable memory it must name the known side as it is (tests/c/copy_kinds.c). */
    CHECK(aclrtMemcpy2d(dev, DPITCH, back, HPITCH, 8, 2, ACL_MEMCPY_DEVICE_TO_HOST));
    char pageable[2 * HPITCH];
    EXPECT_RC(aclrtMemcpy2d(dev, DPITCH, pageable, HPITCH, 8, 2, ACL_MEMCPY_DEVICE_TO_HOST),
              ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("pageable", NULL);
    EXPECT_RC(aclrtMemcpy2dAsync(dev, DPITCH, host, HPITCH, 8, 2, ACL_MEMCPY_HOST_TO_DEVICE,
                                 (aclrtStream)(uintptr_t)0x1234),
              ACL_ERROR_RT_INVALID_HANDLE);

    /* The device side is checked as one range, first row to last: with one row too many the
     * last row starts at dev's end. */
    CHECK(aclrtMemset(dev, ROWS * DPITCH, 0x11, ROWS * DPITCH));
    EXPECT_RC(aclrtMemcpy2d(dev, DPITCH, host, HPITCH, COLS, ROWS + 1, ACL_MEMCPY_HOST_TO_DEVICE),
              ACL_ERROR_RT_PARAM_INVALID);
    char text[64];
    snprintf(text, sizeof text, "allocation %p", dev);
    expect_msg(text, "past", NULL);
    EXPECT_RC(aclrtMemcpy2dAsync(back, HPITCH, dev, DPITCH, COLS, ROWS + 1,
                                 ACL_MEMCPY_DEVICE_TO_HOST, s),
              ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclrtMemcpy(back, ROWS * DPITCH, dev, ROWS * DPITCH, ACL_MEMCPY_DEVICE_TO_HOST));
    for (int i = 0; i < ROWS * DPITCH; i++)
        REQUIRE(back[i] == 0x11, "a refused 2-D copy wrote byte %d (%#x)", i, back[i]);

    /* Freed before the queued copy ran: the stream's task fails, nothing is written. */
    void *gone;
    CHECK(aclrtMalloc(&gone, ROWS * DPITCH, ACL_MEM_MALLOC_HUGE_FIRST));
    gate_t g2 = {0};
    CHECK(aclrtLaunchHostFunc(s, gate_hold, &g2));
    CHECK(aclrtMemcpy2dAsync(dev, DPITCH, gone, DPITCH, COLS, ROWS, ACL_MEMCPY_DEVICE_TO_DEVICE,
                             s));
    CHECK(aclrtFree(gone));
    gate_open(&g2);
    EXPECT_RC(aclrtSynchronizeStream(s), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("freed before the queued task ran", NULL);
    CHECK(aclrtMemcpy(back, ROWS * DPITCH, dev, ROWS * DPITCH, ACL_MEMCPY_DEVICE_TO_HOST));
    for (int i = 0; i < ROWS * DPITCH; i++)
        REQUIRE(back[i] == 0x11, "a failed queued 2-D copy wrote byte %d (%#x)", i, back[i]);

    /* A reserved range with two physical allocations mapped back to back (CANN's VMM
     * sample): rows of 1 KiB every 64 KiB across both, in and out, every byte checked. */
    {
        aclrtPhysicalMemProp prop = device_prop(ACL_HBM_MEM_HUGE);
        size_t g = 0;
        CHECK(aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g));
        void *va = NULL;
        aclrtDrvMemHandle pa, pb;
        CHECK(aclrtReserveMemAddress(&va, 2 * g, 0, NULL, 0));
        CHECK(aclrtMallocPhysical(&pa, g, &prop, 0));
        CHECK(aclrtMallocPhysical(&pb, g, &prop, 0));
        CHECK(aclrtMapMem(va, g, 0, pa, 0));
        CHECK(aclrtMapMem((char *)va + g, g, 0, pb, 0));
        unsigned char *in, *out;
        CHECK(aclrtMallocHost((void **)&in, 2 * g));
        CHECK(aclrtMallocHost((void **)&out, 2 * g));
        const size_t pitch = 64 << 10, width = 1024, rows = 2 * g / pitch;
        for (size_t i = 0; i < 2 * g; i++) in[i] = (unsigned char)(i * 13 + 5);
        CHECK(aclrtMemset(va, 2 * g, 0x3c, 2 * g));
        CHECK(aclrtMemcpy2d(va, pitch, in, pitch, width, rows, ACL_MEMCPY_HOST_TO_DEVICE));
        CHECK(aclrtMemcpy(out, 2 * g, va, 2 * g, ACL_MEMCPY_DEVICE_TO_HOST));
        for (size_t i = 0; i < 2 * g; i++) {
            unsigned char want = i % pitch < width ? in[i] : 0x3c;
            REQUIRE(out[i] == want, "VMM 2-D in: byte %zu is %#x, expected %#x", i, out[i], want);
        }
        /* Out again on a stream, packed (pitch = width), with the default kind. */
        memset(out, 0, 2 * g);
        CHECK(aclrtMemcpy2dAsync(out, width, va, pitch, width, rows, ACL_MEMCPY_DEFAULT, s));
        CHECK(aclrtSynchronizeStream(s));
        for (size_t r = 0; r < rows; r++)
            for (size_t c = 0; c < width; c++)
                REQUIRE(out[r * width + c] == in[r * pitch + c], "VMM 2-D out: row %zu byte %zu", r,
                        c);
        /* A row past the reserved range: refused, nothing written. */
        EXPECT_RC(aclrtMemcpy2d(va, pitch, in, pitch, width, rows + 1, ACL_MEMCPY_HOST_TO_DEVICE),
                  ACL_ERROR_RT_PARAM_INVALID);
        /* A D2H kind from page-locked memory into the range: corrected to H2D, as CANN's
         * runtime corrects a kind between known places (MemcpyKindAutoCorrect). */
        CHECK(aclrtMemcpy2d(va, pitch, in, pitch, width, 2, ACL_MEMCPY_DEVICE_TO_HOST));
        CHECK(aclrtUnmapMem(va));
        CHECK(aclrtUnmapMem((char *)va + g));
        CHECK(aclrtFreePhysical(pa));
        CHECK(aclrtFreePhysical(pb));
        CHECK(aclrtReleaseMemAddress(va));
        CHECK(aclrtFreeHost(in));
        CHECK(aclrtFreeHost(out));
    }

    CHECK(aclrtFree(dev));
    CHECK(aclrtFree(dev2));
    CHECK(aclrtFreeHost(host));
    CHECK(aclrtFreeHost(back));
    CHECK(aclrtDestroyStream(s));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("memcpy2d: ok\n");
    return 0;
}
