/* stream_stop.c — aclrtStreamStop through the C ABI, with CANN's checks in its order
 * (hicann/runtime src/runtime/api/api_c.cc rtsStreamStop; api_error.cc
 * ApiErrorDecorator::StreamStop; api_impl.cc ApiImpl::StreamClear; context.cc
 * Context::StreamClear; stream.cc Stream::StreamStop; docs/zh/api_ref/06_stream_management.md).
 *
 * Checked, on a chip that stops streams (Ascend910B, Ascend910_93, Ascend950PR/DT):
 * - the stopped stream's queued host functions, and those launched after the stop (accepted),
 *   never run; another stream runs meanwhile; the stream's query answers NOT_READY, a
 *   synchronize with a timeout 507046 with a message saying it is stopped; a second stop
 *   succeeds and changes nothing;
 * - a thread synchronizing the stopped stream with no timeout returns when the stream is
 *   aborted (aclrtStreamAbort), which drops the kept host functions; the stream then runs
 *   what is launched on it;
 * - a stop while another thread synchronizes with a timeout returns at once, and that
 *   synchronize returns by its timeout (507046);
 * - aclrtDestroyStream and aclrtDestroyStreamForce of a stopped stream return at once and run
 *   none of its kept host functions; the handle is then dead (107017);
 * - NULL (the default stream) 107000; a destroyed stream 107017; a stream of another device's
 *   context 107003; a stream bound to a model being built or built 507000 naming the model, and
 *   stopped once the model is destroyed.
 * On any other chip: 207000 naming the chip, after the NULL check.
 *
 * usage: stream_stop SOC. Exit 0 and "stream_stop: ok". */
#include "common.h"
#include "join.h"

static int g_ran; /* host functions of stopped streams that ran (none may) */
static int g_other;

static void bump(void *arg) { __atomic_fetch_add((int *)arg, 1, __ATOMIC_SEQ_CST); }

typedef struct {
    aclrtStream s;
    int32_t timeout; /* -1: aclrtSynchronizeStream */
    aclError rc;
    int64_t took_ns;
} sync_job;

static void *sync_thread(void *arg) {
    sync_job *j = (sync_job *)arg;
    CHECK(aclrtSetDevice(0));
    int64_t t0 = now_ns();
    j->rc = j->timeout < 0 ? aclrtSynchronizeStream(j->s)
                           : aclrtSynchronizeStreamWithTimeout(j->s, j->timeout);
    __atomic_store_n(&j->took_ns, now_ns() - t0, __ATOMIC_SEQ_CST);
    return NULL;
}

static int stops_streams(const char *soc) {
    return !strcmp(soc, "Ascend910B") || !strcmp(soc, "Ascend910_93") ||
           !strcmp(soc, "Ascend950PR") || !strcmp(soc, "Ascend950DT");
}

/* Host functions kept, unrun, behind a stop; other streams unaffected; query, synchronize. */
static void kept_unrun(aclrtStream s) {
    aclrtStream other = NULL;
    CHECK(aclrtCreateStream(&other));
    gate_t gate = {0};
    CHECK(aclrtLaunchHostFunc(s, gate_hold, &gate));
    for (int i = 0; i < 3; i++) CHECK(aclrtLaunchHostFunc(s, bump, &g_ran));
    CHECK(aclrtStreamStop(s));
    /* It returned with the host function still held (a time under 5 s stood here until
     * 2026-12-07). */
    gate_not_waited_for(&gate, "aclrtStreamStop");
    gate_open(&gate); /* the running host function returns; the stream runs no more */
    for (int i = 0; i < 2; i++) CHECK(aclrtLaunchHostFunc(s, bump, &g_ran));
    CHECK(aclrtLaunchHostFunc(other, bump, &g_other));
    CHECK(aclrtSynchronizeStream(other));
    REQUIRE(g_other == 1, "the other stream ran %d host functions", g_other);
    sleep_ms(50);
    REQUIRE(__atomic_load_n(&g_ran, __ATOMIC_SEQ_CST) == 0, "a stopped stream ran %d", g_ran);
    aclrtStreamStatus st = ACL_STREAM_STATUS_COMPLETE;
    CHECK(aclrtStreamQuery(s, &st));
    REQUIRE(st == ACL_STREAM_STATUS_NOT_READY, "query of a stopped stream: %d", (int)st);
    EXPECT_RC(aclrtSynchronizeStreamWithTimeout(s, 100), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
    expect_msg("stopped", "aclrtStreamStop", NULL);
    CHECK(aclrtStreamStop(s));
    REQUIRE(__atomic_load_n(&g_ran, __ATOMIC_SEQ_CST) == 0, "a stopped stream ran %d", g_ran);
    CHECK(aclrtDestroyStream(other));
}

/* A synchronize with no timeout returns at the abort, which drops the kept tasks. */
static void abort_resumes(aclrtStream s) {
    sync_job j = {s, -1, -1, 0};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, sync_thread, &j) == 0, "pthread_create");
    sleep_ms(50);
    REQUIRE(__atomic_load_n(&j.took_ns, __ATOMIC_SEQ_CST) == 0, "a synchronize of a stopped stream returned %d", (int)j.rc);
    CHECK(aclrtStreamAbort(s));
    join_within(t, 10000, "aclrtSynchronizeStream after the abort");
    REQUIRE(j.rc == ACL_SUCCESS, "synchronize after the abort: %d", (int)j.rc);
    REQUIRE(__atomic_load_n(&g_ran, __ATOMIC_SEQ_CST) == 0, "an aborted kept task ran");
    int again = 0;
    CHECK(aclrtLaunchHostFunc(s, bump, &again));
    CHECK(aclrtSynchronizeStream(s));
    REQUIRE(again == 1, "the aborted stream did not run again: %d", again);
    CHECK(aclrtDestroyStream(s));
}

/* A stop while another thread synchronizes with a timeout. */
static void stop_during_sync(void) {
    aclrtStream s = NULL;
    CHECK(aclrtCreateStream(&s));
    gate_t gate = {0};
    CHECK(aclrtLaunchHostFunc(s, gate_hold, &gate));
    CHECK(aclrtLaunchHostFunc(s, bump, &g_ran));
    sync_job j = {s, 300, -1, 0};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, sync_thread, &j) == 0, "pthread_create");
    sleep_ms(20);
    CHECK(aclrtStreamStop(s));
    /* It returned with the host function still held (a time under 5 s stood here until
     * 2026-12-07, which could not tell a stop that waited for the 300 ms synchronize). */
    gate_not_waited_for(&gate, "aclrtStreamStop during a synchronize");
    gate_open(&gate);
    join_within(t, 10000, "aclrtSynchronizeStreamWithTimeout(300) of a stopped stream");
    REQUIRE(j.rc == ACL_ERROR_RT_STREAM_SYNC_TIMEOUT, "synchronize: %d", (int)j.rc);
    CHECK(aclrtDestroyStreamForce(s));
    REQUIRE(__atomic_load_n(&g_ran, __ATOMIC_SEQ_CST) == 0, "a stopped stream ran %d", g_ran);
}

/* Destroys of stopped streams return at once and run nothing. */
static void destroy_stopped(int force) {
    aclrtStream s = NULL;
    CHECK(aclrtCreateStream(&s));
    CHECK(aclrtStreamStop(s));
    for (int i = 0; i < 50; i++) CHECK(aclrtLaunchHostFunc(s, bump, &g_ran));
    /* A destroy that waited for the kept tasks would not return (the program's watch ends
     * it); nothing ran is the check (a time under 5 s stood here until 2026-12-07). */
    CHECK(force ? aclrtDestroyStreamForce(s) : aclrtDestroyStream(s));
    REQUIRE(__atomic_load_n(&g_ran, __ATOMIC_SEQ_CST) == 0, "a destroyed stopped stream ran");
    EXPECT_RC(aclrtStreamStop(s), ACL_ERROR_RT_INVALID_HANDLE);
}

static void refusals(void) {
    EXPECT_RC(aclrtStreamStop(NULL), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("default stream", NULL);

    aclrtStream s = NULL;
    CHECK(aclrtCreateStream(&s));
    CHECK(aclrtSetDevice(1));
    EXPECT_RC(aclrtStreamStop(s), ACL_ERROR_RT_STREAM_CONTEXT);
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtDestroyStream(s));

    /* A model's stream: refused while the model is built and once built; stopped after. */
    aclrtStream ps = NULL;
    CHECK(aclrtCreateStreamWithConfig(&ps, 0, ACL_STREAM_PERSISTENT));
    aclmdlRI m = NULL;
    CHECK(aclmdlRIBuildBegin(&m, 0));
    CHECK(aclmdlRIBindStream(m, ps, 0));
    EXPECT_RC(aclrtStreamStop(ps), ACL_ERROR_RT_INTERNAL_ERROR);
    expect_msg("bound to model", NULL);
    CHECK(aclmdlRIEndTask(m, ps));
    CHECK(aclmdlRIBuildEnd(m, NULL));
    EXPECT_RC(aclrtStreamStop(ps), ACL_ERROR_RT_INTERNAL_ERROR);
    expect_msg("bound to model", NULL);
    CHECK(aclmdlRIDestroy(m));
    CHECK(aclrtStreamStop(ps));
    CHECK(aclrtDestroyStream(ps));
}

int main(int argc, char **argv) {
    g_role = "stream_stop";
    REQUIRE(argc == 2, "usage: stream_stop SOC");
    const char *soc = argv[1];
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    if (!stops_streams(soc)) {
        EXPECT_RC(aclrtStreamStop(NULL), ACL_ERROR_RT_PARAM_INVALID);
        aclrtStream s = NULL;
        CHECK(aclrtCreateStream(&s));
        EXPECT_RC(aclrtStreamStop(s), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        expect_msg(soc, "does not stop streams", NULL);
        /* Not stopped: it runs what is launched on it. */
        int ran = 0;
        CHECK(aclrtLaunchHostFunc(s, bump, &ran));
        CHECK(aclrtSynchronizeStream(s));
        REQUIRE(ran == 1, "the refused stream ran %d", ran);
        CHECK(aclrtDestroyStream(s));
    } else {
        aclrtStream s = NULL;
        CHECK(aclrtCreateStream(&s));
        kept_unrun(s);
        abort_resumes(s);
        stop_during_sync();
        destroy_stopped(0);
        destroy_stopped(1);
        refusals();
        aclrtStream gone = NULL;
        CHECK(aclrtCreateStream(&gone));
        CHECK(aclrtDestroyStream(gone));
        EXPECT_RC(aclrtStreamStop(gone), ACL_ERROR_RT_INVALID_HANDLE);
        CHECK(aclrtResetDevice(1));
    }
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("stream_stop: ok\n");
    return 0;
}
