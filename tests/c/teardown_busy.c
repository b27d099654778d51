/* teardown_busy.c — the end of a session while its threads are busy, as a CANN program's main
 * thread ends it: six threads on two devices keep copying into device memory and queueing
 * blocking callbacks (aclrtLaunchCallback, run by a report thread in aclrtProcessReport),
 * synchronizing every 16 rounds, when the main thread, once a callback has run (and at least
 * 300 ms in),
 *
 *   finalize   calls aclFinalize;
 *   reset      calls aclrtResetDeviceForce on both devices.
 *
 * Checked: the call returns 0 (not the 507046 a finalize answers at its drain's bound, 60 s,
 * had it waited for what the workers go on queueing: an answer, not a time, which a loaded
 * machine or memcheck stretches); every worker's next call fails with 107017 naming
 * its stream (never a crash or a hang: joins are bounded); the report thread ends; callbacks
 * ran before. After the resets, the workers' device buffers (device memory outlives a reset in
 * the simulator, until aclrtFree or aclFinalize) free as usual, each device's free memory is
 * back where it was before the workers allocated, and the device works again (a copy lands).
 *
 * usage: teardown_busy finalize|reset; exit 0 and "teardown_busy <mode>: ok (<ms> ms)". */
#include "common.h"
#include "join.h"

#include <pthread.h>
#include <stdatomic.h>

#define WORKERS 6
#define DEVICES 2
#define BYTES (1 << 16)

static atomic_int g_stop, g_callbacks, g_report_errors;
static pthread_t g_reporter;
static pthread_barrier_t g_started;

/* What each worker's last call answered. */
static aclError g_code[WORKERS];
static char g_msg[WORKERS][512];
/* Each worker's device buffer: device memory outlives a device reset (the simulator returns
 * it at aclrtFree or aclFinalize), so the main thread frees it after the resets. */
static void *g_buf[WORKERS];

static void callback(void *arg) {
    (void)arg;
    atomic_fetch_add(&g_callbacks, 1);
    sleep_ms(1);
}

static void *reporter(void *arg) {
    (void)arg;
    if (aclrtSetDevice(0) != ACL_SUCCESS) {
        atomic_fetch_add(&g_report_errors, 1);
        return NULL;
    }
    while (!atomic_load(&g_stop)) {
        aclError r = aclrtProcessReport(100);
        if (r != ACL_SUCCESS && r != ACL_ERROR_RT_REPORT_TIMEOUT &&
            r != ACL_ERROR_RT_THREAD_SUBSCRIBE) {
            /* The session ended under it: a code, then it stops. */
            break;
        }
    }
    return NULL;
}

static void *worker(void *arg) {
    const int me = (int)(intptr_t)arg;
    CHECK(aclrtSetDevice(me % DEVICES));
    aclrtStream s;
    CHECK(aclrtCreateStream(&s));
    const int callbacks = me % DEVICES == 0;
    if (callbacks) CHECK(aclrtSubscribeReport((uint64_t)g_reporter, s));
    void *d;
    CHECK(aclrtMalloc(&d, BYTES, ACL_MEM_MALLOC_HUGE_FIRST));
    g_buf[me] = d;
    char *host = malloc(BYTES);
    REQUIRE(host != NULL, "malloc");
    memset(host, me, BYTES);
    pthread_barrier_wait(&g_started);
    aclError r = ACL_SUCCESS;
    for (int i = 0; r == ACL_SUCCESS; i++) {
        r = aclrtMemcpyAsync(d, BYTES, host, BYTES, ACL_MEMCPY_HOST_TO_DEVICE, s);
        if (r == ACL_SUCCESS && callbacks) {
            r = aclrtLaunchCallback(callback, NULL, ACL_CALLBACK_BLOCK, s);
        }
        if (r == ACL_SUCCESS && i % 16 == 15) r = aclrtSynchronizeStreamWithTimeout(s, 5000);
    }
    g_code[me] = r;
    snprintf(g_msg[me], sizeof g_msg[me], "%s", recent_msg());
    free(host);
    return NULL;
}


int main(int argc, char **argv) {
    g_role = "teardown_busy";
    const char *mode = argc > 1 ? argv[1] : "finalize";
    const int finalize = strcmp(mode, "finalize") == 0;
    REQUIRE(finalize || strcmp(mode, "reset") == 0, "usage: teardown_busy finalize|reset");
    CHECK(aclInit(NULL));
    size_t free0[DEVICES];
    for (int d = 0; d < DEVICES; d++) free0[d] = free_bytes_on(d);
    REQUIRE(pthread_barrier_init(&g_started, NULL, WORKERS + 1) == 0, "pthread_barrier_init");
    REQUIRE(pthread_create(&g_reporter, NULL, reporter, NULL) == 0, "pthread_create");
    pthread_t t[WORKERS];
    start_threads(t, WORKERS, worker);
    pthread_barrier_wait(&g_started);
    sleep_ms(300);
    /* The teardown comes after a callback has run (an order, not a time: a loaded machine or
     * memcheck may take longer than 300 ms to run the first); 60 s bounds a report thread that
     * never runs one. */
    const int64_t first_by = now_ns() + 60000000000LL;
    while (atomic_load(&g_callbacks) == 0) {
        REQUIRE(now_ns() < first_by, "no callback ran in 60 s of busy work");
        sleep_ms(1);
    }
    const int64_t t0 = now_ns();
    if (finalize) {
        CHECK(aclFinalize());
    } else {
        for (int d = 0; d < DEVICES; d++) {
            CHECK(aclrtSetDevice(d));
            CHECK(aclrtResetDeviceForce(d));
        }
    }
    const double took_ms = (double)(now_ns() - t0) / 1e6;
    join_all_within(t, WORKERS, 10000, "a busy worker");
    atomic_store(&g_stop, 1);
    join_within(g_reporter, 10000, "the report thread");
    REQUIRE(atomic_load(&g_report_errors) == 0, "the report thread could not start");
    for (int i = 0; i < WORKERS; i++) {
        REQUIRE(g_code[i] == ACL_ERROR_RT_INVALID_HANDLE && strstr(g_msg[i], "stream") != NULL,
                "worker %d ended with %d: %s", i, (int)g_code[i], g_msg[i]);
    }
    if (!finalize) {
        /* The workers' buffers are still allocated and free as usual; then each device's free
         * memory is back where it started, and each device works again. */
        for (int i = 0; i < WORKERS; i++) {
            CHECK(aclrtSetDevice(i % DEVICES));
            CHECK(aclrtFree(g_buf[i]));
        }
        for (int d = 0; d < DEVICES; d++) {
            size_t f = free_bytes_on(d);
            REQUIRE(f == free0[d], "device %d: %zu bytes free after the reset, %zu before", d, f,
                    free0[d]);
            void *p;
            uint32_t in = 0xfeed0000u + (uint32_t)d, out = 0;
            CHECK(aclrtMalloc(&p, sizeof in, ACL_MEM_MALLOC_HUGE_FIRST));
            CHECK(aclrtMemcpy(p, sizeof in, &in, sizeof in, ACL_MEMCPY_HOST_TO_DEVICE));
            CHECK(aclrtMemcpy(&out, sizeof out, p, sizeof out, ACL_MEMCPY_DEVICE_TO_HOST));
            REQUIRE(out == in, "device %d after its reset: read %#x, wrote %#x", d, out, in);
            CHECK(aclrtFree(p));
        }
        CHECK(aclFinalize());
    }
    printf("teardown_busy %s: %s took %.1f ms, %d callbacks ran, every worker got 107017\n",
           mode, mode, took_ms, atomic_load(&g_callbacks));
    printf("teardown_busy %s: ok (%.0f ms)\n", mode, took_ms);
    return 0;
}
