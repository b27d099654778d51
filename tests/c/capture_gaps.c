/* capture_gaps.c — the edges of stream capture (aclmdlRI*) through the C ABI:
 * - a captured copy, set or value write with a bad range fails at the capturing call, as the
 *   uncaptured call would (CANN checks a task's arguments before it captures it), and the
 *   capture goes on: its end gives a model whose replays run;
 * - aclmdlRISetName keeps the caller's bytes (not UTF-8 here), aclmdlRIGetName gives them back;
 * - aclmdlRICaptureThreadExchangeMode needs a current context (before aclInit: refused);
 * - a device reset while a stream captures ends that capture with the device: the model
 *   handle is dead (ACL_ERROR_RT_INVALID_HANDLE, not "still capturing"), its destroy
 *   callbacks ran, a ready model of the device goes too, and the thread's capture mode no
 *   longer counts the dropped capture (a synchronous copy during a later relaxed capture is
 *   allowed);
 * - a copy with pageable memory on another stream during a global capture: 107041 (CANN makes
 *   it as a synchronous copy, which the mode forbids), allowed once the thread is relaxed.
 * Exit 0 and "capture_gaps: ok". */
#include "common.h"

enum { N = 64 };

static int g_destroyed;
static void on_destroy(void *arg) { __atomic_add_fetch((int *)arg, 1, __ATOMIC_ACQ_REL); }

int main(void) {
    g_role = "capture_gaps";
    aclmdlRICaptureMode mode = ACL_MODEL_RI_CAPTURE_MODE_RELAXED;
    REQUIRE(aclmdlRICaptureThreadExchangeMode(&mode) != ACL_SUCCESS,
            "exchanging the capture mode without a context succeeded");
    REQUIRE(mode == ACL_MODEL_RI_CAPTURE_MODE_RELAXED, "mode written although refused: %d", mode);
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream s1, s2;
    CHECK(aclrtCreateStream(&s1));
    CHECK(aclrtCreateStream(&s2));
    const size_t bytes = N * sizeof(int32_t);
    int32_t *host;
    CHECK(aclrtMallocHost((void **)&host, bytes));
    void *a, *b;
    CHECK(aclrtMalloc(&a, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&b, bytes, ACL_MEM_MALLOC_HUGE_FIRST));

    /* Bad ranges at capture. */
    aclmdlRI m = NULL;
    aclmdlRICaptureStatus st;
    CHECK(aclmdlRICaptureBegin(s1, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    EXPECT_RC(aclrtMemcpyAsync((char *)a + 8, bytes, b, bytes, ACL_MEMCPY_DEVICE_TO_DEVICE, s1),
              ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("allocation", NULL);
    /* A kind CANN's runtime refuses by the addresses (device memory called host beside
     * pageable memory; between known places it would correct it: tests/c/copy_kinds.c). */
    static int32_t pageable[N];
    EXPECT_RC(aclrtMemcpyAsync(a, bytes, pageable, bytes, ACL_MEMCPY_DEVICE_TO_HOST, s1),
              ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("pageable", NULL);
    EXPECT_RC(aclrtMemsetAsync((char *)a + 4, bytes, 0, bytes, s1), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtValueWrite((char *)a + 4, 1, 0, s1), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclmdlRICaptureGetInfo(s1, &st, &m));
    REQUIRE(st == ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE, "a refused argument invalidated: %d", st);
    /* What is captured: host → a, a → b, b → host. */
    CHECK(aclrtMemcpyAsync(a, bytes, host, bytes, ACL_MEMCPY_HOST_TO_DEVICE, s1));
    CHECK(aclrtMemcpyAsync(b, bytes, a, bytes, ACL_MEMCPY_DEVICE_TO_DEVICE, s1));
    CHECK(aclrtMemsetAsync(a, bytes, 0, bytes, s1));
    CHECK(aclrtMemcpyAsync(host, bytes, b, bytes, ACL_MEMCPY_DEVICE_TO_HOST, s1));
    CHECK(aclmdlRICaptureEnd(s1, &m));
    for (int r = 0; r < 10; r++) {
        for (int i = 0; i < N; i++) host[i] = r * 1000 + i;
        CHECK(aclmdlRIExecuteAsync(m, s2));
        CHECK(aclrtSynchronizeStream(s2));
        for (int i = 0; i < N; i++) {
            REQUIRE(host[i] == r * 1000 + i, "replay %d: host[%d] = %d", r, i, host[i]);
        }
    }

    /* A copy with pageable memory on another stream while s1 captures in the global mode:
     * CANN's runtime synchronizes that stream and makes the copy with its synchronous copy,
     * whose capture-mode check refuses it: ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC (107041,
     * hicann/runtime api_error.cc MemcpyAsync / MemCopy2DAsync). With page-locked memory the
     * copy is queued; once this thread exchanged its mode for relaxed, the pageable copy is
     * made. */
    static int32_t pg[N];
    for (int i = 0; i < N; i++) pg[i] = 7000 + i;
    CHECK(aclrtMemset(b, bytes, 0, bytes));
    aclmdlRI g = NULL;
    CHECK(aclmdlRICaptureBegin(s1, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    CHECK(aclrtMemsetAsync(a, bytes, 0, bytes, s1));
    EXPECT_RC(aclrtMemcpyAsync(b, bytes, pg, bytes, ACL_MEMCPY_HOST_TO_DEVICE, s2),
              ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC);
    expect_msg("pageable", "synchronous", NULL);
    EXPECT_RC(aclrtMemcpyAsync(pg, bytes, b, bytes, ACL_MEMCPY_DEFAULT, s2),
              ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC);
    EXPECT_RC(aclrtMemcpy2dAsync(b, bytes, pg, bytes, bytes, 1, ACL_MEMCPY_HOST_TO_DEVICE, s2),
              ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC);
    for (int i = 0; i < N; i++) REQUIRE(pg[i] == 7000 + i, "a refused copy wrote pg[%d]", i);
    CHECK(aclrtMemcpyAsync(b, bytes, host, bytes, ACL_MEMCPY_HOST_TO_DEVICE, s2));
    mode = ACL_MODEL_RI_CAPTURE_MODE_RELAXED;
    CHECK(aclmdlRICaptureThreadExchangeMode(&mode));
    CHECK(aclrtMemcpyAsync(b, bytes, pg, bytes, ACL_MEMCPY_HOST_TO_DEVICE, s2));
    CHECK(aclmdlRICaptureThreadExchangeMode(&mode));
    CHECK(aclmdlRICaptureEnd(s1, &g));
    CHECK(aclmdlRIDestroy(g));
    int32_t back[N];
    CHECK(aclrtMemcpy(back, bytes, b, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
    for (int i = 0; i < N; i++) REQUIRE(back[i] == 7000 + i, "b[%d] = %d after the relaxed copy", i, back[i]);

    /* The name's bytes. */
    const char name[] = "\xff\xfe model \x80";
    CHECK(aclmdlRISetName(m, name));
    char got[32];
    CHECK(aclmdlRIGetName(m, sizeof got, got));
    REQUIRE(memcmp(got, name, sizeof name) == 0, "the name came back as \"%s\"", got);
    EXPECT_RC(aclmdlRIGetName(m, sizeof name - 1, got), ACL_ERROR_RT_PARAM_INVALID);

    /* A device reset while capturing: the thread-local capture is dropped with the device,
     * and so is the ready model m. */
    mode = ACL_MODEL_RI_CAPTURE_MODE_GLOBAL;
    CHECK(aclmdlRICaptureThreadExchangeMode(&mode));
    CHECK(aclmdlRIDestroyRegisterCallback(m, on_destroy, &g_destroyed));
    aclmdlRI capturing = NULL;
    CHECK(aclmdlRICaptureBegin(s1, ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL));
    CHECK(aclmdlRICaptureGetInfo(s1, &st, &capturing));
    CHECK(aclrtMemcpyAsync(a, bytes, host, bytes, ACL_MEMCPY_HOST_TO_DEVICE, s1));
    CHECK(aclmdlRIDestroyRegisterCallback(capturing, on_destroy, &g_destroyed));
    EXPECT_RC(aclrtMemcpy(b, bytes, a, bytes, ACL_MEMCPY_DEVICE_TO_DEVICE),
              ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT);
    CHECK(aclrtResetDevice(0));
    REQUIRE(__atomic_load_n(&g_destroyed, __ATOMIC_ACQUIRE) == 2,
            "%d destroy callbacks ran at the reset, 2 expected", g_destroyed);
    CHECK(aclrtSetDevice(0));
    EXPECT_RC(aclmdlRIDestroy(capturing), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT_RC(aclmdlRIDestroy(m), ACL_ERROR_RT_INVALID_HANDLE);
    /* A relaxed capture now: this thread began no other, so its copies are allowed. */
    aclrtStream s3;
    CHECK(aclrtCreateStream(&s3));
    CHECK(aclmdlRICaptureBegin(s3, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    CHECK(aclrtMemcpy(b, bytes, a, bytes, ACL_MEMCPY_DEVICE_TO_DEVICE));
    CHECK(aclrtMemcpyAsync(host, bytes, a, bytes, ACL_MEMCPY_DEVICE_TO_HOST, s3));
    CHECK(aclmdlRICaptureEnd(s3, &m));
    CHECK(aclmdlRIExecute(m, 10000));
    CHECK(aclmdlRIDestroy(m));
    REQUIRE(__atomic_load_n(&g_destroyed, __ATOMIC_ACQUIRE) == 2, "a callback ran twice");

    CHECK(aclrtDestroyStream(s3));
    CHECK(aclrtFree(a));
    CHECK(aclrtFree(b));
    CHECK(aclrtFreeHost(host));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("capture_gaps: ok\n");
    return 0;
}
