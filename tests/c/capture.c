/* capture.c — stream capture into a model runtime instance (aclmdlRI*) through the C ABI:
 * a chain over two streams (copy in → record notify → wait notify → copy → copy out, the
 * second stream joined to the capture by an event and back by another) captured once and
 * replayed 100 times with new input each time, the output checked every time; nothing runs
 * during the capture; the refusals during a capture (begin twice, synchronize, aclrtMemcpy in
 * global mode unless the thread exchanged to relaxed, end on the joined stream, execute or
 * destroy the model being captured); a capture that fails part-way (an uncapturable task
 * invalidates it, its end answers ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED and gives no model;
 * a joined stream not joined back: ACL_ERROR_RT_STREAM_UNJOINED); aclmdlRIExecute; names,
 * ids and destroy callbacks; a destroy while a replay is still queued waits for it.
 * Argument: the SoC (default Ascend910B); on one without capture (Ascend310B: CANN lists Atlas
 * 200I/500 A2 as unsupported) aclmdlRICaptureBegin is ACL_ERROR_RT_FEATURE_NOT_SUPPORT.
 * Exit 0 and "capture <soc>: ok". */
#include "common.h"

enum { N = 256 };

static int g_destroyed;
static void on_destroy(void *arg) { __atomic_add_fetch((int *)arg, 1, __ATOMIC_ACQ_REL); }
/* Set by `slow` as it returns. */
static int g_slow_done;
static void slow(void *arg) {
    (void)arg;
    sleep_ms(300);
    __atomic_store_n(&g_slow_done, 1, __ATOMIC_RELEASE);
}

int main(int argc, char **argv) {
    g_role = "capture";
    const char *soc = argc > 1 ? argv[1] : "Ascend910B";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream s1, s2, s3;
    CHECK(aclrtCreateStream(&s1));
    if (strcmp(soc, "Ascend310B") == 0) {
        EXPECT_RC(aclmdlRICaptureBegin(s1, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL),
                  ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        expect_msg("not support", NULL);
        CHECK(aclrtDestroyStream(s1));
        CHECK(aclFinalize());
        printf("capture %s: ok\n", soc);
        return 0;
    }
    CHECK(aclrtCreateStream(&s2));
    CHECK(aclrtCreateStream(&s3));
    aclrtEvent e1, e2;
    CHECK(aclrtCreateEventExWithFlag(&e1, ACL_EVENT_SYNC));
    CHECK(aclrtCreateEventExWithFlag(&e2, ACL_EVENT_SYNC));
    aclrtNotify n;
    CHECK(aclrtCreateNotify(&n, ACL_NOTIFY_DEFAULT));
    int32_t *in, *out;
    CHECK(aclrtMallocHost((void **)&in, N * sizeof(int32_t)));
    CHECK(aclrtMallocHost((void **)&out, N * sizeof(int32_t)));
    void *a, *b, *c;
    CHECK(aclrtMalloc(&a, N * sizeof(int32_t), ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&b, N * sizeof(int32_t), ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&c, N * sizeof(int32_t), ACL_MEM_MALLOC_HUGE_FIRST));
    const size_t bytes = N * sizeof(int32_t);

    /* Argument checks. */
    aclmdlRI m = NULL;
    aclmdlRICaptureStatus st;
    EXPECT_RC(aclmdlRICaptureBegin(NULL, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclmdlRICaptureBegin(s1, (aclmdlRICaptureMode)7), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclmdlRICaptureEnd(s1, &m), ACL_ERROR_RT_STREAM_NOT_CAPTURED);
    EXPECT_RC(aclmdlRICaptureGetInfo(s1, NULL, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclmdlRIExecuteAsync(NULL, s1), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclmdlRIDestroy(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclmdlRIDestroy((aclmdlRI)0x4d00123400005678ULL), ACL_ERROR_RT_INVALID_HANDLE);
    CHECK(aclmdlRICaptureGetInfo(s1, &st, &m));
    REQUIRE(st == ACL_MODEL_RI_CAPTURE_STATUS_NONE && m == NULL, "status %d before a capture", st);

    /* The capture. */
    for (int i = 0; i < N; i++) out[i] = -1;
    CHECK(aclmdlRICaptureBegin(s1, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    CHECK(aclmdlRICaptureGetInfo(s1, &st, &m));
    REQUIRE(st == ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE && m != NULL, "status %d during it", st);
    aclmdlRI capturing = m;
    EXPECT_RC(aclmdlRICaptureBegin(s1, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL), ACL_ERROR_RT_STREAM_CAPTURED);
    EXPECT_RC(aclrtSynchronizeStream(s1), ACL_ERROR_RT_STREAM_CAPTURED);
    EXPECT_RC(aclmdlRIExecuteAsync(capturing, s3), ACL_ERROR_RT_MODEL_CAPTURED);
    EXPECT_RC(aclmdlRIDestroy(capturing), ACL_ERROR_RT_MODEL_CAPTURED);
    /* Synchronous copies: refused in global mode, allowed once the thread is relaxed. */
    EXPECT_RC(aclrtMemcpy(c, bytes, in, bytes, ACL_MEMCPY_HOST_TO_DEVICE),
              ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT);
    aclmdlRICaptureMode mode = ACL_MODEL_RI_CAPTURE_MODE_RELAXED;
    CHECK(aclmdlRICaptureThreadExchangeMode(&mode));
    REQUIRE(mode == ACL_MODEL_RI_CAPTURE_MODE_GLOBAL, "old mode %d", mode);
    CHECK(aclrtMemcpy(c, bytes, in, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclmdlRICaptureThreadExchangeMode(&mode));
    REQUIRE(mode == ACL_MODEL_RI_CAPTURE_MODE_RELAXED, "old mode %d", mode);

    CHECK(aclrtMemcpyAsync(a, bytes, in, bytes, ACL_MEMCPY_HOST_TO_DEVICE, s1));
    CHECK(aclrtRecordEvent(e1, s1));
    CHECK(aclrtStreamWaitEvent(s2, e1)); /* s2 joins */
    CHECK(aclmdlRICaptureGetInfo(s2, &st, NULL));
    REQUIRE(st == ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE, "s2 did not join: %d", st);
    EXPECT_RC(aclrtSynchronizeEvent(e1), ACL_ERROR_RT_EVENT_CAPTURED);
    CHECK(aclrtMemcpyAsync(b, bytes, a, bytes, ACL_MEMCPY_DEVICE_TO_DEVICE, s1));
    CHECK(aclrtRecordNotify(n, s1));
    CHECK(aclrtWaitAndResetNotify(n, s2, 0));
    CHECK(aclrtMemcpyAsync(c, bytes, b, bytes, ACL_MEMCPY_DEVICE_TO_DEVICE, s2));
    CHECK(aclrtRecordEvent(e2, s2));
    CHECK(aclrtStreamWaitEvent(s1, e2)); /* s2 joins back */
    CHECK(aclrtMemcpyAsync(out, bytes, c, bytes, ACL_MEMCPY_DEVICE_TO_HOST, s1));
    EXPECT_RC(aclmdlRICaptureEnd(s2, &m), ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED);
    EXPECT_RC(aclmdlRICaptureEnd(s1, NULL), ACL_ERROR_RT_PARAM_INVALID);
    m = NULL;
    CHECK(aclmdlRICaptureEnd(s1, &m));
    REQUIRE(m == capturing, "the model %p is not the one named during the capture %p", m, capturing);
    CHECK(aclmdlRICaptureGetInfo(s1, &st, NULL));
    REQUIRE(st == ACL_MODEL_RI_CAPTURE_STATUS_NONE, "s1 still %d", st);
    CHECK(aclmdlRICaptureGetInfo(s2, &st, NULL));
    REQUIRE(st == ACL_MODEL_RI_CAPTURE_STATUS_NONE, "s2 still %d", st);
    /* Nothing ran during the capture. */
    CHECK(aclrtSynchronizeStream(s1));
    CHECK(aclrtSynchronizeStream(s2));
    for (int i = 0; i < N; i++) REQUIRE(out[i] == -1, "out[%d] = %d: a captured task ran", i, out[i]);

    /* 100 replays, new input each time, output checked each time. */
    for (int r = 0; r < 100; r++) {
        for (int i = 0; i < N; i++) in[i] = r * 1000 + i;
        aclrtStream on = (r % 3 == 2) ? s3 : s1;
        CHECK(aclmdlRIExecuteAsync(m, on));
        CHECK(aclrtSynchronizeStream(on));
        for (int i = 0; i < N; i++)
            REQUIRE(out[i] == r * 1000 + i, "replay %d: out[%d] = %d", r, i, out[i]);
    }
    /* aclmdlRIExecute: on a stream of the model's own, waited for. */
    for (int i = 0; i < N; i++) in[i] = -7 * i;
    EXPECT_RC(aclmdlRIExecute(m, 0), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclmdlRIExecute(m, 10000));
    for (int i = 0; i < N; i++) REQUIRE(out[i] == -7 * i, "execute: out[%d] = %d", i, out[i]);

    /* The model's streams: one for each captured stream, its own (not s1, s2). */
    uint32_t ns = 0;
    CHECK(aclmdlRIGetStreams(m, NULL, &ns));
    REQUIRE(ns == 2, "%u streams", ns);
    aclrtStream ms[3] = {s1, s1, s1};
    ns = 3;
    CHECK(aclmdlRIGetStreams(m, ms, &ns));
    REQUIRE(ns == 2 && ms[0] != NULL && ms[1] != NULL && ms[2] == NULL, "streams %u", ns);
    REQUIRE(ms[0] != s1 && ms[0] != s2 && ms[1] != s1 && ms[1] != s2 && ms[0] != ms[1],
            "the model's streams are the captured ones");
    ns = 1;
    EXPECT_RC(aclmdlRIGetStreams(m, ms, &ns), ACL_ERROR_RT_INSUFFICIENT_INPUT_ARRAY);
    REQUIRE(ns == 1, "written %u", ns);
    EXPECT_RC(aclmdlRIGetStreams(m, ms, NULL), ACL_ERROR_RT_PARAM_INVALID);
    /* Executing a model on a stream of its own is refused. */
    EXPECT_RC(aclmdlRIExecuteAsync(m, ms[1]), ACL_ERROR_RT_PARAM_INVALID);

    /* Name, id, destroy callbacks. */
    char name[32];
    uint32_t id = 0;
    CHECK(aclmdlRISetName(m, "chain"));
    EXPECT_RC(aclmdlRIGetName(m, 5, name), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclmdlRIGetName(m, sizeof name, name));
    REQUIRE(strcmp(name, "chain") == 0, "name %s", name);
    CHECK(aclmdlRIGetId(m, &id));
    CHECK(aclmdlRIDestroyRegisterCallback(m, on_destroy, &g_destroyed));
    CHECK(aclmdlRIDestroyRegisterCallback(m, on_destroy, &g_destroyed));
    CHECK(aclmdlRIDestroyUnregisterCallback(m, on_destroy));
    EXPECT_RC(aclmdlRIDestroyUnregisterCallback(m, on_destroy), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclmdlRIDestroyRegisterCallback(m, on_destroy, &g_destroyed));

    /* Destroy while a replay is queued behind a slow host function: the destroy waits for it. */
    for (int i = 0; i < N; i++) in[i] = 5 * i + 3;
    for (int i = 0; i < N; i++) out[i] = -1;
    CHECK(aclrtLaunchHostFunc(s1, slow, NULL));
    CHECK(aclmdlRIExecuteAsync(m, s1));
    CHECK(aclmdlRIDestroy(m));
    /* By what it finds done, not by how long it took (the host function may have run most of
     * its 300 ms before the destroy was called): one that did not wait finds the host function
     * and the replay behind it still to run, unless this thread was held up for 300 ms. */
    REQUIRE(__atomic_load_n(&g_slow_done, __ATOMIC_ACQUIRE) == 1,
            "the destroy returned before the host function queued ahead of the replay had");
    for (int i = 0; i < N; i++) REQUIRE(out[i] == 5 * i + 3, "queued replay: out[%d] = %d", i, out[i]);
    REQUIRE(__atomic_load_n(&g_destroyed, __ATOMIC_ACQUIRE) == 1, "destroy callbacks ran %d times",
            g_destroyed);
    EXPECT_RC(aclmdlRIExecuteAsync(m, s1), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT_RC(aclmdlRIDestroy(m), ACL_ERROR_RT_INVALID_HANDLE);
    CHECK(aclrtSynchronizeStream(s1));

    /* Model ids: unique among the device's live models, and an id comes back once its model
     * is destroyed (CANN's Model::Setup takes it from the driver's pool, the teardown gives it
     * back: hicann/runtime src/runtime/feature/model/model.cc); the simulator hands out the
     * lowest free one, as for stream ids. None of this file's models lives now. */
    {
        aclmdlRI ma, mb, mc;
        uint32_t ia = 99, ib = 99, ic = 99;
        CHECK(aclmdlRIBuildBegin(&ma, 0));
        CHECK(aclmdlRIBuildBegin(&mb, 0));
        CHECK(aclmdlRIGetId(ma, &ia));
        CHECK(aclmdlRIGetId(mb, &ib));
        REQUIRE(ia == 0 && ib == 1, "the ids of two models on a device with none: %u, %u", ia, ib);
        CHECK(aclmdlRIDestroy(ma));
        CHECK(aclmdlRIBuildBegin(&mc, 0));
        CHECK(aclmdlRIGetId(mc, &ic));
        REQUIRE(ic == ia, "a model made after a destroy got id %u, not the freed %u", ic, ia);
        CHECK(aclmdlRIBuildBegin(&ma, 0));
        CHECK(aclmdlRIGetId(ma, &ia));
        REQUIRE(ia == 2, "the third live model's id: %u", ia);
        CHECK(aclmdlRIDestroy(ma));
        CHECK(aclmdlRIDestroy(mb));
        CHECK(aclmdlRIDestroy(mc));
    }

    /* A capture that fails part-way: an uncapturable task invalidates it. */
    CHECK(aclmdlRICaptureBegin(s1, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    CHECK(aclrtMemcpyAsync(a, bytes, in, bytes, ACL_MEMCPY_HOST_TO_DEVICE, s1));
    EXPECT_RC(aclrtLaunchHostFunc(s1, slow, NULL), ACL_ERROR_RT_STREAM_CAPTURED);
    CHECK(aclmdlRICaptureGetInfo(s1, &st, NULL));
    REQUIRE(st == ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED, "status %d after a refused task", st);
    m = (aclmdlRI)0x1;
    EXPECT_RC(aclmdlRICaptureEnd(s1, &m), ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED);
    expect_msg("invalidated", "aclrtLaunchHostFunc", NULL);
    REQUIRE(m == (aclmdlRI)0x1, "a failed end wrote %p", m);
    /* The stream works as before. */
    for (int i = 0; i < N; i++) in[i] = 11 * i;
    CHECK(aclrtMemcpyAsync(a, bytes, in, bytes, ACL_MEMCPY_HOST_TO_DEVICE, s1));
    CHECK(aclrtMemcpyAsync(out, bytes, a, bytes, ACL_MEMCPY_DEVICE_TO_HOST, s1));
    CHECK(aclrtSynchronizeStream(s1));
    for (int i = 0; i < N; i++) REQUIRE(out[i] == 11 * i, "after: out[%d] = %d", i, out[i]);

    /* A joined stream not joined back: no model. */
    CHECK(aclmdlRICaptureBegin(s1, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    CHECK(aclrtRecordEvent(e1, s1));
    CHECK(aclrtStreamWaitEvent(s2, e1));
    CHECK(aclrtMemcpyAsync(c, bytes, a, bytes, ACL_MEMCPY_DEVICE_TO_DEVICE, s2));
    EXPECT_RC(aclmdlRICaptureEnd(s1, &m), ACL_ERROR_RT_STREAM_UNJOINED);
    CHECK(aclmdlRICaptureGetInfo(s2, &st, NULL));
    REQUIRE(st == ACL_MODEL_RI_CAPTURE_STATUS_NONE, "s2 still %d", st);
    CHECK(aclrtSynchronizeStream(s2));

    CHECK(aclrtFree(a));
    CHECK(aclrtFree(b));
    CHECK(aclrtFree(c));
    CHECK(aclrtFreeHost(in));
    CHECK(aclrtFreeHost(out));
    CHECK(aclrtDestroyNotify(n));
    CHECK(aclrtDestroyEvent(e1));
    CHECK(aclrtDestroyEvent(e2));
    CHECK(aclrtDestroyStream(s1));
    CHECK(aclrtDestroyStream(s2));
    CHECK(aclrtDestroyStream(s3));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("capture %s: ok\n", soc);
    return 0;
}
