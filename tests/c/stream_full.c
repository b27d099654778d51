/* stream_full.c — a stream whose head waits for ever on a notify that this thread records only
 * later: queuing past the stream's capacity must fail with ACL_ERROR_RT_STREAM_TASK_FULL after
 * ACL_NOTIFY_SIM_ENQUEUE_TIMEOUT seconds (run with it set to 1) instead of hanging, say why in
 * aclGetRecentErrMsg(), and lose nothing queued before. Exit 0 when every check holds. */
#include "common.h"

int main(void) {
    g_role = "stream_full";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream s = NULL, other = NULL;
    CHECK(aclrtCreateStream(&s));
    CHECK(aclrtCreateStream(&other));
    aclrtNotify gate = NULL, tick = NULL;
    CHECK(aclrtCreateNotify(&gate, 0));
    CHECK(aclrtCreateNotify(&tick, 0));
    CHECK(aclrtWaitAndResetNotify(gate, s, 0)); /* timeout 0: for ever */

    /* Queue record+wait rounds on `tick` behind the gate until the stream refuses one. */
    long queued = 0;
    int left_set = 0; /* a round whose wait was refused leaves its record set */
    aclError refused = ACL_SUCCESS;
    int64_t took_ms = 0;
    while (refused == ACL_SUCCESS) {
        REQUIRE(queued < 4096, "the queue never filled (%ld tasks queued)", queued);
        int64_t t0 = now_ns();
        refused = aclrtRecordNotify(tick, s);
        if (refused == ACL_SUCCESS) {
            queued++;
            refused = aclrtWaitAndResetNotify(tick, s, 0);
            if (refused == ACL_SUCCESS) {
                queued++;
            } else {
                left_set = 1;
            }
        }
        took_ms = (now_ns() - t0) / 1000000;
    }
    /* Reading the message clears it: keep a copy. */
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", recent_msg());
    REQUIRE(refused == ACL_ERROR_RT_STREAM_TASK_FULL, "refused with %d, expected %d: %s",
            (int)refused, ACL_ERROR_RT_STREAM_TASK_FULL, msg);
    REQUIRE(strstr(msg, "stayed full") && strstr(msg, "ACL_NOTIFY_SIM_ENQUEUE_TIMEOUT"),
            "the message does not explain: %s", msg);
    /* A job whose rank died ends sooner in stop-on-failure mode: the message says so. */
    REQUIRE(strstr(msg, "ACL_STOP_ON_FAILURE"), "the message does not suggest "
            "ACL_STOP_ON_FAILURE: %s", msg);
    uint32_t gate_id = 0;
    CHECK(aclrtGetNotifyId(gate, &gate_id));
    char head[128];
    snprintf(head, sizeof head, "a wait on notify id %u of device 0 with no timeout", gate_id);
    REQUIRE(strstr(msg, head), "the message does not name the head task (%s): %s", head, msg);
    REQUIRE(took_ms >= 900 && took_ms < 30000, "refused after %lld ms, expected about 1000",
            (long long)took_ms);
    REQUIRE(queued >= 1024, "refused after only %ld tasks", queued);

    /* Unblock the head: everything queued before runs (a lost record would leave a wait
     * stuck, so the synchronize is bounded), and the stream goes on. */
    CHECK(aclrtRecordNotify(gate, other));
    CHECK(aclrtSynchronizeStreamWithTimeout(s, 10000));
    CHECK(aclrtSynchronizeStream(other));
    if (!left_set) {
        CHECK(aclrtRecordNotify(tick, other));
        CHECK(aclrtSynchronizeStream(other));
    }
    CHECK(aclrtWaitAndResetNotify(tick, s, 5));
    CHECK(aclrtSynchronizeStreamWithTimeout(s, 10000));
    CHECK(aclrtDestroyNotify(tick));
    CHECK(aclrtDestroyNotify(gate));
    CHECK(aclrtDestroyStream(s));
    CHECK(aclrtDestroyStream(other));
    CHECK(aclFinalize());
    printf("stream_full: ok after %ld tasks, refused after %lld ms\n", queued, (long long)took_ms);
    return 0;
}
