/* teardown.c — aclFinalize and device resets end what other threads are blocked on, whatever
 * the streams' creation order, and leave nothing behind: `teardown <scenario>` runs one of
 *
 *   sync_default   a thread synchronizing the default stream, whose head waits for ever, gets
 *                  107017 from aclFinalize; no worker thread and no notify id outlives it;
 *   drain          an aclrtDestroyStream draining a stream whose head waits for ever, on
 *                  another thread, returns once aclFinalize has run;
 *   hostfn_sync    a host function on stream S synchronizing stream S2 (created after S, its
 *                  head waits for ever): aclFinalize discards both instead of deadlocking;
 *   hostfn_reset   the same with aclrtResetDeviceForce instead of aclFinalize (which waits
 *                  its ACL_NOTIFY_SIM_RESET_TIMEOUT, 1 s here, then answers 507046);
 *   reset_drains   aclrtResetDevice bringing the device's count to 0, and
 *                  aclrtResetDeviceForce, wait for the tasks queued on the device's streams
 *                  (CANN's aclrtResetDevice.md): an async copy queued before lands before they
 *                  return;
 *   reset_bound    the same with a wait for ever queued: the reset ends after
 *                  ACL_NOTIFY_SIM_RESET_TIMEOUT with 507046, releasing the device anyway
 *                  (after aclrtSetDevice the NULL stream is a fresh one, and the old tasks'
 *                  notify ids are free);
 *   reset_deadlock two streams waiting on each other in a cycle: with ACL_NOTIFY_SIM_DEADLOCK=fail
 *                  a wait of the cycle fails at once and the reset's drain finishes (0);
 *   reset_count    aclrtResetDeviceForce.md's sequences: a reset after the count reached 0 is
 *                  507007;
 *   host_wait      an aclnsimNotifyHostWait with no limit, on another thread, ends with
 *                  107017 once aclFinalize has run (it destroys the notify handles);
 *   finalize_drains aclFinalize lets the tasks queued on the streams run first, as CANN's
 *                  leaves them running: copies behind a slow host function, and behind a wait
 *                  that another stream's queued record releases, land before it returns; one
 *                  behind a wait nothing is going to record does not hold it up (one behind
 *                  a wait that times out lands after its timeout); nor does
 *                  another thread that goes on queueing and synchronizing meanwhile.
 *
 * Every wait is bounded (timed joins, timed synchronizes); exit 0 when every check holds. */
#include "common.h"
#include "join.h"

#include <dirent.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>

#include "acl/aclnsim.h"

/* Threads of this process (the main thread alone: 1). */
static int count_threads(void) {
    int n = 0;
    DIR *d = opendir("/proc/self/task");
    REQUIRE(d != NULL, "cannot open /proc/self/task");
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] != '.') {
            n++;
        }
    }
    closedir(d);
    return n;
}

/* The worker threads of a session are gone once nothing runs (bounded poll). */
static void expect_threads(int want) {
    int64_t deadline = now_ns() + 5000000000LL;
    int n;
    while ((n = count_threads()) != want && now_ns() < deadline) {
        sleep_ms(5);
    }
    REQUIRE(n == want, "%d threads left, expected %d (stream workers leaked)", n, want);
}

static uint32_t free_ids(void) {
    uint32_t f = 0;
    CHECK(aclnsimGetNotifyFreeCount(0, &f));
    return f;
}

static atomic_int g_started;
static atomic_int g_rc = -1;
static aclrtStream g_s, g_s2;

/* ---- sync_default ---- */

static void *sync_default_thread(void *arg) {
    (void)arg;
    CHECK(aclrtSetDevice(0));
    atomic_store(&g_started, 1);
    atomic_store(&g_rc, aclrtSynchronizeStream(NULL));
    return NULL;
}

static void sync_default(void) {
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    uint32_t before = free_ids();
    aclrtNotify n = NULL;
    CHECK(aclrtCreateNotify(&n, 0));
    CHECK(aclrtWaitAndResetNotify(n, NULL, 0)); /* for ever: never recorded */
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, sync_default_thread, NULL) == 0, "pthread_create");
    while (!atomic_load(&g_started)) {
        sleep_ms(1);
    }
    sleep_ms(200); /* let it block in the synchronize */
    CHECK(aclFinalize());
    join_within(t, 5000, "aclrtSynchronizeStream(NULL) after aclFinalize");
    REQUIRE(atomic_load(&g_rc) == ACL_ERROR_RT_INVALID_HANDLE,
            "the synchronize returned %d, expected 107017", atomic_load(&g_rc));
    expect_threads(1);
    /* The finalized session kept nothing: its notify id is free again. */
    CHECK(aclInit(NULL));
    uint32_t after = free_ids();
    REQUIRE(after == before, "%u notify ids free after aclFinalize, %u before", after, before);
    CHECK(aclFinalize());
}

/* ---- drain ---- */

static char g_msg[512];

static void *drain_thread(void *arg) {
    (void)arg;
    CHECK(aclrtSetDevice(0));
    atomic_store(&g_started, 1);
    atomic_store(&g_rc, aclrtDestroyStream(g_s));
    snprintf(g_msg, sizeof g_msg, "%s", recent_msg());
    return NULL;
}

static void drain(void) {
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtCreateStream(&g_s));
    aclrtNotify n = NULL;
    CHECK(aclrtCreateNotify(&n, 0));
    CHECK(aclrtWaitAndResetNotify(n, g_s, 0));
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, drain_thread, NULL) == 0, "pthread_create");
    while (!atomic_load(&g_started)) {
        sleep_ms(1);
    }
    sleep_ms(200); /* let it block in the drain */
    CHECK(aclFinalize());
    join_within(t, 5000, "aclrtDestroyStream (draining) after aclFinalize");
    /* It says its queued tasks did not run, naming the caller's stream handle. */
    char want[64];
    snprintf(want, sizeof want, "stream %#" PRIxPTR " was discarded while it drained",
             (uintptr_t)g_s);
    REQUIRE(strstr(g_msg, want) != NULL, "`%s` missing: %s", want, g_msg);
    REQUIRE(atomic_load(&g_rc) == ACL_ERROR_RT_INVALID_HANDLE,
            "the draining destroy returned %d, expected 107017 (its tasks were discarded)",
            atomic_load(&g_rc));
    expect_threads(1);
}

/* ---- hostfn_sync / hostfn_reset ---- */

static void sync_s2(void *arg) {
    (void)arg;
    CHECK(aclrtSetDevice(0));
    atomic_store(&g_started, 1);
    atomic_store(&g_rc, aclrtSynchronizeStream(g_s2));
}

static int g_reset;

static void *teardown_thread(void *arg) {
    (void)arg;
    if (g_reset) {
        /* Its drain cannot finish: 507046 after its bound, and it releases anyway. */
        aclError rc = aclrtResetDeviceForce(0);
        REQUIRE(rc == ACL_ERROR_RT_STREAM_SYNC_TIMEOUT, "aclrtResetDeviceForce returned %d, "
                "expected 507046: %s", (int)rc, recent_msg());
    } else {
        CHECK(aclFinalize());
    }
    return NULL;
}

static void hostfn_sync(int reset) {
    g_reset = reset;
    if (reset) {
        REQUIRE(setenv("ACL_NOTIFY_SIM_RESET_TIMEOUT", "1", 1) == 0, "setenv");
    }
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    /* S first, then S2: the order in which a one-stream-at-a-time teardown deadlocked. */
    CHECK(aclrtCreateStream(&g_s));
    CHECK(aclrtCreateStream(&g_s2));
    aclrtNotify n = NULL;
    CHECK(aclrtCreateNotify(&n, 0));
    CHECK(aclrtWaitAndResetNotify(n, g_s2, 0));
    CHECK(aclrtLaunchHostFunc(g_s, sync_s2, NULL));
    int64_t deadline = now_ns() + 10000000000LL;
    while (!atomic_load(&g_started)) {
        REQUIRE(now_ns() < deadline, "the host function never started");
        sleep_ms(1);
    }
    sleep_ms(100); /* let it block in the synchronize */
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, teardown_thread, NULL) == 0, "pthread_create");
    join_within(t, 10000, reset ? "aclrtResetDeviceForce" : "aclFinalize");
    REQUIRE(atomic_load(&g_rc) == ACL_ERROR_RT_INVALID_HANDLE,
            "the host function's synchronize returned %d, expected 107017", atomic_load(&g_rc));
    if (reset) {
        expect_threads(1);
        CHECK(aclFinalize());
    } else {
        expect_threads(1);
    }
}

/* ---- reset_drains / reset_bound / reset_count ---- */

static void slow_host_fn(void *arg) {
    (void)arg;
    sleep_ms(300);
}

enum { COPY = 64 };

/* Queues on `stream` (NULL: the default stream) a 300 ms host function and, behind it, an
 * async copy of device memory `dev` into host memory `dst`. */
static void queue_copy(void *dev, unsigned char *dst, aclrtStream stream) {
    memset(dst, 0, COPY);
    CHECK(aclrtLaunchHostFunc(stream, slow_host_fn, NULL));
    CHECK(aclrtMemcpyAsync(dst, COPY, dev, COPY, ACL_MEMCPY_DEVICE_TO_HOST, stream));
}

/* Zeroed host memory the runtime knows (registered with aclrtHostRegister; the calling thread
 * has a current device), for copies queued into it: an aclrtMemcpyAsync with malloc'd memory is
 * not queued (CANN's runtime synchronizes the stream and copies at once), and aclrtMallocHost's
 * memory goes with aclFinalize, after which these checks read it. Freed with free() after
 * aclFinalize. */
static unsigned char *host_buf(void) {
    unsigned char *p = aligned_alloc(4096, 4096);
    REQUIRE(p, "aligned_alloc");
    memset(p, 0, 4096);
    void *dev_ptr = NULL;
    CHECK(aclrtHostRegister(p, 4096, ACL_HOST_REGISTER_MAPPED, &dev_ptr));
    return p;
}

/* Whether all of `dst` holds `want`. */
static int holds(const unsigned char *dst, unsigned char want) {
    for (int i = 0; i < COPY; i++) {
        if (dst[i] != want) {
            return 0;
        }
    }
    return 1;
}

/* Device memory on the current device holding COPY bytes of `v`. */
static void *device_bytes(unsigned char v) {
    void *dev = NULL;
    CHECK(aclrtMalloc(&dev, COPY, ACL_MEM_MALLOC_HUGE_FIRST));
    unsigned char src[COPY];
    memset(src, v, sizeof src);
    CHECK(aclrtMemcpy(dev, COPY, src, COPY, ACL_MEMCPY_HOST_TO_DEVICE));
    return dev;
}

static void reset_drains(void) {
    CHECK(aclInit(NULL));

    /* aclrtResetDevice bringing the count to 0 (set twice, reset twice): the copies queued
     * on the default stream and on a created stream land before it returns. */
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtSetDevice(0));
    unsigned char *a = host_buf(), *b = host_buf();
    void *dev = device_bytes(0x5a);
    aclrtStream s = NULL;
    CHECK(aclrtCreateStream(&s));
    queue_copy(dev, a, NULL);
    queue_copy(dev, b, s);
    CHECK(aclrtResetDevice(0)); /* count 1: releases nothing */
    CHECK(aclrtResetDevice(0));
    REQUIRE(holds(a, 0x5a), "the copy queued on the default stream before aclrtResetDevice "
                            "had not landed when it returned");
    REQUIRE(holds(b, 0x5a), "the copy queued on a created stream before aclrtResetDevice "
                            "had not landed when it returned");

    /* aclrtResetDeviceForce: the same. */
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtSetDevice(0));
    dev = device_bytes(0x3c);
    CHECK(aclrtCreateStream(&s));
    queue_copy(dev, a, NULL);
    queue_copy(dev, b, s);
    CHECK(aclrtResetDeviceForce(0));
    REQUIRE(holds(a, 0x3c), "the copy queued on the default stream before "
                            "aclrtResetDeviceForce had not landed when it returned");
    REQUIRE(holds(b, 0x3c), "the copy queued on a created stream before "
                            "aclrtResetDeviceForce had not landed when it returned");
    CHECK(aclFinalize());
    expect_threads(1);
    free(a);
    free(b);
}

/* A reset whose streams do not drain within ACL_NOTIFY_SIM_RESET_TIMEOUT (1 s here) answers
 * 507046 saying so, and releases the device anyway: the queued copy never lands, the notify
 * ids are free, and after aclrtSetDevice the NULL stream is a fresh one. */
static void reset_bound_case(int force) {
    const char *call = force ? "aclrtResetDeviceForce" : "aclrtResetDevice";
    CHECK(aclrtSetDevice(0));
    uint32_t before = free_ids();
    void *dev = device_bytes(0x77);
    unsigned char *a = host_buf();
    aclrtNotify n = NULL;
    CHECK(aclrtCreateNotify(&n, 0));
    CHECK(aclrtWaitAndResetNotify(n, NULL, 0)); /* for ever: never recorded */
    CHECK(aclrtMemcpyAsync(a, COPY, dev, COPY, ACL_MEMCPY_DEVICE_TO_HOST, NULL));
    int64_t t0 = now_ns();
    aclError rc = force ? aclrtResetDeviceForce(0) : aclrtResetDevice(0);
    int64_t ms = (now_ns() - t0) / 1000000;
    const char *msg = recent_msg();
    REQUIRE(rc == ACL_ERROR_RT_STREAM_SYNC_TIMEOUT, "%s with a wait for ever queued returned %d, "
            "expected 507046: %s", call, (int)rc, msg);
    /* Its bound ended it (507046 above): not before it, a lower bound only (a loaded machine
     * makes it late, never early; under 5 s too until 2026-12-07). */
    REQUIRE(ms >= 900, "%s took %lld ms, expected its 1 s bound", call, (long long)ms);
    REQUIRE(strstr(msg, "ACL_NOTIFY_SIM_RESET_TIMEOUT") && strstr(msg, "released anyway"),
            "%s: message `%s`", call, msg);
    REQUIRE(holds(a, 0), "the copy behind the endless wait ran");
    CHECK(aclrtSetDevice(0));
    REQUIRE(free_ids() == before, "%s left %u notify ids free, %u before", call, free_ids(),
            before);
    aclrtNotify m = NULL;
    CHECK(aclrtCreateNotify(&m, 0));
    CHECK(aclrtRecordNotify(m, NULL));
    CHECK(aclrtSynchronizeStreamWithTimeout(NULL, 5000));
    aclrtStreamStatus st = ACL_STREAM_STATUS_RESERVED;
    CHECK(aclrtStreamQuery(NULL, &st));
    REQUIRE(st == ACL_STREAM_STATUS_COMPLETE, "the new default stream is not complete (%d)",
            (int)st);
    CHECK(aclrtDestroyNotify(m));
    CHECK(aclrtHostUnregister(a));
    CHECK(aclrtResetDeviceForce(0));
    free(a);
}

static void reset_bound(void) {
    REQUIRE(setenv("ACL_NOTIFY_SIM_RESET_TIMEOUT", "1", 1) == 0, "setenv");
    CHECK(aclInit(NULL));
    reset_bound_case(1);
    reset_bound_case(0);
    CHECK(aclFinalize());
    expect_threads(1);
}

/* Two streams waiting on each other's record in a cycle: with ACL_NOTIFY_SIM_DEADLOCK=fail the
 * wait-for graph fails a wait of the cycle at once (107020), its stream goes on (continue on
 * failure) and records, and the reset's drain finishes well before its bound (30 s here),
 * returning 0. */
static void reset_deadlock(void) {
    REQUIRE(setenv("ACL_NOTIFY_SIM_DEADLOCK", "fail", 1) == 0, "setenv");
    REQUIRE(setenv("ACL_NOTIFY_SIM_RESET_TIMEOUT", "30", 1) == 0, "setenv");
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream s1 = NULL, s2 = NULL;
    CHECK(aclrtCreateStream(&s1));
    CHECK(aclrtCreateStream(&s2));
    aclrtNotify n1 = NULL, n2 = NULL;
    CHECK(aclrtCreateNotify(&n1, 0));
    CHECK(aclrtCreateNotify(&n2, 0));
    CHECK(aclrtWaitAndResetNotify(n2, s1, 0)); /* for ever */
    CHECK(aclrtRecordNotify(n1, s1));
    CHECK(aclrtWaitAndResetNotify(n1, s2, 0)); /* for ever */
    CHECK(aclrtRecordNotify(n2, s2));
    void *dev = device_bytes(0x21);
    unsigned char *a = host_buf();
    CHECK(aclrtMemcpyAsync(a, COPY, dev, COPY, ACL_MEMCPY_DEVICE_TO_HOST, s1));
    /* 0, not the 507046 of a drain that waited out its 30 s bound: the pair was undone (a
     * time under 10 s stood here too until 2026-12-07). */
    CHECK(aclrtResetDevice(0));
    REQUIRE(holds(a, 0x21), "the copy behind the deadlocked wait had not landed");
    CHECK(aclFinalize());
    free(a);
}

/* Expects `call` to fail with 507007 (ACL_ERROR_RT_CONTEXT_RELEASE_ERROR). */
#define EXPECT_RESET_ERROR(call)                                                               \
    do {                                                                                       \
        aclError rc_ = (call);                                                                 \
        REQUIRE(rc_ == ACL_ERROR_RT_CONTEXT_RELEASE_ERROR, "%s returned %d, expected 507007",  \
                #call, (int)rc_);                                                              \
        REQUIRE(strstr(recent_msg(), "already reset to 0") != NULL, "%s: no reason given",   \
                #call);                                                                        \
    } while (0)

/* aclrtResetDeviceForce.md's sequences: the valid ones return 0; a reset after the count
 * reached 0 is an error. */
static void reset_count(void) {
    CHECK(aclInit(NULL));
    EXPECT_RESET_ERROR(aclrtResetDevice(1)); /* never set */
    EXPECT_RESET_ERROR(aclrtResetDeviceForce(1));
    /* valid */
    CHECK(aclrtSetDevice(1));
    CHECK(aclrtResetDevice(1));
    CHECK(aclrtSetDevice(1));
    CHECK(aclrtResetDeviceForce(1));
    CHECK(aclrtSetDevice(1));
    CHECK(aclrtSetDevice(1));
    CHECK(aclrtResetDevice(1));
    CHECK(aclrtResetDeviceForce(1));
    CHECK(aclrtSetDevice(1));
    CHECK(aclrtSetDevice(1));
    CHECK(aclrtResetDeviceForce(1));
    /* invalid */
    CHECK(aclrtSetDevice(1));
    CHECK(aclrtSetDevice(1));
    CHECK(aclrtResetDevice(1));
    CHECK(aclrtResetDevice(1));
    EXPECT_RESET_ERROR(aclrtResetDeviceForce(1));
    CHECK(aclrtSetDevice(1));
    CHECK(aclrtSetDevice(1));
    CHECK(aclrtResetDevice(1));
    CHECK(aclrtResetDeviceForce(1));
    EXPECT_RESET_ERROR(aclrtResetDeviceForce(1));
    CHECK(aclrtSetDevice(1));
    CHECK(aclrtSetDevice(1));
    CHECK(aclrtResetDeviceForce(1));
    EXPECT_RESET_ERROR(aclrtResetDevice(1));
    /* a reset that failed leaves the device usable once set again */
    CHECK(aclrtSetDevice(1));
    aclrtStream s = NULL;
    CHECK(aclrtCreateStream(&s));
    CHECK(aclrtSynchronizeStreamWithTimeout(s, 5000));
    CHECK(aclrtResetDevice(1));
    CHECK(aclFinalize());
}

/* ---- host_wait ---- */

static void *host_wait_thread(void *arg) {
    aclrtNotify n = arg;
    CHECK(aclrtSetDevice(0));
    atomic_store(&g_started, 1);
    atomic_store(&g_rc, aclnsimNotifyHostWait(n, UINT64_MAX));
    snprintf(g_msg, sizeof g_msg, "%s", recent_msg());
    return NULL;
}

static void host_wait(void) {
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtNotify n = NULL;
    CHECK(aclrtCreateNotify(&n, 0));
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, host_wait_thread, n) == 0, "pthread_create");
    while (!atomic_load(&g_started)) {
        sleep_ms(1);
    }
    sleep_ms(200); /* let it sleep in the wait */
    CHECK(aclFinalize());
    join_within(t, 5000, "aclnsimNotifyHostWait after aclFinalize");
    REQUIRE(atomic_load(&g_rc) == ACL_ERROR_RT_INVALID_HANDLE, "the host wait returned %d: %s",
            (int)atomic_load(&g_rc), g_msg);
    REQUIRE(strstr(g_msg, "was destroyed") != NULL && strstr(g_msg, "aclFinalize") != NULL,
            "message: %s", g_msg);
}

/* ---- finalize_drains ---- */

static void short_nap(void *arg) {
    (void)arg;
    usleep(50);
}

/* Queues 50 µs host functions on g_s as fast as it can (the queue never empties) until a call
 * fails (the session it used was finalized). */
static void *busy_thread(void *arg) {
    (void)arg;
    CHECK(aclrtSetDevice(0));
    atomic_store(&g_started, 1);
    for (int i = 0; i < 10000000; i++) {
        if (aclrtLaunchHostFunc(g_s, short_nap, NULL) != ACL_SUCCESS) {
            break;
        }
    }
    return NULL;
}

static void finalize_drains(void) {
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    unsigned char *a = host_buf(), *b = host_buf(), *c = host_buf(), *d = host_buf(),
                  *e = host_buf();
    void *dev = device_bytes(0x6b);
    aclrtStream s, waiter, recorder, stuck;
    CHECK(aclrtCreateStream(&s));
    CHECK(aclrtCreateStream(&waiter));
    CHECK(aclrtCreateStream(&recorder));
    CHECK(aclrtCreateStream(&stuck));
    queue_copy(dev, a, NULL);
    queue_copy(dev, b, s);
    /* `waiter` waits for a record `recorder` makes after its 300 ms host function. */
    aclrtNotify later, never;
    CHECK(aclrtCreateNotify(&later, 0));
    CHECK(aclrtCreateNotify(&never, 0));
    CHECK(aclrtWaitAndResetNotify(later, waiter, 0));
    CHECK(aclrtMemcpyAsync(d, COPY, dev, COPY, ACL_MEMCPY_DEVICE_TO_HOST, waiter));
    CHECK(aclrtLaunchHostFunc(recorder, slow_host_fn, NULL));
    CHECK(aclrtRecordNotify(later, recorder));
    /* `stuck` waits for a record nothing queues: CANN's device would wait for ever. */
    CHECK(aclrtWaitAndResetNotify(never, stuck, 0));
    CHECK(aclrtMemcpyAsync(c, COPY, dev, COPY, ACL_MEMCPY_DEVICE_TO_HOST, stuck));
    /* `timed` waits 1 s for a record nothing queues: the wait fails, the copy behind it runs
     * (continue on failure), as on CANN's device. */
    aclrtStream timed;
    aclrtNotify unrecorded;
    CHECK(aclrtCreateStream(&timed));
    CHECK(aclrtCreateNotify(&unrecorded, 0));
    CHECK(aclrtWaitAndResetNotify(unrecorded, timed, 1));
    CHECK(aclrtMemcpyAsync(e, COPY, dev, COPY, ACL_MEMCPY_DEVICE_TO_HOST, timed));
    const int64_t t0 = now_ns();
    CHECK(aclFinalize());
    const int64_t took_ms = (now_ns() - t0) / 1000000;
    REQUIRE(holds(a, 0x6b), "the copy queued on the default stream before aclFinalize had not "
                            "landed when it returned");
    REQUIRE(holds(b, 0x6b), "the copy queued on a created stream before aclFinalize had not "
                            "landed when it returned");
    REQUIRE(holds(d, 0x6b), "the copy behind a wait that a queued record releases had not "
                            "landed when aclFinalize returned");
    REQUIRE(holds(c, 0), "the copy behind a wait nothing records ran");
    REQUIRE(holds(e, 0x6b), "the copy behind a wait that times out had not landed when "
                            "aclFinalize returned");
    /* `stuck` given up as waiting for ever (0 and a note), not waited for until the drain's
     * bound (60 s, then 507046): judged by that answer, not by a time ("under 5 s"; a loaded
     * machine can stretch any). */
    const char *fm = recent_msg();
    REQUIRE(strstr(fm, "aclFinalize: discarded the tasks still queued on 1 stream(s)") != NULL &&
                strstr(fm, "nothing in this process was going to make") != NULL,
            "aclFinalize (%lld ms) did not give up the stream waiting for ever: %s",
            (long long)took_ms, fm);
    expect_threads(1);
    free(a);
    free(b);
    free(c);
    free(d);
    free(e);

    /* Another thread queueing without pause: aclFinalize waits for what was queued when it
     * was called, not for what comes after. */
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtCreateStream(&g_s));
    atomic_store(&g_started, 0);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, busy_thread, NULL) == 0, "pthread_create");
    while (!atomic_load(&g_started)) sleep_ms(1);
    sleep_ms(50);
    /* Its 0 is the check: had it waited for what the thread goes on queueing, it would have
     * answered 507046 at its drain's bound (60 s); a time ("under 5 s") only adds a way to
     * fail on a loaded machine. */
    CHECK(aclFinalize());
    join_within(t, 5000, "the busy thread after aclFinalize");
}

int main(int argc, char **argv) {
    g_role = "teardown";
    const char *what = argc > 1 ? argv[1] : "";
    if (!strcmp(what, "sync_default")) {
        sync_default();
    } else if (!strcmp(what, "drain")) {
        drain();
    } else if (!strcmp(what, "hostfn_sync")) {
        hostfn_sync(0);
    } else if (!strcmp(what, "hostfn_reset")) {
        hostfn_sync(1);
    } else if (!strcmp(what, "reset_drains")) {
        reset_drains();
    } else if (!strcmp(what, "reset_bound")) {
        reset_bound();
    } else if (!strcmp(what, "reset_deadlock")) {
        reset_deadlock();
    } else if (!strcmp(what, "reset_count")) {
        reset_count();
    } else if (!strcmp(what, "host_wait")) {
        host_wait();
    } else if (!strcmp(what, "finalize_drains")) {
        finalize_drains();
    } else {
        fprintf(stderr, "usage: teardown sync_default|drain|hostfn_sync|hostfn_reset|"
                        "reset_drains|reset_bound|reset_deadlock|reset_count|host_wait|"
                        "finalize_drains\n");
        return 2;
    }
    printf("teardown %s: ok\n", what);
    return 0;
}
