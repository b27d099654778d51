/* copy_kinds.c — a copy whose kind contradicts its addresses, for every pair of places
 * (device memory, aclrtMallocHost memory, pageable host memory) and every kind, through each
 * copy call, as CANN's runtime answers it (hicann/runtime src/runtime/api/impl/api_error.cc):
 *
 * - aclrtMemcpy: the kind is not looked at (MemCopySync hands the copy to the driver, whose
 *   synchronous copy takes no kind; the API page calls kind reserved): every pair copies.
 * - aclrtMemcpyAsync: MemcpyKindAutoCorrect. Between device and page-locked memory the kind
 *   is replaced by what the addresses are (ACL_MEMCPY_HOST_TO_DEVICE between two device
 *   buffers is a device-to-device copy); two page-locked sides make a host-to-host copy,
 *   refused (207000). Beside pageable memory an explicit kind must call the known side what
 *   it is (else 107000, naming pageable memory); DEFAULT calls pageable memory host memory.
 * - aclrtMemcpy2d / aclrtMemcpy2dAsync: the same table (MemCopy2DSync, MemCopy2DAsync); the
 *   corrected kind must then be H2D or D2H (sync), or H2D, D2H or D2D (async), else 107000;
 *   an explicit D2D kind is 207000 for the sync copy before any of it.
 *
 * A copy that succeeds moved its bytes (checked after the stream's synchronize); one refused
 * wrote nothing. Cells marked '?' are left alone: CANN's runtime lets them through to the
 * driver (a 2-D copy between two host buffers, a device-to-device task with a pageable side),
 * whose answer its source does not show.
 *
 * usage: copy_kinds; exit 0 and "copy_kinds: ok" when every check holds. */
#include "common.h"

enum { B = 64, HALF = B / 2 };
enum { DEV, PIN, PG, NPLACES };
static const char *place_name[NPLACES] = {"device", "aclrtMallocHost", "pageable"};
static const aclrtMemcpyKind kinds[5] = {ACL_MEMCPY_HOST_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE,
                                         ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_DEVICE_TO_DEVICE,
                                         ACL_MEMCPY_DEFAULT};
static const char *kind_name[5] = {"H2H", "H2D", "D2H", "D2D", "DEFAULT"};

/* [place][0 destination, 1 source] */
static void *buf[NPLACES][2];
static unsigned char pg_bytes[2][B];
static aclrtStream s;

/* Sets / tests a buffer's bytes with a default-kind copy (by the addresses everywhere). */
static void fill(void *p, unsigned char v) {
    unsigned char tmp[B];
    memset(tmp, v, B);
    CHECK(aclrtMemcpy(p, B, tmp, B, ACL_MEMCPY_DEFAULT));
}

static int holds(void *p, unsigned char v) {
    unsigned char tmp[B];
    CHECK(aclrtMemcpy(tmp, B, p, B, ACL_MEMCPY_DEFAULT));
    for (int i = 0; i < B; i++) {
        if (tmp[i] != v) return 0;
    }
    return 1;
}

/* Expected outcome per (destination, source) pair, one character per kind of `kinds`:
 * 'c' copied, 'R' 107000, 'N' 207000, 'P' 100000 (the ACL layer's), '?' not asserted. */
typedef const char *row_t[NPLACES][NPLACES];

/* aclrtMemcpyAsync: kinds H2H, H2D, D2H, D2D, DEFAULT. */
static row_t async_1d = {
    /* dst DEV  <- DEV      PIN      PG */
    {"ccccc", "ccccc", "RcRvc"},
    /* dst PIN  <- */
    {"ccccc", "NNNNN", "NRcRN"},
    /* dst PG   <- */
    {"RRcvc", "NcRRN", "NccvN"},
};

/* aclrtMemcpy2d: kinds H2D, D2H, D2D, DEFAULT. */
static row_t sync_2d = {
    {"RRNR", "ccNc", "cRNc"},
    {"ccNc", "RRNR", "R?NR"},
    {"RcNc", "?RNR", "??NR"},
};

/* aclrtMemcpy2dAsync: kinds H2D, D2H, D2D, DEFAULT. */
static row_t async_2d = {
    {"cccc", "cccc", "cR?c"},
    {"cccc", "RRRR", "R?RR"},
    {"Rc?c", "?RRR", "???R"},
};

static int case_no;

/* Runs one copy of kind index k from place sp to place dp and checks `want`. `call` is 0 for
 * aclrtMemcpy, 1 for aclrtMemcpyAsync, 2 for aclrtMemcpy2d, 3 for aclrtMemcpy2dAsync. */
static void one(int call, int dp, int sp, int k, char want) {
    static const char *call_name[4] = {"aclrtMemcpy", "aclrtMemcpyAsync", "aclrtMemcpy2d",
                                       "aclrtMemcpy2dAsync"};
    if (want == '?') return;
    void *dst = buf[dp][0], *src = buf[sp][1];
    unsigned char v = (unsigned char)(++case_no);
    fill(src, v);
    fill(dst, 0);
    aclrtMemcpyKind kind = (call >= 2) ? kinds[k + 1] : kinds[k];
    aclError r;
    switch (call) {
        case 0: r = aclrtMemcpy(dst, B, src, B, kind); break;
        case 1: r = aclrtMemcpyAsync(dst, B, src, B, kind, s); break;
        case 2: r = aclrtMemcpy2d(dst, HALF, src, HALF, HALF, 2, kind); break;
        default: r = aclrtMemcpy2dAsync(dst, HALF, src, HALF, HALF, 2, kind, s); break;
    }
    const char *msg = recent_msg();
    aclError expected = want == 'c' ? ACL_SUCCESS
                        : want == 'R' ? ACL_ERROR_RT_PARAM_INVALID
                        : want == 'N' ? ACL_ERROR_RT_FEATURE_NOT_SUPPORT
                                      : ACL_ERROR_INVALID_PARAM;
    REQUIRE(r == expected, "%s %s <- %s, kind %s: %d, expected %d: %s", call_name[call],
            place_name[dp], place_name[sp], kind_name[(call >= 2) ? k + 1 : k], (int)r,
            (int)expected, msg);
    CHECK(aclrtSynchronizeStream(s));
    REQUIRE(holds(dst, want == 'c' ? v : 0), "%s %s <- %s, kind %s: the destination %s",
            call_name[call], place_name[dp], place_name[sp],
            kind_name[(call >= 2) ? k + 1 : k], want == 'c' ? "lacks the bytes" : "was written");
    /* A refusal of the table (an explicit kind beside pageable memory) names it. */
    if (want == 'R' && call == 1) {
        REQUIRE(strstr(msg, "pageable") != NULL, "message lacks \"pageable\": %s", msg);
    }
}

int main(void) {
    g_role = "copy_kinds";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtCreateStream(&s));
    for (int i = 0; i < 2; i++) {
        CHECK(aclrtMalloc(&buf[DEV][i], B, ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK(aclrtMallocHost(&buf[PIN][i], B));
        buf[PG][i] = pg_bytes[i];
    }

    /* aclrtMemcpy: every kind between every pair copies, as the addresses are. */
    for (int dp = 0; dp < NPLACES; dp++)
        for (int sp = 0; sp < NPLACES; sp++)
            for (int k = 0; k < 5; k++) one(0, dp, sp, k, 'c');

    /* 'v' in async_1d: a D2D kind with a pageable side, let through to the driver ('?'). */
    for (int dp = 0; dp < NPLACES; dp++)
        for (int sp = 0; sp < NPLACES; sp++)
            for (int k = 0; k < 5; k++) {
                char w = async_1d[dp][sp][k];
                one(1, dp, sp, k, w == 'v' ? '?' : w);
            }
    for (int dp = 0; dp < NPLACES; dp++)
        for (int sp = 0; sp < NPLACES; sp++)
            for (int k = 0; k < 4; k++) {
                one(2, dp, sp, k, sync_2d[dp][sp][k]);
                one(3, dp, sp, k, async_2d[dp][sp][k]);
            }
    /* ACL_MEMCPY_HOST_TO_HOST is no kind of a 2-D copy (the ACL layer's 100000). */
    EXPECT_RC(aclrtMemcpy2d(buf[DEV][0], HALF, buf[DEV][1], HALF, HALF, 2, ACL_MEMCPY_HOST_TO_HOST),
              ACL_ERROR_INVALID_PARAM);

    /* A corrected copy in a capture is captured as corrected: H2D between two device
     * buffers replays as a device-to-device copy. */
    aclmdlRI m = NULL;
    fill(buf[DEV][1], 0x5a);
    fill(buf[DEV][0], 0);
    CHECK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    CHECK(aclrtMemcpyAsync(buf[DEV][0], B, buf[DEV][1], B, ACL_MEMCPY_HOST_TO_DEVICE, s));
    EXPECT_RC(aclrtMemcpyAsync(buf[DEV][0], B, buf[PG][1], B, ACL_MEMCPY_DEVICE_TO_HOST, s),
              ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclmdlRICaptureEnd(s, &m));
    REQUIRE(holds(buf[DEV][0], 0), "a captured copy ran at capture");
    CHECK(aclmdlRIExecuteAsync(m, s));
    CHECK(aclrtSynchronizeStream(s));
    REQUIRE(holds(buf[DEV][0], 0x5a), "the captured corrected copy did not copy");
    CHECK(aclmdlRIDestroy(m));

    for (int i = 0; i < 2; i++) {
        CHECK(aclrtFree(buf[DEV][i]));
        CHECK(aclrtFreeHost(buf[PIN][i]));
    }
    CHECK(aclrtDestroyStream(s));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("copy_kinds: ok (%d copies)\n", case_no);
    return 0;
}
