/* event_flag.c — aclrtRecordEventWithFlag and aclrtStreamWaitEventWithFlag, after hicann/runtime
 * src/acl/aclrt_impl/event.cpp, stream.cpp and src/runtime/api/impl/api_impl.cc.
 *
 * Checked: a NULL event is 100000 and a flag other than 0/1 is 100000 (naming the flag) for
 * both, as event.cpp's ACL_CHECK_INVALID_VALUE_WITH_EXPECT_RET; an external wait with a
 * timeout is 100000; the external flag on a stream that is not
 * capturing is 107029; the DEFAULT flag records (the event completes) and waits (a stream
 * waiting with it runs after a record queued behind a 300 ms host function on another
 * stream); inside a capture, an external wait makes each execution wait for the caller's
 * event recorded outside the model (the model's copy reads data written before that record),
 * and an external record lets a stream outside the model wait for the model's copy.
 *
 * usage: event_flag SOC. Exit 0 and "event_flag: ok". */
#include "common.h"

#include <stdatomic.h>

#define N 8

static atomic_int g_slept;

static void sleep_then_mark(void *arg) {
    (void)arg;
    sleep_ms(300);
    atomic_store(&g_slept, 1);
}

static void expect_status(aclrtEvent e, aclrtEventRecordedStatus want, const char *what) {
    aclrtEventRecordedStatus st = ACL_EVENT_RECORDED_STATUS_NOT_READY;
    CHECK(aclrtQueryEventStatus(e, &st));
    REQUIRE(st == want, "%s: status %d, expected %d", what, (int)st, (int)want);
}

static void checks(aclrtStream s, aclrtEvent e) {
    EXPECT_RC(aclrtRecordEventWithFlag(NULL, s, ACL_EVENT_RECORD_DEFAULT), ACL_ERROR_INVALID_PARAM);
    expect_msg("aclrtRecordEventWithFlag", "event", NULL);
    EXPECT_RC(aclrtStreamWaitEventWithFlag(s, NULL, 0, ACL_EVENT_WAIT_DEFAULT),
              ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtRecordEventWithFlag(e, s, 2), ACL_ERROR_INVALID_PARAM);
    expect_msg("aclrtRecordEventWithFlag", "flag 0x2", "ACL_EVENT_RECORD_EXTERNAL", NULL);
    EXPECT_RC(aclrtStreamWaitEventWithFlag(s, e, 0, 0x10), ACL_ERROR_INVALID_PARAM);
    expect_msg("flag 0x10", "ACL_EVENT_WAIT_EXTERNAL", NULL);
    EXPECT_RC(aclrtStreamWaitEventWithFlag(s, e, 5, ACL_EVENT_WAIT_EXTERNAL),
              ACL_ERROR_INVALID_PARAM);
    expect_msg("timeout 5", NULL);
    EXPECT_RC(aclrtRecordEventWithFlag(e, s, ACL_EVENT_RECORD_EXTERNAL),
              ACL_ERROR_RT_STREAM_NOT_CAPTURED);
    expect_msg("not capturing", NULL);
    EXPECT_RC(aclrtStreamWaitEventWithFlag(s, e, 0, ACL_EVENT_WAIT_EXTERNAL),
              ACL_ERROR_RT_STREAM_NOT_CAPTURED);
}

/* DEFAULT: b waits (flag 0, timeout 0 = for ever) for a's record, queued behind 300 ms. */
static void default_flags(aclrtStream a, aclrtStream b) {
    aclrtEvent e, done;
    CHECK(aclrtCreateEvent(&e));
    CHECK(aclrtCreateEvent(&done));
    atomic_store(&g_slept, 0);
    CHECK(aclrtLaunchHostFunc(a, sleep_then_mark, NULL));
    CHECK(aclrtRecordEventWithFlag(e, a, ACL_EVENT_RECORD_DEFAULT));
    CHECK(aclrtStreamWaitEventWithFlag(b, e, 0, ACL_EVENT_WAIT_DEFAULT));
    CHECK(aclrtRecordEventWithFlag(done, b, ACL_EVENT_RECORD_DEFAULT));
    expect_status(done, ACL_EVENT_RECORDED_STATUS_NOT_READY, "b's record before a's 300 ms");
    CHECK(aclrtSynchronizeStream(b));
    REQUIRE(atomic_load(&g_slept) == 1, "b ran past its wait before a's record");
    expect_status(e, ACL_EVENT_RECORDED_STATUS_COMPLETE, "a's record");
    expect_status(done, ACL_EVENT_RECORDED_STATUS_COMPLETE, "b's record");
    CHECK(aclrtSynchronizeStream(a));
    CHECK(aclrtDestroyEvent(e));
    CHECK(aclrtDestroyEvent(done));
}

static void fill(int32_t *h, int32_t base) {
    for (int i = 0; i < N; i++) h[i] = base + i;
}

static void expect_data(const int32_t *h, int32_t base, const char *what) {
    for (int i = 0; i < N; i++) {
        REQUIRE(h[i] == base + i, "%s: [%d] = %d, expected %d", what, i, h[i], base + i);
    }
}

/* External wait: the model copies src to dst after the caller's record on x, which follows a
 * 300 ms host function and the copy writing src. */
static void external_wait(aclrtStream g, aclrtStream x) {
    const size_t size = N * sizeof(int32_t);
    int32_t host[N], out[N];
    void *src = NULL, *dst = NULL;
    CHECK(aclrtMalloc(&src, size, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&dst, size, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemset(src, size, 0, size));
    CHECK(aclrtMemset(dst, size, 0, size));
    aclrtEvent e;
    CHECK(aclrtCreateEventExWithFlag(&e, ACL_EVENT_SYNC));
    aclmdlRI model;
    CHECK(aclmdlRICaptureBegin(g, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    CHECK(aclrtStreamWaitEventWithFlag(g, e, 0, ACL_EVENT_WAIT_EXTERNAL));
    CHECK(aclrtMemcpyAsync(dst, size, src, size, ACL_MEMCPY_DEVICE_TO_DEVICE, g));
    CHECK(aclmdlRICaptureEnd(g, &model));
    for (int32_t round = 1; round <= 2; round++) {
        fill(host, 100 * round);
        CHECK(aclrtLaunchHostFunc(x, sleep_then_mark, NULL));
        CHECK(aclrtMemcpyAsync(src, size, host, size, ACL_MEMCPY_HOST_TO_DEVICE, x));
        CHECK(aclrtRecordEvent(e, x));
        CHECK(aclmdlRIExecuteAsync(model, g));
        CHECK(aclrtSynchronizeStream(g));
        CHECK(aclrtMemcpy(out, size, dst, size, ACL_MEMCPY_DEVICE_TO_HOST));
        expect_data(out, 100 * round, "the model's copy after the external wait");
        CHECK(aclrtSynchronizeStream(x));
    }
    CHECK(aclmdlRIDestroy(model));
    CHECK(aclrtDestroyEvent(e));
    CHECK(aclrtFree(src));
    CHECK(aclrtFree(dst));
}

/* External record: x waits for the model's record, which follows the model's copy, which
 * follows a 300 ms host function on g. */
static void external_record(aclrtStream g, aclrtStream x) {
    const size_t size = N * sizeof(int32_t);
    int32_t host[N], out[N];
    void *src = NULL, *dst = NULL;
    CHECK(aclrtMalloc(&src, size, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&dst, size, ACL_MEM_MALLOC_HUGE_FIRST));
    fill(host, 7);
    CHECK(aclrtMemcpy(src, size, host, size, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtMemset(dst, size, 0, size));
    aclrtEvent e;
    CHECK(aclrtCreateEventExWithFlag(&e, ACL_EVENT_SYNC));
    aclmdlRI model;
    CHECK(aclmdlRICaptureBegin(g, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    CHECK(aclrtMemcpyAsync(dst, size, src, size, ACL_MEMCPY_DEVICE_TO_DEVICE, g));
    CHECK(aclrtRecordEventWithFlag(e, g, ACL_EVENT_RECORD_EXTERNAL));
    CHECK(aclmdlRICaptureEnd(g, &model));
    CHECK(aclrtLaunchHostFunc(g, sleep_then_mark, NULL));
    CHECK(aclmdlRIExecuteAsync(model, g));
    CHECK(aclrtStreamWaitEvent(x, e));
    memset(out, 0, sizeof out);
    CHECK(aclrtMemcpyAsync(out, size, dst, size, ACL_MEMCPY_DEVICE_TO_HOST, x));
    CHECK(aclrtSynchronizeStream(x));
    expect_data(out, 7, "the copy after waiting for the model's external record");
    CHECK(aclrtSynchronizeStream(g));
    CHECK(aclmdlRIDestroy(model));
    CHECK(aclrtDestroyEvent(e));
    CHECK(aclrtFree(src));
    CHECK(aclrtFree(dst));
}

int main(int argc, char **argv) {
    g_role = "event_flag";
    REQUIRE(argc == 2, "usage: event_flag SOC");
    (void)argv;
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream a, b;
    CHECK(aclrtCreateStream(&a));
    CHECK(aclrtCreateStream(&b));
    aclrtEvent e;
    CHECK(aclrtCreateEvent(&e));
    checks(a, e);
    CHECK(aclrtDestroyEvent(e));
    default_flags(a, b);
    external_wait(a, b);
    external_record(a, b);
    CHECK(aclrtDestroyStream(a));
    CHECK(aclrtDestroyStream(b));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("event_flag: ok\n");
    return 0;
}
