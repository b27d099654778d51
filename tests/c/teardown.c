/* teardown.c — aclFinalize and device resets end what other threads are blocked on, whatever
 * the streams' creation order, and leave nothing behind: `teardown <scenario>` runs one of
 *
 *   sync_default   a thread synchronizing the default stream, whose head waits for ever, gets
 *                  107017 from aclFinalize; no worker thread and no notify id outlives it;
 *   drain          an aclrtDestroyStream draining a stream whose head waits for ever, on
 *                  another thread, returns once aclFinalize has run;
 *   hostfn_sync    a host function on stream S synchronizing stream S2 (created after S, its
 *                  head waits for ever): aclFinalize discards both instead of deadlocking;
 *   hostfn_reset   the same with aclrtResetDeviceForce instead of aclFinalize;
 *   reset_default  aclrtResetDeviceForce, and aclrtResetDevice bringing the device's count to
 *                  0, discard the device's default stream: after aclrtSetDevice the NULL
 *                  stream is a fresh one, and the old tasks' notify ids are free;
 *   host_wait      an aclnsimNotifyHostWait with no limit, on another thread, ends with
 *                  107017 once aclFinalize has run (it destroys the notify handles).
 *
 * Every wait is bounded (timed joins, timed synchronizes); exit 0 when every check holds. */
#include "common.h"

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

/* Joins `t` within `ms` milliseconds, or fails naming `what`. */
static void join_within(pthread_t t, long ms, const char *what) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    int r = pthread_timedjoin_np(t, NULL, &ts);
    REQUIRE(r == 0, "%s still blocked after %ld ms", what, ms);
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
        CHECK(aclrtResetDeviceForce(0));
    } else {
        CHECK(aclFinalize());
    }
    return NULL;
}

static void hostfn_sync(int reset) {
    g_reset = reset;
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

/* ---- reset_default ---- */

static void reset_default(void) {
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    uint32_t before = free_ids();

    /* aclrtResetDeviceForce. */
    aclrtNotify n = NULL;
    CHECK(aclrtCreateNotify(&n, 0));
    CHECK(aclrtWaitAndResetNotify(n, NULL, 0)); /* for ever */
    CHECK(aclrtResetDeviceForce(0));
    CHECK(aclrtSetDevice(0));
    REQUIRE(free_ids() == before, "the reset left %u notify ids free, %u before", free_ids(),
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

    /* aclrtResetDevice bringing the device's count to 0 (set twice, reset twice). */
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtCreateNotify(&n, 0));
    CHECK(aclrtWaitAndResetNotify(n, NULL, 0));
    CHECK(aclrtResetDevice(0));
    CHECK(aclrtResetDevice(0));
    CHECK(aclrtSetDevice(0));
    REQUIRE(free_ids() == before, "the reset left %u notify ids free, %u before", free_ids(),
            before);
    CHECK(aclrtCreateNotify(&m, 0));
    CHECK(aclrtRecordNotify(m, NULL));
    CHECK(aclrtSynchronizeStreamWithTimeout(NULL, 5000));
    CHECK(aclrtDestroyNotify(m));
    CHECK(aclFinalize());
    expect_threads(1);
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
    } else if (!strcmp(what, "reset_default")) {
        reset_default();
    } else if (!strcmp(what, "host_wait")) {
        host_wait();
    } else {
        fprintf(stderr, "usage: teardown sync_default|drain|hostfn_sync|hostfn_reset|"
                        "reset_default|host_wait\n");
        return 2;
    }
    printf("teardown %s: ok\n", what);
    return 0;
}
