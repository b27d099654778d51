/* context_threads.c — several host threads, each with a context of its own on one of several
 * devices, as CANN's multi-thread samples run them (aclrtCreateContext per thread, no
 * aclrtSetDevice): each thread allocates device and host memory, times its stream's work with
 * two ACL_EVENT_TIME_LINE events around a 30 ms host function, sets and copies on the stream,
 * and makes its stream wait on an event that the next thread recorded in ITS context (another
 * device). Checked: every word copied back; aclrtEventElapsedTime covers the host function;
 * aclrtGetMemInfo counts the thread's allocations on its device; after aclrtSetCurrentContext
 * to another thread's context the current device is that context's, and the thread's own
 * stream is refused there (107003) and works again once its context is current again.
 *
 * usage: context_threads; exit 0 and "context_threads: ok" when every check holds. */
#include "common.h"
#include "join.h"

#include <pthread.h>

#define THREADS 6
#define DEVICES 3
#define WORDS 4096
#define BYTES (WORDS * sizeof(uint32_t))
#define HOST_FN_MS 30

static aclrtEvent g_ready[THREADS];
static aclrtContext g_ctx[THREADS];
static pthread_barrier_t g_barrier;

static void slow_host_function(void *arg) {
    (void)arg;
    sleep_ms(HOST_FN_MS);
}

static uint32_t word(int thread, int i) { return (uint32_t)(thread * 100000 + i); }

static void *run_thread(void *arg) {
    const int me = (int)(intptr_t)arg, dev = me % DEVICES, next = (me + 1) % THREADS;
    aclrtContext ctx;
    CHECK(aclrtCreateContext(&ctx, dev));
    g_ctx[me] = ctx;
    int32_t current = -1;
    CHECK(aclrtGetDevice(&current));
    REQUIRE(current == dev, "thread %d: aclrtGetDevice says %d after creating a context on %d",
            me, current, dev);
    aclrtStream s;
    CHECK(aclrtCreateStream(&s));
    aclrtEvent start, end;
    CHECK(aclrtCreateEventWithFlag(&start, ACL_EVENT_TIME_LINE));
    CHECK(aclrtCreateEventWithFlag(&end, ACL_EVENT_TIME_LINE));
    CHECK(aclrtCreateEvent(&g_ready[me]));

    uint32_t *host, *back;
    CHECK(aclrtMallocHost((void **)&host, BYTES));
    CHECK(aclrtMallocHost((void **)&back, BYTES));
    for (int i = 0; i < WORDS; i++) host[i] = word(me, i);
    size_t free_before, total;
    CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &free_before, &total));
    void *a, *b;
    CHECK(aclrtMalloc(&a, BYTES, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&b, BYTES, ACL_MEM_MALLOC_NORMAL_ONLY));
    size_t free_after;
    CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &free_after, &total));
    /* Another thread on the same device may allocate meanwhile: at least ours is gone. */
    REQUIRE(free_before >= free_after + 2 * BYTES && free_after <= total,
            "thread %d: free %zu before two allocations of %zu bytes, %zu after (total %zu)",
            me, free_before, (size_t)BYTES, free_after, total);

    /* a = host; b = 0xab..; first half of b = first half of a; timed by start/end. */
    CHECK(aclrtRecordEvent(start, s));
    CHECK(aclrtMemcpyAsync(a, BYTES, host, BYTES, ACL_MEMCPY_HOST_TO_DEVICE, s));
    CHECK(aclrtLaunchHostFunc(s, slow_host_function, NULL));
    CHECK(aclrtMemsetAsync(b, BYTES, 0xab, BYTES, s));
    CHECK(aclrtMemcpyAsync(b, BYTES / 2, a, BYTES / 2, ACL_MEMCPY_DEVICE_TO_DEVICE, s));
    CHECK(aclrtRecordEvent(end, s));
    CHECK(aclrtRecordEvent(g_ready[me], s));
    /* Every thread's g_ready is recorded before any stream waits on one (a classic event
     * never recorded is refused). */
    pthread_barrier_wait(&g_barrier);
    CHECK(aclrtStreamWaitEvent(s, g_ready[next]));
    CHECK(aclrtMemcpyAsync(back, BYTES, b, BYTES, ACL_MEMCPY_DEVICE_TO_HOST, s));
    CHECK(aclrtSynchronizeStream(s));
    aclrtEventRecordedStatus st = ACL_EVENT_RECORDED_STATUS_NOT_READY;
    CHECK(aclrtQueryEventStatus(g_ready[next], &st));
    REQUIRE(st == ACL_EVENT_RECORDED_STATUS_COMPLETE,
            "thread %d: the stream waited on thread %d's event, which is not complete", me, next);
    float ms = -1.0f;
    CHECK(aclrtEventElapsedTime(&ms, start, end));
    REQUIRE(ms >= HOST_FN_MS - 5 && ms < 20000.0f,
            "thread %d: %.3f ms between the events around a %d ms host function", me, ms,
            HOST_FN_MS);
    for (int i = 0; i < WORDS; i++) {
        uint32_t want = i < WORDS / 2 ? word(me, i) : 0xababababu;
        REQUIRE(back[i] == want, "thread %d: word %d is %#x, expected %#x", me, i, back[i], want);
    }

    /* Another thread's context: its device, and our stream is not of it. */
    pthread_barrier_wait(&g_barrier);
    CHECK(aclrtSetCurrentContext(g_ctx[next]));
    CHECK(aclrtGetDevice(&current));
    REQUIRE(current == next % DEVICES, "thread %d: in thread %d's context the device is %d", me,
            next, current);
    aclrtContext got = NULL;
    CHECK(aclrtGetCurrentContext(&got));
    REQUIRE(got == g_ctx[next], "thread %d: aclrtGetCurrentContext is not the context set", me);
    EXPECT_RC(aclrtMemsetAsync(b, BYTES, 0, BYTES, s), ACL_ERROR_RT_STREAM_CONTEXT);
    CHECK(aclrtSetCurrentContext(ctx));
    CHECK(aclrtMemsetAsync(b, BYTES, 0, BYTES, s));
    CHECK(aclrtMemcpyAsync(back, BYTES, b, BYTES, ACL_MEMCPY_DEVICE_TO_HOST, s));
    CHECK(aclrtSynchronizeStream(s));
    REQUIRE(back[0] == 0 && back[WORDS - 1] == 0, "thread %d: the set did not land", me);

    /* Nobody destroys an event another thread's stream may still wait on. */
    pthread_barrier_wait(&g_barrier);
    CHECK(aclrtFree(a));
    CHECK(aclrtFree(b));
    CHECK(aclrtFreeHost(host));
    CHECK(aclrtFreeHost(back));
    CHECK(aclrtDestroyEvent(start));
    CHECK(aclrtDestroyEvent(end));
    CHECK(aclrtDestroyEvent(g_ready[me]));
    CHECK(aclrtDestroyStream(s));
    CHECK(aclrtDestroyContext(ctx));
    printf("thread %d (device %d): %.3f ms timed, every word back\n", me, dev, ms);
    return NULL;
}

int main(void) {
    g_role = "context_threads";
    CHECK(aclInit(NULL));
    REQUIRE(pthread_barrier_init(&g_barrier, NULL, THREADS) == 0, "pthread_barrier_init");
    pthread_t t[THREADS];
    start_threads(t, THREADS, run_thread);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    CHECK(aclFinalize());
    printf("context_threads: ok\n");
    return 0;
}
