/* persistent_clean.c — aclrtPersistentTaskClean through the C ABI, with CANN's checks in its
 * order (hicann/runtime src/runtime/api/api_c_standard_soc.cc rtsPersistentTaskClean;
 * api_error_standard_soc.cc ApiErrorDecorator::StreamTaskClean; stream.cc / stream_david.cc
 * Stream::StreamTaskClean).
 *
 * Checked, on a chip that cleans tasks (Ascend910B, Ascend910_93, Ascend950PR/DT):
 * - a model built on two persistent streams, each copying its own input to its own output
 *   (host → device → host): an execution copies both; after aclrtPersistentTaskClean of the
 *   first stream, executions with new input copy only the second stream's (the first's output
 *   stays as it was set), every time; a second clean of the same stream succeeds; the model's
 *   JSON print (aclmdlRIDebugJsonPrint) lists none of the cleaned stream's tasks, and the
 *   other stream's two;
 * - NULL 107000; a stream made without ACL_STREAM_PERSISTENT, a persistent stream bound to no
 *   model, a stream bound to a model still being built: 507000, each with its message.
 * On any other chip: 207000 naming the chip, after the NULL check.
 *
 * usage: persistent_clean SOC. Exit 0 and "persistent_clean: ok". */
#include "common.h"

enum { N = 64, RUNS = 5 };
#define FLAG_HEAD 0x00000000U

/* Destroys the four streams, resets the device, finalizes; the success line. */
static int finish(aclrtStream *streams) {
    for (int i = 0; i < 4; i++) CHECK(aclrtDestroyStream(streams[i]));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("persistent_clean: ok\n");
    return 0;
}

/* Requires aclmdlRIDebugJsonPrint of `m` to show `want` tasks of stream `s`. */
static void json_has_tasks(aclmdlRI m, aclrtStream s, int want) {
    static char json[65536];
    read_json_print(m, "persistent_clean.json", json, sizeof json);
    char key[64];
    snprintf(key, sizeof key, "\"stream\":\"%#lx\"", (unsigned long)(uintptr_t)s);
    int n = 0;
    for (const char *at = strstr(json, key); at; at = strstr(at + 1, key)) n++;
    REQUIRE(n == want, "stream %p: %d tasks in the print, expected %d: %s", s, n, want, json);
}

int main(int argc, char **argv) {
    g_role = "persistent_clean";
    const char *soc = argc > 1 ? argv[1] : "Ascend910B";
    const int cleans = strcmp(soc, "Ascend910B") == 0 || strcmp(soc, "Ascend910_93") == 0 ||
                       strcmp(soc, "Ascend950PR") == 0 || strcmp(soc, "Ascend950DT") == 0;
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream s1, s2, plain, lone;
    CHECK(aclrtCreateStreamWithConfig(&s1, 0, ACL_STREAM_PERSISTENT));
    CHECK(aclrtCreateStreamWithConfig(&s2, 0, ACL_STREAM_PERSISTENT));
    CHECK(aclrtCreateStreamWithConfig(&lone, 0, ACL_STREAM_PERSISTENT));
    CHECK(aclrtCreateStream(&plain));
    aclrtStream streams[4] = {s1, s2, lone, plain};

    EXPECT_RC(aclrtPersistentTaskClean(NULL), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("default stream", NULL);
    if (!cleans) {
        EXPECT_RC(aclrtPersistentTaskClean(lone), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        expect_msg(soc, "does not clean", NULL);
        return finish(streams);
    }
    EXPECT_RC(aclrtPersistentTaskClean(plain), ACL_ERROR_RT_INTERNAL_ERROR);
    expect_msg("not persistent", "ACL_STREAM_PERSISTENT", NULL);
    EXPECT_RC(aclrtPersistentTaskClean(lone), ACL_ERROR_RT_INTERNAL_ERROR);
    expect_msg("bound to no model", NULL);

    const size_t bytes = N * sizeof(int32_t);
    int32_t *in1, *in2, *out1, *out2;
    CHECK(aclrtMallocHost((void **)&in1, bytes));
    CHECK(aclrtMallocHost((void **)&in2, bytes));
    CHECK(aclrtMallocHost((void **)&out1, bytes));
    CHECK(aclrtMallocHost((void **)&out2, bytes));
    void *a, *b;
    CHECK(aclrtMalloc(&a, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&b, bytes, ACL_MEM_MALLOC_HUGE_FIRST));

    aclmdlRI m = NULL;
    CHECK(aclmdlRIBuildBegin(&m, 0));
    CHECK(aclmdlRIBindStream(m, s1, FLAG_HEAD));
    CHECK(aclmdlRIBindStream(m, s2, FLAG_HEAD));
    CHECK(aclrtMemcpyAsync(a, bytes, in1, bytes, ACL_MEMCPY_HOST_TO_DEVICE, s1));
    CHECK(aclrtMemcpyAsync(out1, bytes, a, bytes, ACL_MEMCPY_DEVICE_TO_HOST, s1));
    CHECK(aclrtMemcpyAsync(b, bytes, in2, bytes, ACL_MEMCPY_HOST_TO_DEVICE, s2));
    CHECK(aclrtMemcpyAsync(out2, bytes, b, bytes, ACL_MEMCPY_DEVICE_TO_HOST, s2));
    CHECK(aclmdlRIEndTask(m, s1));
    CHECK(aclmdlRIEndTask(m, s2));
    /* The model's build has not ended. */
    EXPECT_RC(aclrtPersistentTaskClean(s1), ACL_ERROR_RT_INTERNAL_ERROR);
    expect_msg("build has not ended", "aclmdlRIBuildEnd", NULL);
    CHECK(aclmdlRIBuildEnd(m, NULL));

    /* Before the clean an execution runs both streams' copies. */
    for (int i = 0; i < N; i++) {
        in1[i] = 1000 + i;
        in2[i] = 2000 + i;
        out1[i] = out2[i] = -1;
    }
    CHECK(aclmdlRIExecute(m, 10000));
    for (int i = 0; i < N; i++) {
        REQUIRE(out1[i] == 1000 + i && out2[i] == 2000 + i, "before the clean: out1[%d] = %d, out2[%d] = %d",
                i, out1[i], i, out2[i]);
    }

    CHECK(aclrtPersistentTaskClean(s1));
    for (int r = 0; r < RUNS; r++) {
        for (int i = 0; i < N; i++) {
            in1[i] = r * 7919 + i;
            in2[i] = r * 104729 + i;
            out1[i] = out2[i] = -7;
        }
        CHECK(aclmdlRIExecute(m, 10000));
        for (int i = 0; i < N; i++) {
            REQUIRE(out1[i] == -7, "execution %d after the clean: the cleaned stream's copy ran "
                    "(out1[%d] = %d)", r, i, out1[i]);
            REQUIRE(out2[i] == r * 104729 + i, "execution %d after the clean: out2[%d] = %d", r, i,
                    out2[i]);
        }
        if (r == 1) CHECK(aclrtPersistentTaskClean(s1));
    }
    /* The cleaned stream has no tasks left (CANN's clean recycles them, and its model print
     * lists each stream's remaining ones): the JSON print shows the second stream's two
     * copies and none of the first's. */
    json_has_tasks(m, s1, 0);
    json_has_tasks(m, s2, 2);

    CHECK(aclmdlRIDestroy(m));
    CHECK(aclrtFree(a));
    CHECK(aclrtFree(b));
    CHECK(aclrtFreeHost(in1));
    CHECK(aclrtFreeHost(in2));
    CHECK(aclrtFreeHost(out1));
    CHECK(aclrtFreeHost(out2));
    return finish(streams);
}
