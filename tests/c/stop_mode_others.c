/* stop_mode_others.c — what the other streams of a context in stop-on-failure mode see when one
 * of its streams fails, as CANN's runtime does it (hicann/runtime):
 *
 * - a synchronize that waits on a healthy stream (aclrtSynchronizeStream[WithTimeout]),
 *   a device synchronize and an event synchronize return as soon as the context fails,
 *   answering the failure, although the stream they wait for is still held: CANN's waits
 *   poll the context's status (src/runtime/core/src/stream/stream.cc:
 *   Stream::SynchronizeExecutedTask and Stream::WaitForTask call CheckContextStatus in their
 *   loops, then Stream::GetSynchronizeError answers the context's failure;
 *   src/runtime/core/src/context/context.cc: Context::CheckStatus, Context::Synchronize);
 * - every stream whose task fails while its context stops on failure is in abort mode, the
 *   first and every later one (stream.cc Stream::EnterFailureAbort, called for each failed
 *   task). What a program sees of it: such a stream that was set to stop on failure takes
 *   no failure mode any more (src/runtime/api/impl/api_impl.cc ApiImpl::StreamSetMode,
 *   207000); one that was left in continue mode still takes either (its abort mode stays),
 *   and once set to stop takes none; a stream of the context whose task did not fail takes
 *   stop, and stop again.
 *
 * No timing: each failure is a notify wait of 1 s that nothing records; the program waits for
 * it on a condition (the synchronize under test, or the exception callback), and the streams
 * it must not wait for are held at a gate that opens only after the checks. Exit 0 and
 * "stop_mode_others: ok". */
#include <pthread.h>

#include "common.h"

#define FAILED ACL_ERROR_RT_TASK_TIMEOUT

/* The failed tasks the exception callback was told of. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_failures;

static void on_exception(aclrtExceptionInfo *info) {
    (void)info;
    pthread_mutex_lock(&g_mu);
    g_failures++;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
}

/* Waits until `n` failed tasks were told (bounded: a failure that never comes fails the test
 * after 60 s instead of hanging it). */
static void await_failures(int n) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 60;
    pthread_mutex_lock(&g_mu);
    while (g_failures < n) {
        if (pthread_cond_timedwait(&g_cv, &g_mu, &until) != 0) {
            break;
        }
    }
    int seen = g_failures;
    pthread_mutex_unlock(&g_mu);
    REQUIRE(seen >= n, "%d failed tasks told after 60 s, %d expected", seen, n);
}

/* The healthy stream's hold: the gate, then a mark that the hold has ended. */
static gate_t g_hold;
static int g_released;
static void hold_then_mark(void *arg) {
    (void)arg;
    gate_hold(&g_hold);
    __atomic_store_n(&g_released, 1, __ATOMIC_RELEASE);
}

typedef enum { SYNC_STREAM, SYNC_DEVICE, SYNC_EVENT } waiter_t;
static const char *const WAITER[] = {"aclrtSynchronizeStreamWithTimeout",
                                     "aclrtSynchronizeDeviceWithTimeout",
                                     "aclrtSynchronizeEventWithTimeout"};

/* In a new context: `s` stops on failure and its wait fails; the healthy stream `h` is held at
 * a gate, an event recorded behind it. The waiter under test waits on `h` (or the device, or
 * the event) and must answer the failure while `h` is still held. */
static void healthy_wait_ends_at_failure(waiter_t w, aclrtNotify never) {
    aclrtContext c;
    CHECK(aclrtCreateContext(&c, 0));
    aclrtStream s, h;
    aclrtEvent ev;
    CHECK(aclrtCreateStream(&s));
    CHECK(aclrtCreateStream(&h));
    CHECK(aclrtCreateEvent(&ev));
    CHECK(aclrtSetStreamFailureMode(s, ACL_STOP_ON_FAILURE));
    g_hold.open = 0;
    g_released = 0;
    CHECK(aclrtLaunchHostFunc(h, hold_then_mark, NULL));
    CHECK(aclrtRecordEvent(ev, h));
    CHECK(aclrtWaitAndResetNotify(never, s, 1));
    aclError rc = ACL_SUCCESS;
    switch (w) {
    case SYNC_STREAM:
        rc = aclrtSynchronizeStreamWithTimeout(h, 60000);
        break;
    case SYNC_DEVICE:
        rc = aclrtSynchronizeDeviceWithTimeout(60000);
        break;
    case SYNC_EVENT:
        rc = aclrtSynchronizeEventWithTimeout(ev, 60000);
        break;
    }
    /* Returned while the healthy stream is still held (the gate opens only below, or by
     * itself after 60 s): not after the stream's tasks ran. */
    REQUIRE(!__atomic_load_n(&g_released, __ATOMIC_ACQUIRE),
            "%s returned (%d) only once the healthy stream's task had ended", WAITER[w], (int)rc);
    REQUIRE(rc == FAILED, "%s on the healthy stream, its task held, while another stream of "
            "the context failed: %d, not the failure %d (%s)",
            WAITER[w], (int)rc, FAILED, recent_msg());
    expect_msg("has failed", "got no record within 1 s", NULL);
    /* The healthy stream itself is still held: it did not fail, it is only in a failed
     * context, whose calls all answer the failure. */
    aclrtStreamStatus st;
    EXPECT_RC(aclrtStreamQuery(h, &st), FAILED);
    gate_open(&g_hold);
    /* The hold has ended before the next case sets the gate again. */
    for (int i = 0; i < 60000 && !__atomic_load_n(&g_released, __ATOMIC_ACQUIRE); i++) sleep_ms(1);
    REQUIRE(__atomic_load_n(&g_released, __ATOMIC_ACQUIRE), "the opened gate did not let go");
    CHECK(aclrtDestroyEvent(ev));
    CHECK(aclrtDestroyContext(c));
}

int main(void) {
    g_role = "stop_mode_others";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtNotify never;
    CHECK(aclrtCreateNotify(&never, 0));
    aclrtContext primary;
    CHECK(aclrtGetCurrentContext(&primary));

    healthy_wait_ends_at_failure(SYNC_STREAM, never);
    healthy_wait_ends_at_failure(SYNC_DEVICE, never);
    healthy_wait_ends_at_failure(SYNC_EVENT, never);

    /* Every stream whose task fails is in abort mode: `s` fails first (the context's
     * failure), then `t`, whose wait was queued before and held until after; `u` never
     * fails. */
    CHECK(aclrtExceptionInfoCallbackRegister(on_exception));
    aclrtContext c;
    CHECK(aclrtCreateContext(&c, 0));
    aclrtStream s, t, u;
    CHECK(aclrtCreateStream(&s));
    CHECK(aclrtCreateStream(&t));
    CHECK(aclrtCreateStream(&u));
    CHECK(aclrtSetStreamFailureMode(s, ACL_STOP_ON_FAILURE));
    static gate_t hold_t;
    CHECK(aclrtLaunchHostFunc(t, gate_hold, &hold_t));
    CHECK(aclrtWaitAndResetNotify(never, t, 1));
    CHECK(aclrtWaitAndResetNotify(never, s, 1));
    await_failures(1);
    EXPECT_RC(aclrtSynchronizeStream(s), FAILED);
    gate_open(&hold_t);
    await_failures(2);
    /* s was set to stop: in abort mode it takes no mode. */
    EXPECT_RC(aclrtSetStreamFailureMode(s, ACL_STOP_ON_FAILURE), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    expect_msg("abort mode", NULL);
    EXPECT_RC(aclrtSetStreamFailureMode(s, ACL_CONTINUE_ON_FAILURE),
              ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    /* t is in abort mode too, but was given continue: as in CANN, it still takes a mode, and
     * once given stop, being in abort mode, it takes none (a stream that were not in abort
     * mode would take stop again, a no-op). */
    CHECK(aclrtSetStreamFailureMode(t, ACL_CONTINUE_ON_FAILURE));
    CHECK(aclrtSetStreamFailureMode(t, ACL_STOP_ON_FAILURE));
    EXPECT_RC(aclrtSetStreamFailureMode(t, ACL_STOP_ON_FAILURE), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    expect_msg("abort mode", NULL);
    CHECK(aclrtSetStreamFailureMode(u, ACL_STOP_ON_FAILURE));
    CHECK(aclrtSetStreamFailureMode(u, ACL_STOP_ON_FAILURE));
    /* t's failure did not replace the context's: still the first one's. */
    EXPECT_RC(aclrtSynchronizeStream(u), FAILED);
    CHECK(aclrtExceptionInfoCallbackUnregister(on_exception));
    CHECK(aclrtDestroyContext(c));

    CHECK(aclrtSetCurrentContext(primary));
    CHECK(aclrtDestroyNotify(never));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("stop_mode_others: ok\n");
    return 0;
}
