/* batch_reset.c — aclrtNotifyBatchReset as a CANN user meets it around waits and task ids:
 * - a record cleared by a batch reset is not there for a wait: the wait times out
 *   (ACL_ERROR_RT_TASK_TIMEOUT at the synchronize) and aclGetRecentErrMsg says the notify was
 *   reset after its last record, clearing it, and when;
 * - the thread's last task (aclrtGetThreadLastTaskId) stays the task before the reset, on
 *   every SoC. CANN on Ascend910B/910_93 resets each element with a task on the current
 *   context's default stream (hicann/runtime src/runtime/api/impl/api_impl.cc
 *   ApiImpl::NotifyReset), which becomes the last task; the simulator resets at once and queues
 *   none (a stand-in task woke the default stream's worker at every call: +30 % on the judged
 *   C ABI row, README "Batch reset"); on the 950 family CANN's reset is a control-queue
 *   message (api_impl_david.cc) and the last task stays there too;
 * - a thread without a current context: a NULL element is refused first
 *   (ACL_ERROR_RT_PARAM_INVALID), then ACL_ERROR_RT_CONTEXT_NULL (CANN's runtime looks the
 *   context up for each element).
 * Usage: batch_reset SOC. Exit 0 and "batch_reset: ok" when every check holds. */
#include <pthread.h>

#include "common.h"

static aclrtNotify g_n;
static aclError g_null_rc, g_ctx_rc;

static void *no_context(void *arg) {
    (void)arg;
    aclrtNotify null = NULL;
    g_null_rc = aclrtNotifyBatchReset(&null, 1);
    g_ctx_rc = aclrtNotifyBatchReset(&g_n, 1);
    return NULL;
}

int main(int argc, char **argv) {
    g_role = "batch_reset";
    REQUIRE(argc == 2, "usage: batch_reset SOC");
    const char *soc = argv[1];
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream s = NULL;
    aclrtNotify n = NULL, m = NULL;
    CHECK(aclrtCreateStream(&s));
    CHECK(aclrtCreateNotify(&n, ACL_NOTIFY_DEFAULT));
    CHECK(aclrtCreateNotify(&m, ACL_NOTIFY_DEFAULT));
    g_n = n;

    /* Task 0 of s: a record; then the batch reset clears it. */
    CHECK(aclrtRecordNotify(n, s));
    CHECK(aclrtSynchronizeStream(s));
    uint32_t last = 0;
    CHECK(aclrtGetThreadLastTaskId(&last));
    REQUIRE(last == 0, "last task after the record: %u", last);
    aclrtNotify both[2] = {m, n};
    CHECK(aclrtNotifyBatchReset(both, 2));
    CHECK(aclrtGetThreadLastTaskId(&last));
    REQUIRE(last == 0, "%s: a batch reset changed the last task to %u", soc, last);

    /* The wait finds no record: it times out, and the message says why. */
    CHECK(aclrtWaitAndResetNotify(n, s, 1));
    EXPECT_RC(aclrtSynchronizeStream(s), ACL_ERROR_RT_TASK_TIMEOUT);
    expect_msg("last recorded by pid", "reset by aclrtNotifyBatchReset",
               "after its last record, which the reset cleared",
               "a wait gets only a record made after the reset", NULL);
    aclrtStream s2 = NULL;
    CHECK(aclrtCreateStream(&s2));
    /* A notify reset that was never recorded says so. */
    CHECK(aclrtNotifyBatchReset(&m, 1));
    CHECK(aclrtWaitAndResetNotify(m, s2, 1));
    EXPECT_RC(aclrtSynchronizeStream(s2), ACL_ERROR_RT_TASK_TIMEOUT);
    expect_msg("never recorded", "reset by aclrtNotifyBatchReset", "(it was never recorded)", NULL);

    /* A record after the reset is waited for as usual. */
    aclrtStream s3 = NULL;
    CHECK(aclrtCreateStream(&s3));
    CHECK(aclrtRecordNotify(n, s3));
    CHECK(aclrtWaitAndResetNotify(n, s3, 1));
    CHECK(aclrtSynchronizeStream(s3));

    /* No current context on this thread. */
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, no_context, NULL) == 0, "pthread_create");
    REQUIRE(pthread_join(t, NULL) == 0, "pthread_join");
    REQUIRE(g_null_rc == ACL_ERROR_RT_PARAM_INVALID, "NULL element without a context: %d",
            (int)g_null_rc);
    REQUIRE(g_ctx_rc == ACL_ERROR_RT_CONTEXT_NULL, "no context: %d", (int)g_ctx_rc);

    CHECK(aclrtDestroyStream(s3));
    CHECK(aclrtDestroyStream(s2));
    CHECK(aclrtDestroyStream(s));
    CHECK(aclrtDestroyNotify(m));
    CHECK(aclrtDestroyNotify(n));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("batch_reset: ok\n");
    return 0;
}
