/* stream_info.c — what a stream answers about itself: aclrtStreamGetId, aclrtStreamGetPriority
 * and aclrtStreamGetFlags, as CANN's runtime answers them (hicann/runtime
 * src/acl/aclrt_impl/stream.cpp for the NULL output checks and the flags, src/runtime/api/impl/
 * api_impl.cc for the NULL stream and the missing context, api_error.cc for the priority's
 * clamp into [0, 7]): ids unique among the live streams of a device, the priority and
 * ACL_STREAM_* flags of aclrtCreateStreamWithConfig, 0 for aclrtCreateStream's and default
 * streams. The getters do not check the stream's context: a live stream of another device or
 * context answers its own values.
 * aclrtSetStreamOverflowSwitch / aclrtGetStreamOverflowSwitch: plain state of a stream used in
 * its own context on chips that keep it (Ascend910B: 0 until set), elsewhere the set does
 * nothing and answers 0 and the get answers 1 (Ascend310P; api_c_stream.cc, api_impl.cc).
 * aclrtSetStreamAttribute / aclrtGetStreamAttribute: the failure mode (aclrtSetStreamFailureMode's
 * state), the overflow switch as above, the user tag where the chip keeps it, the operator-info
 * cache switch (0 or 1) and the priority (clamped; not of a NULL stream), with their codes
 * (api_c_stream.cc rtsStreamSetAttribute, api_error.cc).
 * Also: callback tasks a stream discards before they run (abort, forced destroy) free what they
 * hold; run under valgrind's memcheck, a leak fails the run.
 * Exit 0 and "stream_info: ok". */
#include "common.h"

#include <pthread.h>

static int32_t id_of(aclrtStream s) {
    int32_t id = -1;
    CHECK(aclrtStreamGetId(s, &id));
    REQUIRE(id >= 0, "stream id %d is negative", id);
    return id;
}

static uint32_t priority_of(aclrtStream s) {
    uint32_t v = 99;
    CHECK(aclrtStreamGetPriority(s, &v));
    return v;
}

static uint32_t flags_of(aclrtStream s) {
    uint32_t v = 99;
    CHECK(aclrtStreamGetFlags(s, &v));
    return v;
}

static void require_distinct(const int32_t *ids, int n, const char *what) {
    for (int i = 0; i < n; i++) {
        for (int j = i + 1; j < n; j++) {
            REQUIRE(ids[i] != ids[j], "%s: streams %d and %d share id %d", what, i, j, ids[i]);
        }
    }
}

/* ---- the overflow switch ------------------------------------------------------------------ */

static uint32_t switch_of(aclrtStream s) {
    uint32_t v = 99;
    CHECK(aclrtGetStreamOverflowSwitch(s, &v));
    return v;
}

/* `live` is a stream of the current context, `other` one of another context, `dead` destroyed. */
static void overflow_switch(int keeps, aclrtStream live, aclrtStream other, aclrtStream dead) {
    uint32_t v = 0;
    EXPECT_RC(aclrtSetStreamOverflowSwitch(live, 2), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtSetStreamOverflowSwitch(dead, UINT32_MAX), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtGetStreamOverflowSwitch(live, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtGetStreamOverflowSwitch(dead, &v), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT_RC(aclrtGetStreamOverflowSwitch(other, &v), ACL_ERROR_RT_STREAM_CONTEXT);
    if (!keeps) {
        /* Nothing is kept, nothing is checked: the get answers 1. */
        REQUIRE(switch_of(live) == 1 && switch_of(NULL) == 1, "the switch of a chip without one");
        CHECK(aclrtSetStreamOverflowSwitch(live, 0));
        CHECK(aclrtSetStreamOverflowSwitch(dead, 1));
        CHECK(aclrtSetStreamOverflowSwitch(other, 1));
        REQUIRE(switch_of(live) == 1, "a chip without the switch answered %u", switch_of(live));
        return;
    }
    EXPECT_RC(aclrtSetStreamOverflowSwitch(dead, 1), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT_RC(aclrtSetStreamOverflowSwitch((aclrtStream)(uintptr_t)0x1234, 1),
              ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT_RC(aclrtSetStreamOverflowSwitch(other, 1), ACL_ERROR_RT_STREAM_CONTEXT);
    REQUIRE(strstr(recent_msg(), "aclrtSetStreamOverflowSwitch") != NULL, "message: %s",
            recent_msg());
    REQUIRE(switch_of(live) == 0 && switch_of(NULL) == 0, "the switch starts off");
    CHECK(aclrtSetStreamOverflowSwitch(live, 1));
    REQUIRE(switch_of(live) == 1, "switch %u after setting 1", switch_of(live));
    REQUIRE(switch_of(NULL) == 0, "another stream's switch moved");
    CHECK(aclrtSetStreamOverflowSwitch(NULL, 1));
    aclrtStream dflt = NULL;
    CHECK(aclrtCtxGetCurrentDefaultStream(&dflt));
    REQUIRE(switch_of(NULL) == 1 && switch_of(dflt) == 1, "the default stream's switch");
    CHECK(aclrtSetStreamOverflowSwitch(live, 0));
    REQUIRE(switch_of(live) == 0, "switch %u after setting 0", switch_of(live));
}

/* ---- the attributes (aclrtSetStreamAttribute / aclrtGetStreamAttribute) -------------------- */

/* `full`: a chip that keeps the overflow switch and the user tag (Ascend910B). `live` is a
 * stream of the current context, `other` one of another context, `dead` a destroyed one. */
static void stream_attributes(int full, aclrtStream live, aclrtStream other, aclrtStream dead) {
    aclrtStreamAttrValue v;
    memset(&v, 0, sizeof v);
    EXPECT_RC(aclrtSetStreamAttribute(live, ACL_STREAM_ATTR_FAILURE_MODE, NULL),
              ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtGetStreamAttribute(live, ACL_STREAM_ATTR_PRIORITY, NULL),
              ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtGetStreamAttribute(dead, ACL_STREAM_ATTR_PRIORITY, &v),
              ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT_RC(aclrtSetStreamAttribute(dead, ACL_STREAM_ATTR_CACHE_OP_INFO, &v),
              ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT_RC(aclrtSetStreamAttribute(live, (aclrtStreamAttr)6, &v), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtGetStreamAttribute(live, (aclrtStreamAttr)0, &v), ACL_ERROR_RT_PARAM_INVALID);
    /* The failure mode, the same state as aclrtSetStreamFailureMode's. */
    CHECK(aclrtGetStreamAttribute(live, ACL_STREAM_ATTR_FAILURE_MODE, &v));
    REQUIRE(v.failureMode == ACL_CONTINUE_ON_FAILURE, "failure mode %llu",
            (unsigned long long)v.failureMode);
    v.failureMode = ACL_STOP_ON_FAILURE;
    CHECK(aclrtSetStreamAttribute(live, ACL_STREAM_ATTR_FAILURE_MODE, &v));
    memset(&v, 0xff, sizeof v);
    CHECK(aclrtGetStreamAttribute(live, ACL_STREAM_ATTR_FAILURE_MODE, &v));
    REQUIRE(v.failureMode == ACL_STOP_ON_FAILURE, "failure mode %llu",
            (unsigned long long)v.failureMode);
    CHECK(aclrtSetStreamFailureMode(live, ACL_CONTINUE_ON_FAILURE));
    CHECK(aclrtGetStreamAttribute(live, ACL_STREAM_ATTR_FAILURE_MODE, &v));
    REQUIRE(v.failureMode == ACL_CONTINUE_ON_FAILURE, "aclrtSetStreamFailureMode not seen");
    EXPECT_RC(aclrtSetStreamAttribute(other, ACL_STREAM_ATTR_FAILURE_MODE, &v),
              ACL_ERROR_RT_STREAM_CONTEXT);
    /* The overflow switch, as aclrtSet/GetStreamOverflowSwitch. */
    memset(&v, 0, sizeof v);
    v.overflowSwitch = 1;
    CHECK(aclrtSetStreamAttribute(live, ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK, &v));
    REQUIRE(switch_of(live) == 1, "overflow switch after the attribute set");
    v.overflowSwitch = 0;
    CHECK(aclrtSetStreamAttribute(live, ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK, &v));
    v.overflowSwitch = 7;
    CHECK(aclrtGetStreamAttribute(live, ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK, &v));
    REQUIRE(v.overflowSwitch == (full ? 0u : 1u), "overflow switch %u", v.overflowSwitch);
    v.overflowSwitch = 2;
    EXPECT_RC(aclrtSetStreamAttribute(live, ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK, &v),
              full ? ACL_ERROR_RT_PARAM_INVALID : ACL_SUCCESS);
    /* The user tag: kept where the chip has it, else nothing set and nothing written. */
    v.userCustomTag = 0xabc;
    CHECK(aclrtSetStreamAttribute(live, ACL_STREAM_ATTR_USER_CUSTOM_TAG, &v));
    memset(&v, 0x5a, sizeof v);
    CHECK(aclrtGetStreamAttribute(live, ACL_STREAM_ATTR_USER_CUSTOM_TAG, &v));
    REQUIRE(v.userCustomTag == (full ? 0xabcu : 0x5a5a5a5au), "user tag %#x", v.userCustomTag);
    if (full) {
        EXPECT_RC(aclrtGetStreamAttribute(other, ACL_STREAM_ATTR_USER_CUSTOM_TAG, &v),
                  ACL_ERROR_RT_STREAM_CONTEXT);
    }
    /* The operator-information cache switch: 0 or 1. */
    v.cacheOpInfoSwitch = 2;
    EXPECT_RC(aclrtSetStreamAttribute(live, ACL_STREAM_ATTR_CACHE_OP_INFO, &v),
              ACL_ERROR_RT_PARAM_INVALID);
    v.cacheOpInfoSwitch = 1;
    CHECK(aclrtSetStreamAttribute(live, ACL_STREAM_ATTR_CACHE_OP_INFO, &v));
    v.cacheOpInfoSwitch = 0;
    CHECK(aclrtGetStreamAttribute(live, ACL_STREAM_ATTR_CACHE_OP_INFO, &v));
    REQUIRE(v.cacheOpInfoSwitch == 1, "cache op info switch %u", v.cacheOpInfoSwitch);
    /* The priority: clamped, answered by aclrtStreamGetPriority too; not of a NULL stream. */
    const uint32_t was = priority_of(live);
    v.streamPriority = 12;
    CHECK(aclrtSetStreamAttribute(live, ACL_STREAM_ATTR_PRIORITY, &v));
    v.streamPriority = 0;
    CHECK(aclrtGetStreamAttribute(live, ACL_STREAM_ATTR_PRIORITY, &v));
    REQUIRE(v.streamPriority == 7 && priority_of(live) == 7, "priority %u", v.streamPriority);
    EXPECT_RC(aclrtSetStreamAttribute(NULL, ACL_STREAM_ATTR_PRIORITY, &v),
              ACL_ERROR_RT_PARAM_INVALID);
    v.streamPriority = was;
    CHECK(aclrtSetStreamAttribute(live, ACL_STREAM_ATTR_PRIORITY, &v));
}

/* ---- callback tasks discarded unrun ------------------------------------------------------ */

static volatile int g_stop;
static volatile int g_ran;

static void *serve(void *ctx) {
    CHECK(aclrtSetCurrentContext((aclrtContext)ctx));
    while (!g_stop) {
        aclError rc = aclrtProcessReport(50);
        REQUIRE(rc == ACL_SUCCESS || rc == ACL_ERROR_RT_REPORT_TIMEOUT ||
                    rc == ACL_ERROR_RT_THREAD_SUBSCRIBE,
                "aclrtProcessReport: %d", rc);
    }
    return NULL;
}

static void counted(void *arg) {
    (void)arg;
    g_ran++;
}

/* Queues two callbacks behind a wait that never ends, then discards them: by an abort, or by a
 * forced destroy. */
static void discarded_callbacks(pthread_t thread, int force_destroy) {
    aclrtStream s = NULL;
    aclrtNotify n = NULL;
    CHECK(aclrtCreateStream(&s));
    CHECK(aclrtCreateNotify(&n, 0));
    CHECK(aclrtSubscribeReport((uint64_t)thread, s));
    CHECK(aclrtWaitAndResetNotify(n, s, 0));
    CHECK(aclrtLaunchCallback(counted, NULL, ACL_CALLBACK_NO_BLOCK, s));
    CHECK(aclrtLaunchCallback(counted, NULL, ACL_CALLBACK_BLOCK, s));
    if (force_destroy) {
        CHECK(aclrtDestroyStreamForce(s));
    } else {
        CHECK(aclrtStreamAbort(s));
        CHECK(aclrtUnSubscribeReport((uint64_t)thread, s));
        CHECK(aclrtDestroyStream(s));
    }
    CHECK(aclrtDestroyNotify(n));
}

static void callbacks(void) {
    pthread_t thread;
    aclrtContext ctx = NULL;
    CHECK(aclrtGetCurrentContext(&ctx));
    REQUIRE(pthread_create(&thread, NULL, serve, ctx) == 0, "pthread_create");
    discarded_callbacks(thread, 0);
    discarded_callbacks(thread, 1);
    g_stop = 1;
    REQUIRE(pthread_join(thread, NULL) == 0, "pthread_join");
    REQUIRE(g_ran == 0, "%d discarded callbacks ran", g_ran);
}

int main(void) {
    const char *chip = getenv("ACL_NOTIFY_SIM_SOC");
    REQUIRE(chip != NULL, "ACL_NOTIFY_SIM_SOC is not set");
    int keeps_switch = strcmp(chip, "Ascend910B") == 0;
    REQUIRE(keeps_switch || strcmp(chip, "Ascend310P") == 0, "run on an unexpected chip %s", chip);
    int32_t id = 0;
    uint32_t u = 0;
    /* NULL outputs first (the ACL layer checks them), even before aclInit. */
    EXPECT_RC(aclrtStreamGetId(NULL, NULL), ACL_ERROR_INVALID_PARAM);
    REQUIRE(strstr(recent_msg(), "aclrtStreamGetId") != NULL, "message: %s", recent_msg());
    EXPECT_RC(aclrtStreamGetPriority(NULL, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtStreamGetFlags(NULL, NULL), ACL_ERROR_INVALID_PARAM);

    CHECK(aclInit(NULL));
    /* No current context: the default stream is nobody's. */
    EXPECT_RC(aclrtStreamGetId(NULL, &id), ACL_ERROR_RT_CONTEXT_NULL);
    EXPECT_RC(aclrtStreamGetPriority(NULL, &u), ACL_ERROR_RT_CONTEXT_NULL);
    EXPECT_RC(aclrtStreamGetFlags(NULL, &u), ACL_ERROR_RT_CONTEXT_NULL);
    EXPECT_RC(aclrtStreamGetId((aclrtStream)(uintptr_t)0x1234, &id), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT_RC(aclrtGetStreamOverflowSwitch(NULL, &u), ACL_ERROR_RT_CONTEXT_NULL);
    EXPECT_RC(aclrtSetStreamOverflowSwitch(NULL, 1),
              keeps_switch ? ACL_ERROR_RT_CONTEXT_NULL : ACL_SUCCESS);

    CHECK(aclrtSetDevice(0));
    aclrtStream plain = NULL, fast = NULL, high = NULL, wrapped = NULL, dflt = NULL;
    CHECK(aclrtCreateStream(&plain));
    CHECK(aclrtCreateStreamWithConfig(&fast, 3, ACL_STREAM_FAST_LAUNCH | ACL_STREAM_FAST_SYNC));
    CHECK(aclrtCreateStreamWithConfig(&high, 9, ACL_STREAM_PERSISTENT));
    CHECK(aclrtCreateStreamWithConfig(&wrapped, 0x80000000u, ACL_STREAM_DEVICE_USE_ONLY));
    CHECK(aclrtCtxGetCurrentDefaultStream(&dflt));

    /* NULL outputs on a live stream. */
    EXPECT_RC(aclrtStreamGetId(fast, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtStreamGetPriority(fast, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtStreamGetFlags(fast, NULL), ACL_ERROR_INVALID_PARAM);

    /* Priorities as created, clamped into [0, 7] (above INT32_MAX is negative: 0). */
    REQUIRE(priority_of(plain) == 0, "aclrtCreateStream's priority %u", priority_of(plain));
    REQUIRE(priority_of(fast) == 3, "priority %u, want 3", priority_of(fast));
    REQUIRE(priority_of(high) == 7, "priority 9 answered %u, want 7", priority_of(high));
    REQUIRE(priority_of(wrapped) == 0, "priority 0x80000000 answered %u, want 0",
            priority_of(wrapped));
    REQUIRE(priority_of(NULL) == 0 && priority_of(dflt) == 0, "default stream's priority");

    /* Flags as created. */
    REQUIRE(flags_of(plain) == 0, "aclrtCreateStream's flags %#x", flags_of(plain));
    REQUIRE(flags_of(fast) == (ACL_STREAM_FAST_LAUNCH | ACL_STREAM_FAST_SYNC), "flags %#x",
            flags_of(fast));
    REQUIRE(flags_of(high) == ACL_STREAM_PERSISTENT, "flags %#x", flags_of(high));
    REQUIRE(flags_of(wrapped) == ACL_STREAM_DEVICE_USE_ONLY, "flags %#x", flags_of(wrapped));
    REQUIRE(flags_of(NULL) == 0 && flags_of(dflt) == 0, "default stream's flags");

    /* Ids: one per live stream of the device, the default stream's the same every time. */
    int32_t dev0[5] = {id_of(plain), id_of(fast), id_of(high), id_of(wrapped), id_of(NULL)};
    require_distinct(dev0, 5, "device 0");
    REQUIRE(id_of(dflt) == dev0[4] && id_of(NULL) == dev0[4], "the default stream's id moved");
    REQUIRE(id_of(fast) == dev0[1], "a stream's id moved");

    /* A destroyed stream: 107017 from each getter; the others keep their ids. */
    CHECK(aclrtDestroyStream(fast));
    EXPECT_RC(aclrtStreamGetId(fast, &id), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT_RC(aclrtStreamGetPriority(fast, &u), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT_RC(aclrtStreamGetFlags(fast, &u), ACL_ERROR_RT_INVALID_HANDLE);
    REQUIRE(strstr(recent_msg(), "aclrtStreamGetFlags") != NULL, "message: %s", recent_msg());
    aclrtStream again = NULL;
    CHECK(aclrtCreateStream(&again));
    int32_t dev0b[5] = {id_of(plain), id_of(again), id_of(high), id_of(wrapped), id_of(NULL)};
    require_distinct(dev0b, 5, "device 0 after a destroy");
    REQUIRE(dev0b[0] == dev0[0] && dev0b[2] == dev0[2], "a destroy moved another stream's id");

    /* Another context of device 0: its default stream is another stream, with its own id; the
     * streams of the primary context still answer (the getters check no context). */
    aclrtContext ctx = NULL;
    CHECK(aclrtCreateContext(&ctx, 0));
    aclrtStream in_ctx = NULL;
    CHECK(aclrtCreateStreamWithConfig(&in_ctx, 5, ACL_STREAM_FAST_SYNC));
    int32_t dev0c[7] = {dev0b[0], dev0b[1], dev0b[2], dev0b[3], dev0b[4], id_of(NULL),
                        id_of(in_ctx)};
    require_distinct(dev0c, 7, "device 0 with a second context");
    REQUIRE(id_of(plain) == dev0[0] && priority_of(high) == 7 && flags_of(high) == ACL_STREAM_PERSISTENT,
            "a stream of another context answered other values");
    overflow_switch(keeps_switch, in_ctx, plain, fast);
    stream_attributes(keeps_switch, in_ctx, plain, fast);

    /* Another device: its own ids (unique on that device), and device 0's streams answer. */
    CHECK(aclrtSetDevice(1));
    aclrtStream d1a = NULL, d1b = NULL;
    CHECK(aclrtCreateStream(&d1a));
    CHECK(aclrtCreateStreamWithConfig(&d1b, 2, ACL_STREAM_FAST_LAUNCH));
    int32_t dev1[3] = {id_of(d1a), id_of(d1b), id_of(NULL)};
    require_distinct(dev1, 3, "device 1");
    REQUIRE(priority_of(d1b) == 2 && flags_of(d1b) == ACL_STREAM_FAST_LAUNCH, "device 1 stream");
    REQUIRE(id_of(plain) == dev0[0] && priority_of(in_ctx) == 5 && flags_of(in_ctx) == ACL_STREAM_FAST_SYNC,
            "device 0's streams, asked from device 1");

    /* A destroyed context takes its streams along. */
    CHECK(aclrtDestroyContext(ctx));
    EXPECT_RC(aclrtStreamGetId(in_ctx, &id), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT_RC(aclrtStreamGetPriority(in_ctx, &u), ACL_ERROR_RT_INVALID_HANDLE);

    /* A device reset takes its streams along; the other device's stay. */
    CHECK(aclrtResetDevice(0));
    EXPECT_RC(aclrtStreamGetId(plain, &id), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT_RC(aclrtStreamGetFlags(high, &u), ACL_ERROR_RT_INVALID_HANDLE);
    REQUIRE(id_of(d1a) == dev1[0], "device 1's stream after device 0's reset");
    CHECK(aclrtDestroyStream(d1a));
    CHECK(aclrtDestroyStream(d1b));

    callbacks();

    CHECK(aclrtResetDevice(1));
    CHECK(aclFinalize());
    printf("stream_info: ok\n");
    return 0;
}
