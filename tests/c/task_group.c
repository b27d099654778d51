/* task_group.c — task groups of a captured model and their updates through the C ABI
 * (aclmdlRICaptureTaskGrpBegin/End, aclmdlRICaptureTaskUpdateBegin/End): a capture whose
 * middle two tasks (a value write and a set) form a group; before each of 30 executions the
 * group's tasks are replaced on another stream with a new value and a new fill byte, the
 * update queued tasks do not run by themselves (the buffer keeps its bytes until the next
 * execution), and each execution's output is checked against that round's values; the
 * refusals (a group begun twice or ended without a begin: 107033; on a stream not capturing:
 * 107029; an update on a capturing stream: 107027; one begun twice: 107033; too few tasks or
 * one of another type: 507000; a group of a destroyed model: 107017; NULLs: 100000).
 * Exit 0 and "task_group: ok". */
#include "common.h"

enum { N = 256, ROUNDS = 30 };
#define ACL_ERROR_STREAM_TASK_GROUP_STATUS_ 107033
#define ACL_ERROR_RT_INTERNAL_ERROR_ 507000

int main(void) {
    g_role = "task_group";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream cap, upd, exec;
    CHECK(aclrtCreateStream(&cap));
    CHECK(aclrtCreateStream(&upd));
    CHECK(aclrtCreateStream(&exec));
    uint8_t *buf, *out;
    uint64_t *word;
    CHECK(aclrtMalloc((void **)&buf, N, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc((void **)&word, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMallocHost((void **)&out, N));

    /* Refusals outside a capture. */
    aclrtTaskGrp g = NULL;
    EXPECT_RC(aclmdlRICaptureTaskGrpBegin(cap), ACL_ERROR_RT_STREAM_NOT_CAPTURED);
    EXPECT_RC(aclmdlRICaptureTaskGrpEnd(cap, &g), ACL_ERROR_RT_STREAM_NOT_CAPTURED);
    EXPECT_RC(aclmdlRICaptureTaskGrpBegin(NULL), ACL_ERROR_INVALID_PARAM);

    /* The capture: set buf to 1, [value write 5, set buf to 2], copy buf out. */
    aclmdlRI m = NULL;
    CHECK(aclmdlRICaptureBegin(cap, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    CHECK(aclrtMemsetAsync(buf, N, 1, N, cap));
    EXPECT_RC(aclmdlRICaptureTaskGrpEnd(cap, &g), ACL_ERROR_STREAM_TASK_GROUP_STATUS_);
    CHECK(aclmdlRICaptureTaskGrpBegin(cap));
    EXPECT_RC(aclmdlRICaptureTaskGrpBegin(cap), ACL_ERROR_STREAM_TASK_GROUP_STATUS_);
    expect_msg("nest", NULL);
    CHECK(aclrtValueWrite(word, 5, 0, cap));
    CHECK(aclrtMemsetAsync(buf, N, 2, N, cap));
    EXPECT_RC(aclmdlRICaptureTaskGrpEnd(cap, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK(aclmdlRICaptureTaskGrpEnd(cap, &g));
    REQUIRE(g != NULL, "no group");
    CHECK(aclrtMemcpyAsync(out, N, buf, N, ACL_MEMCPY_DEVICE_TO_HOST, cap));
    EXPECT_RC(aclmdlRICaptureTaskUpdateBegin(cap, g), ACL_ERROR_RT_STREAM_CAPTURED);
    CHECK(aclmdlRICaptureEnd(cap, &m));

    CHECK(aclmdlRIExecute(m, 10000));
    for (int i = 0; i < N; i++) REQUIRE(out[i] == 2, "first execution: out[%d] = %u", i, out[i]);

    for (int r = 0; r < ROUNDS; r++) {
        const uint8_t fill = (uint8_t)(0x30 + r);
        CHECK(aclmdlRICaptureTaskUpdateBegin(upd, g));
        EXPECT_RC(aclmdlRICaptureTaskUpdateBegin(upd, g), ACL_ERROR_STREAM_TASK_GROUP_STATUS_);
        CHECK(aclrtValueWrite(word, 1000 + (uint64_t)r, 0, upd));
        CHECK(aclrtMemsetAsync(buf, N, fill, N, upd));
        CHECK(aclmdlRICaptureTaskUpdateEnd(upd));
        CHECK(aclrtSynchronizeStream(upd));
        /* The update's tasks did not run by themselves. */
        uint8_t now[N];
        CHECK(aclrtMemcpy(now, N, buf, N, ACL_MEMCPY_DEVICE_TO_HOST));
        const uint8_t before = r == 0 ? 2 : (uint8_t)(fill - 1);
        for (int i = 0; i < N; i++) {
            REQUIRE(now[i] == before, "round %d: buf[%d] = %u before the execution", r, i, now[i]);
        }
        memset(out, 0, N);
        CHECK(aclmdlRIExecuteAsync(m, exec));
        CHECK(aclrtSynchronizeStream(exec));
        uint64_t w = 0;
        CHECK(aclrtMemcpy(&w, 8, word, 8, ACL_MEMCPY_DEVICE_TO_HOST));
        REQUIRE(w == 1000 + (uint64_t)r, "round %d: the word is %llu", r, (unsigned long long)w);
        for (int i = 0; i < N; i++) {
            REQUIRE(out[i] == fill, "round %d: out[%d] = %u, expected %u", r, i, out[i], fill);
        }
    }

    /* Updates that do not match the group. */
    CHECK(aclmdlRICaptureTaskUpdateBegin(upd, g));
    CHECK(aclrtValueWrite(word, 1, 0, upd));
    EXPECT_RC(aclmdlRICaptureTaskUpdateEnd(upd), ACL_ERROR_RT_INTERNAL_ERROR_);
    expect_msg("holds 2 tasks", NULL);
    CHECK(aclmdlRICaptureTaskUpdateBegin(upd, g));
    CHECK(aclrtMemsetAsync(buf, N, 9, N, upd));
    CHECK(aclrtValueWrite(word, 1, 0, upd));
    EXPECT_RC(aclmdlRICaptureTaskUpdateEnd(upd), ACL_ERROR_RT_INTERNAL_ERROR_);
    expect_msg("types must match", NULL);
    EXPECT_RC(aclmdlRICaptureTaskUpdateEnd(upd), ACL_ERROR_STREAM_TASK_GROUP_STATUS_);
    EXPECT_RC(aclmdlRICaptureTaskUpdateBegin(upd, NULL), ACL_ERROR_INVALID_PARAM);
    /* The stream runs its own tasks again. */
    CHECK(aclrtMemsetAsync(buf, N, 7, N, upd));
    CHECK(aclrtSynchronizeStream(upd));
    uint8_t now[N];
    CHECK(aclrtMemcpy(now, N, buf, N, ACL_MEMCPY_DEVICE_TO_HOST));
    REQUIRE(now[0] == 7 && now[N - 1] == 7, "the stream's own set did not run: %u", now[0]);

    CHECK(aclmdlRIDestroy(m));
    EXPECT_RC(aclmdlRICaptureTaskUpdateBegin(upd, g), ACL_ERROR_RT_INVALID_HANDLE);

    CHECK(aclrtFree(buf));
    CHECK(aclrtFree(word));
    CHECK(aclrtFreeHost(out));
    CHECK(aclrtDestroyStream(cap));
    CHECK(aclrtDestroyStream(upd));
    CHECK(aclrtDestroyStream(exec));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("task_group: ok\n");
    return 0;
}
