/* events.c — events, contexts, stream modes, device synchronize and the last-error queries
 * through the C ABI, written against CANN's headers: record / query / synchronize (with its
 * timeout codes), a stream waiting on another through an event, reset, an Ex event's wait
 * capturing its latest record, elapsed time, ids, the NULL and flag checks; per-thread current
 * contexts with their default streams and the stream-context rule (107003); stream creation
 * with config, ACL_STOP_ON_FAILURE and abort; aclrtSynchronizeDevice[WithTimeout];
 * aclrtGetLastError / aclrtPeekAtLastError.
 * usage: events events|none (run with ACL_NOTIFY_SIM_SOC set: `none` for IPV350, which has no
 * events). Exit 0, printing "events <mode>: ok", when every check holds. */
#include <pthread.h>

#include "common.h"

/* A notify wait that holds `s` back until release_gate() records the notify elsewhere. */
static aclrtNotify g_gate;
static aclrtStream g_gate_other;

static void hold(aclrtStream s) {
    CHECK(aclrtCreateNotify(&g_gate, 0));
    CHECK(aclrtCreateStream(&g_gate_other));
    CHECK(aclrtWaitAndResetNotify(g_gate, s, 10));
}

static void release_gate(void) {
    CHECK(aclrtRecordNotify(g_gate, g_gate_other));
    CHECK(aclrtSynchronizeStream(g_gate_other));
    CHECK(aclrtDestroyStream(g_gate_other));
}

static volatile int g_ran;
static void bump(void *arg) {
    (void)arg;
    __atomic_add_fetch(&g_ran, 1, __ATOMIC_SEQ_CST);
}
static void nap(void *arg) {
    (void)arg;
    sleep_ms(30);
}

static void events_basic(void) {
    aclrtStream s1, s2;
    aclrtEvent e, x;
    aclrtEventRecordedStatus st;
    CHECK(aclrtCreateStream(&s1));
    CHECK(aclrtCreateStream(&s2));
    EXPECT_RC(aclrtCreateEvent(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK(aclrtCreateEvent(&e));

    /* A classic event never recorded is not complete; one that cannot be waited on yet. */
    CHECK(aclrtQueryEventStatus(e, &st));
    REQUIRE(st == ACL_EVENT_RECORDED_STATUS_NOT_READY, "status before a record: %d", (int)st);
    EXPECT_RC(aclrtStreamWaitEvent(s2, e), ACL_ERROR_RT_PARAM_INVALID);
    uint32_t id;
    EXPECT_RC(aclrtGetEventId(e, &id), ACL_ERROR_RT_INTERNAL_ERROR);

    /* Recorded behind a held-back task: not ready; s2 waits for it. */
    hold(s1);
    CHECK(aclrtRecordEvent(e, s1));
    CHECK(aclrtQueryEventStatus(e, &st));
    REQUIRE(st == ACL_EVENT_RECORDED_STATUS_NOT_READY, "status of a pending record: %d", (int)st);
    EXPECT_RC(aclrtSynchronizeEventWithTimeout(e, 50), ACL_ERROR_RT_EVENT_SYNC_TIMEOUT);
    EXPECT_RC(aclrtSynchronizeEventWithTimeout(e, 0), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtSynchronizeEventWithTimeout(e, -2), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclrtStreamWaitEvent(s2, e));
    g_ran = 0;
    CHECK(aclrtLaunchHostFunc(s2, bump, NULL));
    sleep_ms(100);
    REQUIRE(g_ran == 0, "a task behind the event wait ran before the record");
    aclrtEventWaitStatus ws;
    CHECK(aclrtQueryEventWaitStatus(e, &ws));
    REQUIRE(ws == ACL_EVENT_WAIT_STATUS_NOT_READY, "wait status while waiting: %d", (int)ws);
    release_gate();
    CHECK(aclrtSynchronizeEvent(e));
    CHECK(aclrtSynchronizeStream(s2));
    REQUIRE(g_ran == 1, "the task behind the wait ran %d times", g_ran);
    CHECK(aclrtQueryEventWaitStatus(e, &ws));
    REQUIRE(ws == ACL_EVENT_WAIT_STATUS_COMPLETE, "wait status after the wait: %d", (int)ws);
    CHECK(aclrtQueryEventStatus(e, &st));
    REQUIRE(st == ACL_EVENT_RECORDED_STATUS_COMPLETE, "status after the record ran: %d", (int)st);
    CHECK(aclrtGetEventId(e, &id));

    /* A reset clears the flag: a later wait with a 1 s timeout fails at synchronize. */
    CHECK(aclrtResetEvent(e, s1));
    CHECK(aclrtSynchronizeStream(s1));
    CHECK(aclrtStreamWaitEventWithTimeout(s2, e, 1));
    EXPECT_RC(aclrtSynchronizeStream(s2), ACL_ERROR_RT_TASK_TIMEOUT);
    EXPECT_RC(aclrtStreamWaitEventWithTimeout(s2, e, -1), ACL_ERROR_RT_PARAM_INVALID);

    /* Elapsed time across a 30 ms task. */
    aclrtEvent a, z;
    float ms = 0;
    CHECK(aclrtCreateEvent(&a));
    CHECK(aclrtCreateEvent(&z));
    EXPECT_RC(aclrtEventElapsedTime(&ms, a, z), ACL_ERROR_RT_INTERNAL_ERROR);
    EXPECT_RC(aclrtEventElapsedTime(NULL, a, z), ACL_ERROR_INVALID_PARAM);
    CHECK(aclrtRecordEvent(a, s1));
    CHECK(aclrtLaunchHostFunc(s1, nap, NULL));
    CHECK(aclrtRecordEvent(z, s1));
    CHECK(aclrtSynchronizeStream(s1));
    CHECK(aclrtEventElapsedTime(&ms, a, z));
    REQUIRE(ms >= 25.0f && ms < 10000.0f, "elapsed across a 30 ms task: %f ms", ms);
    uint64_t t0, t1;
    CHECK(aclrtEventGetTimestamp(a, &t0));
    CHECK(aclrtEventGetTimestamp(z, &t1));
    REQUIRE(t1 > t0, "timestamps %llu then %llu", (unsigned long long)t0,
            (unsigned long long)t1);
    /* Without ACL_EVENT_TIME_LINE there is no timestamp. */
    aclrtEvent nt;
    CHECK(aclrtCreateEventWithFlag(&nt, ACL_EVENT_SYNC));
    CHECK(aclrtGetEventId(nt, &id)); /* a flag word other than the default: id at create */
    CHECK(aclrtRecordEvent(nt, s1));
    CHECK(aclrtSynchronizeStream(s1));
    EXPECT_RC(aclrtEventElapsedTime(&ms, a, nt), ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID);

    /* Flag words. */
    aclrtEvent bad;
    EXPECT_RC(aclrtCreateEventWithFlag(&bad, 0), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtCreateEventWithFlag(&bad, ACL_EVENT_IPC), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtCreateEventWithFlag(&bad, ACL_EVENT_EXTERNAL | ACL_EVENT_SYNC),
              ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtCreateEventExWithFlag(&bad, 0), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtCreateEventExWithFlag(&bad, ACL_EVENT_IPC | ACL_EVENT_SYNC),
              ACL_ERROR_RT_PARAM_INVALID);

    /* An Ex event: complete before any record, never reset, and its wait captures the record
     * that was latest when the wait was enqueued. */
    CHECK(aclrtCreateEventExWithFlag(&x, ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE));
    CHECK(aclrtQueryEventStatus(x, &st));
    REQUIRE(st == ACL_EVENT_RECORDED_STATUS_COMPLETE, "Ex status before a record: %d", (int)st);
    CHECK(aclrtStreamWaitEvent(s2, x)); /* nothing recorded: nothing to wait for */
    CHECK(aclrtSynchronizeStream(s2));
    EXPECT_RC(aclrtResetEvent(x, s1), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    EXPECT_RC(aclrtQueryEventWaitStatus(x, &ws), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    aclrtStream s3;
    CHECK(aclrtCreateStream(&s3));
    hold(s1);
    CHECK(aclrtRecordEvent(x, s1));
    CHECK(aclrtStreamWaitEvent(s2, x));
    g_ran = 0;
    CHECK(aclrtLaunchHostFunc(s2, bump, NULL));
    CHECK(aclrtRecordEvent(x, s3)); /* later, and runs at once */
    CHECK(aclrtSynchronizeStream(s3));
    sleep_ms(100);
    REQUIRE(g_ran == 0, "an Ex wait was released by a record enqueued after it");
    release_gate();
    CHECK(aclrtSynchronizeStream(s2));
    REQUIRE(g_ran == 1, "the task behind the Ex wait ran %d times", g_ran);

    /* Destroy with a record still queued: allowed, the stream still runs it. */
    hold(s1);
    CHECK(aclrtRecordEvent(e, s1));
    CHECK(aclrtDestroyEvent(e));
    EXPECT_RC(aclrtDestroyEvent(e), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT_RC(aclrtRecordEvent(e, s1), ACL_ERROR_RT_INVALID_HANDLE);
    release_gate();
    CHECK(aclrtSynchronizeStream(s1));
    EXPECT_RC(aclrtDestroyEvent(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK(aclrtDestroyEvent(a));
    CHECK(aclrtDestroyEvent(z));
    CHECK(aclrtDestroyEvent(nt));
    CHECK(aclrtDestroyEvent(x));
    CHECK(aclrtDestroyStream(s1));
    CHECK(aclrtDestroyStream(s2));
    CHECK(aclrtDestroyStream(s3));
}

/* ---- contexts ----------------------------------------------------------------------------- */

static aclrtContext g_ctx1;
static aclError g_thread_rc[4];

static void *other_thread(void *arg) {
    (void)arg;
    aclrtContext c = NULL;
    int32_t dev = -1;
    /* A new thread has no current context... */
    g_thread_rc[0] = aclrtGetCurrentContext(&c);
    /* ...until it sets one, which also sets its device. */
    g_thread_rc[1] = aclrtSetCurrentContext(g_ctx1);
    g_thread_rc[2] = aclrtGetDevice(&dev);
    g_thread_rc[3] = (dev == 1 && aclrtGetCurrentContext(&c) == ACL_SUCCESS && c == g_ctx1)
                         ? ACL_SUCCESS
                         : -1;
    return NULL;
}

static void contexts(void) {
    aclrtContext c0 = NULL, cur = NULL;
    int32_t dev = -1;
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtGetCurrentContext(&c0));
    REQUIRE(c0 != NULL, "the primary context is NULL");
    aclrtStream s0;
    CHECK(aclrtCreateStream(&s0));

    EXPECT_RC(aclrtCreateContext(NULL, 1), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtCreateContext(&g_ctx1, 99), ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK(aclrtCreateContext(&g_ctx1, 1));
    CHECK(aclrtGetCurrentContext(&cur));
    REQUIRE(cur == g_ctx1, "a created context becomes current");
    CHECK(aclrtGetDevice(&dev));
    REQUIRE(dev == 1, "current device after creating a context on device 1: %d", dev);

    /* A stream of another context is refused (107003); NULL is this context's default. */
    EXPECT_RC(aclrtSynchronizeStream(s0), ACL_ERROR_RT_STREAM_CONTEXT);
    aclrtStream s1, d1, d1b;
    CHECK(aclrtCreateStream(&s1));
    CHECK(aclrtCtxGetCurrentDefaultStream(&d1));
    CHECK(aclrtCtxGetCurrentDefaultStream(&d1b));
    REQUIRE(d1 != NULL && d1 == d1b, "the default stream handle is stable");
    g_ran = 0;
    CHECK(aclrtLaunchHostFunc(NULL, bump, NULL));
    CHECK(aclrtSynchronizeStream(d1));
    REQUIRE(g_ran == 1, "a task on NULL ran on the context's default stream");
    EXPECT_RC(aclrtDestroyStream(d1), ACL_ERROR_RT_PARAM_INVALID);

    /* Per thread. */
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, other_thread, NULL) == 0, "pthread_create");
    pthread_join(t, NULL);
    REQUIRE(g_thread_rc[0] == ACL_ERROR_RT_CONTEXT_NULL, "new thread's context: %d",
            (int)g_thread_rc[0]);
    REQUIRE(g_thread_rc[1] == ACL_SUCCESS && g_thread_rc[2] == ACL_SUCCESS &&
                g_thread_rc[3] == ACL_SUCCESS,
            "set/get in another thread: %d %d %d", (int)g_thread_rc[1], (int)g_thread_rc[2],
            (int)g_thread_rc[3]);

    /* Back to the primary context: its stream works again, the other's does not. */
    CHECK(aclrtSetCurrentContext(c0));
    CHECK(aclrtGetDevice(&dev));
    REQUIRE(dev == 0, "device after switching back: %d", dev);
    CHECK(aclrtSynchronizeStream(s0));
    EXPECT_RC(aclrtSynchronizeStream(s1), ACL_ERROR_RT_STREAM_CONTEXT);

    EXPECT_RC(aclrtDestroyContext(c0), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclrtDestroyContext(g_ctx1));
    EXPECT_RC(aclrtDestroyContext(g_ctx1), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT_RC(aclrtSetCurrentContext(g_ctx1), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT_RC(aclrtSynchronizeStream(s1), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT_RC(aclrtSetCurrentContext(NULL), ACL_ERROR_INVALID_PARAM);

    /* Two contexts of one device: a stream is still used only in its own. */
    aclrtContext c2;
    CHECK(aclrtCreateContext(&c2, 0));
    EXPECT_RC(aclrtSynchronizeStream(s0), ACL_ERROR_RT_STREAM_CONTEXT);
    CHECK(aclrtSynchronizeStream(NULL));
    CHECK(aclrtDestroyContext(c2));
    /* The thread's current context went with it. */
    EXPECT_RC(aclrtGetCurrentContext(&cur), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK(aclrtSetCurrentContext(c0));
    CHECK(aclrtDestroyStream(s0));
}

/* ---- stream modes, device synchronize, last error ------------------------------------------ */

static void stream_modes(void) {
    aclrtStream s;
    aclrtNotify n;
    EXPECT_RC(aclrtCreateStreamWithConfig(NULL, 0, 0), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtCreateStreamWithConfig(&s, 0, 0x1000), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclrtCreateStreamWithConfig(&s, 0, ACL_STREAM_FAST_LAUNCH | ACL_STREAM_FAST_SYNC));
    CHECK(aclrtCreateNotify(&n, 0));

    /* Continue (the default): the task after a failed one runs, and so does an event record
     * after it: the event synchronizes with 0 and reads COMPLETE (CANN's context checks
     * answer a failure only in stop mode: hicann/runtime context.cc Context::CheckStatus,
     * called first by api_impl.cc ApiImpl::EventSynchronize / EventQueryStatus). */
    aclrtEvent after;
    aclrtEventRecordedStatus rec = ACL_EVENT_RECORDED_STATUS_NOT_READY;
    CHECK(aclrtCreateEvent(&after));
    g_ran = 0;
    CHECK(aclrtWaitAndResetNotify(n, s, 1));
    CHECK(aclrtLaunchHostFunc(s, bump, NULL));
    CHECK(aclrtRecordEvent(after, s));
    CHECK(aclrtSynchronizeEvent(after));
    CHECK(aclrtQueryEventStatus(after, &rec));
    REQUIRE(rec == ACL_EVENT_RECORDED_STATUS_COMPLETE, "continue mode: event status %d", (int)rec);
    EXPECT_RC(aclrtSynchronizeStream(s), ACL_ERROR_RT_TASK_TIMEOUT);
    REQUIRE(g_ran == 1, "continue mode: the task after the failure ran %d times", g_ran);
    /* Stop on failure, in a context of its own: a failure there fails the whole context for
     * good, as CANN's (tests/c/stop_mode.c has the rest). The task after the failure is
     * discarded, and an event record behind it never runs: its synchronize and status query
     * answer the failure's code (CANN: stream.cc Stream::SetFailMode puts the context in stop
     * mode, and EnterFailureAbort gives the context the failure that Context::CheckStatus
     * answers). Stop mode does not go back to continue (ApiImpl::StreamSetMode); the same mode
     * again is accepted. */
    aclrtContext here, stopping;
    CHECK(aclrtGetCurrentContext(&here));
    CHECK(aclrtCreateContext(&stopping, 0));
    aclrtStream fs;
    CHECK(aclrtCreateStream(&fs));
    CHECK(aclrtSetStreamFailureMode(fs, ACL_STOP_ON_FAILURE));
    EXPECT_RC(aclrtSetStreamFailureMode(fs, ACL_CONTINUE_ON_FAILURE),
              ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK(aclrtSetStreamFailureMode(fs, ACL_STOP_ON_FAILURE));
    g_ran = 0;
    CHECK(aclrtWaitAndResetNotify(n, fs, 1));
    CHECK(aclrtLaunchHostFunc(fs, bump, NULL));
    CHECK(aclrtRecordEvent(after, fs));
    CHECK(aclrtLaunchHostFunc(fs, bump, NULL));
    EXPECT_RC(aclrtSynchronizeEvent(after), ACL_ERROR_RT_TASK_TIMEOUT);
    expect_msg("never ran: its stream stops on failure (ACL_STOP_ON_FAILURE)",
               "a task before the record failed", "got no record within 1 s", NULL);
    EXPECT_RC(aclrtQueryEventStatus(after, &rec), ACL_ERROR_RT_TASK_TIMEOUT);
    EXPECT_RC(aclrtSynchronizeEventWithTimeout(after, 1000), ACL_ERROR_RT_TASK_TIMEOUT);
    /* The context stays failed: its synchronizes answer the failure each time, its launches
     * are refused. */
    EXPECT_RC(aclrtSynchronizeStream(fs), ACL_ERROR_RT_TASK_TIMEOUT);
    EXPECT_RC(aclrtSynchronizeStream(fs), ACL_ERROR_RT_TASK_TIMEOUT);
    EXPECT_RC(aclrtLaunchHostFunc(fs, bump, NULL), ACL_ERROR_RT_TASK_TIMEOUT);
    /* A stream of another context that waits on that record fails so too, and a record
     * behind that wait, on a stream that stops on failure as well, names both failures. */
    aclrtContext chain;
    aclrtStream s2;
    aclrtEvent after2;
    CHECK(aclrtCreateContext(&chain, 0));
    CHECK(aclrtCreateStream(&s2));
    CHECK(aclrtSetStreamFailureMode(s2, ACL_STOP_ON_FAILURE));
    CHECK(aclrtCreateEvent(&after2));
    /* Held until both are queued: once the wait has failed, the context refuses launches. */
    gate_t hold = {0};
    CHECK(aclrtLaunchHostFunc(s2, gate_hold, &hold));
    CHECK(aclrtStreamWaitEvent(s2, after));
    CHECK(aclrtRecordEvent(after2, s2));
    gate_open(&hold);
    (void)recent_msg(); /* the thread's earlier messages go */
    EXPECT_RC(aclrtSynchronizeEvent(after2), ACL_ERROR_RT_TASK_TIMEOUT);
    expect_msg("never ran", "a task before the record failed", "got no record within 1 s", NULL);
    EXPECT_RC(aclrtSynchronizeStream(s2), ACL_ERROR_RT_TASK_TIMEOUT);
    CHECK(aclrtDestroyEvent(after2));
    CHECK(aclrtDestroyContext(chain));
    CHECK(aclrtSetCurrentContext(stopping));
    CHECK(aclrtDestroyContext(stopping));
    CHECK(aclrtSetCurrentContext(here));
    /* The event was this context's: it answers what its last record did. */
    EXPECT_RC(aclrtSynchronizeEvent(after), ACL_ERROR_RT_TASK_TIMEOUT);
    CHECK(aclrtDestroyEvent(after));
    REQUIRE(g_ran == 0, "stop mode: %d tasks after the failure ran", g_ran);

    /* Abort: the endless wait and the task behind it go; the stream stays usable. */
    g_ran = 0;
    CHECK(aclrtWaitAndResetNotify(n, s, 0));
    CHECK(aclrtLaunchHostFunc(s, bump, NULL));
    CHECK(aclrtStreamAbort(s));
    CHECK(aclrtSynchronizeStreamWithTimeout(s, 10000));
    REQUIRE(g_ran == 0, "a task queued before the abort ran");
    CHECK(aclrtLaunchHostFunc(s, bump, NULL));
    CHECK(aclrtSynchronizeStream(s));
    REQUIRE(g_ran == 1, "a task after the abort ran %d times", g_ran);

    /* Device synchronize waits for every stream of the current context. */
    EXPECT_RC(aclrtSynchronizeDeviceWithTimeout(0), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtSynchronizeDeviceWithTimeout(-2), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclrtWaitAndResetNotify(n, s, 0));
    int64_t t = now_ns();
    EXPECT_RC(aclrtSynchronizeDeviceWithTimeout(100), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
    REQUIRE(now_ns() - t >= 90 * 1000000LL, "the device synchronize expired early");
    /* It names the stream that does not finish and what it waits for. */
    char unfinished[96];
    snprintf(unfinished, sizeof unfinished,
             "stream %p of the current context still has tasks after 100 ms", (void *)s);
    expect_msg(unfinished, "its head task is a wait on notify", NULL);
    CHECK(aclrtRecordNotify(n, NULL));
    CHECK(aclrtSynchronizeDevice());

    /* Last error: a runtime failure is kept per thread; Peek keeps it, Get clears it; an ACL
     * argument check (100000) is not a runtime failure. */
    (void)aclrtGetLastError(ACL_RT_THREAD_LEVEL);
    EXPECT_RC(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_SUCCESS);
    EXPECT_RC(aclrtStreamQuery((aclrtStream)0x1234, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), ACL_SUCCESS);
    EXPECT_RC(aclrtSynchronizeStream((aclrtStream)0x1234), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT_RC(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT_RC(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT_RC(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT_RC(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_SUCCESS);
    EXPECT_RC(aclrtGetLastError((aclrtLastErrLevel)1), ACL_ERROR_INVALID_PARAM);

    CHECK(aclrtDestroyNotify(n));
    CHECK(aclrtDestroyStream(s));
}

/* IPC events: Ascend950PR, Ascend910_93 and Ascend910B only (207000 elsewhere, before any
 * argument is looked at). Their two-process use is tests/c/ipc_event.c. */
static void ipc_event_support(void) {
    const char *soc = aclrtGetSocName();
    REQUIRE(soc != NULL, "aclrtGetSocName returned NULL");
    int has = strncmp(soc, "Ascend950PR", 11) == 0 || strncmp(soc, "Ascend910_93", 12) == 0 ||
              strncmp(soc, "Ascend910B", 10) == 0;
    aclrtEvent e;
    aclrtIpcEventHandle h;
    memset(&h, 0, sizeof h);
    if (has) {
        CHECK(aclrtCreateEventExWithFlag(&e, ACL_EVENT_IPC));
        CHECK(aclrtIpcGetEventHandle(e, &h));
        CHECK(aclrtDestroyEvent(e));
        EXPECT_RC(aclrtIpcOpenEventHandle(h, &e), ACL_ERROR_RT_INVALID_HANDLE);
    } else {
        EXPECT_RC(aclrtCreateEventExWithFlag(&e, ACL_EVENT_IPC),
                  ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        EXPECT_RC(aclrtIpcOpenEventHandle(h, &e), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    }
}

/* aclrtGetEventAvailNum: an event made with a flag word takes its id at create. */
static void event_budget(void) {
    aclrtEvent e;
    uint32_t before, during, after;
    EXPECT_RC(aclrtGetEventAvailNum(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK(aclrtGetEventAvailNum(&before));
    CHECK(aclrtCreateEventWithFlag(&e, ACL_EVENT_SYNC));
    CHECK(aclrtGetEventAvailNum(&during));
    REQUIRE(during + 1 == before, "available events %u then %u after a create", before, during);
    CHECK(aclrtDestroyEvent(e));
    CHECK(aclrtGetEventAvailNum(&after));
    REQUIRE(after == before, "available events %u, then %u after the destroy", before, after);
}

static void no_events(void) {
    aclrtEvent e;
    CHECK(aclrtSetDevice(0));
    EXPECT_RC(aclrtCreateEvent(&e), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    EXPECT_RC(aclrtCreateEventWithFlag(&e, ACL_EVENT_SYNC), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    EXPECT_RC(aclrtCreateEventExWithFlag(&e, ACL_EVENT_SYNC), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
}

int main(int argc, char **argv) {
    g_role = "events";
    REQUIRE(argc == 2, "usage: events events|none");
    CHECK(aclInit(NULL));
    if (strcmp(argv[1], "none") == 0) {
        no_events();
    } else {
        contexts();
        CHECK(aclrtSetDevice(0));
        events_basic();
        ipc_event_support();
        event_budget();
        stream_modes();
    }
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("events %s: ok\n", argv[1]);
    return 0;
}
