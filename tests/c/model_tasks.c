/* model_tasks.c — the tasks of a model runtime instance through the C ABI
 * (aclmdlRIGetTasksByStream, aclmdlRITaskGetType, aclmdlRITaskGetSeqId, aclmdlRITaskGetParams,
 * aclmdlRITaskSetParams, aclmdlRITaskDisable, aclmdlRIUpdate): a captured stream's tasks listed
 * in order with their types, sequence ids and parameters; a value write's value set anew
 * before each of 100 executions and read back from device memory after each (a change takes
 * effect at aclmdlRIUpdate, not before); a disabled value write no longer runs; the refusals
 * (default tasks have no parameters and are not disabled, event tasks take no new ones, a
 * type that is not the task's, a short array, a stream of no model, a built model's
 * sequence ids, a task of a destroyed model). Ascend910B (value tasks). Exit 0 and
 * "model_tasks: ok". */
#include "common.h"

enum { N = 64 };

typedef struct {
    void *devAddr;
    uint64_t value;
} value_write_params;

int main(void) {
    g_role = "model_tasks";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream s1, exec;
    CHECK(aclrtCreateStream(&s1));
    CHECK(aclrtCreateStream(&exec));
    aclrtEvent e;
    CHECK(aclrtCreateEventExWithFlag(&e, ACL_EVENT_SYNC));
    uint64_t *words, *host;
    CHECK(aclrtMalloc((void **)&words, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMallocHost((void **)&host, 64));

    /* The capture: clear the words, write 11 and 22 into them (with an event round trip in
     * between), copy them out. */
    CHECK(aclmdlRICaptureBegin(s1, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    CHECK(aclrtMemsetAsync(words, 64, 0, 64, s1));
    CHECK(aclrtValueWrite(&words[0], 11, 0, s1));
    CHECK(aclrtRecordEvent(e, s1));
    CHECK(aclrtStreamWaitEvent(s1, e));
    CHECK(aclrtResetEvent(e, s1));
    CHECK(aclrtValueWrite(&words[1], 22, 0, s1));
    CHECK(aclrtMemcpyAsync(host, 64, words, 64, ACL_MEMCPY_DEVICE_TO_HOST, s1));
    aclmdlRI m;
    CHECK(aclmdlRICaptureEnd(s1, &m));
    aclrtStream ms;
    uint32_t ns = 1;
    CHECK(aclmdlRIGetStreams(m, &ms, &ns));

    /* The list. */
    uint32_t n = 0;
    EXPECT_RC(aclmdlRIGetTasksByStream(ms, NULL, NULL), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclmdlRIGetTasksByStream(exec, NULL, &n), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclmdlRIGetTasksByStream(ms, NULL, &n));
    REQUIRE(n == 7, "%u tasks listed, 7 captured", n);
    aclmdlRITask t[8];
    uint32_t short_n = 3;
    EXPECT_RC(aclmdlRIGetTasksByStream(ms, t, &short_n), ACL_ERROR_RT_INSUFFICIENT_INPUT_ARRAY);
    REQUIRE(short_n == 3, "short array: %u written", short_n);
    n = 8;
    CHECK(aclmdlRIGetTasksByStream(ms, t, &n));
    REQUIRE(n == 7 && t[7] == NULL, "%u tasks, the 8th slot %p", n, t[7]);
    const aclmdlRITaskType want[7] = {
        ACL_MODEL_RI_TASK_DEFAULT,      ACL_MODEL_RI_TASK_VALUE_WRITE, ACL_MODEL_RI_TASK_EVENT_RECORD,
        ACL_MODEL_RI_TASK_EVENT_WAIT,   ACL_MODEL_RI_TASK_EVENT_RESET, ACL_MODEL_RI_TASK_VALUE_WRITE,
        ACL_MODEL_RI_TASK_DEFAULT};
    for (uint32_t i = 0; i < 7; i++) {
        aclmdlRITaskType ty;
        uint32_t seq;
        CHECK(aclmdlRITaskGetType(t[i], &ty));
        CHECK(aclmdlRITaskGetSeqId(t[i], &seq));
        REQUIRE(ty == want[i] && seq == i, "task %u: type %d seq %u", i, ty, seq);
    }
    aclmdlRITask again[8];
    uint32_t n2 = 8;
    CHECK(aclmdlRIGetTasksByStream(ms, again, &n2));
    REQUIRE(memcmp(again, t, 7 * sizeof t[0]) == 0, "a second listing names other tasks");
    EXPECT_RC(aclmdlRITaskGetType(NULL, NULL), ACL_ERROR_RT_PARAM_INVALID);

    /* Parameters. */
    aclmdlRITaskParams p;
    EXPECT_RC(aclmdlRITaskGetParams(t[0], &p), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclmdlRITaskGetParams(t[2], &p));
    REQUIRE(p.type == ACL_MODEL_RI_TASK_EVENT_RECORD && p.eventRecordTaskParams.event == e,
            "the record's params");
    CHECK(aclmdlRITaskGetParams(t[1], &p));
    REQUIRE(p.type == ACL_MODEL_RI_TASK_VALUE_WRITE && p.valueWriteTaskParams.devAddr == &words[0] &&
                p.valueWriteTaskParams.value == 11,
            "the write's params: %p %llu", p.valueWriteTaskParams.devAddr,
            (unsigned long long)p.valueWriteTaskParams.value);
    EXPECT_RC(aclmdlRITaskSetParams(t[2], &p), ACL_ERROR_RT_PARAM_INVALID); /* type mismatch */
    aclmdlRITaskParams ev;
    CHECK(aclmdlRITaskGetParams(t[2], &ev));
    EXPECT_RC(aclmdlRITaskSetParams(t[2], &ev), ACL_ERROR_RT_PARAM_INVALID); /* event task */
    EXPECT_RC(aclmdlRITaskDisable(t[0]), ACL_ERROR_RT_PARAM_INVALID);
    aclmdlRITaskParams bad = p;
    bad.valueWriteTaskParams.devAddr = host;
    EXPECT_RC(aclmdlRITaskSetParams(t[1], &bad), ACL_ERROR_RT_PARAM_INVALID);

    /* 100 executions, each with the first write's value set anew. */
    for (int r = 0; r < 100; r++) {
        p.valueWriteTaskParams.value = 1000 + (uint64_t)r;
        CHECK(aclmdlRITaskSetParams(t[1], &p));
        if (r == 0) {
            /* Not yet updated: the old value. */
            CHECK(aclmdlRIExecuteAsync(m, exec));
            CHECK(aclrtSynchronizeStream(exec));
            REQUIRE(host[0] == 11 && host[1] == 22, "before the update: %llu %llu",
                    (unsigned long long)host[0], (unsigned long long)host[1]);
        }
        CHECK(aclmdlRIUpdate(m));
        CHECK(aclmdlRIExecuteAsync(m, exec));
        CHECK(aclrtSynchronizeStream(exec));
        REQUIRE(host[0] == 1000 + (uint64_t)r && host[1] == 22, "execution %d: %llu %llu", r,
                (unsigned long long)host[0], (unsigned long long)host[1]);
    }
    CHECK(aclmdlRIUpdate(m)); /* nothing changed */
    aclmdlRITaskParams got;
    CHECK(aclmdlRITaskGetParams(t[1], &got));
    REQUIRE(got.valueWriteTaskParams.value == 1099, "params read back %llu",
            (unsigned long long)got.valueWriteTaskParams.value);

    /* Disabling the second write: its word stays as the set left it. */
    CHECK(aclmdlRITaskDisable(t[5]));
    CHECK(aclmdlRIExecute(m, 10000));
    REQUIRE(host[1] == 22, "disabled before the update: %llu", (unsigned long long)host[1]);
    CHECK(aclmdlRIUpdate(m));
    for (int r = 0; r < 5; r++) {
        host[1] = 77;
        CHECK(aclmdlRIExecute(m, 10000));
        REQUIRE(host[0] == 1099 && host[1] == 0, "disabled: %llu %llu", (unsigned long long)host[0],
                (unsigned long long)host[1]);
    }

    /* A built model's tasks are listed, but have no sequence id. */
    aclmdlRI b;
    aclrtStream bs;
    CHECK(aclrtCreateStream(&bs));
    CHECK(aclmdlRIBuildBegin(&b, 0));
    CHECK(aclmdlRIBindStream(b, bs, 0));
    CHECK(aclrtValueWrite(&words[2], 5, 0, bs));
    CHECK(aclmdlRIBuildEnd(b, NULL));
    aclmdlRITask bt;
    uint32_t bn = 1;
    CHECK(aclmdlRIGetTasksByStream(bs, &bt, &bn));
    aclmdlRITaskType bty;
    CHECK(aclmdlRITaskGetType(bt, &bty));
    REQUIRE(bty == ACL_MODEL_RI_TASK_VALUE_WRITE, "built task type %d", bty);
    uint32_t seq;
    EXPECT_RC(aclmdlRITaskGetSeqId(bt, &seq), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK(aclmdlRIDestroy(b));
    EXPECT_RC(aclmdlRITaskGetType(bt, &bty), ACL_ERROR_RT_INVALID_HANDLE);

    CHECK(aclmdlRIDestroy(m));
    EXPECT_RC(aclmdlRITaskGetType(t[1], &bty), ACL_ERROR_RT_INVALID_HANDLE);
    CHECK(aclrtDestroyStream(bs));
    CHECK(aclrtDestroyEvent(e));
    CHECK(aclrtDestroyStream(s1));
    CHECK(aclrtDestroyStream(exec));
    CHECK(aclrtFree(words));
    CHECK(aclrtFreeHost(host));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("model_tasks: ok\n");
    return 0;
}
