/* extensions.c — the simulator library's extensions beyond CANN (acl/aclnsim.h): host-side
 * waits and try-consume on a notify, the free-id budget and the server id.
 * usage: extensions (run with ACL_NOTIFY_SIM_DEVICES >= 2). Exit 0 when every check holds. */
#include "common.h"

#include "acl/aclnsim.h"

#include <inttypes.h>
#include <pthread.h>
#include <sched.h>

/* A host wait with no limit, on another thread; its result and message. */
struct endless_wait {
    aclrtNotify n;
    volatile int ready; /* set once the device is current, just before the wait */
    aclError rc;
    char msg[512];
};

static void *wait_endlessly(void *p) {
    struct endless_wait *w = p;
    CHECK(aclrtSetDevice(0));
    __atomic_store_n(&w->ready, 1, __ATOMIC_RELEASE);
    w->rc = aclnsimNotifyHostWait(w->n, UINT64_MAX);
    snprintf(w->msg, sizeof w->msg, "%s", recent_msg());
    return NULL;
}

int main(void) {
    g_role = "extensions";
    uint32_t n0 = 0, n1 = 0, sid = 99;
    int32_t consumed = -1;
    /* Before aclInit: the call starts the session, as any runtime call does. */
    CHECK(aclnsimGetServerId(&sid));
    REQUIRE(sid == 0, "server id before aclInit %u, expected 0", sid);
    CHECK(aclInit(NULL));
    EXPECT_RC(aclnsimGetServerId(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK(aclnsimGetServerId(&sid));
    REQUIRE(sid == 0, "server id %u, expected 0", sid);
    EXPECT_RC(aclnsimGetNotifyFreeCount(0, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclnsimGetNotifyFreeCount(-1, &n0), ACL_ERROR_RT_INVALID_DEVICEID);

    CHECK(aclrtSetDevice(0));
    CHECK(aclnsimGetNotifyFreeCount(0, &n0));
    aclrtNotify n = NULL;
    CHECK(aclrtCreateNotify(&n, 0));
    CHECK(aclnsimGetNotifyFreeCount(0, &n1));
    REQUIRE(n1 + 1 == n0, "free ids went from %u to %u after one create", n0, n1);

    EXPECT_RC(aclnsimNotifyTryConsume(NULL, &consumed), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclnsimNotifyTryConsume(n, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclnsimNotifyTryConsume((void *)0x1234, &consumed), ACL_ERROR_RT_INVALID_HANDLE);
    CHECK(aclnsimNotifyTryConsume(n, &consumed));
    REQUIRE(consumed == 0, "consumed a record nobody made");
    CHECK(aclrtRecordNotify(n, NULL));
    CHECK(aclrtSynchronizeStream(NULL));
    CHECK(aclnsimNotifyTryConsume(n, &consumed));
    REQUIRE(consumed == 1, "the record was not there to consume");
    CHECK(aclnsimNotifyTryConsume(n, &consumed));
    REQUIRE(consumed == 0, "one record consumed twice");

    /* Merged records: two records before a wait are one; the count says so. */
    uint32_t run = 99, total = 99;
    EXPECT_RC(aclnsimNotifyGetMergedRecords(NULL, &run, &total), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclnsimNotifyGetMergedRecords(n, NULL, &total), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclnsimNotifyGetMergedRecords(n, &run, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclnsimNotifyGetMergedRecords((void *)0x1234, &run, &total),
              ACL_ERROR_RT_INVALID_HANDLE);
    CHECK(aclnsimNotifyGetMergedRecords(n, &run, &total));
    REQUIRE(run == 0 && total == 0, "merged %u/%u before any record merged", run, total);
    CHECK(aclrtRecordNotify(n, NULL));
    CHECK(aclrtRecordNotify(n, NULL));
    CHECK(aclrtRecordNotify(n, NULL));
    CHECK(aclrtSynchronizeStream(NULL));
    CHECK(aclnsimNotifyGetMergedRecords(n, &run, &total));
    REQUIRE(run == 2 && total == 2, "3 records before a wait: merged %u/%u, expected 2/2", run,
            total);
    CHECK(aclnsimNotifyTryConsume(n, &consumed));
    REQUIRE(consumed == 1, "the merged record was not there to consume");
    CHECK(aclrtRecordNotify(n, NULL));
    CHECK(aclrtSynchronizeStream(NULL));
    CHECK(aclnsimNotifyGetMergedRecords(n, &run, &total));
    REQUIRE(run == 0 && total == 2, "a record after the wait: merged %u/%u, expected 0/2", run,
            total);
    CHECK(aclnsimNotifyTryConsume(n, &consumed));

    /* A stream whose head waits says why it is not done: the 507046 message and a query
     * that finds it not ready name the wait, and, once one failed, the stored failure. No
     * step assumes how long another takes (a process paused for seconds, as a loaded machine
     * or a SIGSTOP does, used to make a 1 s wait and a 1.5 s sleep expire together): the
     * first wait is released by a record, the query is asked until the failure is stored. */
    {
        aclrtStream s = NULL;
        aclrtNotify first = NULL, failing = NULL, last = NULL;
        aclrtStreamStatus st = ACL_STREAM_STATUS_COMPLETE;
        char m[2048];
        CHECK(aclrtCreateStream(&s));
        CHECK(aclrtCreateNotify(&first, 0));
        CHECK(aclrtCreateNotify(&failing, 0));
        CHECK(aclrtCreateNotify(&last, 0));
        uint32_t first_id = 0, failing_id = 0, last_id = 0;
        CHECK(aclrtGetNotifyId(first, &first_id));
        CHECK(aclrtGetNotifyId(failing, &failing_id));
        CHECK(aclrtGetNotifyId(last, &last_id));
        char want[64];
        CHECK(aclrtWaitAndResetNotify(first, s, 30));
        CHECK(aclrtWaitAndResetNotify(failing, s, 1)); /* times out after 1 s */
        CHECK(aclrtWaitAndResetNotify(last, s, 30));
        snprintf(want, sizeof want, "its head task is a wait on notify %u of device 0", first_id);
        /* Asked until the head wait sleeps (it did after a 300 ms sleep here until 2026-12-07,
         * which a loaded machine may outlast), bounded by the watch: 60 s this process could
         * run. */
        wait_watch_t ww = wait_watch(60);
        do {
            (void)aclGetRecentErrMsg();
            (void)aclrtGetLastError(ACL_RT_THREAD_LEVEL);
            EXPECT_RC(aclrtSynchronizeStreamWithTimeout(s, 100), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
            /* CANN's last error is a code (acl_rt.h: "Runtime error code"); the words are in
             * aclGetRecentErrMsg. */
            EXPECT_RC(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
            EXPECT_RC(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
            snprintf(m, sizeof m, "%s", recent_msg());
        } while (!(strstr(m, want) && strstr(m, "asleep for")) && wait_watch_nap(&ww) == NULL);
        wait_watch_end(&ww);
        REQUIRE(strstr(m, want) && strstr(m, "asleep for") && strstr(m, "(timeout 30.0 s)"),
                "the 507046 message does not name the head wait: %s", m);
        /* The second wait fails after its 1 s; the third then sleeps at the head. A query
         * notes why the stream is not ready at most once a second, so it is asked every
         * 1.1 s until the note shows both (bounded by the watch: 60 s this process could run;
         * 20 s of wall time until 2026-12-07). */
        CHECK(aclrtRecordNotify(first, NULL));
        snprintf(want, sizeof want, "its head task is a wait on notify %u of device 0", last_id);
        ww = wait_watch(60);
        do {
            usleep(1100000);
            CHECK(aclrtStreamQuery(s, &st));
            REQUIRE(st == ACL_STREAM_STATUS_NOT_READY, "a stream with a waiting head is ready");
            snprintf(m, sizeof m, "%s", recent_msg());
            REQUIRE(strstr(m, "aclrtStreamQuery") && strstr(m, "is not ready"),
                    "a not-ready query does not say why: %s", m);
        } while (!(strstr(m, want) && strstr(m, "a failure is stored on it") &&
                   strstr(m, "(107020)")) &&
                 wait_watch_nap(&ww) == NULL);
        wait_watch_end(&ww);
        REQUIRE(strstr(m, want) && strstr(m, "a failure is stored on it") && strstr(m, "(107020)"),
                "a not-ready query does not name the waiting head and the stored failure: %s",
                m);
        CHECK(aclrtRecordNotify(last, NULL));
        EXPECT_RC(aclrtSynchronizeStream(s), ACL_ERROR_RT_TASK_TIMEOUT);
        /* The stored failure, once reported, is the thread's last error, and the message
         * names the task that failed. */
        EXPECT_RC(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_TASK_TIMEOUT);
        snprintf(m, sizeof m, "%s", recent_msg());
        snprintf(want, sizeof want, "wait on notify %u (device 0", failing_id);
        REQUIRE(strstr(m, "aclrtSynchronizeStream") && strstr(m, "(107020)") && strstr(m, want),
                "the reported failure does not name its task: %s", m);
        snprintf(want, sizeof want, "stream %#" PRIxPTR ": a task on it failed", (uintptr_t)s);
        REQUIRE(strstr(m, want), "the reported failure does not name its stream: %s", m);
        CHECK(aclrtSynchronizeStream(s));
        CHECK(aclrtDestroyStream(s));
        CHECK(aclrtDestroyNotify(first));
        CHECK(aclrtDestroyNotify(failing));
        CHECK(aclrtDestroyNotify(last));
    }

    /* Two streams that wait on each other: the timeout says deadlock and names both streams
     * by the handles this program holds. */
    {
        aclrtStream a = NULL, b = NULL;
        aclrtNotify n1 = NULL, n2 = NULL;
        char m[4096], ha[32], hb[32];
        CHECK(aclrtCreateStream(&a));
        CHECK(aclrtCreateStream(&b));
        CHECK(aclrtCreateNotify(&n1, 0));
        CHECK(aclrtCreateNotify(&n2, 0));
        /* The records queued right behind the waits (a sleep between let a pause of the
         * process end the 1 s wait before they were queued: no cycle then). */
        CHECK(aclrtWaitAndResetNotify(n1, a, 1));
        CHECK(aclrtWaitAndResetNotify(n2, b, 30));
        CHECK(aclrtRecordNotify(n2, a));
        CHECK(aclrtRecordNotify(n1, b));
        (void)aclGetRecentErrMsg();
        EXPECT_RC(aclrtSynchronizeStream(a), ACL_ERROR_RT_TASK_TIMEOUT);
        snprintf(m, sizeof m, "%s", recent_msg());
        snprintf(ha, sizeof ha, "stream %p of pid", a);
        snprintf(hb, sizeof hb, "stream %p of pid", b);
        REQUIRE(strstr(m, "deadlock: 2 streams wait on each other") && strstr(m, ha) &&
                    strstr(m, hb),
                "the deadlock is not reported with the C handles (%s, %s): %s", ha, hb, m);
        CHECK(aclrtSynchronizeStream(b));
        CHECK(aclrtDestroyStream(a));
        CHECK(aclrtDestroyStream(b));
        CHECK(aclrtDestroyNotify(n1));
        CHECK(aclrtDestroyNotify(n2));
    }

    int64_t t0 = now_ns();
    EXPECT_RC(aclnsimNotifyHostWait(n, 50000), ACL_ERROR_RT_WAIT_TIMEOUT);
    int64_t ms = (now_ns() - t0) / 1000000;
    /* A lower bound only: a loaded machine makes a timeout late, never early (under 5 s too
     * until 2026-12-07). */
    REQUIRE(ms >= 45, "a 50 ms host wait returned after %lld ms", (long long)ms);
    CHECK(aclrtRecordNotify(n, NULL));
    CHECK(aclrtSynchronizeStream(NULL));
    CHECK(aclnsimNotifyHostWait(n, UINT64_MAX));

    /* Only with the owner's device current. */
    CHECK(aclrtSetDevice(1));
    EXPECT_RC(aclnsimNotifyHostWait(n, 1000), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclnsimNotifyTryConsume(n, &consumed), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclrtSetDevice(0));

    CHECK(aclrtDestroyNotify(n));
    CHECK(aclnsimGetNotifyFreeCount(0, &n1));
    REQUIRE(n1 == n0, "destroy did not give the id back (%u free, %u before)", n1, n0);

    /* A host wait with no limit ends when another thread destroys its notify. The destroy comes
     * 100 ms after the waiting thread has its device current; on a loaded machine the wait may
     * still begin after it (then the handle is simply dead: 107017 too, another message), so
     * the scenario is tried again, up to 5 times, until the destroy meets a wait under way. */
    int met = 0;
    for (int attempt = 0; attempt < 5 && !met; attempt++) {
        struct endless_wait w = {NULL, 0, ACL_SUCCESS, ""};
        CHECK(aclrtCreateNotify(&w.n, 0));
        pthread_t th;
        REQUIRE(pthread_create(&th, NULL, wait_endlessly, &w) == 0, "pthread_create");
        while (!__atomic_load_n(&w.ready, __ATOMIC_ACQUIRE)) {
            sched_yield();
        }
        struct timespec pause = {0, 100 * 1000 * 1000};
        nanosleep(&pause, NULL);
        CHECK(aclrtDestroyNotify(w.n));
        pthread_join(th, NULL);
        REQUIRE(w.rc == ACL_ERROR_RT_INVALID_HANDLE, "the host wait returned %d: %s", (int)w.rc,
                w.msg);
        /* An endless wait ended by the destroy (its message says so; it has no timeout to end
         * at): no time bound needed (one of 5 s stood here until 2026-12-07). */
        met = strstr(w.msg, "while this host wait waited on it") != NULL;
        if (!met) {
            fprintf(stderr, "extensions: attempt %d: the wait began after the destroy (%s)\n",
                    attempt, w.msg);
        }
    }
    REQUIRE(met, "in 5 attempts no destroy met a host wait under way");
    CHECK(aclFinalize());
    printf("extensions: ok\n");
    return 0;
}
