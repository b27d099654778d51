/* stop_mode.c — a context in stop-on-failure mode, as CANN's runtime keeps it (hicann/runtime
 * src/runtime/core/src/stream/stream.cc: Stream::SetFailMode puts the stream's context in stop
 * mode, Stream::EnterFailureAbort gives the context the first failure of any of its streams;
 * src/runtime/core/src/context/context.cc: Context::CheckStatus answers it to stream and
 * device synchronizes, stream queries, event synchronizes and queries, Context::CheckTaskSend
 * to every task submitted in the context, and only the context's teardown clears it;
 * src/runtime/api/impl/api_impl.cc ApiImpl::StreamSetMode refuses any mode for a stream in
 * abort mode).
 *
 * What a program sees once a task failed in such a context: every one of those calls answers
 * the failure's code (here 107020, a notify wait that timed out), again and again, on every
 * stream of the context, the default stream and streams created after the failure included;
 * nothing launched runs. Another context, a new one, and the primary context made after
 * aclrtResetDevice start afresh. A failure before the mode was set stays its stream's
 * (reported once). Exit 0 and "stop_mode: ok". */
#include "common.h"

static volatile int g_ran;
static void bump(void *arg) {
    (void)arg;
    __atomic_add_fetch(&g_ran, 1, __ATOMIC_SEQ_CST);
}

#define FAILED ACL_ERROR_RT_TASK_TIMEOUT

/* Every check of the failed current context answers the failure; nothing launched runs. */
static void context_is_failed(aclrtStream s, aclrtStream t, aclrtEvent ev, aclrtNotify n) {
    EXPECT_RC(aclrtSynchronizeStream(s), FAILED);
    expect_msg("has failed", "stays failed", "aclrtResetDevice", "got no record within 1 s", NULL);
    EXPECT_RC(aclrtSynchronizeStream(s), FAILED);
    EXPECT_RC(aclrtSynchronizeStreamWithTimeout(s, 1000), FAILED);
    EXPECT_RC(aclrtSynchronizeStream(t), FAILED);
    EXPECT_RC(aclrtSynchronizeStream(NULL), FAILED);
    aclrtStreamStatus st;
    EXPECT_RC(aclrtStreamQuery(t, &st), FAILED);
    EXPECT_RC(aclrtSynchronizeDevice(), FAILED);
    EXPECT_RC(aclrtSynchronizeDeviceWithTimeout(1000), FAILED);
    EXPECT_RC(aclrtSynchronizeEvent(ev), FAILED);
    aclrtEventRecordedStatus rec;
    EXPECT_RC(aclrtQueryEventStatus(ev, &rec), FAILED);
    /* Launches on any stream of the context are refused. */
    EXPECT_RC(aclrtLaunchHostFunc(t, bump, NULL), FAILED);
    EXPECT_RC(aclrtLaunchHostFunc(NULL, bump, NULL), FAILED);
    EXPECT_RC(aclrtRecordNotify(n, t), FAILED);
    EXPECT_RC(aclrtRecordEvent(ev, t), FAILED);
    EXPECT_RC(aclrtStreamWaitEvent(t, ev), FAILED);
    void *dev = NULL;
    char host[64] = {0};
    CHECK(aclrtMalloc(&dev, sizeof host, ACL_MEM_MALLOC_HUGE_FIRST));
    EXPECT_RC(aclrtMemcpyAsync(dev, sizeof host, host, sizeof host, ACL_MEMCPY_HOST_TO_DEVICE, t),
              FAILED);
    EXPECT_RC(aclrtMemsetAsync(dev, sizeof host, 0, sizeof host, t), FAILED);
    CHECK(aclrtFree(dev));
    /* A stream created now is the context's too. */
    aclrtStream u;
    CHECK(aclrtCreateStream(&u));
    EXPECT_RC(aclrtLaunchHostFunc(u, bump, NULL), FAILED);
    EXPECT_RC(aclrtSynchronizeStream(u), FAILED);
    CHECK(aclrtDestroyStream(u));
    /* The failed stream is in abort mode: no mode is set any more; another stream's is. */
    EXPECT_RC(aclrtSetStreamFailureMode(s, ACL_STOP_ON_FAILURE), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK(aclrtSetStreamFailureMode(t, ACL_STOP_ON_FAILURE));
    REQUIRE(g_ran == 0, "%d tasks ran in the failed context", g_ran);
}

/* In the current context: `s` stops on failure, `t` does not; a wait on `s` times out. */
static void fail_in_current_context(aclrtStream *s, aclrtStream *t, aclrtEvent *ev,
                                    aclrtNotify n) {
    CHECK(aclrtCreateStream(s));
    CHECK(aclrtCreateStream(t));
    CHECK(aclrtCreateEvent(ev));
    CHECK(aclrtSetStreamFailureMode(*s, ACL_STOP_ON_FAILURE));
    /* Before the failure the context works. */
    g_ran = 0;
    CHECK(aclrtLaunchHostFunc(*t, bump, NULL));
    CHECK(aclrtSynchronizeDevice());
    REQUIRE(g_ran == 1, "before the failure: %d", g_ran);
    g_ran = 0;
    /* Held until all are queued: once the wait has failed, the context refuses launches. */
    static gate_t hold;
    hold.open = 0;
    CHECK(aclrtLaunchHostFunc(*s, gate_hold, &hold));
    CHECK(aclrtWaitAndResetNotify(n, *s, 1));
    CHECK(aclrtLaunchHostFunc(*s, bump, NULL));
    CHECK(aclrtRecordEvent(*ev, *s));
    gate_open(&hold);
    /* The record behind the failure never runs: the event answers the failure at once. */
    EXPECT_RC(aclrtSynchronizeEvent(*ev), FAILED);
}

int main(void) {
    g_role = "stop_mode";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtNotify n;
    CHECK(aclrtCreateNotify(&n, 0));
    aclrtContext primary;
    CHECK(aclrtGetCurrentContext(&primary));

    /* A created context fails; the primary context beside it does not. */
    aclrtContext c1;
    CHECK(aclrtCreateContext(&c1, 0));
    aclrtStream s, t;
    aclrtEvent ev;
    fail_in_current_context(&s, &t, &ev, n);
    context_is_failed(s, t, ev, n);
    /* Another context of the device works, and a new one does. */
    CHECK(aclrtSetCurrentContext(primary));
    g_ran = 0;
    CHECK(aclrtLaunchHostFunc(NULL, bump, NULL));
    CHECK(aclrtSynchronizeDevice());
    REQUIRE(g_ran == 1, "the primary context beside the failed one: %d", g_ran);
    aclrtContext c2;
    CHECK(aclrtCreateContext(&c2, 0));
    aclrtStream v;
    aclrtEvent ev2;
    CHECK(aclrtCreateStream(&v));
    CHECK(aclrtCreateEvent(&ev2));
    CHECK(aclrtSetStreamFailureMode(v, ACL_STOP_ON_FAILURE));
    CHECK(aclrtLaunchHostFunc(v, bump, NULL));
    CHECK(aclrtRecordEvent(ev2, v));
    CHECK(aclrtSynchronizeEvent(ev2));
    CHECK(aclrtSynchronizeStream(v));
    REQUIRE(g_ran == 2, "a new context: %d", g_ran);
    /* The failed context's event answers its context's failure whatever the current one. */
    EXPECT_RC(aclrtSynchronizeEvent(ev), FAILED);
    CHECK(aclrtDestroyEvent(ev2));
    CHECK(aclrtDestroyContext(c2));
    /* Destroying the failed context is allowed, with its streams and event. */
    CHECK(aclrtSetCurrentContext(c1));
    CHECK(aclrtDestroyEvent(ev));
    CHECK(aclrtDestroyContext(c1));

    /* The primary context fails; aclrtResetDevice ends it, and the next one is new. */
    CHECK(aclrtSetCurrentContext(primary));
    fail_in_current_context(&s, &t, &ev, n);
    context_is_failed(s, t, ev, n);
    CHECK(aclrtDestroyEvent(ev));
    CHECK(aclrtResetDevice(0));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtCreateStream(&s));
    g_ran = 0;
    CHECK(aclrtLaunchHostFunc(s, bump, NULL));
    CHECK(aclrtLaunchHostFunc(NULL, bump, NULL));
    CHECK(aclrtSynchronizeDevice());
    REQUIRE(g_ran == 2, "after the reset: %d", g_ran);

    /* A failure before stop mode was set stays the stream's: reported once, then the context
     * goes on (CANN's EnterFailureAbort looks at the context's mode when the task fails). */
    CHECK(aclrtCreateNotify(&n, 0));
    CHECK(aclrtWaitAndResetNotify(n, s, 1));
    CHECK(aclrtLaunchHostFunc(s, bump, NULL));
    aclError rc = aclrtSynchronizeStream(s);
    REQUIRE(rc == FAILED, "the continue-mode failure: %d", (int)rc);
    CHECK(aclrtSetStreamFailureMode(s, ACL_STOP_ON_FAILURE));
    CHECK(aclrtSynchronizeStream(s));
    g_ran = 0;
    CHECK(aclrtLaunchHostFunc(s, bump, NULL));
    CHECK(aclrtSynchronizeDevice());
    REQUIRE(g_ran == 1, "after a continue-mode failure: %d", g_ran);
    CHECK(aclrtDestroyStream(s));
    CHECK(aclrtDestroyNotify(n));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("stop_mode: ok\n");
    return 0;
}
