/* cnt.c — count notifies through the C ABI (SPEC §6): struct layouts, the check order (NULL
 * info → ACL_ERROR_INVALID_PARAM; NULL handle or id pointer, bad flag or mode →
 * ACL_ERROR_RT_PARAM_INVALID), every record mode with ADD wrapping at 2^32, clear-on-wait,
 * a wait released by a record on another stream, reset, a timeout reported by synchronize,
 * the free-id budget, and ACL_ERROR_RT_FEATURE_NOT_SUPPORT off the 950 family.
 * usage: cnt 950|other (run with ACL_NOTIFY_SIM_SOC set to match). Exit 0 when every check
 * holds. */
#include <stddef.h>

#include "common.h"

#include "acl/aclnsim.h"

_Static_assert(sizeof(aclrtCntNotifyRecordInfo) == 8, "record info is 8 bytes");
_Static_assert(sizeof(aclrtCntNotifyWaitInfo) == 16, "wait info is 16 bytes");
_Static_assert(offsetof(aclrtCntNotifyWaitInfo, timeout) == 8, "timeout at 8");
_Static_assert(offsetof(aclrtCntNotifyWaitInfo, isClear) == 12, "isClear at 12");
_Static_assert(sizeof(aclrtCntNotify) == sizeof(void *), "aclrtCntNotify is void*");

static aclrtCntNotifyRecordInfo rec(aclrtCntNotifyRecordMode mode, uint32_t value) {
    aclrtCntNotifyRecordInfo r = {mode, value};
    return r;
}

static aclrtCntNotifyWaitInfo wait_for(aclrtCntNotifyWaitMode mode, uint32_t value,
                                       uint32_t timeout, bool clear) {
    aclrtCntNotifyWaitInfo w;
    memset(&w, 0, sizeof w);
    w.mode = mode;
    w.value = value;
    w.timeout = timeout;
    w.isClear = clear;
    return w;
}

/* The count equals v: a 1-second EQUAL wait on the default stream passes. */
static void expect_count(aclrtCntNotify c, uint32_t v) {
    aclrtCntNotifyWaitInfo w = wait_for(ACL_RT_CNT_NOTIFY_WAIT_EQUAL_MODE, v, 1, false);
    CHECK(aclrtCntNotifyWaitWithTimeout(c, NULL, &w));
    aclError r = aclrtSynchronizeStream(NULL);
    REQUIRE(r == ACL_SUCCESS, "the count is not 0x%x (synchronize returned %d): %s", v, (int)r,
            recent_msg());
}

static void unsupported(void) {
    aclrtCntNotify c = NULL;
    aclrtCntNotifyRecordInfo r = rec(ACL_RT_CNT_NOTIFY_RECORD_ADD_MODE, 1);
    aclrtCntNotifyWaitInfo w = wait_for(ACL_RT_CNT_NOTIFY_WAIT_EQUAL_MODE, 1, 1, false);
    uint32_t id = 0, n = 0;
    EXPECT_RC(aclrtCntNotifyCreate(&c, 0), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    EXPECT_RC(aclrtCntNotifyRecord((void *)0x1234, NULL, &r), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    EXPECT_RC(aclrtCntNotifyWaitWithTimeout((void *)0x1234, NULL, &w),
              ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    EXPECT_RC(aclrtCntNotifyReset((void *)0x1234, NULL), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    EXPECT_RC(aclrtCntNotifyGetId((void *)0x1234, &id), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    EXPECT_RC(aclrtCntNotifyDestroy((void *)0x1234), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    EXPECT_RC(aclnsimGetCntNotifyFreeCount(0, &n), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    /* Argument checks still come first. */
    EXPECT_RC(aclrtCntNotifyCreate(NULL, 0), ACL_ERROR_RT_PARAM_INVALID);
}

static void supported(void) {
    uint32_t free0 = 0, free1 = 0, id = 0;
    CHECK(aclnsimGetCntNotifyFreeCount(0, &free0));
    aclrtCntNotify c = NULL;
    EXPECT_RC(aclrtCntNotifyCreate(&c, 1), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclrtCntNotifyCreate(&c, 0));
    REQUIRE(c != NULL, "aclrtCntNotifyCreate gave NULL");
    CHECK(aclrtCntNotifyGetId(c, &id));
    CHECK(aclnsimGetCntNotifyFreeCount(0, &free1));
    REQUIRE(free1 + 1 == free0, "free count-notify ids went from %u to %u", free0, free1);
    /* A notify does not take a count-notify id. */
    aclrtNotify plain = NULL;
    CHECK(aclrtCreateNotify(&plain, 0));
    CHECK(aclnsimGetCntNotifyFreeCount(0, &free0));
    REQUIRE(free0 == free1, "a notify took a count-notify id (%u → %u)", free1, free0);

    /* Records: SET, ADD (wrapping), BIT_OR, BIT_AND, reset. */
    aclrtCntNotifyRecordInfo r = rec(ACL_RT_CNT_NOTIFY_RECORD_SET_VALUE_MODE, 0xFFFFFFFFu);
    CHECK(aclrtCntNotifyRecord(c, NULL, &r));
    r = rec(ACL_RT_CNT_NOTIFY_RECORD_ADD_MODE, 2);
    CHECK(aclrtCntNotifyRecord(c, NULL, &r));
    expect_count(c, 1);
    r = rec(ACL_RT_CNT_NOTIFY_RECORD_BIT_OR_MODE, 0x30);
    CHECK(aclrtCntNotifyRecord(c, NULL, &r));
    expect_count(c, 0x31);
    r = rec(ACL_RT_CNT_NOTIFY_RECORD_BIT_AND_MODE, 0x21);
    CHECK(aclrtCntNotifyRecord(c, NULL, &r));
    expect_count(c, 0x21);
    CHECK(aclrtCntNotifyReset(c, NULL));
    expect_count(c, 0);

    /* Unknown modes. */
    r.mode = (aclrtCntNotifyRecordMode)3;
    EXPECT_RC(aclrtCntNotifyRecord(c, NULL, &r), ACL_ERROR_RT_PARAM_INVALID);
    aclrtCntNotifyWaitInfo w = wait_for((aclrtCntNotifyWaitMode)5, 0, 1, false);
    EXPECT_RC(aclrtCntNotifyWaitWithTimeout(c, NULL, &w), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtCntNotifyWaitWithTimeout(c, NULL, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtCntNotifyRecord(c, NULL, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtCntNotifyGetId(c, NULL), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtCntNotifyReset(NULL, NULL), ACL_ERROR_RT_PARAM_INVALID);

    /* A wait on another stream, released by a record; clear-on-wait. */
    aclrtStream s = NULL;
    CHECK(aclrtCreateStream(&s));
    w = wait_for(ACL_RT_CNT_NOTIFY_WAIT_BIGGER_OR_EQUAL_MODE, 3, 0, true);
    CHECK(aclrtCntNotifyWaitWithTimeout(c, s, &w));
    EXPECT_RC(aclrtSynchronizeStreamWithTimeout(s, 100), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
    r = rec(ACL_RT_CNT_NOTIFY_RECORD_ADD_MODE, 3);
    CHECK(aclrtCntNotifyRecord(c, NULL, &r));
    CHECK(aclrtSynchronizeStreamWithTimeout(s, 10000));
    expect_count(c, 0);

    /* A timeout is reported by the next synchronize, once, and explained. */
    w = wait_for(ACL_RT_CNT_NOTIFY_WAIT_BIGGER_MODE, 100, 1, false);
    CHECK(aclrtCntNotifyWaitWithTimeout(c, s, &w));
    EXPECT_RC(aclrtSynchronizeStream(s), ACL_ERROR_RT_TASK_TIMEOUT);
    const char *m = recent_msg();
    REQUIRE(strstr(m, "count notify") != NULL && strstr(m, "count > value") != NULL,
            "the timeout message does not explain the wait: %s", m);
    CHECK(aclrtSynchronizeStream(s));
    CHECK(aclrtDestroyStream(s));

    /* Handles: a notify is not a count notify; destroyed handles are stale. */
    EXPECT_RC(aclrtCntNotifyGetId(plain, &id), ACL_ERROR_RT_INVALID_HANDLE);
    CHECK(aclrtDestroyNotify(plain));
    CHECK(aclrtCntNotifyDestroy(c));
    EXPECT_RC(aclrtCntNotifyDestroy(c), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT_RC(aclrtCntNotifyGetId(c, &id), ACL_ERROR_RT_INVALID_HANDLE);
    CHECK(aclnsimGetCntNotifyFreeCount(0, &free1));
    REQUIRE(free1 == free0 + 1, "destroy did not give the id back (%u free, %u before)", free1,
            free0);
}

int main(int argc, char **argv) {
    g_role = "cnt";
    REQUIRE(argc == 2 && (strcmp(argv[1], "950") == 0 || strcmp(argv[1], "other") == 0),
            "usage: cnt 950|other");
    aclrtCntNotify c = NULL;
    aclrtCntNotifyRecordInfo r = rec(ACL_RT_CNT_NOTIFY_RECORD_ADD_MODE, 1);
    uint32_t id = 0;
    /* Argument checks come before the session starts (the first call that passes them starts
     * it, as CANN's runtime does: then no device is current yet). */
    EXPECT_RC(aclrtCntNotifyCreate(NULL, 0), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtCntNotifyGetId(NULL, &id), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtCntNotifyRecord((void *)0x1234, NULL, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtCntNotifyRecord(NULL, NULL, &r), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtCntNotifyCreate(&c, 0), strcmp(argv[1], "950") == 0
                                               ? ACL_ERROR_RT_CONTEXT_NULL
                                               : ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    if (strcmp(argv[1], "950") == 0) {
        supported();
    } else {
        unsupported();
    }
    CHECK(aclFinalize());
    printf("cnt: ok\n");
    return 0;
}
