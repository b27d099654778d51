/* app_threads.c — one process as a CANN application writes it with several host threads, each
 * thread in contexts of its own on two devices, the host enqueuing while the streams run:
 *
 * - WORKERS threads; thread i calls aclrtSetDevice, then creates a context on its device
 *   (i % 2) and one on the other device, with a stream in each, and switches between them
 *   (aclrtSetCurrentContext) every round; peer access is enabled both ways;
 * - every round, thread i, as a producer in its first context, takes a block of the device's
 *   memory pool (aclrtMemPoolMallocAsync), copies a host buffer into it and on to a second
 *   device buffer (a chain of aclrtMemcpyAsync), queues a callback (aclrtLaunchCallback) and
 *   records an event; thread i + 1, as a consumer in its second context (the other device),
 *   makes its stream wait on that event (recorded on another thread's stream), copies the
 *   block across devices and back to the host, and queues a callback that checks every word;
 *   the consumer's event makes the producer's stream free the block (aclrtMemPoolFreeAsync)
 *   once the consumer has read it; SLOTS rounds in flight, so the host fills a buffer only
 *   once the event of the round that last used it has completed (aclrtSynchronizeEvent);
 * - one report thread per device runs every callback (aclrtSubscribeReport for each stream,
 *   aclrtProcessReport in a loop, as CANN's callback sample does);
 * - at the end: every word of every round checked, every callback run exactly once, in order
 *   per stream, on its device's report thread; each device's free memory back to where it
 *   started once the pools are destroyed.
 *
 * usage: app_threads [rounds]; exit 0 and "app_threads: ok" when every check holds. Run with
 * ACL_NOTIFY_SIM_SOC=Ascend910B (memory pools) and ACL_NOTIFY_SIM_DEVICES >= 2. */
#include "common.h"
#include "join.h"
#include "acl/acl_rt_memory_soma.h"

#include <pthread.h>
#include <stdatomic.h>

#define WORKERS 6
#define DEVICES 2
#define SLOTS 3
#define WORDS 2048
#define BYTES (WORDS * sizeof(uint32_t))
#define WAIT_MS 10000

static int g_rounds = 300;
static aclrtMemPool g_pool[DEVICES];
static pthread_t g_reporter[DEVICES];
static atomic_int g_stop;
static atomic_int g_callback_errors;
static atomic_int g_report_errors;
static pthread_barrier_t g_start;

/* What producer p hands its consumer for each slot, and the consumer's answer. */
struct mailbox {
    int published;     /* the round whose block is in `block`, -1 before any */
    int acked;         /* the last round the consumer has queued its reads of, -1 before any */
    void *block;       /* the producer's pool block holding the round's words */
};
static struct mailbox g_box[WORKERS][SLOTS];
static aclrtEvent g_ready[WORKERS][SLOTS];    /* recorded by the producer after its copies */
static aclrtEvent g_consumed[WORKERS][SLOTS]; /* recorded by the consumer after its reads */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;

/* Per thread, what its callbacks saw. */
static atomic_int g_produced_cb[WORKERS], g_checked_cb[WORKERS];
static atomic_int g_last_produced[WORKERS], g_last_checked[WORKERS];

static uint32_t word(int producer, int round, int i) {
    return (uint32_t)producer * 0x01000000u + (uint32_t)round * 4096u + (uint32_t)i;
}

/* Waits (bounded) until `ok(box)` holds for g_box[p][slot]; the mutex is held meanwhile. */
static void wait_box(int me, int p, int slot, int round, int want_ack) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += WAIT_MS / 1000;
    pthread_mutex_lock(&g_mu);
    for (;;) {
        struct mailbox *b = &g_box[p][slot];
        if (want_ack ? b->acked >= round : b->published >= round) break;
        int r = pthread_cond_timedwait(&g_cv, &g_mu, &ts);
        REQUIRE(r != ETIMEDOUT,
                "thread %d: waited %d ms for thread %d's slot %d to be %s for round %d "
                "(published %d, acked %d)",
                me, WAIT_MS, p, slot, want_ack ? "acknowledged" : "published", round,
                b->published, b->acked);
    }
    pthread_mutex_unlock(&g_mu);
}

static void post_box(int p, int slot, int published, int acked, void *block) {
    pthread_mutex_lock(&g_mu);
    if (published >= 0) {
        g_box[p][slot].block = block;
        g_box[p][slot].published = published;
    }
    if (acked >= 0) g_box[p][slot].acked = acked;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
}

struct produced_arg {
    int me, round, device;
};

/* Runs after the producer's copies: in order per stream, on the device's report thread. */
static void produced(void *arg) {
    struct produced_arg *a = arg;
    if (!pthread_equal(pthread_self(), g_reporter[a->device])) atomic_fetch_add(&g_callback_errors, 1);
    if (atomic_load(&g_last_produced[a->me]) != a->round - 1) {
        fprintf(stderr, "[app_threads] thread %d: produced callback of round %d after round %d\n",
                a->me, a->round, atomic_load(&g_last_produced[a->me]));
        atomic_fetch_add(&g_callback_errors, 1);
    }
    atomic_store(&g_last_produced[a->me], a->round);
    atomic_fetch_add(&g_produced_cb[a->me], 1);
    free(a);
}

struct checked_arg {
    int me, producer, round, device;
    const uint32_t *out;
};

/* Runs after the consumer's copy back to the host: checks every word of the round. */
static void checked(void *arg) {
    struct checked_arg *a = arg;
    if (!pthread_equal(pthread_self(), g_reporter[a->device])) atomic_fetch_add(&g_callback_errors, 1);
    if (atomic_load(&g_last_checked[a->me]) != a->round - 1) {
        fprintf(stderr, "[app_threads] thread %d: checking callback of round %d after round %d\n",
                a->me, a->round, atomic_load(&g_last_checked[a->me]));
        atomic_fetch_add(&g_callback_errors, 1);
    }
    for (int i = 0; i < WORDS; i++) {
        if (a->out[i] != word(a->producer, a->round, i)) {
            fprintf(stderr,
                    "[app_threads] thread %d round %d: word %d is %#x, expected %#x (from thread "
                    "%d)\n",
                    a->me, a->round, i, a->out[i], word(a->producer, a->round, i), a->producer);
            atomic_fetch_add(&g_callback_errors, 1);
            break;
        }
    }
    atomic_store(&g_last_checked[a->me], a->round);
    atomic_fetch_add(&g_checked_cb[a->me], 1);
    free(a);
}

static void *reporter(void *arg) {
    const int dev = (int)(intptr_t)arg;
    aclError r = aclrtSetDevice(dev);
    if (r != ACL_SUCCESS) {
        fprintf(stderr, "[app_threads] reporter %d: aclrtSetDevice %d: %s\n", dev, (int)r,
                recent_msg());
        atomic_fetch_add(&g_report_errors, 1);
        return NULL;
    }
    while (!atomic_load(&g_stop)) {
        r = aclrtProcessReport(100);
        if (r != ACL_SUCCESS && r != ACL_ERROR_RT_REPORT_TIMEOUT &&
            r != ACL_ERROR_RT_THREAD_SUBSCRIBE) {
            fprintf(stderr, "[app_threads] reporter %d: aclrtProcessReport returned %d: %s\n",
                    dev, (int)r, recent_msg());
            atomic_fetch_add(&g_report_errors, 1);
            sleep_ms(10);
        }
    }
    return NULL;
}

static void *worker(void *arg) {
    const int me = (int)(intptr_t)arg;
    const int dev_a = me % DEVICES, dev_b = (me + 1) % DEVICES;
    const int producer = (me + WORKERS - 1) % WORKERS, consumer = (me + 1) % WORKERS;
    CHECK(aclrtSetDevice(dev_a));
    aclrtContext ctx_a, ctx_b;
    aclrtStream s_a, s_b;
    CHECK(aclrtCreateContext(&ctx_b, dev_b));
    CHECK(aclrtDeviceEnablePeerAccess(dev_a, 0));
    CHECK(aclrtCreateStream(&s_b));
    CHECK(aclrtSubscribeReport((uint64_t)g_reporter[dev_b], s_b));
    CHECK(aclrtCreateContext(&ctx_a, dev_a));
    CHECK(aclrtDeviceEnablePeerAccess(dev_b, 0));
    CHECK(aclrtCreateStream(&s_a));
    CHECK(aclrtSubscribeReport((uint64_t)g_reporter[dev_a], s_a));

    uint32_t *in[SLOTS], *out[SLOTS];
    void *mid[SLOTS], *recv[SLOTS];
    aclrtEvent freed[SLOTS];
    for (int k = 0; k < SLOTS; k++) {
        CHECK(aclrtMallocHost((void **)&in[k], BYTES));
        CHECK(aclrtMallocHost((void **)&out[k], BYTES));
        CHECK(aclrtMalloc(&mid[k], BYTES, ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK(aclrtCreateEvent(&freed[k]));
        CHECK(aclrtCreateEvent(&g_ready[me][k]));
    }
    CHECK(aclrtSetCurrentContext(ctx_b));
    for (int k = 0; k < SLOTS; k++) {
        CHECK(aclrtMalloc(&recv[k], BYTES, ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK(aclrtCreateEvent(&g_consumed[me][k]));
    }
    int32_t dev = -1;
    CHECK(aclrtGetDevice(&dev));
    REQUIRE(dev == dev_b, "thread %d: device %d in its second context, expected %d", me, dev,
            dev_b);
    /* Every thread's events exist before any thread uses another's. */
    pthread_barrier_wait(&g_start);

    void *block_of[SLOTS] = {0};
    for (int r = 0; r < g_rounds; r++) {
        const int k = r % SLOTS;
        /* ---- producer, first context ---- */
        CHECK(aclrtSetCurrentContext(ctx_a));
        if (r >= SLOTS) {
            /* The block of round r - SLOTS goes back to the pool once the consumer has read
             * it; the host buffer is refilled once that round's copies have run. */
            wait_box(me, me, k, r - SLOTS, 1);
            CHECK(aclrtStreamWaitEvent(s_a, g_consumed[consumer][k]));
            CHECK(aclrtMemPoolFreeAsync(block_of[k], s_a));
            CHECK(aclrtRecordEvent(freed[k], s_a));
            CHECK(aclrtSynchronizeEvent(freed[k]));
        }
        for (int i = 0; i < WORDS; i++) in[k][i] = word(me, r, i);
        void *block = NULL;
        CHECK(aclrtMemPoolMallocAsync(&block, BYTES, g_pool[dev_a], s_a));
        CHECK(aclrtMemcpyAsync(mid[k], BYTES, in[k], BYTES, ACL_MEMCPY_HOST_TO_DEVICE, s_a));
        CHECK(aclrtMemcpyAsync(block, BYTES, mid[k], BYTES, ACL_MEMCPY_DEVICE_TO_DEVICE, s_a));
        struct produced_arg *pa = malloc(sizeof *pa);
        REQUIRE(pa != NULL, "malloc");
        *pa = (struct produced_arg){me, r, dev_a};
        CHECK(aclrtLaunchCallback(produced, pa, r % 2 ? ACL_CALLBACK_BLOCK : ACL_CALLBACK_NO_BLOCK,
                                  s_a));
        CHECK(aclrtRecordEvent(g_ready[me][k], s_a));
        block_of[k] = block;
        post_box(me, k, r, -1, block);

        /* ---- consumer of the previous thread, second context (the other device) ---- */
        CHECK(aclrtSetCurrentContext(ctx_b));
        wait_box(me, producer, k, r, 0);
        pthread_mutex_lock(&g_mu);
        void *theirs = g_box[producer][k].block;
        pthread_mutex_unlock(&g_mu);
        if (r >= SLOTS) {
            /* out[k] is read by the callback of round r - SLOTS: it ran before the consumed
             * event of that round completed. */
            CHECK(aclrtSynchronizeEvent(g_consumed[me][k]));
        }
        CHECK(aclrtStreamWaitEvent(s_b, g_ready[producer][k]));
        CHECK(aclrtMemcpyAsync(recv[k], BYTES, theirs, BYTES, ACL_MEMCPY_DEVICE_TO_DEVICE, s_b));
        CHECK(aclrtMemcpyAsync(out[k], BYTES, recv[k], BYTES, ACL_MEMCPY_DEVICE_TO_HOST, s_b));
        struct checked_arg *ca = malloc(sizeof *ca);
        REQUIRE(ca != NULL, "malloc");
        *ca = (struct checked_arg){me, producer, r, dev_b, out[k]};
        CHECK(aclrtLaunchCallback(checked, ca, ACL_CALLBACK_BLOCK, s_b));
        CHECK(aclrtRecordEvent(g_consumed[me][k], s_b));
        post_box(producer, k, -1, r, NULL);
    }
    /* The last SLOTS rounds' blocks. */
    CHECK(aclrtSetCurrentContext(ctx_a));
    for (int r = g_rounds > SLOTS ? g_rounds - SLOTS : 0; r < g_rounds; r++) {
        const int k = r % SLOTS;
        wait_box(me, me, k, r, 1);
        CHECK(aclrtStreamWaitEvent(s_a, g_consumed[consumer][k]));
        CHECK(aclrtMemPoolFreeAsync(block_of[k], s_a));
    }
    CHECK(aclrtSynchronizeStream(s_a));
    CHECK(aclrtSetCurrentContext(ctx_b));
    CHECK(aclrtSynchronizeStream(s_b));
    /* Nobody destroys an event another thread's stream may still wait on. */
    pthread_barrier_wait(&g_start);
    CHECK(aclrtUnSubscribeReport((uint64_t)g_reporter[dev_b], s_b));
    for (int k = 0; k < SLOTS; k++) {
        CHECK(aclrtFree(recv[k]));
        CHECK(aclrtDestroyEvent(g_consumed[me][k]));
    }
    CHECK(aclrtDestroyStream(s_b));
    CHECK(aclrtSetCurrentContext(ctx_a));
    CHECK(aclrtUnSubscribeReport((uint64_t)g_reporter[dev_a], s_a));
    for (int k = 0; k < SLOTS; k++) {
        CHECK(aclrtFreeHost(in[k]));
        CHECK(aclrtFreeHost(out[k]));
        CHECK(aclrtFree(mid[k]));
        CHECK(aclrtDestroyEvent(freed[k]));
        CHECK(aclrtDestroyEvent(g_ready[me][k]));
    }
    CHECK(aclrtDestroyStream(s_a));
    CHECK(aclrtDestroyContext(ctx_b));
    CHECK(aclrtDestroyContext(ctx_a));
    CHECK(aclrtResetDevice(dev_a));
    return NULL;
}


int main(int argc, char **argv) {
    g_role = "app_threads";
    if (argc > 1) g_rounds = atoi(argv[1]);
    REQUIRE(g_rounds > 0, "rounds must be positive");
    const int64_t t0 = now_ns();
    CHECK(aclInit(NULL));
    size_t free0[DEVICES];
    for (int d = 0; d < DEVICES; d++) free0[d] = free_bytes_on(d);
    for (int d = 0; d < DEVICES; d++) {
        CHECK(aclrtSetDevice(d));
        aclrtMemPoolProps p = pool_props(d, 64u << 20);
        CHECK(aclrtMemPoolCreate(&g_pool[d], &p));
    }
    for (int w = 0; w < WORKERS; w++) {
        for (int k = 0; k < SLOTS; k++) g_box[w][k] = (struct mailbox){-1, -1, NULL};
        atomic_store(&g_last_produced[w], -1);
        atomic_store(&g_last_checked[w], -1);
    }
    for (int d = 0; d < DEVICES; d++) {
        REQUIRE(pthread_create(&g_reporter[d], NULL, reporter, (void *)(intptr_t)d) == 0,
                "pthread_create");
    }
    REQUIRE(pthread_barrier_init(&g_start, NULL, WORKERS) == 0, "pthread_barrier_init");
    pthread_t t[WORKERS];
    start_threads(t, WORKERS, worker);
    join_all_within(t, WORKERS, 60000, "a worker thread");
    atomic_store(&g_stop, 1);
    for (int d = 0; d < DEVICES; d++) join_within(g_reporter[d], 5000, "a report thread");
    REQUIRE(atomic_load(&g_report_errors) == 0, "aclrtProcessReport failed (above)");
    REQUIRE(atomic_load(&g_callback_errors) == 0, "callbacks saw wrong data or order (above)");
    for (int w = 0; w < WORKERS; w++) {
        REQUIRE(atomic_load(&g_produced_cb[w]) == g_rounds &&
                    atomic_load(&g_checked_cb[w]) == g_rounds,
                "thread %d: %d producing and %d checking callbacks ran, expected %d each", w,
                atomic_load(&g_produced_cb[w]), atomic_load(&g_checked_cb[w]), g_rounds);
    }
    for (int d = 0; d < DEVICES; d++) {
        CHECK(aclrtSetDevice(d));
        CHECK(aclrtMemPoolDestroy(g_pool[d]));
    }
    for (int d = 0; d < DEVICES; d++) {
        size_t f = free_bytes_on(d);
        REQUIRE(f == free0[d], "device %d: %zu bytes free at the end, %zu at the start", d, f,
                free0[d]);
        CHECK(aclrtResetDevice(d));
    }
    CHECK(aclFinalize());
    printf("app_threads: %d threads x %d rounds of %zu bytes checked in %.1f s\n", WORKERS,
           g_rounds, (size_t)BYTES, (double)(now_ns() - t0) / 1e9);
    printf("app_threads: ok\n");
    return 0;
}
