/* model_flow.c — run-time control flow in built models through the C ABI (aclrtCreateLabel,
 * aclrtSetLabel, aclrtCreateLabelList, aclrtSwitchLabelByIndex, aclrtSwitchStream,
 * aclrtActiveStream, streams bound with ACL_MODEL_STREAM_FLAG_DEFAULT, aclmdlRIAbort):
 *
 * - a loop made of labels: each round shifts a device array down by one word until its first
 *   word is 1; the trip count is how many zeros the host put in front, set anew before each
 *   of 60 executions (0 to 40), and the array after the run is checked word for word against
 *   that many shifts; in 10 of them the host writes the array AFTER queueing the execution
 *   (the execution stream held by a notify it records afterwards), so the values are read
 *   when the tasks run, not when queued;
 * - a switch between streams: the head stream copies a selector into place, then switches to
 *   stream B when it equals 1 (the head stops), else activates stream C and goes on; 40
 *   executions, alternating selectors, each stream's output word checked;
 * - aclmdlRIAbort of an execution looping for ever (507023 on its stream, and from
 *   aclmdlRIExecute), then a clean execution with its result checked;
 * - refusals: non-model streams (107005), a label set twice, in another model or in no list
 *   (507000), maxValue 0 or past the list (107000), a bad condition or data type (107000), a
 *   non-NULL falseStream (107000), a destroyed label (107017), NULLs (100000), a list label
 *   set nowhere at aclmdlRIBuildEnd (507000), a capturing stream (107005);
 * - aclmdlRIDebugPrint (text on standard error) and aclmdlRIDebugJsonPrint (a trace-event
 *   array in a file) list the models' streams and tasks.
 * Exit 0 and "model_flow: ok". */
#include "common.h"
/* aclmdlRIDebugPrint is deprecated in CANN's header; it is still checked here. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <pthread.h>
#include <unistd.h>

enum { K = 64, LOOPS = 60, SWITCHES = 40 };
#define FLAG_HEAD 0x00000000U
#define FLAG_DEFAULT 0x7FFFFFFFU
#define ACL_ERROR_RT_MODEL_ABORT_NORMAL_ 507023
#define ACL_ERROR_RT_INTERNAL_ERROR_ 507000

/* The array the loop starts from: `trips` zeros, a 1, then 1000, 1001, … */
static void loop_input(uint32_t *a, int trips) {
    for (int i = 0; i < K; i++) a[i] = i < trips ? 0 : i == trips ? 1 : (uint32_t)(1000 + i);
}

/* The array after `trips` rounds of "copy words 1..K-1 down by one". */
static void loop_expected(uint32_t *a, int trips) {
    loop_input(a, trips);
    for (int t = 0; t < trips; t++) memmove(a, a + 1, (K - 1) * sizeof(uint32_t));
}

/* A model looping on stream `s`: top: switch by arr[0] to body (0) or exit (1); body: shift
 * arr down one word (through tmp), jump to top (index word 0); exit: copy arr out. */
static aclmdlRI build_loop(aclrtStream s, uint32_t *arr, uint32_t *tmp, uint32_t *zero,
                           uint32_t *out, aclrtLabel lb[3], aclrtLabelList ll[2]) {
    aclmdlRI m = NULL;
    CHECK(aclmdlRIBuildBegin(&m, 0));
    CHECK(aclmdlRIBindStream(m, s, FLAG_HEAD));
    for (int i = 0; i < 3; i++) CHECK(aclrtCreateLabel(&lb[i]));
    aclrtLabel cond[2] = {lb[1], lb[2]};
    CHECK(aclrtCreateLabelList(cond, 2, &ll[0]));
    CHECK(aclrtCreateLabelList(&lb[0], 1, &ll[1]));
    const size_t shift = (K - 1) * sizeof(uint32_t);
    CHECK(aclrtSetLabel(lb[0], s));
    CHECK(aclrtSwitchLabelByIndex(arr, 2, ll[0], s));
    CHECK(aclrtSetLabel(lb[1], s));
    CHECK(aclrtMemcpyAsync(tmp, shift, arr + 1, shift, ACL_MEMCPY_DEVICE_TO_DEVICE, s));
    CHECK(aclrtMemcpyAsync(arr, shift, tmp, shift, ACL_MEMCPY_DEVICE_TO_DEVICE, s));
    CHECK(aclrtSwitchLabelByIndex(zero, 1, ll[1], s));
    CHECK(aclrtSetLabel(lb[2], s));
    CHECK(aclrtMemcpyAsync(out, K * 4, arr, K * 4, ACL_MEMCPY_DEVICE_TO_HOST, s));
    CHECK(aclmdlRIEndTask(m, s));
    CHECK(aclmdlRIBuildEnd(m, NULL));
    return m;
}

static void check_loop(const uint32_t *out, int trips, int run) {
    uint32_t want[K];
    loop_expected(want, trips);
    for (int i = 0; i < K; i++) {
        REQUIRE(out[i] == want[i], "execution %d (%d trips): out[%d] = %u, expected %u", run,
                trips, i, out[i], want[i]);
    }
}

struct aborter {
    aclmdlRI model;
    int done;
};

/* Aborts the model every 10 ms until the main thread's execution has returned (an abort with
 * no execution queued does nothing). */
static void *abort_until_done(void *arg) {
    struct aborter *ab = arg;
    CHECK(aclrtSetDevice(0));
    while (!__atomic_load_n(&ab->done, __ATOMIC_ACQUIRE)) {
        sleep_ms(10);
        CHECK(aclmdlRIAbort(ab->model));
    }
    return NULL;
}

int main(void) {
    g_role = "model_flow";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream s, a, b, c, exec, plain, other;
    CHECK(aclrtCreateStreamWithConfig(&s, 0, ACL_STREAM_PERSISTENT));
    CHECK(aclrtCreateStreamWithConfig(&a, 0, ACL_STREAM_PERSISTENT));
    CHECK(aclrtCreateStreamWithConfig(&b, 0, ACL_STREAM_PERSISTENT));
    CHECK(aclrtCreateStreamWithConfig(&c, 0, ACL_STREAM_PERSISTENT));
    CHECK(aclrtCreateStreamWithConfig(&other, 0, ACL_STREAM_PERSISTENT));
    CHECK(aclrtCreateStream(&exec));
    CHECK(aclrtCreateStream(&plain));
    uint32_t *arr, *tmp, *zero, *words, *out;
    CHECK(aclrtMalloc((void **)&arr, K * 4, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc((void **)&tmp, K * 4, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc((void **)&zero, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc((void **)&words, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMallocHost((void **)&out, K * 4));
    CHECK(aclrtMemset(zero, 64, 0, 64));
    aclrtNotify gate;
    CHECK(aclrtCreateNotify(&gate, 0));

    /* 1. The label loop: trip counts from device memory, new before each execution. */
    aclrtLabel lb[3];
    aclrtLabelList ll[2];
    aclmdlRI loop = build_loop(s, arr, tmp, zero, out, lb, ll);
    uint32_t in[K];
    for (int r = 0; r < LOOPS; r++) {
        const int trips = (r * 7) % 41;
        memset(out, 0xEE, K * 4);
        loop_input(in, trips);
        if (r % 6 == 5) {
            /* Queued first, its array written after: read when the tasks run. */
            loop_input(in, 0);
            CHECK(aclrtMemcpy(arr, K * 4, in, K * 4, ACL_MEMCPY_HOST_TO_DEVICE));
            CHECK(aclrtWaitAndResetNotify(gate, exec, 0));
            CHECK(aclmdlRIExecuteAsync(loop, exec));
            loop_input(in, trips);
            CHECK(aclrtMemcpy(arr, K * 4, in, K * 4, ACL_MEMCPY_HOST_TO_DEVICE));
            CHECK(aclrtRecordNotify(gate, plain));
            CHECK(aclrtSynchronizeStream(exec));
        } else if (r % 2 == 0) {
            CHECK(aclrtMemcpy(arr, K * 4, in, K * 4, ACL_MEMCPY_HOST_TO_DEVICE));
            CHECK(aclmdlRIExecuteAsync(loop, exec));
            CHECK(aclrtSynchronizeStream(exec));
        } else {
            CHECK(aclrtMemcpy(arr, K * 4, in, K * 4, ACL_MEMCPY_HOST_TO_DEVICE));
            CHECK(aclmdlRIExecute(loop, 30000));
        }
        check_loop(out, trips, r);
    }

    /* 2. Abort an execution that loops for ever (the array all zeros: arr[0] never 1). */
    CHECK(aclrtMemset(arr, K * 4, 0, K * 4));
    CHECK(aclmdlRIExecuteAsync(loop, exec));
    sleep_ms(20);
    CHECK(aclmdlRIAbort(loop));
    EXPECT_RC(aclrtSynchronizeStream(exec), ACL_ERROR_RT_MODEL_ABORT_NORMAL_);
    CHECK(aclmdlRIExecuteAsync(loop, exec));
    CHECK(aclmdlRIAbort(loop)); /* queued, not yet running: stopped too */
    EXPECT_RC(aclrtSynchronizeStream(exec), ACL_ERROR_RT_MODEL_ABORT_NORMAL_);
    /* The host waiting in aclmdlRIExecute gets 507023 (another thread aborts). */
    struct aborter ab = {loop, 0};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, abort_until_done, &ab) == 0, "no thread");
    EXPECT_RC(aclmdlRIExecute(loop, 30000), ACL_ERROR_RT_MODEL_ABORT_NORMAL_);
    __atomic_store_n(&ab.done, 1, __ATOMIC_RELEASE);
    REQUIRE(pthread_join(t, NULL) == 0, "join");
    /* ... and a clean execution after. */
    loop_input(in, 9);
    CHECK(aclrtMemcpy(arr, K * 4, in, K * 4, ACL_MEMCPY_HOST_TO_DEVICE));
    memset(out, 0xEE, K * 4);
    CHECK(aclmdlRIExecute(loop, 30000));
    check_loop(out, 9, -1);
    CHECK(aclmdlRIAbort(loop)); /* nothing running: nothing to do */
    memset(out, 0xEE, K * 4);
    CHECK(aclrtMemcpy(arr, K * 4, in, K * 4, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclmdlRIExecute(loop, 30000));
    check_loop(out, 9, -2);

    /* 3. A switch between streams: a copies the selector into words[0], switches to b when
     * it equals words[1] (1), else activates c and writes its own mark. */
    aclmdlRI sw = NULL;
    uint32_t *sel_in, *marks, *outs;
    CHECK(aclrtMalloc((void **)&sel_in, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc((void **)&marks, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc((void **)&outs, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    const uint32_t mark_init[4] = {0xA, 0xB, 0xC, 1};
    CHECK(aclrtMemcpy(marks, 16, mark_init, 16, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtMemcpy(words + 1, 4, &mark_init[3], 4, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclmdlRIBuildBegin(&sw, 0));
    CHECK(aclmdlRIBindStream(sw, a, FLAG_HEAD));
    CHECK(aclmdlRIBindStream(sw, b, FLAG_DEFAULT));
    CHECK(aclmdlRIBindStream(sw, c, FLAG_DEFAULT));
    CHECK(aclrtMemcpyAsync(words, 4, sel_in, 4, ACL_MEMCPY_DEVICE_TO_DEVICE, a));
    CHECK(aclrtSwitchStream(words, ACL_RT_EQUAL, words + 1, ACL_RT_SWITCH_INT32, b, NULL, a));
    CHECK(aclrtActiveStream(c, a));
    CHECK(aclrtMemcpyAsync(outs, 4, marks, 4, ACL_MEMCPY_DEVICE_TO_DEVICE, a));
    CHECK(aclrtMemcpyAsync(outs + 1, 4, marks + 1, 4, ACL_MEMCPY_DEVICE_TO_DEVICE, b));
    CHECK(aclrtMemcpyAsync(outs + 2, 4, marks + 2, 4, ACL_MEMCPY_DEVICE_TO_DEVICE, c));
    CHECK(aclmdlRIBuildEnd(sw, NULL));
    for (int r = 0; r < SWITCHES; r++) {
        const uint32_t sel = (r % 3 == 1) ? 1 : (uint32_t)(r + 2);
        CHECK(aclrtMemcpy(sel_in, 4, &sel, 4, ACL_MEMCPY_HOST_TO_DEVICE));
        CHECK(aclrtMemset(outs, 64, 0, 64));
        CHECK(aclmdlRIExecute(sw, 30000));
        uint32_t got[3];
        CHECK(aclrtMemcpy(got, 12, outs, 12, ACL_MEMCPY_DEVICE_TO_HOST));
        const int to_b = sel == 1;
        REQUIRE(got[0] == (to_b ? 0u : 0xAu) && got[1] == (to_b ? 0xBu : 0u) &&
                    got[2] == (to_b ? 0u : 0xCu),
                "execution %d, selector %u: a %#x b %#x c %#x", r, sel, got[0], got[1], got[2]);
    }

    /* 4. Refusals. */
    aclrtLabel spare, unlisted;
    aclrtLabelList spare_list;
    CHECK(aclrtCreateLabel(&spare));
    CHECK(aclrtCreateLabel(&unlisted));
    CHECK(aclrtCreateLabelList(&spare, 1, &spare_list));
    EXPECT_RC(aclrtCreateLabel(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtCreateLabelList(&spare, 0, &spare_list), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtSetLabel(spare, plain), ACL_ERROR_RT_STREAM_MODEL);
    expect_msg("aclmdlRIBindStream", NULL);
    EXPECT_RC(aclrtSwitchLabelByIndex(zero, 1, spare_list, plain), ACL_ERROR_RT_STREAM_MODEL);
    EXPECT_RC(aclrtSwitchStream(words, ACL_RT_EQUAL, words + 1, ACL_RT_SWITCH_INT32, b, NULL,
                                plain),
              ACL_ERROR_RT_STREAM_MODEL);
    EXPECT_RC(aclrtActiveStream(c, plain), ACL_ERROR_RT_STREAM_MODEL);
    aclmdlRI bad = NULL;
    CHECK(aclmdlRIBuildBegin(&bad, 0));
    CHECK(aclmdlRIBindStream(bad, other, FLAG_HEAD));
    /* A label of the loop model (set on s) set on a stream of another model. */
    EXPECT_RC(aclrtSetLabel(lb[0], other), ACL_ERROR_RT_INTERNAL_ERROR_);
    expect_msg("model", NULL);
    EXPECT_RC(aclrtSetLabel(unlisted, other), ACL_ERROR_RT_INTERNAL_ERROR_);
    expect_msg("aclrtCreateLabelList", NULL);
    CHECK(aclrtSetLabel(spare, other));
    EXPECT_RC(aclrtSetLabel(spare, other), ACL_ERROR_RT_INTERNAL_ERROR_);
    expect_msg("set already", NULL);
    EXPECT_RC(aclrtSwitchLabelByIndex(zero, 0, spare_list, other), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtSwitchLabelByIndex(zero, 2, spare_list, other), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtSwitchLabelByIndex(NULL, 1, spare_list, other), ACL_ERROR_INVALID_PARAM);
    /* The switch target and the activated stream: streams of the same model. */
    EXPECT_RC(aclrtSwitchStream(words, ACL_RT_EQUAL, words + 1, ACL_RT_SWITCH_INT32, b, NULL,
                                other),
              ACL_ERROR_RT_STREAM_MODEL);
    EXPECT_RC(aclrtActiveStream(plain, other), ACL_ERROR_RT_STREAM_MODEL);
    EXPECT_RC(aclrtSwitchStream(words, 6, words + 1, ACL_RT_SWITCH_INT32, other, NULL, other),
              ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtSwitchStream(words, ACL_RT_EQUAL, words + 1, 2, other, NULL, other),
              ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtSwitchStream(words, ACL_RT_EQUAL, words + 1, ACL_RT_SWITCH_INT32, other,
                                plain, other),
              ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtActiveStream(NULL, other), ACL_ERROR_INVALID_PARAM);
    /* A switch through a list whose label is set nowhere: the build's end fails. */
    aclrtLabel nowhere;
    aclrtLabelList nowhere_list;
    CHECK(aclrtCreateLabel(&nowhere));
    CHECK(aclrtCreateLabelList(&nowhere, 1, &nowhere_list));
    CHECK(aclrtSwitchLabelByIndex(zero, 1, nowhere_list, other));
    EXPECT_RC(aclmdlRIBuildEnd(bad, NULL), ACL_ERROR_RT_INTERNAL_ERROR_);
    expect_msg("set on no stream", NULL);
    CHECK(aclmdlRIDestroy(bad));
    /* A capturing stream takes no control task. */
    CHECK(aclmdlRICaptureBegin(plain, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    EXPECT_RC(aclrtSetLabel(nowhere, plain), ACL_ERROR_RT_STREAM_MODEL);
    expect_msg("capture", NULL);
    aclmdlRI captured = NULL;
    CHECK(aclrtMemsetAsync(tmp, 4, 0, 4, plain));
    CHECK(aclmdlRICaptureEnd(plain, &captured));
    /* A captured model is aborted as a built one is (`ApiImpl::ModelAbort`; cond_model.c
     * aborts a captured loop): none in flight, nothing to do. */
    CHECK(aclmdlRIAbort(captured));
    CHECK(aclmdlRIDestroy(captured));
    /* Destroyed handles. */
    CHECK(aclrtDestroyLabelList(nowhere_list));
    EXPECT_RC(aclrtDestroyLabelList(nowhere_list), ACL_ERROR_RT_INVALID_HANDLE);
    CHECK(aclrtDestroyLabel(nowhere));
    EXPECT_RC(aclrtDestroyLabel(nowhere), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT_RC(aclrtSetLabel(nowhere, s), ACL_ERROR_RT_INVALID_HANDLE);

    /* The loop model still runs once its labels and lists are destroyed. */
    for (int i = 0; i < 3; i++) CHECK(aclrtDestroyLabel(lb[i]));
    for (int i = 0; i < 2; i++) CHECK(aclrtDestroyLabelList(ll[i]));
    loop_input(in, 13);
    CHECK(aclrtMemcpy(arr, K * 4, in, K * 4, ACL_MEMCPY_HOST_TO_DEVICE));
    memset(out, 0xEE, K * 4);
    CHECK(aclmdlRIExecute(loop, 30000));
    check_loop(out, 13, -3);

    /* 5. The models described: text on standard error, JSON to a file. */
    fflush(stderr);
    const int saved = dup(2);
    FILE *log = tmpfile();
    REQUIRE(saved >= 0 && log != NULL, "no stderr copy");
    REQUIRE(dup2(fileno(log), 2) == 2, "dup2");
    const aclError printed = aclmdlRIDebugPrint(sw);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    CHECK(printed);
    char text[4096] = {0};
    rewind(log);
    const size_t got_text = fread(text, 1, sizeof text - 1, log);
    fclose(log);
    REQUIRE(got_text > 0 && strstr(text, "streams 3 tasks 6") && strstr(text, "stream 1 ") &&
                strstr(text, " started tasks 1") && strstr(text, "task 1 aclrtSwitchStream") &&
                strstr(text, "task 2 aclrtActiveStream"),
            "aclmdlRIDebugPrint wrote: %s", text);
    char json[8192];
    read_json_print(loop, "model_flow.json", json, sizeof json);
    REQUIRE(strstr(json, "\"name\":\"aclrtSetLabel\"") &&
                strstr(json, "\"name\":\"aclrtSwitchLabelByIndex\"") &&
                strstr(json, "\"ph\":\"X\""),
            "aclmdlRIDebugJsonPrint wrote: %s", json);
    EXPECT_RC(aclmdlRIDebugJsonPrint(loop, NULL, 0), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclmdlRIDebugPrint(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclmdlRIDebugJsonPrint(loop, "/nonexistent-dir/x.json", 0),
              ACL_ERROR_RT_PARAM_INVALID);

    CHECK(aclmdlRIDestroy(loop));
    CHECK(aclmdlRIDestroy(sw));
    CHECK(aclrtDestroyLabel(spare));
    CHECK(aclrtDestroyLabel(unlisted));
    CHECK(aclrtDestroyLabelList(spare_list));
    CHECK(aclrtDestroyNotify(gate));
    CHECK(aclrtFree(arr));
    CHECK(aclrtFree(tmp));
    CHECK(aclrtFree(zero));
    CHECK(aclrtFree(words));
    CHECK(aclrtFree(sel_in));
    CHECK(aclrtFree(marks));
    CHECK(aclrtFree(outs));
    CHECK(aclrtFreeHost(out));
    aclrtStream all[] = {s, a, b, c, other, exec, plain};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) CHECK(aclrtDestroyStream(all[i]));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("model_flow: ok\n");
    return 0;
}
