/* exception_info.c — a failed task's exception record (aclrtSetExceptionInfoCallback and the
 * aclrtGet...FromExceptionInfo getters) and aclrtGetThreadLastTaskId, after hicann/runtime
 * src/acl/aclrt_impl/callback.cpp, kernel.cpp and task_manager.cc (TaskFailCallBack).
 *
 * Checked: NULL answers (getters 0xFFFFFFFF, aclrtGetThreadLastTaskId 100000) and the last task
 * id before any task (0xFFFFFFFF); the last task id counts the thread's tasks on a stream; a
 * notify wait that times out calls the callback once, before the synchronize returns, with the
 * task's id, the stream's id (aclrtStreamGetId's), this thread's id, the device and the code
 * the synchronize returns (107020); the args getter answers 0xFFFFFFFF and the function-handle
 * getter 107000 for such a (non-kernel) task; the same on the default stream of device 1; tasks
 * that succeed call nothing; a NULL callback removes it. The callback runs off the stream's
 * thread (CANN's reporting thread): one that synchronizes the failed stream gets the stream's
 * answer (0 or 107020) instead of 507000 or a hang.
 *
 * usage: exception_info SOC. Exit 0 and "exception_info: ok". */
#include "common.h"

/* aclrtSetExceptionInfoCallback is deprecated in CANN's header, as in ours; it is still checked here. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <stdatomic.h>
#include <sys/syscall.h>

static atomic_int g_calls;
static uint32_t g_task, g_stream, g_thread, g_device, g_code;
static aclError g_args_rc, g_func_rc;

static void on_exception(aclrtExceptionInfo *info) {
    g_task = aclrtGetTaskIdFromExceptionInfo(info);
    g_stream = aclrtGetStreamIdFromExceptionInfo(info);
    g_thread = aclrtGetThreadIdFromExceptionInfo(info);
    g_device = aclrtGetDeviceIdFromExceptionInfo(info);
    g_code = aclrtGetErrorCodeFromExceptionInfo(info);
    void *args = (void *)1;
    uint32_t len = 7;
    g_args_rc = aclrtGetArgsFromExceptionInfo(info, &args, &len);
    aclrtFuncHandle f = (aclrtFuncHandle)1;
    g_func_rc = aclrtGetFuncHandleFromExceptionInfo(info, &f);
    atomic_fetch_add(&g_calls, 1);
}

/* The callback that synchronizes the failed stream. */
static aclrtStream g_sync_stream;
static aclrtContext g_sync_ctx;
static atomic_int g_sync_rc = -1;

static void on_exception_sync(aclrtExceptionInfo *info) {
    (void)info;
    aclError rc = aclrtSetCurrentContext(g_sync_ctx); /* the reporting thread has none */
    if (rc == ACL_SUCCESS)
        rc = aclrtSynchronizeStream(g_sync_stream);
    atomic_store(&g_sync_rc, (int)rc);
}

/* Queues a wait of 1 s that times out on `s` (task id `want_task`), synchronizes, and checks the
 * record the callback got. */
static void expect_timeout(aclrtStream s, aclrtNotify n, uint32_t want_task, int32_t device) {
    int before = atomic_load(&g_calls);
    CHECK(aclrtWaitAndResetNotify(n, s, 1));
    uint32_t last = 0;
    CHECK(aclrtGetThreadLastTaskId(&last));
    REQUIRE(last == want_task, "last task id %u, expected %u", last, want_task);
    aclError rc = aclrtSynchronizeStream(s);
    REQUIRE(rc == ACL_ERROR_RT_TASK_TIMEOUT, "synchronize returned %d", (int)rc);
    REQUIRE(atomic_load(&g_calls) == before + 1, "the callback ran %d times",
            atomic_load(&g_calls) - before);
    int32_t sid = -1;
    CHECK(aclrtStreamGetId(s, &sid));
    REQUIRE(g_task == want_task, "task id %u, expected %u", g_task, want_task);
    REQUIRE(g_stream == (uint32_t)sid, "stream id %u, expected %d", g_stream, sid);
    REQUIRE(g_thread == (uint32_t)syscall(SYS_gettid), "thread id %u, expected %ld", g_thread,
            (long)syscall(SYS_gettid));
    REQUIRE(g_device == (uint32_t)device, "device %u", g_device);
    REQUIRE(g_code == (uint32_t)rc, "code %u, the synchronize's %d", g_code, (int)rc);
    REQUIRE(g_args_rc == (aclError)0xFFFFFFFF, "args getter %d", (int)g_args_rc);
    REQUIRE(g_func_rc == ACL_ERROR_RT_PARAM_INVALID, "func getter %d", (int)g_func_rc);
}

int main(int argc, char **argv) {
    g_role = "exception_info";
    REQUIRE(argc == 2, "usage: exception_info SOC");
    REQUIRE(aclrtGetTaskIdFromExceptionInfo(NULL) == 0xFFFFFFFFu, "task id of NULL");
    REQUIRE(aclrtGetStreamIdFromExceptionInfo(NULL) == 0xFFFFFFFFu, "stream id of NULL");
    REQUIRE(aclrtGetThreadIdFromExceptionInfo(NULL) == 0xFFFFFFFFu, "thread id of NULL");
    REQUIRE(aclrtGetDeviceIdFromExceptionInfo(NULL) == 0xFFFFFFFFu, "device id of NULL");
    REQUIRE(aclrtGetErrorCodeFromExceptionInfo(NULL) == 0xFFFFFFFFu, "code of NULL");
    expect_msg("aclrtGetErrorCodeFromExceptionInfo", "NULL", NULL);
    void *args = NULL;
    uint32_t len = 0;
    EXPECT_RC(aclrtGetArgsFromExceptionInfo(NULL, &args, &len), (aclError)0xFFFFFFFF);
    EXPECT_RC(aclrtGetThreadLastTaskId(NULL), ACL_ERROR_INVALID_PARAM);
    uint32_t last = 0;
    CHECK(aclrtGetThreadLastTaskId(&last));
    REQUIRE(last == 0xFFFFFFFFu, "last task id before any task: %u", last);

    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtSetExceptionInfoCallback(on_exception));
    aclrtStream s = NULL;
    aclrtNotify n = NULL;
    CHECK(aclrtCreateStream(&s));
    CHECK(aclrtCreateNotify(&n, ACL_NOTIFY_DEFAULT));
    CHECK(aclrtRecordNotify(n, s));
    CHECK(aclrtGetThreadLastTaskId(&last));
    REQUIRE(last == 0, "last task id after the stream's first task: %u", last);
    CHECK(aclrtWaitAndResetNotify(n, s, 0));
    CHECK(aclrtSynchronizeStream(s));
    REQUIRE(atomic_load(&g_calls) == 0, "tasks that succeeded called the callback");
    expect_timeout(s, n, 2, 0);

    /* The default stream of device 1. */
    CHECK(aclrtSetDevice(1));
    aclrtNotify n1 = NULL;
    CHECK(aclrtCreateNotify(&n1, ACL_NOTIFY_DEFAULT));
    expect_timeout(NULL, n1, 0, 1);
    CHECK(aclrtDestroyNotify(n1));
    CHECK(aclrtSetDevice(0));

    /* Removed: a failure calls nothing. */
    CHECK(aclrtSetExceptionInfoCallback(NULL));
    int before = atomic_load(&g_calls);
    CHECK(aclrtWaitAndResetNotify(n, s, 1));
    EXPECT_RC(aclrtSynchronizeStream(s), ACL_ERROR_RT_TASK_TIMEOUT);
    REQUIRE(atomic_load(&g_calls) == before, "a removed callback ran");

    /* A callback that synchronizes the failed stream returns (bounded: 60 s). */
    g_sync_stream = s;
    CHECK(aclrtGetCurrentContext(&g_sync_ctx));
    CHECK(aclrtSetExceptionInfoCallback(on_exception_sync));
    CHECK(aclrtWaitAndResetNotify(n, s, 1));
    aclError main_rc = aclrtSynchronizeStream(s);
    for (int i = 0; i < 6000 && atomic_load(&g_sync_rc) == -1; i++)
        usleep(10000);
    int cb_rc = atomic_load(&g_sync_rc);
    REQUIRE(cb_rc == 0 || cb_rc == ACL_ERROR_RT_TASK_TIMEOUT,
            "the callback's synchronize of the failed stream returned %d", cb_rc);
    /* The failure is reported once: to one of the two synchronizes. */
    REQUIRE((cb_rc == 0) != (main_rc == 0), "synchronize %d in the callback, %d outside", cb_rc,
            (int)main_rc);
    CHECK(aclrtSetExceptionInfoCallback(NULL));

    CHECK(aclrtDestroyNotify(n));
    CHECK(aclrtDestroyStream(s));
    CHECK(aclrtResetDevice(1));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("exception_info: ok (%s)\n", argv[1]);
    return 0;
}
