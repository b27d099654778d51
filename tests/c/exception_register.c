/* exception_register.c — aclrtExceptionInfoCallbackRegister / Unregister beside
 * aclrtSetExceptionInfoCallback, after hicann/runtime src/acl/aclrt_impl/callback.cpp (one
 * registration per callback address, NULL is 107000) and task_fail_callback_data_manager.cc
 * (every registered callback is told of each failure; unregistering an unknown one succeeds).
 *
 * Checked: NULL is 107000 for both; a notify wait that times out calls the set callback and
 * each registered one exactly once with the failed task's code (a callback registered twice:
 * once); an unregistered callback is not called while the others still are; unregistering a
 * callback that is not registered succeeds; after all are removed a failure calls nothing.
 *
 * usage: exception_register SOC. Exit 0 and "exception_register: ok". */
#include "common.h"

/* aclrtSetExceptionInfoCallback is deprecated in CANN's header, as in ours; it is still checked here. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <stdatomic.h>

static atomic_int g_set, g_a, g_b;
static atomic_uint g_code_a;

static void on_set(aclrtExceptionInfo *info) {
    (void)info;
    atomic_fetch_add(&g_set, 1);
}

static void on_a(aclrtExceptionInfo *info) {
    atomic_store(&g_code_a, aclrtGetErrorCodeFromExceptionInfo(info));
    atomic_fetch_add(&g_a, 1);
}

static void on_b(aclrtExceptionInfo *info) {
    (void)info;
    atomic_fetch_add(&g_b, 1);
}

/* A wait of 1 s that times out on `s`; each counter must have grown by the given amount. */
static void fail_once(aclrtStream s, aclrtNotify n, int set, int a, int b) {
    int s0 = atomic_load(&g_set), a0 = atomic_load(&g_a), b0 = atomic_load(&g_b);
    CHECK(aclrtWaitAndResetNotify(n, s, 1));
    EXPECT_RC(aclrtSynchronizeStream(s), ACL_ERROR_RT_TASK_TIMEOUT);
    REQUIRE(atomic_load(&g_set) - s0 == set, "set callback ran %d times, expected %d",
            atomic_load(&g_set) - s0, set);
    REQUIRE(atomic_load(&g_a) - a0 == a, "callback a ran %d times, expected %d",
            atomic_load(&g_a) - a0, a);
    REQUIRE(atomic_load(&g_b) - b0 == b, "callback b ran %d times, expected %d",
            atomic_load(&g_b) - b0, b);
}

int main(int argc, char **argv) {
    g_role = "exception_register";
    REQUIRE(argc == 2, "usage: exception_register SOC");
    (void)argv;
    EXPECT_RC(aclrtExceptionInfoCallbackRegister(NULL), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("aclrtExceptionInfoCallbackRegister", "callback", NULL);
    EXPECT_RC(aclrtExceptionInfoCallbackUnregister(NULL), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream s = NULL;
    aclrtNotify n = NULL;
    CHECK(aclrtCreateStream(&s));
    CHECK(aclrtCreateNotify(&n, ACL_NOTIFY_DEFAULT));

    CHECK(aclrtSetExceptionInfoCallback(on_set));
    CHECK(aclrtExceptionInfoCallbackRegister(on_a));
    CHECK(aclrtExceptionInfoCallbackRegister(on_a));
    CHECK(aclrtExceptionInfoCallbackRegister(on_b));
    fail_once(s, n, 1, 1, 1);
    REQUIRE(atomic_load(&g_code_a) == (unsigned)ACL_ERROR_RT_TASK_TIMEOUT, "a got code %u",
            atomic_load(&g_code_a));

    CHECK(aclrtExceptionInfoCallbackUnregister(on_a));
    fail_once(s, n, 1, 0, 1);
    CHECK(aclrtExceptionInfoCallbackUnregister(on_a));
    CHECK(aclrtSetExceptionInfoCallback(NULL));
    fail_once(s, n, 0, 0, 1);
    CHECK(aclrtExceptionInfoCallbackUnregister(on_b));
    fail_once(s, n, 0, 0, 0);

    CHECK(aclrtDestroyNotify(n));
    CHECK(aclrtDestroyStream(s));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("exception_register: ok\n");
    return 0;
}
