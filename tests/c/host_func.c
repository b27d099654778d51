/* host_func.c — host functions run by a thread of the program, as CANN's callback sample
 * (hicann/runtime example/2_advanced_features/callback/0_simple_callback) writes it: one
 * thread loops on aclrtProcessHostFunc(100), another on aclrtProcessReport(100), both bound to
 * the same stream (aclrtSubscribeHostFunc, aclrtSubscribeReport); aclrtLaunchHostFunc and
 * aclrtLaunchCallback tasks queued between copies then run on their own threads in stream
 * order.
 *
 * CANN has these three calls on IPV350 only: on any other SoC (the argument, e.g. Ascend910B)
 * the program checks that they answer 207000 and that aclrtLaunchHostFunc still runs its
 * function (on a library thread), then ends. IPV350 has no notifies, so the stream is held
 * back by a blocking callback that waits for the host to open it.
 *
 * Checked: the codes of misuse (NULL stream, bad timeouts, processing while subscribed to
 * nothing, a second thread for a stream's host functions, an unsubscription by the wrong
 * thread); the host functions run on the host-function thread and the callbacks on the
 * reporter, in the order queued, each after the copy before it landed (data), the task after
 * a slow host function only once it returned; after aclrtUnSubscribeHostFunc host functions
 * run again on a library thread; a host function that no thread processes holds its stream
 * (a synchronize with a timeout answers 507046), aclrtStreamAbort ends it unrun; aclFinalize
 * returns promptly with one still queued, never running it.
 *
 * usage: host_func SOC. Exit 0 and "host_func: ok". */
#include "common.h"

#include <pthread.h>

static aclrtContext g_ctx;
static volatile int g_loop = 1;
static pthread_t g_host_thread, g_reporter;
static int g_bad_codes;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_log[64], g_logged;
static int g_wrong_thread;

static void logit(int tag) {
    pthread_mutex_lock(&g_mu);
    if (g_logged < 64) g_log[g_logged++] = tag;
    pthread_mutex_unlock(&g_mu);
}

/* A processing thread: loops on `process(100)` in the stream's context. */
struct loop {
    aclError (*process)(int32_t);
    const char *name;
    int processed;
};
static struct loop g_host_loop = {aclrtProcessHostFunc, "aclrtProcessHostFunc", 0};
static struct loop g_report_loop = {aclrtProcessReport, "aclrtProcessReport", 0};

static void *process_loop(void *arg) {
    struct loop *l = arg;
    if (aclrtSetCurrentContext(g_ctx) != ACL_SUCCESS) {
        g_bad_codes++;
        return NULL;
    }
    while (g_loop) {
        aclError r = l->process(100);
        if (r == ACL_SUCCESS) {
            l->processed++;
        } else if (r != ACL_ERROR_RT_REPORT_TIMEOUT && r != ACL_ERROR_RT_THREAD_SUBSCRIBE) {
            fprintf(stderr, "[host_func] %s returned %d: %s\n", l->name, (int)r, recent_msg());
            g_bad_codes++;
        }
    }
    return NULL;
}

/* A host function: logs its tag, on the host-function thread. */
static void host_tagged(void *arg) {
    if (!pthread_equal(pthread_self(), g_host_thread)) g_wrong_thread++;
    logit((int)(intptr_t)arg);
}

/* A callback: logs its tag (+100), on the reporter. */
static void report_tagged(void *arg) {
    if (!pthread_equal(pthread_self(), g_reporter)) g_wrong_thread++;
    logit(100 + (int)(intptr_t)arg);
}

/* What the copy before a host function brought back. */
static uint32_t *g_host_buf;
static volatile uint32_t g_seen;
static void host_read(void *arg) {
    (void)arg;
    if (!pthread_equal(pthread_self(), g_host_thread)) g_wrong_thread++;
    g_seen = g_host_buf[0];
}

static volatile int g_slow_done, g_after_slow_saw = -1;
static void host_slow(void *arg) {
    (void)arg;
    sleep_ms(100);
    g_slow_done = 1;
}
static void host_after_slow(void *arg) {
    (void)arg;
    g_after_slow_saw = g_slow_done;
}

/* A blocking callback holding the stream until the host opens it. */
static volatile int g_open;
static void gate(void *arg) {
    (void)arg;
    int64_t end = now_ns() + 60000000000LL; /* generous: the process may be paused */
    while (!g_open && now_ns() < end) sleep_ms(1);
}

/* Run by a library thread once no thread serves the stream's host functions. */
static volatile int g_library_ran;
static void on_library(void *arg) {
    (void)arg;
    g_library_ran = pthread_equal(pthread_self(), g_host_thread) ? 2 : 1;
}

static int g_never_ran;
static void never(void *arg) {
    (void)arg;
    g_never_ran = 1;
}

int main(int argc, char **argv) {
    g_role = "host_func";
    REQUIRE(argc == 2, "usage: host_func SOC");
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtCreateContext(&g_ctx, 0));
    aclrtStream stream = NULL;
    CHECK(aclrtCreateStream(&stream));

    if (strcmp(argv[1], "IPV350") != 0) {
        EXPECT_RC(aclrtSubscribeHostFunc((uint64_t)pthread_self(), stream),
                  ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        const char *m = recent_msg();
        REQUIRE(strstr(m, "IPV350 only") != NULL, "the message does not say why: %s", m);
        EXPECT_RC(aclrtProcessHostFunc(50), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        EXPECT_RC(aclrtUnSubscribeHostFunc((uint64_t)pthread_self(), stream),
                  ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        CHECK(aclrtLaunchHostFunc(stream, on_library, NULL));
        CHECK(aclrtSynchronizeStreamWithTimeout(stream, 20000));
        REQUIRE(g_library_ran == 1, "aclrtLaunchHostFunc's function did not run");
        CHECK(aclrtDestroyStream(stream));
        CHECK(aclFinalize());
        printf("host_func: ok (%s: 207000)\n", argv[1]);
        return 0;
    }

    /* Misuse before any subscription. */
    EXPECT_RC(aclrtSubscribeHostFunc((uint64_t)pthread_self(), NULL), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtUnSubscribeHostFunc((uint64_t)pthread_self(), NULL),
              ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtProcessHostFunc(0), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtProcessHostFunc(-2), ACL_ERROR_RT_PARAM_INVALID);
    int64_t t0 = now_ns();
    EXPECT_RC(aclrtProcessHostFunc(50), ACL_ERROR_RT_THREAD_SUBSCRIBE);
    REQUIRE(now_ns() - t0 >= 40000000LL, "aclrtProcessHostFunc(50) of an unsubscribed thread "
            "returned after %lld ns, before its timeout", (long long)(now_ns() - t0));
    const char *m = recent_msg();
    REQUIRE(strstr(m, "aclrtSubscribeHostFunc") != NULL, "the message does not say what to "
            "call: %s", m);
    EXPECT_RC(aclrtLaunchHostFunc(stream, NULL, NULL), ACL_ERROR_RT_PARAM_INVALID);

    REQUIRE(pthread_create(&g_host_thread, NULL, process_loop, &g_host_loop) == 0,
            "pthread_create");
    REQUIRE(pthread_create(&g_reporter, NULL, process_loop, &g_report_loop) == 0,
            "pthread_create");
    uint64_t htid = (uint64_t)g_host_thread, rtid = (uint64_t)g_reporter;
    CHECK(aclrtSubscribeHostFunc(htid, stream));
    CHECK(aclrtSubscribeReport(rtid, stream));
    EXPECT_RC(aclrtSubscribeHostFunc(htid, stream), ACL_ERROR_RT_STREAM_SUBSCRIBE);
    EXPECT_RC(aclrtSubscribeHostFunc(rtid, stream), ACL_ERROR_RT_STREAM_SUBSCRIBE);
    m = recent_msg();
    REQUIRE(strstr(m, "aclrtUnSubscribeHostFunc") != NULL, "the message does not say what to "
            "call: %s", m);

    /* Held back by a gate while the host queues copies, host functions and callbacks. */
    CHECK(aclrtLaunchCallback(gate, NULL, ACL_CALLBACK_BLOCK, stream));
    void *dev = NULL;
    CHECK(aclrtMalloc(&dev, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMallocHost((void **)&g_host_buf, 4096));
    g_host_buf[0] = 0xFEEDu;
    CHECK(aclrtMemcpyAsync(dev, 4096, g_host_buf, 4096, ACL_MEMCPY_HOST_TO_DEVICE, stream));
    CHECK(aclrtLaunchHostFunc(stream, host_tagged, (void *)(intptr_t)1));
    CHECK(aclrtMemsetAsync(g_host_buf, 4096, 0, 4096, stream));
    CHECK(aclrtMemcpyAsync(g_host_buf, 4096, dev, 4096, ACL_MEMCPY_DEVICE_TO_HOST, stream));
    CHECK(aclrtLaunchHostFunc(stream, host_read, NULL));
    CHECK(aclrtLaunchCallback(report_tagged, (void *)(intptr_t)2, ACL_CALLBACK_BLOCK, stream));
    CHECK(aclrtLaunchHostFunc(stream, host_tagged, (void *)(intptr_t)3));
    CHECK(aclrtLaunchHostFunc(stream, host_slow, NULL));
    CHECK(aclrtLaunchCallback(host_after_slow, NULL, ACL_CALLBACK_BLOCK, stream));
    for (int i = 4; i <= 7; i++) {
        if (i % 2 == 0)
            CHECK(aclrtLaunchHostFunc(stream, host_tagged, (void *)(intptr_t)i));
        else
            CHECK(aclrtLaunchCallback(report_tagged, (void *)(intptr_t)i, ACL_CALLBACK_BLOCK,
                                      stream));
    }
    aclrtStreamStatus st = ACL_STREAM_STATUS_COMPLETE;
    CHECK(aclrtStreamQuery(stream, &st));
    REQUIRE(st == ACL_STREAM_STATUS_NOT_READY, "the stream ran past its gate (status %d)", (int)st);
    REQUIRE(g_logged == 0, "a host function ran before the stream reached it");
    g_open = 1;
    CHECK(aclrtSynchronizeStreamWithTimeout(stream, 20000));

    REQUIRE(g_seen == 0xFEEDu, "the host function after the copy read %#x", (unsigned)g_seen);
    REQUIRE(g_after_slow_saw == 1, "the task after a host function ran before it returned");
    REQUIRE(g_wrong_thread == 0, "%d functions ran on another thread than their subscribed one",
            g_wrong_thread);
    static const int want[] = {1, 102, 3, 4, 105, 6, 107};
    pthread_mutex_lock(&g_mu);
    REQUIRE(g_logged == 7, "%d tagged functions ran, expected 7", g_logged);
    for (int i = 0; i < 7; i++)
        REQUIRE(g_log[i] == want[i], "place %d: %d ran, expected %d", i, g_log[i], want[i]);
    pthread_mutex_unlock(&g_mu);

    /* Unsubscribed: the wrong thread is refused; then host functions run on a library
     * thread, and aclrtLaunchCallback still goes to the reporter. */
    EXPECT_RC(aclrtUnSubscribeHostFunc(rtid, stream), ACL_ERROR_RT_STREAM_SUBSCRIBE);
    CHECK(aclrtUnSubscribeHostFunc(htid, stream));
    EXPECT_RC(aclrtUnSubscribeHostFunc(htid, stream), ACL_ERROR_RT_STREAM_SUBSCRIBE);
    CHECK(aclrtLaunchHostFunc(stream, on_library, NULL));
    CHECK(aclrtSynchronizeStreamWithTimeout(stream, 20000));
    REQUIRE(g_library_ran == 1, "after aclrtUnSubscribeHostFunc the host function %s",
            g_library_ran == 2 ? "still ran on the unsubscribed thread" : "did not run");
    CHECK(aclrtUnSubscribeReport(rtid, stream));
    g_loop = 0;
    REQUIRE(pthread_join(g_host_thread, NULL) == 0, "pthread_join");
    REQUIRE(pthread_join(g_reporter, NULL) == 0, "pthread_join");
    REQUIRE(g_bad_codes == 0, "a processing call returned an unexpected code");
    REQUIRE(g_host_loop.processed == 6, "the host-function thread ran %d, expected 6",
            g_host_loop.processed);
    REQUIRE(g_report_loop.processed == 5, "the reporter ran %d callbacks, expected 5",
            g_report_loop.processed);

    /* A host function no thread processes (this thread is subscribed and never does) holds
     * its stream: a bounded synchronize says so, an abort ends it unrun. */
    aclrtStream held = NULL;
    CHECK(aclrtCreateStream(&held));
    CHECK(aclrtSubscribeHostFunc((uint64_t)pthread_self(), held));
    CHECK(aclrtLaunchHostFunc(held, never, NULL));
    EXPECT_RC(aclrtSynchronizeStreamWithTimeout(held, 100), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
    CHECK(aclrtStreamAbort(held));
    CHECK(aclrtSynchronizeStreamWithTimeout(held, 5000));
    /* aclFinalize with one still queued gives the stream up at once (0 and a note saying why),
     * not at its drain's bound (60 s, then 507046), without running it. Judged by that answer,
     * not by a time (a loaded machine can stretch any). */
    CHECK(aclrtLaunchHostFunc(held, never, NULL));
    CHECK(aclrtMemcpyAsync(dev, 4096, g_host_buf, 4096, ACL_MEMCPY_HOST_TO_DEVICE, held));
    t0 = now_ns();
    aclError fr = aclFinalize();
    double took = (double)(now_ns() - t0) / 1e9;
    const char *fm = recent_msg();
    REQUIRE(fr == ACL_SUCCESS && strstr(fm, "aclFinalize: discarded the tasks still queued on 1 "
                                            "stream(s): each is held by a blocking callback") != NULL,
            "aclFinalize (%.1f s) returned %d, not giving up the stream held by an unprocessed "
            "host function: %s",
            took, (int)fr, fm);
    REQUIRE(g_never_ran == 0, "a host function ran with no aclrtProcessHostFunc to run it");
    printf("host_func: ok (aclFinalize returned %d after %.2f s)\n", (int)fr, took);
    return 0;
}
