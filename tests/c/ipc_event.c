/* ipc_event.c — an IPC event shared by two processes, as CANN's ipcevent sample does it
 * (hicann/runtime example/2_advanced_features/ipcevent): the owner creates an event with
 * ACL_EVENT_IPC, exports its aclrtIpcEventHandle and records it on a stream held back by a
 * 300 ms host function; the opener opens the handle, makes one of its streams wait on the
 * event and checks that a task behind that wait runs only after the owner's record, then
 * synchronizes the event itself. Once the owner destroyed its event the handle opens
 * nothing (107017: CANN's creator frees the event's shared memory at its release), while the
 * opener's handle keeps working. The handle, and who got how far, travel through files in <dir>.
 * usage: ipc_event owner|opener <dir> (run with ACL_NOTIFY_SIM_SOC set to a SoC with IPC
 * events, and the same ACL_NOTIFY_SIM_NAMESPACE). Exit 0, printing "ipc_event <role>: ok".
 *
 * `ipc_event dead_recorder <dir>`: this process forks a holder that opens the event and
 * records it on a stream held back by a wait that never ends, then SIGKILLs it. The record
 * will never run: this process's synchronize of the event and its stream waiting on it end
 * with 107023 naming the dead process, instead of waiting for ever.
 *
 * `ipc_event dead_creator <dir>`: this process forks the creator, opens its event, then
 * SIGKILLs it: the handle opens nothing more (107017), the handle opened before still records
 * and waits. */
#include "common.h"
#include "join.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

static void nap_300ms(void *arg) {
    (void)arg;
    sleep_ms(300);
}

static volatile int64_t g_ran_at;
static void stamp(void *arg) {
    (void)arg;
    g_ran_at = now_ns();
}

static void owner(const char *dir) {
    aclrtStream s;
    aclrtEvent e, plain;
    aclrtIpcEventHandle h;
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtCreateStream(&s));
    /* Only an ACL_EVENT_IPC event can be shared; IPC events refuse what they do not support. */
    CHECK(aclrtCreateEvent(&plain));
    EXPECT_RC(aclrtIpcGetEventHandle(plain, &h), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtIpcGetEventHandle(plain, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK(aclrtDestroyEvent(plain));
    CHECK(aclrtCreateEventExWithFlag(&e, ACL_EVENT_IPC));
    uint32_t id;
    EXPECT_RC(aclrtGetEventId(e, &id), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    EXPECT_RC(aclrtResetEvent(e, s), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK(aclrtIpcGetEventHandle(e, &h));
    put_file(dir, "handle", &h, sizeof h);
    char buf[64];
    get_file(dir, "opened", buf, sizeof buf, 20000);

    /* The record runs 300 ms from now, after the opener has queued its wait. */
    CHECK(aclrtLaunchHostFunc(s, nap_300ms, NULL));
    int64_t queued = now_ns();
    CHECK(aclrtRecordEvent(e, s));
    char t[32];
    snprintf(t, sizeof t, "%lld", (long long)queued);
    put_file(dir, "recorded", t, strlen(t));
    CHECK(aclrtSynchronizeStream(s));
    get_file(dir, "done", buf, sizeof buf, 20000);
    CHECK(aclrtDestroyEvent(e));
    CHECK(aclrtDestroyStream(s));
    put_file(dir, "owner-destroyed", "1", 1);
}

static void opener(const char *dir) {
    aclrtStream s;
    aclrtEvent e;
    aclrtIpcEventHandle h, bad;
    CHECK(aclrtSetDevice(1));
    CHECK(aclrtCreateStream(&s));
    char buf[128];
    size_t n = get_file(dir, "handle", buf, sizeof buf, 20000);
    REQUIRE(n == sizeof h, "the handle file has %zu bytes", n);
    memcpy(&h, buf, sizeof h);
    memset(&bad, 0x5a, sizeof bad);
    EXPECT_RC(aclrtIpcOpenEventHandle(bad, &e), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtIpcOpenEventHandle(h, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK(aclrtIpcOpenEventHandle(h, &e));
    aclrtEventRecordedStatus st;
    CHECK(aclrtQueryEventStatus(e, &st));
    REQUIRE(st == ACL_EVENT_RECORDED_STATUS_COMPLETE, "an IPC event never recorded: %d",
            (int)st);
    put_file(dir, "opened", "1", 1);

    n = get_file(dir, "recorded", buf, sizeof buf, 20000);
    int64_t queued = atoll(buf);
    CHECK(aclrtStreamWaitEvent(s, e));
    g_ran_at = 0;
    CHECK(aclrtLaunchHostFunc(s, stamp, NULL));
    CHECK(aclrtSynchronizeStream(s));
    REQUIRE(g_ran_at - queued >= 250 * 1000000LL,
            "the task behind the wait ran %lld ms after the owner queued its record, which "
            "ran 300 ms later",
            (long long)((g_ran_at - queued) / 1000000));
    CHECK(aclrtSynchronizeEvent(e));
    CHECK(aclrtQueryEventStatus(e, &st));
    REQUIRE(st == ACL_EVENT_RECORDED_STATUS_COMPLETE, "after the record: %d", (int)st);
    float ms;
    EXPECT_RC(aclrtEventElapsedTime(&ms, e, e), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    put_file(dir, "done", "1", 1);

    /* The owner destroyed its event: CANN's creator frees the event's shared memory at its
     * release (hicann/runtime ipc_event.cc, ReleaseDrvResource), so the handle opens nothing
     * more (107017), while the handle opened before keeps working: a record and a wait on
     * it, and its synchronize. */
    get_file(dir, "owner-destroyed", buf, sizeof buf, 20000);
    aclrtEvent again;
    EXPECT_RC(aclrtIpcOpenEventHandle(h, &again), ACL_ERROR_RT_INVALID_HANDLE);
    expect_msg("creator", "destroyed", NULL);
    CHECK(aclrtRecordEvent(e, s));
    CHECK(aclrtStreamWaitEvent(s, e));
    CHECK(aclrtSynchronizeStream(s));
    CHECK(aclrtSynchronizeEvent(e));
    CHECK(aclrtDestroyEvent(e));
    /* Every holder gone: the handle names nothing. */
    EXPECT_RC(aclrtIpcOpenEventHandle(h, &again), ACL_ERROR_RT_INVALID_HANDLE);
    CHECK(aclrtDestroyStream(s));
}

/* ---- dead_recorder ---- */

static void recorder(const char *dir) {
    g_role = "recorder";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    char buf[128];
    aclrtIpcEventHandle h;
    size_t n = get_file(dir, "handle", buf, sizeof buf, 20000);
    REQUIRE(n == sizeof h, "the handle file has %zu bytes", n);
    memcpy(&h, buf, sizeof h);
    aclrtEvent e;
    CHECK(aclrtIpcOpenEventHandle(h, &e));
    aclrtStream s;
    CHECK(aclrtCreateStream(&s));
    aclrtNotify never;
    CHECK(aclrtCreateNotify(&never, 0));
    CHECK(aclrtWaitAndResetNotify(never, s, 0)); /* for ever */
    CHECK(aclrtRecordEvent(e, s));
    put_file(dir, "recorded", "1", 1);
    for (;;) {
        sleep_ms(1000); /* until SIGKILLed */
    }
}

static aclrtEvent g_shared;
static atomic_int g_sync_rc = -1;
static char g_sync_msg[512];

static void *synchronizer(void *arg) {
    (void)arg;
    aclError e = aclrtSynchronizeEvent(g_shared);
    snprintf(g_sync_msg, sizeof g_sync_msg, "%s", e ? recent_msg() : "");
    atomic_store(&g_sync_rc, e);
    return NULL;
}

static void dead_recorder(const char *dir) {
    g_role = "dead_recorder";
    pid_t child = fork(); /* before this process's first ACL call */
    REQUIRE(child >= 0, "fork: %s", strerror(errno));
    if (child == 0) {
        recorder(dir);
    }
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtCreateEventExWithFlag(&g_shared, ACL_EVENT_IPC));
    aclrtIpcEventHandle h;
    CHECK(aclrtIpcGetEventHandle(g_shared, &h));
    put_file(dir, "handle", &h, sizeof h);
    char buf[16];
    get_file(dir, "recorded", buf, sizeof buf, 20000);
    aclrtStream s;
    CHECK(aclrtCreateStream(&s));
    CHECK(aclrtStreamWaitEvent(s, g_shared)); /* the holder's record */
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, synchronizer, NULL) == 0, "pthread_create");
    sleep_ms(50);
    REQUIRE(atomic_load(&g_sync_rc) == -1, "the synchronize returned %d before the recorder died",
            atomic_load(&g_sync_rc));
    REQUIRE(kill(child, SIGKILL) == 0, "kill: %s", strerror(errno));
    REQUIRE(waitpid(child, NULL, 0) == child, "waitpid");
    join_within(t, 10000, "aclrtSynchronizeEvent after the only recorder died");
    char pid[32];
    snprintf(pid, sizeof pid, "pid %d, died first", (int)child);
    REQUIRE(atomic_load(&g_sync_rc) == ACL_ERROR_RT_STREAM_ABORT && strstr(g_sync_msg, pid),
            "the synchronize returned %d: %s", atomic_load(&g_sync_rc), g_sync_msg);
    EXPECT_RC(aclrtSynchronizeStreamWithTimeout(s, 10000), ACL_ERROR_RT_STREAM_ABORT);
    aclrtEventRecordedStatus st;
    CHECK(aclrtQueryEventStatus(g_shared, &st));
    REQUIRE(st == ACL_EVENT_RECORDED_STATUS_COMPLETE, "after the recorder died: %d", (int)st);
    CHECK(aclrtDestroyStream(s));
    CHECK(aclrtDestroyEvent(g_shared));
    CHECK(aclFinalize());
}

/* ---- dead_creator ---- */

/* The creator: makes the event, records it once, hands its handle out, then waits to be
 * SIGKILLed holding it. */
static void creator(const char *dir) {
    g_role = "creator";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtEvent e;
    CHECK(aclrtCreateEventExWithFlag(&e, ACL_EVENT_IPC));
    aclrtStream s;
    CHECK(aclrtCreateStream(&s));
    CHECK(aclrtRecordEvent(e, s));
    CHECK(aclrtSynchronizeStream(s));
    aclrtIpcEventHandle h;
    CHECK(aclrtIpcGetEventHandle(e, &h));
    put_file(dir, "handle", &h, sizeof h);
    for (;;) {
        sleep_ms(1000); /* until SIGKILLed */
    }
}

/* This process opens the event of a creator it forked, then SIGKILLs the creator: a process
 * that dies releases what it held, and CANN's creator frees the event's shared memory at its
 * release, so the handle opens nothing more (107017) while this process's handle opened
 * before keeps working (its own records and waits). */
static void dead_creator(const char *dir) {
    g_role = "dead_creator";
    pid_t child = fork(); /* before this process's first ACL call */
    REQUIRE(child >= 0, "fork: %s", strerror(errno));
    if (child == 0) {
        creator(dir);
    }
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(1));
    char buf[128];
    aclrtIpcEventHandle h;
    size_t n = get_file(dir, "handle", buf, sizeof buf, 20000);
    REQUIRE(n == sizeof h, "the handle file has %zu bytes", n);
    memcpy(&h, buf, sizeof h);
    aclrtEvent e, again;
    CHECK(aclrtIpcOpenEventHandle(h, &e));
    CHECK(aclrtIpcOpenEventHandle(h, &again)); /* the creator holds it: opens */
    CHECK(aclrtDestroyEvent(again));
    REQUIRE(kill(child, SIGKILL) == 0, "kill: %s", strerror(errno));
    REQUIRE(waitpid(child, NULL, 0) == child, "waitpid");
    EXPECT_RC(aclrtIpcOpenEventHandle(h, &again), ACL_ERROR_RT_INVALID_HANDLE);
    char pid[32];
    snprintf(pid, sizeof pid, "pid %d", (int)child);
    expect_msg("creator", pid, NULL);
    aclrtStream s;
    CHECK(aclrtCreateStream(&s));
    aclrtEventRecordedStatus st;
    CHECK(aclrtQueryEventStatus(e, &st));
    REQUIRE(st == ACL_EVENT_RECORDED_STATUS_COMPLETE, "the creator's record: %d", (int)st);
    CHECK(aclrtStreamWaitEvent(s, e)); /* the creator's record ran: passes */
    CHECK(aclrtRecordEvent(e, s));
    CHECK(aclrtStreamWaitEvent(s, e));
    CHECK(aclrtSynchronizeStream(s));
    CHECK(aclrtSynchronizeEvent(e));
    CHECK(aclrtDestroyStream(s));
    CHECK(aclrtDestroyEvent(e));
    CHECK(aclFinalize());
}

int main(int argc, char **argv) {
    REQUIRE(argc == 3, "usage: ipc_event owner|opener|dead_recorder|dead_creator <dir>");
    g_role = argv[1];
    if (strcmp(argv[1], "dead_recorder") == 0) {
        dead_recorder(argv[2]);
        printf("ipc_event dead_recorder: ok\n");
        return 0;
    }
    if (strcmp(argv[1], "dead_creator") == 0) {
        dead_creator(argv[2]);
        printf("ipc_event dead_creator: ok\n");
        return 0;
    }
    CHECK(aclInit(NULL));
    if (strcmp(argv[1], "owner") == 0) {
        owner(argv[2]);
    } else {
        opener(argv[2]);
    }
    CHECK(aclFinalize());
    printf("ipc_event %s: ok\n", argv[1]);
    return 0;
}
