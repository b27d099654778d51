/* model_build.c — models built on bound streams (aclmdlRIBuildBegin, aclmdlRIBindStream,
 * aclmdlRIEndTask, aclmdlRIBuildEnd, aclmdlRIUnbindStream) through the C ABI: two persistent
 * streams bound to a model, a chain over them (copy in, value write → event → value wait,
 * copy, value write on the second stream → event back → copy out; the value tasks on
 * Ascend910B only), nothing run while it is built; 50
 * executions with new input, the output checked every time; the refusals (a stream bound
 * twice, a flag neither ACL_MODEL_STREAM_FLAG_HEAD nor _DEFAULT, synchronizing a bound stream, a task
 * after aclmdlRIEndTask, executing before the build's end, binding to a captured model,
 * unbinding a stream that is not bound); aclmdlRIGetStreams lists the bound streams;
 * aclmdlRIUnbindStream after the build stops the model; a model destroyed while built.
 * Argument: the SoC (default Ascend910B); on Ascend950PR a stream without
 * ACL_STREAM_PERSISTENT is refused. Exit 0 and "model_build <soc>: ok". */
#include "common.h"

enum { N = 128 };
#define FLAG_HEAD 0x00000000U

int main(int argc, char **argv) {
    g_role = "model_build";
    const char *soc = argc > 1 ? argv[1] : "Ascend910B";
    /* Value tasks: Ascend910B and Ascend910_93 only (CANN's memory-semantics chapter). */
    const int values = strcmp(soc, "Ascend910B") == 0;
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream s1, s2, exec, plain;
    CHECK(aclrtCreateStreamWithConfig(&s1, 0, ACL_STREAM_PERSISTENT));
    CHECK(aclrtCreateStreamWithConfig(&s2, 0, ACL_STREAM_PERSISTENT));
    CHECK(aclrtCreateStream(&exec));
    CHECK(aclrtCreateStream(&plain));
    aclrtEvent e1, e2;
    CHECK(aclrtCreateEventExWithFlag(&e1, ACL_EVENT_SYNC));
    CHECK(aclrtCreateEventExWithFlag(&e2, ACL_EVENT_SYNC));
    const size_t bytes = N * sizeof(int32_t);
    int32_t *in, *out;
    CHECK(aclrtMallocHost((void **)&in, bytes));
    CHECK(aclrtMallocHost((void **)&out, bytes));
    void *a, *b;
    CHECK(aclrtMalloc(&a, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&b, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    uint64_t *flag_word;
    CHECK(aclrtMalloc((void **)&flag_word, 64, ACL_MEM_MALLOC_HUGE_FIRST));

    /* Argument checks. */
    aclmdlRI m = NULL;
    EXPECT_RC(aclmdlRIBuildBegin(NULL, 0), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclmdlRIBindStream(NULL, s1, FLAG_HEAD), ACL_ERROR_INVALID_PARAM);
    CHECK(aclmdlRIBuildBegin(&m, 0));
    REQUIRE(m != NULL, "no model");
    if (strcmp(soc, "Ascend950PR") == 0) {
        EXPECT_RC(aclmdlRIBindStream(m, plain, FLAG_HEAD), ACL_ERROR_RT_PARAM_INVALID);
        expect_msg("ACL_STREAM_PERSISTENT", NULL);
    }
    EXPECT_RC(aclmdlRIBindStream(m, s1, 5), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("ACL_MODEL_STREAM_FLAG_DEFAULT", NULL);
    CHECK(aclmdlRIBindStream(m, s1, FLAG_HEAD));
    CHECK(aclmdlRIBindStream(m, s2, FLAG_HEAD));
    EXPECT_RC(aclmdlRIBindStream(m, s1, FLAG_HEAD), ACL_ERROR_RT_STREAM_MODEL);
    EXPECT_RC(aclmdlRIUnbindStream(m, exec), ACL_ERROR_RT_STREAM_MODEL);
    EXPECT_RC(aclmdlRIEndTask(m, exec), ACL_ERROR_RT_STREAM_MODEL);
    aclmdlRICaptureStatus st;
    aclmdlRI info = (aclmdlRI)1;
    CHECK(aclmdlRICaptureGetInfo(s1, &st, &info));
    REQUIRE(st == ACL_MODEL_RI_CAPTURE_STATUS_NONE && info == NULL, "a bound stream captures");

    /* The chain: s1 copies in → a, s2 copies a → b once the flag word is 1 and clears it,
     * s1 copies b → out after s2. Nothing runs now. */
    for (int i = 0; i < N; i++) out[i] = -1;
    CHECK(aclrtMemset(flag_word, 64, 0, 64));
    CHECK(aclrtMemcpyAsync(a, bytes, in, bytes, ACL_MEMCPY_HOST_TO_DEVICE, s1));
    if (values) CHECK(aclrtValueWrite(flag_word, 1, 0, s1));
    CHECK(aclrtRecordEvent(e1, s1));
    CHECK(aclrtStreamWaitEvent(s2, e1));
    if (values) CHECK(aclrtValueWait(flag_word, 1, ACL_STREAM_WAIT_VALUE_EQ, s2));
    CHECK(aclrtMemcpyAsync(b, bytes, a, bytes, ACL_MEMCPY_DEVICE_TO_DEVICE, s2));
    if (values) CHECK(aclrtValueWrite(flag_word, 0, 0, s2));
    CHECK(aclrtRecordEvent(e2, s2));
    CHECK(aclrtStreamWaitEvent(s1, e2));
    CHECK(aclrtMemcpyAsync(out, bytes, b, bytes, ACL_MEMCPY_DEVICE_TO_HOST, s1));
    EXPECT_RC(aclrtSynchronizeStream(s1), ACL_ERROR_RT_STREAM_MODEL);
    EXPECT_RC(aclmdlRIExecuteAsync(m, exec), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclmdlRIEndTask(m, s1));
    CHECK(aclmdlRIEndTask(m, s2));
    EXPECT_RC(aclrtMemsetAsync(a, bytes, 0, bytes, s1), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("aclmdlRIEndTask", NULL);
    sleep_ms(50);
    for (int i = 0; i < N; i++) REQUIRE(out[i] == -1, "out[%d] = %d before any execution", i, out[i]);
    EXPECT_RC(aclmdlRIBuildEnd(m, (void *)1), ACL_ERROR_INVALID_PARAM);
    CHECK(aclmdlRIBuildEnd(m, NULL));
    EXPECT_RC(aclmdlRIBuildEnd(m, NULL), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclmdlRIBindStream(m, plain, FLAG_HEAD), ACL_ERROR_RT_PARAM_INVALID);
    aclrtStream listed[3];
    uint32_t n = 3;
    CHECK(aclmdlRIGetStreams(m, listed, &n));
    REQUIRE(n == 2 && listed[0] == s1 && listed[1] == s2, "streams listed: %u", n);

    /* Executions with new input; the model's tasks run on s1 and s2. */
    for (int r = 0; r < 50; r++) {
        for (int i = 0; i < N; i++) in[i] = r * 7919 + i;
        if (r % 2 == 0) {
            CHECK(aclmdlRIExecuteAsync(m, exec));
            CHECK(aclrtSynchronizeStream(exec));
        } else {
            CHECK(aclmdlRIExecute(m, 10000));
        }
        for (int i = 0; i < N; i++) {
            REQUIRE(out[i] == r * 7919 + i, "execution %d: out[%d] = %d", r, i, out[i]);
        }
    }
    uint64_t word = 7;
    CHECK(aclrtMemcpy(&word, 8, flag_word, 8, ACL_MEMCPY_DEVICE_TO_HOST));
    REQUIRE(word == 0, "the flag word is %llu after the executions", (unsigned long long)word);
    /* After the build the bound streams take the caller's tasks again. */
    CHECK(aclrtMemsetAsync(a, bytes, 0, bytes, s1));
    CHECK(aclrtSynchronizeStream(s1));

    /* A captured model takes no bound stream (capture: not on Ascend310B). */
    if (strcmp(soc, "Ascend310B") != 0) {
        aclmdlRI captured = NULL;
        CHECK(aclmdlRICaptureBegin(plain, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
        CHECK(aclrtMemsetAsync(a, bytes, 0, bytes, plain));
        EXPECT_RC(aclmdlRIBindStream(captured, plain, FLAG_HEAD), ACL_ERROR_INVALID_PARAM);
        CHECK(aclmdlRICaptureEnd(plain, &captured));
        EXPECT_RC(aclmdlRIBindStream(captured, exec, FLAG_HEAD), ACL_ERROR_RT_PARAM_INVALID);
        expect_msg("ACL Graph", NULL);
        EXPECT_RC(aclmdlRIUnbindStream(captured, plain), ACL_ERROR_RT_PARAM_INVALID);
        CHECK(aclmdlRIDestroy(captured));
    }

    /* Unbinding a stream stops the model. */
    CHECK(aclmdlRIUnbindStream(m, s2));
    EXPECT_RC(aclmdlRIUnbindStream(m, s2), ACL_ERROR_RT_STREAM_MODEL);
    EXPECT_RC(aclmdlRIExecuteAsync(m, exec), ACL_ERROR_RT_STREAM_MODEL);
    CHECK(aclmdlRIDestroy(m));

    /* A model destroyed while it is built gives its streams back. */
    CHECK(aclmdlRIBuildBegin(&m, 0));
    CHECK(aclmdlRIBindStream(m, s2, FLAG_HEAD));
    CHECK(aclrtMemsetAsync(b, bytes, 0, bytes, s2));
    CHECK(aclmdlRIDestroy(m));
    CHECK(aclrtSynchronizeStream(s2));
    EXPECT_RC(aclmdlRIBuildEnd(m, NULL), ACL_ERROR_RT_INVALID_HANDLE);

    CHECK(aclrtDestroyEvent(e1));
    CHECK(aclrtDestroyEvent(e2));
    CHECK(aclrtDestroyStream(s1));
    CHECK(aclrtDestroyStream(s2));
    CHECK(aclrtDestroyStream(exec));
    CHECK(aclrtDestroyStream(plain));
    CHECK(aclrtFree(a));
    CHECK(aclrtFree(b));
    CHECK(aclrtFree(flag_word));
    CHECK(aclrtFreeHost(in));
    CHECK(aclrtFreeHost(out));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("model_build %s: ok\n", soc);
    return 0;
}
