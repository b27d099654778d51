/* callback.c — CANN's callback flow as its samples write it: a thread of the program loops on
 * aclrtProcessReport(100) in the stream's context, aclrtSubscribeReport binds it to a stream,
 * and aclrtLaunchCallback queues callbacks that run on that thread in stream order.
 *
 * Checked: the callbacks run on the subscribed thread, in order, between the stream's other
 * tasks (a copy before one has landed when it runs); ACL_CALLBACK_BLOCK holds the stream until
 * the callback returns, ACL_CALLBACK_NO_BLOCK does not (the task after it runs while the
 * callback still waits for it); the host enqueues while the stream is held back by a notify;
 * the codes and messages of misuse (no subscribed thread, a second thread for a stream, one
 * thread for two devices, a bad blockType, NULL fn, bad timeouts, processing from a thread
 * subscribed to nothing, an unsubscription by the wrong thread, a launch after the
 * unsubscription); a blocking callback that no thread processes, which holds its stream until
 * aclrtStreamAbort or aclrtDestroyStreamForce ends it unrun (a synchronize's 507046 meanwhile
 * names it and the thread it waits for), while a draining
 * aclrtDestroyStream waits for it to run; and aclFinalize returning promptly with a blocking
 * callback that no thread will ever process still queued, without running it; a device reset
 * from the very thread a blocking callback waits for giving it up at once (507046).
 *
 * usage: callback. Exit 0 and "callback: ok". */
#include "common.h"

#include <pthread.h>

static aclrtContext g_ctx;
static volatile int g_loop = 1;
static pthread_t g_reporter;
static int g_processed, g_bad_codes;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_log[64], g_logged;
static int g_wrong_thread;

static void *reporter(void *arg) {
    (void)arg;
    aclError r = aclrtSetCurrentContext(g_ctx);
    if (r != ACL_SUCCESS) {
        g_bad_codes++;
        return NULL;
    }
    while (g_loop) {
        r = aclrtProcessReport(100);
        if (r == ACL_SUCCESS) {
            g_processed++;
        } else if (r != ACL_ERROR_RT_REPORT_TIMEOUT && r != ACL_ERROR_RT_THREAD_SUBSCRIBE) {
            fprintf(stderr, "[callback] aclrtProcessReport returned %d: %s\n", (int)r,
                    recent_msg());
            g_bad_codes++;
        }
    }
    return NULL;
}

/* Logs its tag; checks it runs on the reporter thread. */
static void tagged(void *arg) {
    if (!pthread_equal(pthread_self(), g_reporter)) g_wrong_thread++;
    pthread_mutex_lock(&g_mu);
    if (g_logged < 64) g_log[g_logged++] = (int)(intptr_t)arg;
    pthread_mutex_unlock(&g_mu);
}

/* A blocking callback that takes its time: the task after it must see `slow_done`. */
static volatile int g_slow_done;
static void slow(void *arg) {
    (void)arg;
    sleep_ms(100);
    g_slow_done = 1;
}
static volatile int g_after_slow_saw = -1;
static void after_slow(void *arg) {
    (void)arg;
    g_after_slow_saw = g_slow_done;
}

/* A non-blocking callback that waits for the host function queued after it: it can only
 * finish if the stream went on without waiting for it. */
static volatile int g_host_ran, g_nonblock_saw = -1;
static void nonblocking(void *arg) {
    (void)arg;
    int64_t end = now_ns() + 60000000000LL; /* generous: the process may be paused */
    while (!g_host_ran && now_ns() < end) sleep_ms(1);
    g_nonblock_saw = g_host_ran;
}
static void host_after_nonblocking(void *arg) {
    (void)arg;
    g_host_ran = 1;
}

/* The data a copy queued before a callback wrote. */
static uint32_t *g_host_buf;
static volatile uint32_t g_seen;
static void read_copy(void *arg) {
    (void)arg;
    g_seen = g_host_buf[0];
}

static int g_never_ran;
static void never(void *arg) {
    (void)arg;
    g_never_ran = 1;
}

/* A reporter that starts processing only after a while. */
static volatile int g_late_ran;
static aclError g_late_rc = -1;
static void late_tagged(void *arg) {
    (void)arg;
    g_late_ran = 1;
}
static void *late_reporter(void *arg) {
    (void)arg;
    sleep_ms(200);
    if (aclrtSetCurrentContext(g_ctx) == ACL_SUCCESS) g_late_rc = aclrtProcessReport(5000);
    return NULL;
}

int main(void) {
    g_role = "callback";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtCreateContext(&g_ctx, 0));
    aclrtStream stream = NULL, other = NULL;
    CHECK(aclrtCreateStream(&stream));
    CHECK(aclrtCreateStream(&other));
    CHECK(aclrtSetStreamFailureMode(stream, ACL_STOP_ON_FAILURE));

    /* Misuse before any subscription. */
    EXPECT_RC(aclrtLaunchCallback(tagged, NULL, ACL_CALLBACK_BLOCK, stream),
              ACL_ERROR_RT_STREAM_SUBSCRIBE);
    const char *m = recent_msg();
    REQUIRE(strstr(m, "aclrtSubscribeReport") != NULL, "the message does not say what to call: %s",
            m);
    EXPECT_RC(aclrtProcessReport(0), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtProcessReport(-2), ACL_ERROR_RT_PARAM_INVALID);
    int64_t t0 = now_ns();
    EXPECT_RC(aclrtProcessReport(50), ACL_ERROR_RT_THREAD_SUBSCRIBE);
    REQUIRE(now_ns() - t0 >= 40000000LL, "aclrtProcessReport(50) of an unsubscribed thread "
            "returned after %lld ns, before its timeout", (long long)(now_ns() - t0));

    REQUIRE(pthread_create(&g_reporter, NULL, reporter, NULL) == 0, "pthread_create");
    uint64_t tid = (uint64_t)g_reporter;
    CHECK(aclrtSubscribeReport(tid, stream));
    EXPECT_RC(aclrtSubscribeReport(tid, stream), ACL_ERROR_RT_STREAM_SUBSCRIBE);
    EXPECT_RC(aclrtSubscribeReport((uint64_t)pthread_self(), stream),
              ACL_ERROR_RT_STREAM_SUBSCRIBE);
    EXPECT_RC(aclrtLaunchCallback(tagged, NULL, (aclrtCallbackBlockType)7, stream),
              ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtLaunchCallback(NULL, NULL, ACL_CALLBACK_BLOCK, stream),
              ACL_ERROR_RT_PARAM_INVALID);
    /* The same thread for a stream of another device. */
    CHECK(aclrtSetDevice(1));
    aclrtStream dev1 = NULL;
    CHECK(aclrtCreateStream(&dev1));
    EXPECT_RC(aclrtSubscribeReport(tid, dev1), ACL_ERROR_RT_THREAD_SUBSCRIBE);
    CHECK(aclrtDestroyStream(dev1));
    CHECK(aclrtSetCurrentContext(g_ctx));

    /* Held back by a notify while the host queues: a copy, callbacks, host functions. */
    aclrtNotify gate = NULL;
    CHECK(aclrtCreateNotify(&gate, ACL_NOTIFY_DEFAULT));
    CHECK(aclrtWaitAndResetNotify(gate, stream, 30));
    void *dev = NULL;
    CHECK(aclrtMalloc(&dev, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMallocHost((void **)&g_host_buf, 4096));
    g_host_buf[0] = 0xC0FFEEu;
    CHECK(aclrtMemcpyAsync(dev, 4096, g_host_buf, 4096, ACL_MEMCPY_HOST_TO_DEVICE, stream));
    CHECK(aclrtLaunchCallback(tagged, (void *)(intptr_t)1, ACL_CALLBACK_BLOCK, stream));
    CHECK(aclrtMemsetAsync(g_host_buf, 4096, 0, 4096, stream));
    CHECK(aclrtMemcpyAsync(g_host_buf, 4096, dev, 4096, ACL_MEMCPY_DEVICE_TO_HOST, stream));
    CHECK(aclrtLaunchCallback(read_copy, NULL, ACL_CALLBACK_BLOCK, stream));
    CHECK(aclrtLaunchCallback(slow, NULL, ACL_CALLBACK_BLOCK, stream));
    CHECK(aclrtLaunchHostFunc(stream, after_slow, NULL));
    CHECK(aclrtLaunchCallback(nonblocking, NULL, ACL_CALLBACK_NO_BLOCK, stream));
    CHECK(aclrtLaunchHostFunc(stream, host_after_nonblocking, NULL));
    for (int i = 2; i <= 6; i++)
        CHECK(aclrtLaunchCallback(tagged, (void *)(intptr_t)i, ACL_CALLBACK_BLOCK, stream));
    aclrtStreamStatus st = ACL_STREAM_STATUS_COMPLETE;
    CHECK(aclrtStreamQuery(stream, &st));
    REQUIRE(st == ACL_STREAM_STATUS_NOT_READY, "the stream ran past its gate (status %d)", (int)st);
    REQUIRE(g_logged == 0, "a callback ran before the stream reached it");
    CHECK(aclrtRecordNotify(gate, other));
    CHECK(aclrtSynchronizeStreamWithTimeout(stream, 20000));

    REQUIRE(g_seen == 0xC0FFEEu, "the callback after the copy read %#x", (unsigned)g_seen);
    REQUIRE(g_after_slow_saw == 1, "the task after a blocking callback ran before it returned");
    /* The non-blocking callback may still be finishing on the reporter thread. */
    for (int i = 0; i < 60000 && g_nonblock_saw < 0; i++) sleep_ms(1);
    REQUIRE(g_nonblock_saw == 1, "the task after a non-blocking callback waited for it");
    REQUIRE(g_wrong_thread == 0, "%d callbacks ran on another thread than the subscribed one",
            g_wrong_thread);
    pthread_mutex_lock(&g_mu);
    REQUIRE(g_logged == 6, "%d tagged callbacks ran, expected 6", g_logged);
    for (int i = 0; i < 6; i++)
        REQUIRE(g_log[i] == i + 1, "callback %d ran in place %d", g_log[i], i);
    pthread_mutex_unlock(&g_mu);

    EXPECT_RC(aclrtUnSubscribeReport((uint64_t)pthread_self(), stream),
              ACL_ERROR_RT_STREAM_SUBSCRIBE);
    CHECK(aclrtUnSubscribeReport(tid, stream));
    EXPECT_RC(aclrtUnSubscribeReport(tid, stream), ACL_ERROR_RT_STREAM_SUBSCRIBE);
    EXPECT_RC(aclrtLaunchCallback(tagged, NULL, ACL_CALLBACK_BLOCK, stream),
              ACL_ERROR_RT_STREAM_SUBSCRIBE);
    g_loop = 0;
    REQUIRE(pthread_join(g_reporter, NULL) == 0, "pthread_join");
    REQUIRE(g_bad_codes == 0, "aclrtProcessReport returned unexpected codes");
    REQUIRE(g_processed == 9, "the reporter processed %d callbacks, expected 9", g_processed);

    /* A blocking callback that no thread processes holds its stream like a wait for ever;
     * aclrtStreamAbort and aclrtDestroyStreamForce end it (it never runs), a draining
     * aclrtDestroyStream waits for it to run. */
    aclrtStream held = NULL;
    CHECK(aclrtCreateStream(&held));
    CHECK(aclrtSubscribeReport((uint64_t)pthread_self(), held));
    CHECK(aclrtLaunchCallback(never, NULL, ACL_CALLBACK_BLOCK, held));
    EXPECT_RC(aclrtSynchronizeStreamWithTimeout(held, 100), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
    /* The message names the callback and the thread it waits for, not "a host function". */
    char self_id[32];
    snprintf(self_id, sizeof self_id, "thread %#lx", (unsigned long)pthread_self());
    expect_msg("a blocking callback (aclrtLaunchCallback)", self_id,
               "has not taken yet with aclrtProcessReport", NULL);
    CHECK(aclrtStreamAbort(held));
    CHECK(aclrtSynchronizeStreamWithTimeout(held, 5000));
    CHECK(aclrtLaunchCallback(never, NULL, ACL_CALLBACK_BLOCK, held));
    /* The callback never runs: a destroy that waited for it would not return (the program's
     * watch ends it). A time under 5 s stood here until 2026-12-07. */
    CHECK(aclrtDestroyStreamForce(held));
    CHECK(aclrtCreateStream(&held));
    pthread_t late;
    REQUIRE(pthread_create(&late, NULL, late_reporter, NULL) == 0, "pthread_create");
    CHECK(aclrtSubscribeReport((uint64_t)late, held));
    CHECK(aclrtLaunchCallback(late_tagged, NULL, ACL_CALLBACK_BLOCK, held));
    CHECK(aclrtDestroyStream(held));
    REQUIRE(g_late_ran == 1, "a draining aclrtDestroyStream returned before the blocking "
            "callback queued on its stream ran");
    REQUIRE(pthread_join(late, NULL) == 0, "pthread_join");
    REQUIRE(g_late_rc == ACL_SUCCESS, "the late reporter's aclrtProcessReport returned %d",
            g_late_rc);
    /* This thread served the first `held` (destroyed since, its callbacks given up above and
     * gone from this thread's mailbox): its aclrtProcessReport says it serves no stream any
     * more. */
    EXPECT_RC(aclrtProcessReport(50), ACL_ERROR_RT_THREAD_SUBSCRIBE);
    m = recent_msg();
    REQUIRE(strstr(m, "within 50 ms, and it is subscribed to no stream any more (") != NULL,
            "not the timeout of a thread that served a stream: %s", m);

    /* A reset of a device whose stream is held by a blocking callback for the resetting
     * thread itself, which cannot process it while it resets: the reset gives it up at once
     * with its 507046 (not after its 60 s bound), naming it, and the callback never runs. */
    CHECK(aclrtSetDevice(1));
    aclrtStream mine = NULL;
    CHECK(aclrtCreateStream(&mine));
    CHECK(aclrtSubscribeReport((uint64_t)pthread_self(), mine));
    CHECK(aclrtLaunchCallback(never, NULL, ACL_CALLBACK_BLOCK, mine));
    EXPECT_RC(aclrtResetDeviceForce(1), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
    m = recent_msg();
    /* Given up at once, not at the reset's bound (also 507046): the message says which. */
    REQUIRE(strstr(m, "queued for this very thread") != NULL,
            "the reset's message does not say why it gave up: %s", m);
    REQUIRE(strstr(m, "its head task is a blocking callback (aclrtLaunchCallback) that "
                      "thread") != NULL,
            "the reset's message does not name the held stream's callback: %s", m);
    CHECK(aclrtSetCurrentContext(g_ctx));

    /* aclFinalize with a blocking callback whose thread (this one) never processes it, and a
     * copy queued behind it: it gives the stream up at once (0 and a note saying why), not at
     * its drain's bound (60 s, then 507046), and the callback never runs. Judged by that
     * answer, not by a time (a loaded machine can stretch any). */
    CHECK(aclrtSubscribeReport((uint64_t)pthread_self(), other));
    CHECK(aclrtLaunchCallback(never, NULL, ACL_CALLBACK_BLOCK, other));
    CHECK(aclrtMemcpyAsync(dev, 4096, g_host_buf, 4096, ACL_MEMCPY_HOST_TO_DEVICE, other));
    t0 = now_ns();
    aclError fr = aclFinalize();
    double took = (double)(now_ns() - t0) / 1e9;
    const char *fm = recent_msg();
    REQUIRE(fr == ACL_SUCCESS && strstr(fm, "aclFinalize: discarded the tasks still queued on 1 "
                                            "stream(s): each is held by a blocking callback") != NULL,
            "aclFinalize (%.1f s) returned %d, not giving up the stream held by an unprocessed "
            "blocking callback: %s",
            took, (int)fr, fm);
    REQUIRE(g_never_ran == 0, "a callback ran with no aclrtProcessReport to run it");
    printf("callback: ok (aclFinalize returned %d after %.2f s)\n", (int)fr, took);
    return 0;
}
