/* threads.c — host threads racing on shared objects, as multi-threaded CANN hosts do:
 * `threads <scenario>` runs one of
 *
 *   shared_stream  four threads enqueue on ONE stream at once: an async host-to-device copy,
 *                  a record and a wait-and-reset of the thread's own notify, a host function,
 *                  an event record and an async device-to-host copy, 300 times each; every
 *                  thread's tasks run in its order (the host functions count), none is lost,
 *                  and every copied value arrives;
 *   discarded      a thread synchronizes an event (classic, Ex, IPC) whose latest record is
 *                  queued behind a wait that never ends, and another stream waits on the
 *                  event (Ex, IPC); then the record's stream is destroyed with
 *                  aclrtDestroyStreamForce, aborted, or its device reset with
 *                  aclrtResetDeviceForce (which gives up waiting for the stream after its
 *                  ACL_NOTIFY_SIM_RESET_TIMEOUT, 1 s here, with 507046, and discards it
 *                  anyway): the record never runs, and the synchronizes end with
 *                  107023 (ACL_ERROR_RT_STREAM_ABORT) saying so, instead of waiting for ever;
 *   destroyed      three threads keep enqueueing (records, waits, copies, host functions,
 *                  event records and waits, queries, synchronizes) on a stream, an event or a
 *                  context that another thread destroys: every call answers 0, or 107017 once
 *                  its object is gone (never a crash or a hang), and a thread that sets the
 *                  destroyed context is told 107017;
 *   device_refs    four threads each set a device (two devices, in turn), make a stream and a
 *                  notify there, use them and reset the device, 300 times: the process's
 *                  count of sets reaches 0 now and then, and a reset that brings it to 0
 *                  releases the device's default context with its streams and notifies; a
 *                  thread whose set came after that reset keeps what it made (every call 0).
 *
 * Every wait is bounded (timed joins, timed synchronizes); exit 0 when every check holds. */
#include "common.h"
#include "join.h"

#include <pthread.h>
#include <stdatomic.h>

/* ---- shared_stream ---- */

#define THREADS 4
#define ROUNDS 300

static aclrtStream g_shared;
static void *g_dev; /* THREADS * ROUNDS ints */
static int g_in[THREADS][ROUNDS], g_out[THREADS][ROUNDS];
static atomic_int g_last[THREADS];
static atomic_int g_out_of_order;
static atomic_int g_ran;

struct step {
    int thread, round;
};
static struct step g_steps[THREADS][ROUNDS];

static void count_step(void *p) {
    const struct step *s = p;
    if (atomic_exchange(&g_last[s->thread], s->round) != s->round - 1) {
        atomic_fetch_add(&g_out_of_order, 1);
    }
    atomic_fetch_add(&g_ran, 1);
}

static void *shared_enqueuer(void *arg) {
    int t = (int)(intptr_t)arg;
    CHECK(aclrtSetDevice(0));
    aclrtNotify n = NULL;
    CHECK(aclrtCreateNotify(&n, 0));
    aclrtEvent ev = NULL;
    CHECK(aclrtCreateEvent(&ev));
    for (int i = 0; i < ROUNDS; i++) {
        int *d = (int *)g_dev + t * ROUNDS + i;
        g_in[t][i] = t * 100000 + i;
        g_steps[t][i] = (struct step){t, i};
        CHECK(aclrtMemcpyAsync(d, sizeof(int), &g_in[t][i], sizeof(int),
                               ACL_MEMCPY_HOST_TO_DEVICE, g_shared));
        CHECK(aclrtRecordNotify(n, g_shared));
        CHECK(aclrtWaitAndResetNotify(n, g_shared, 10));
        CHECK(aclrtLaunchHostFunc(g_shared, count_step, &g_steps[t][i]));
        CHECK(aclrtRecordEvent(ev, g_shared));
        CHECK(aclrtMemcpyAsync(&g_out[t][i], sizeof(int), d, sizeof(int),
                               ACL_MEMCPY_DEVICE_TO_HOST, g_shared));
    }
    CHECK(aclrtSynchronizeEventWithTimeout(ev, 20000));
    CHECK(aclrtDestroyEvent(ev));
    CHECK(aclrtDestroyNotify(n));
    return NULL;
}

static void shared_stream(void) {
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtCreateStream(&g_shared));
    CHECK(aclrtMalloc(&g_dev, sizeof(int) * THREADS * ROUNDS, ACL_MEM_MALLOC_HUGE_FIRST));
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) {
        atomic_store(&g_last[t], -1);
    }
    for (int t = 0; t < THREADS; t++) {
        REQUIRE(pthread_create(&th[t], NULL, shared_enqueuer, (void *)(intptr_t)t) == 0,
                "pthread_create");
    }
    for (int t = 0; t < THREADS; t++) {
        join_within(th[t], 30000, "an enqueueing thread");
    }
    CHECK(aclrtSynchronizeStreamWithTimeout(g_shared, 20000));
    REQUIRE(atomic_load(&g_ran) == THREADS * ROUNDS, "%d host functions ran, %d enqueued",
            atomic_load(&g_ran), THREADS * ROUNDS);
    REQUIRE(atomic_load(&g_out_of_order) == 0, "%d host functions ran out of their thread's order",
            atomic_load(&g_out_of_order));
    static int back[THREADS * ROUNDS];
    CHECK(aclrtMemcpy(back, sizeof back, g_dev, sizeof back, ACL_MEMCPY_DEVICE_TO_HOST));
    for (int t = 0; t < THREADS; t++) {
        for (int i = 0; i < ROUNDS; i++) {
            REQUIRE(g_out[t][i] == t * 100000 + i && back[t * ROUNDS + i] == t * 100000 + i,
                    "thread %d round %d: copied back %d, device holds %d, sent %d", t, i,
                    g_out[t][i], back[t * ROUNDS + i], t * 100000 + i);
        }
    }
    CHECK(aclrtFree(g_dev));
    CHECK(aclrtDestroyStream(g_shared));
    CHECK(aclFinalize());
}

/* ---- discarded ---- */

static aclrtEvent g_ev;
static aclrtStream g_waiter;
static atomic_int g_started;
static atomic_int g_sync_rc, g_waiter_rc;
static char g_msg[1024];

static void *event_syncer(void *arg) {
    (void)arg;
    CHECK(aclrtSetDevice(0));
    atomic_store(&g_started, 1);
    aclError e = aclrtSynchronizeEvent(g_ev);
    snprintf(g_msg, sizeof g_msg, "%s", e ? recent_msg() : "");
    atomic_store(&g_sync_rc, e);
    if (g_waiter) {
        atomic_store(&g_waiter_rc, aclrtSynchronizeStreamWithTimeout(g_waiter, 5000));
    }
    return NULL;
}

enum { CLASSIC, EX, IPC };
enum { DESTROY_FORCE, ABORT, RESET_FORCE };

static void discarded_case(int kind, int how) {
    static const char *kinds[] = {"classic", "Ex", "IPC"};
    static const char *hows[] = {"aclrtDestroyStreamForce", "aclrtStreamAbort",
                                 "aclrtResetDeviceForce"};
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream s = NULL;
    CHECK(aclrtCreateStream(&s));
    if (kind == CLASSIC) {
        CHECK(aclrtCreateEvent(&g_ev));
    } else {
        CHECK(aclrtCreateEventExWithFlag(&g_ev, kind == EX ? ACL_EVENT_SYNC : ACL_EVENT_IPC));
    }
    aclrtNotify never = NULL;
    CHECK(aclrtCreateNotify(&never, 0));
    CHECK(aclrtWaitAndResetNotify(never, s, 0)); /* for ever: never recorded */
    CHECK(aclrtRecordEvent(g_ev, s));
    g_waiter = NULL;
    if (kind != CLASSIC) {
        /* A stream of this process that waits on the record (a classic wait waits for any
         * later record, so only Ex and IPC waits are ended by this one's discard). */
        CHECK(aclrtCreateStream(&g_waiter));
        CHECK(aclrtStreamWaitEvent(g_waiter, g_ev));
    }
    atomic_store(&g_started, 0);
    atomic_store(&g_sync_rc, -1);
    atomic_store(&g_waiter_rc, -1);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, event_syncer, NULL) == 0, "pthread_create");
    while (!atomic_load(&g_started)) {
        sleep_ms(1);
    }
    sleep_ms(50); /* let it block in the synchronize */
    switch (how) {
    case DESTROY_FORCE:
        CHECK(aclrtDestroyStreamForce(s));
        break;
    case ABORT:
        CHECK(aclrtStreamAbort(s));
        break;
    default: {
        /* Its drain waits for the record behind the endless wait: 507046 at its bound (1 s,
         * set in `discarded`), then it discards the stream anyway. */
        aclError rc = aclrtResetDeviceForce(0);
        REQUIRE(rc == ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
                "aclrtResetDeviceForce returned %d, expected 507046: %s", (int)rc, recent_msg());
        break;
    }
    }
    char what[128];
    snprintf(what, sizeof what, "aclrtSynchronizeEvent of a %s event after %s", kinds[kind],
             hows[how]);
    join_within(t, 10000, what);
    REQUIRE(atomic_load(&g_sync_rc) == ACL_ERROR_RT_STREAM_ABORT, "%s returned %d: %s", what,
            atomic_load(&g_sync_rc), g_msg);
    REQUIRE(strstr(g_msg, "discarded unrun") != NULL, "%s: message `%s`", what, g_msg);
    if (kind != CLASSIC && how != RESET_FORCE) { /* the reset discards the waiter too */
        REQUIRE(atomic_load(&g_waiter_rc) == ACL_ERROR_RT_STREAM_ABORT,
                "the stream waiting on the %s event after %s: synchronize returned %d",
                kinds[kind], hows[how], atomic_load(&g_waiter_rc));
    }
    CHECK(aclFinalize());
}

static void discarded(void) {
    /* A reset waits this long for the stream it releases (its endless wait never ends). */
    REQUIRE(setenv("ACL_NOTIFY_SIM_RESET_TIMEOUT", "1", 1) == 0, "setenv");
    for (int kind = CLASSIC; kind <= IPC; kind++) {
        for (int how = DESTROY_FORCE; how <= RESET_FORCE; how++) {
            discarded_case(kind, how);
        }
    }
}

/* ---- destroyed ---- */

static atomic_int g_stop, g_bad;
static atomic_long g_ok, g_stale;
static aclrtStream g_s;
static aclrtContext g_ctx;
static void *g_buf;
static int g_host[16];

static void nothing(void *p) {
    (void)p;
}

#define ANSWER(call)                                                                       \
    do {                                                                                   \
        aclError e_ = (call);                                                              \
        if (e_ == ACL_SUCCESS) {                                                           \
            atomic_fetch_add(&g_ok, 1);                                                    \
        } else if (e_ == ACL_ERROR_RT_INVALID_HANDLE) {                                    \
            atomic_fetch_add(&g_stale, 1);                                                 \
        } else if (!atomic_exchange(&g_bad, 1)) {                                          \
            fprintf(stderr, "[threads] %s returned %d: %s\n", #call, (int)e_, recent_msg()); \
        }                                                                                  \
    } while (0)

static void *user(void *arg) {
    (void)arg;
    if (g_ctx) {
        CHECK(aclrtSetCurrentContext(g_ctx));
    } else {
        CHECK(aclrtSetDevice(0));
    }
    aclrtNotify n = NULL;
    CHECK(aclrtCreateNotify(&n, 0));
    atomic_fetch_add(&g_started, 1);
    while (!atomic_load(&g_stop)) {
        aclrtStreamStatus st;
        ANSWER(aclrtRecordNotify(n, g_s));
        ANSWER(aclrtWaitAndResetNotify(n, g_s, 5));
        ANSWER(aclrtMemcpyAsync(g_buf, sizeof g_host, g_host, sizeof g_host,
                                ACL_MEMCPY_HOST_TO_DEVICE, g_s));
        ANSWER(aclrtLaunchHostFunc(g_s, nothing, NULL));
        ANSWER(aclrtRecordEvent(g_ev, g_s));
        ANSWER(aclrtStreamWaitEvent(g_s, g_ev));
        ANSWER(aclrtStreamQuery(g_s, &st));
        ANSWER(aclrtSynchronizeStreamWithTimeout(g_s, 5000));
    }
    ANSWER(aclrtDestroyNotify(n));
    return NULL;
}

enum { STREAM, EVENT, CONTEXT };

static void destroyed_case(int what) {
    static const char *names[] = {"stream", "event", "context"};
    CHECK(aclInit(NULL));
    g_ctx = NULL;
    if (what == CONTEXT) {
        CHECK(aclrtCreateContext(&g_ctx, 0));
    } else {
        CHECK(aclrtSetDevice(0));
    }
    CHECK(aclrtCreateStream(&g_s));
    CHECK(aclrtCreateEvent(&g_ev));
    CHECK(aclrtMalloc(&g_buf, sizeof g_host, ACL_MEM_MALLOC_HUGE_FIRST));
    atomic_store(&g_stop, 0);
    atomic_store(&g_started, 0);
    atomic_store(&g_ok, 0);
    atomic_store(&g_stale, 0);
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        REQUIRE(pthread_create(&th[i], NULL, user, NULL) == 0, "pthread_create");
    }
    /* Destroyed while the threads are at work: once they have got calls through. */
    int64_t deadline = now_ns() + 10000000000LL;
    while (atomic_load(&g_started) < 3 || atomic_load(&g_ok) < 50) {
        REQUIRE(now_ns() < deadline, "the threads got %ld calls through in 10 s",
                atomic_load(&g_ok));
        sleep_ms(1);
    }
    switch (what) {
    case STREAM:
        CHECK(aclrtDestroyStream(g_s));
        break;
    case EVENT:
        CHECK(aclrtDestroyEvent(g_ev));
        break;
    default:
        CHECK(aclrtDestroyContext(g_ctx));
        break;
    }
    /* Let the threads run into the destroyed object: until one call has answered 107017
     * (bounded; a fixed sleep could end, under load or a pause, before any thread ran). */
    deadline = now_ns() + 10000000000LL;
    while (atomic_load(&g_stale) == 0 && now_ns() < deadline) {
        sleep_ms(1);
    }
    sleep_ms(30);
    atomic_store(&g_stop, 1);
    for (int i = 0; i < 3; i++) {
        join_within(th[i], 10000, "a thread using the destroyed object");
    }
    REQUIRE(!atomic_load(&g_bad), "a call on a %s another thread destroyed answered neither 0 "
            "nor 107017", names[what]);
    REQUIRE(atomic_load(&g_stale) > 0, "no call on the destroyed %s answered 107017",
            names[what]);
    if (what == CONTEXT) {
        EXPECT_RC(aclrtSetCurrentContext(g_ctx), ACL_ERROR_RT_INVALID_HANDLE);
    } else {
        EXPECT_RC(what == STREAM ? aclrtDestroyStream(g_s) : aclrtDestroyEvent(g_ev),
                  ACL_ERROR_RT_INVALID_HANDLE);
    }
    CHECK(aclFinalize());
}

static void destroyed(void) {
    for (int what = STREAM; what <= CONTEXT; what++) {
        destroyed_case(what);
    }
}

/* ---- device_refs ---- */

static void *set_use_reset(void *arg) {
    int t = (int)(intptr_t)arg;
    for (int i = 0; i < 300; i++) {
        int32_t d = (t + i) % 2;
        CHECK(aclrtSetDevice(d));
        aclrtStream s = NULL;
        CHECK(aclrtCreateStream(&s));
        aclrtNotify n = NULL;
        CHECK(aclrtCreateNotify(&n, 0));
        CHECK(aclrtRecordNotify(n, NULL));
        CHECK(aclrtWaitAndResetNotify(n, s, 5));
        CHECK(aclrtSynchronizeStreamWithTimeout(s, 10000));
        CHECK(aclrtSynchronizeStreamWithTimeout(NULL, 10000));
        CHECK(aclrtDestroyNotify(n));
        CHECK(aclrtDestroyStream(s));
        CHECK(aclrtResetDevice(d));
    }
    return NULL;
}

static void device_refs(void) {
    CHECK(aclInit(NULL));
    pthread_t th[4];
    for (int t = 0; t < 4; t++) {
        REQUIRE(pthread_create(&th[t], NULL, set_use_reset, (void *)(intptr_t)t) == 0,
                "pthread_create");
    }
    for (int t = 0; t < 4; t++) {
        join_within(th[t], 30000, "a thread setting and resetting devices");
    }
    CHECK(aclFinalize());
}

int main(int argc, char **argv) {
    g_role = "threads";
    const char *what = argc > 1 ? argv[1] : "";
    if (!strcmp(what, "shared_stream")) {
        shared_stream();
    } else if (!strcmp(what, "discarded")) {
        discarded();
    } else if (!strcmp(what, "destroyed")) {
        destroyed();
    } else if (!strcmp(what, "device_refs")) {
        device_refs();
    } else {
        fprintf(stderr, "usage: threads shared_stream|discarded|destroyed|device_refs\n");
        return 2;
    }
    printf("threads %s: ok\n", what);
    return 0;
}
