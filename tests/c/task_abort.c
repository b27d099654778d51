/* task_abort.c — aclrtDeviceTaskAbort and aclrtSetDeviceTaskAbortCallback, after hicann/runtime
 * (context_manage.cc DeviceTaskAbort, runtime.cc TaskAbortCallBack).
 *
 * Checked: registration codes (NULL name, a name registered twice; a NULL callback
 * unregisters); the callbacks run in name order, all "pre" then all "post", with the device and
 * the time left; the abort drops the queued tasks of every stream of the device — streams held
 * by a notify wait, a host function and an event record queued behind — without running them:
 * a synchronize then succeeds, the event's synchronize fails with 107023, the streams run new
 * tasks; a stream of another device keeps its tasks; a failing callback fails the abort with
 * its code; bad device 107001, timeout above 36 min 107000. On a SoC without it (the argument,
 * e.g. Ascend310P) the abort is 207000.
 *
 * usage: task_abort SOC. Exit 0 and "task_abort: ok". */
#include "common.h"

static char g_log[64][32];
static int g_logged, g_bad_args;
static int g_fail_pre;

static int32_t on_abort(int32_t dev, aclrtDeviceTaskAbortStage stage, uint32_t timeout,
                        void *args) {
    if (dev != 0 || timeout == 0 || timeout > 5000) g_bad_args++;
    if (g_logged < 64)
        snprintf(g_log[g_logged++], 32, "%s-%s", (const char *)args,
                 stage == ACL_RT_DEVICE_TASK_ABORT_PRE ? "pre" : "post");
    if (g_fail_pre && stage == ACL_RT_DEVICE_TASK_ABORT_PRE) return ACL_ERROR_RT_PARAM_INVALID;
    return 0;
}

static volatile int g_ran[8];
static void mark(void *arg) { g_ran[(intptr_t)arg] = 1; }

int main(int argc, char **argv) {
    g_role = "task_abort";
    REQUIRE(argc == 2, "usage: task_abort SOC");
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    if (strcmp(argv[1], "Ascend910B") != 0) {
        EXPECT_RC(aclrtDeviceTaskAbort(0, 1000), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        CHECK(aclFinalize());
        printf("task_abort: ok (%s: 207000)\n", argv[1]);
        return 0;
    }
    EXPECT_RC(aclrtSetDeviceTaskAbortCallback(NULL, on_abort, "x"), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclrtSetDeviceTaskAbortCallback("beta", on_abort, "beta"));
    CHECK(aclrtSetDeviceTaskAbortCallback("alpha", on_abort, "alpha"));
    EXPECT_RC(aclrtSetDeviceTaskAbortCallback("alpha", on_abort, "again"),
              ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclrtSetDeviceTaskAbortCallback("gone", on_abort, "gone"));
    CHECK(aclrtSetDeviceTaskAbortCallback("gone", NULL, NULL));
    EXPECT_RC(aclrtDeviceTaskAbort(99, 1000), ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT_RC(aclrtDeviceTaskAbort(0, 36u * 60u * 1000u + 1u), ACL_ERROR_RT_PARAM_INVALID);
    REQUIRE(g_logged == 0, "a callback ran for a refused abort");

    /* Two streams of device 0 held by notify waits, tasks queued behind; one of device 1. */
    aclrtStream s1 = NULL, s2 = NULL, d1 = NULL;
    aclrtNotify n1 = NULL, n2 = NULL, nd1 = NULL;
    aclrtEvent ev = NULL;
    CHECK(aclrtCreateStream(&s1));
    CHECK(aclrtCreateStream(&s2));
    CHECK(aclrtCreateNotify(&n1, ACL_NOTIFY_DEFAULT));
    CHECK(aclrtCreateNotify(&n2, ACL_NOTIFY_DEFAULT));
    CHECK(aclrtCreateEvent(&ev));
    CHECK(aclrtWaitAndResetNotify(n1, s1, 60));
    CHECK(aclrtLaunchHostFunc(s1, mark, (void *)1));
    CHECK(aclrtRecordEvent(ev, s1));
    CHECK(aclrtWaitAndResetNotify(n2, s2, 60));
    CHECK(aclrtLaunchHostFunc(s2, mark, (void *)2));
    CHECK(aclrtSetDevice(1));
    CHECK(aclrtCreateStream(&d1));
    CHECK(aclrtCreateNotify(&nd1, ACL_NOTIFY_DEFAULT));
    CHECK(aclrtWaitAndResetNotify(nd1, d1, 60));
    CHECK(aclrtLaunchHostFunc(d1, mark, (void *)3));
    CHECK(aclrtSetDevice(0));

    /* A failing "pre" callback: the abort fails with its code, nothing is aborted. */
    g_fail_pre = 1;
    EXPECT_RC(aclrtDeviceTaskAbort(0, 5000), ACL_ERROR_RT_PARAM_INVALID);
    REQUIRE(g_logged == 1 && strcmp(g_log[0], "alpha-pre") == 0,
            "the failing pre callback did not stop the abort (%d calls)", g_logged);
    aclrtStreamStatus st = ACL_STREAM_STATUS_COMPLETE;
    CHECK(aclrtStreamQuery(s1, &st));
    REQUIRE(st == ACL_STREAM_STATUS_NOT_READY, "a failed abort emptied the stream");
    g_logged = 0;
    g_fail_pre = 0;

    CHECK(aclrtDeviceTaskAbort(0, 5000));
    static const char *want[] = {"alpha-pre", "beta-pre", "alpha-post", "beta-post"};
    REQUIRE(g_logged == 4, "%d callback calls, expected 4", g_logged);
    for (int i = 0; i < 4; i++)
        REQUIRE(strcmp(g_log[i], want[i]) == 0, "call %d was %s, expected %s", i, g_log[i],
                want[i]);
    REQUIRE(g_bad_args == 0, "a callback got another device, or no time left");

    /* What the aborted tasks answer. */
    CHECK(aclrtSynchronizeStreamWithTimeout(s1, 5000));
    CHECK(aclrtSynchronizeStreamWithTimeout(s2, 5000));
    REQUIRE(!g_ran[1] && !g_ran[2], "an aborted host function ran");
    EXPECT_RC(aclrtSynchronizeEventWithTimeout(ev, 5000), ACL_ERROR_RT_STREAM_ABORT);
    CHECK(aclrtLaunchHostFunc(s1, mark, (void *)4));
    CHECK(aclrtSynchronizeStreamWithTimeout(s1, 5000));
    REQUIRE(g_ran[4], "a stream did not run a task queued after the abort");

    /* Device 1 kept its tasks. */
    CHECK(aclrtSetDevice(1));
    CHECK(aclrtStreamQuery(d1, &st));
    REQUIRE(st == ACL_STREAM_STATUS_NOT_READY && !g_ran[3],
            "the abort of device 0 touched device 1's stream");
    CHECK(aclrtRecordNotify(nd1, NULL));
    CHECK(aclrtSynchronizeStreamWithTimeout(d1, 20000));
    REQUIRE(g_ran[3], "device 1's host function did not run after its notify");
    CHECK(aclrtSetDevice(0));

    CHECK(aclrtSetDeviceTaskAbortCallback("alpha", NULL, NULL));
    CHECK(aclrtSetDeviceTaskAbortCallback("beta", NULL, NULL));
    g_logged = 0;
    CHECK(aclrtDeviceTaskAbort(0, 0));
    REQUIRE(g_logged == 0, "an unregistered callback ran");
    CHECK(aclFinalize());
    printf("task_abort: ok\n");
    return 0;
}
