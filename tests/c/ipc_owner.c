/* ipc_owner.c — process A of CANN's two-process notify sample (SPEC §7), written only against
 * acl/acl.h: on device 2 it creates a notify, exports its key, whitelists process B's PID
 * (unless run in "open" mode, which exports with DISABLE_PID_VALIDATION), hands the key over,
 * and enqueues a wait followed by a host function that reads the data B wrote.
 *
 * It proves the wait blocks: after enqueueing, the stream must report NOT_READY and a 50 ms
 * synchronize must time out; only then does it tell B to record. The host function stamps the
 * time the stream got past the wait ("released"); the test checks that this is later than B's
 * "recorded" stamp and that the data B wrote before recording is visible.
 *
 * usage: ipc_owner <exchange dir> <whitelist|open> [device=2] [peer=3]
 * Files in <exchange dir>: pid (B → A), key (A → B), waiting (A → B), data (B → A); each run
 * needs an empty directory (a file of an earlier run there is refused).
 * Timeline events go to stdout (see common.h). Exit 0 on success. */
#include "common.h"

struct released {
    int64_t t;
    int data;
    const char *dir;
};

/* Runs on the stream after the wait: when B's record has released it. */
static void on_released(void *arg) {
    struct released *r = (struct released *)arg;
    r->t = now_ns();
    char path[4096];
    snprintf(path, sizeof path, "%s/data", r->dir);
    FILE *f = fopen(path, "rb");
    if (f) {
        if (fscanf(f, "%d", &r->data) != 1) {
            r->data = -2;
        }
        fclose(f);
    }
}

int main(int argc, char **argv) {
    g_role = "owner";
    if (argc < 3 || (strcmp(argv[2], "whitelist") != 0 && strcmp(argv[2], "open") != 0)) {
        fprintf(stderr, "usage: %s <exchange dir> <whitelist|open> [device] [peer]\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    int whitelist = strcmp(argv[2], "whitelist") == 0;
    int32_t dev = argc > 3 ? atoi(argv[3]) : 2;
    int32_t peer = argc > 4 ? atoi(argv[4]) : 3;

    require_fresh(dir, "key");
    require_fresh(dir, "waiting");
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(dev));
    aclrtStream stream = NULL;
    CHECK(aclrtCreateStream(&stream));
    EVENT(dev, "started", "soc=%s", aclrtGetSocName());

    int32_t can = 0;
    CHECK(aclrtDeviceCanAccessPeer(&can, dev, peer));
    if (can == 1) {
        CHECK(aclrtDeviceEnablePeerAccess(peer, 0));
    }

    aclrtNotify notify = NULL;
    CHECK(aclrtCreateNotify(&notify, ACL_NOTIFY_DEFAULT));
    uint32_t id = 0;
    CHECK(aclrtGetNotifyId(notify, &id));
    EVENT(dev, "created", "id=%u", id);

    char key[65] = {0};
    uint64_t flags = whitelist ? ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT
                               : ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION;
    CHECK(aclrtNotifyGetExportKey(notify, key, sizeof key, flags));
    REQUIRE(strlen(key) > 0 && strlen(key) <= 64, "key has length %zu", strlen(key));
    EVENT(dev, "exported", "%s", whitelist ? "pid validation on" : "pid validation off");

    if (whitelist) {
        char buf[64];
        get_file(dir, "pid", buf, sizeof buf, 10000);
        int32_t pid = atoi(buf);
        REQUIRE(pid > 0, "bad pid file content '%s'", buf);
        CHECK(aclrtNotifySetImportPid(notify, &pid, 1));
        EVENT(dev, "whitelisted", "pid=%d", (int)pid);
    }
    put_file(dir, "key", key, strlen(key));

    /* Wait forever (timeout 0) as the sample does; the synchronize below is bounded. */
    CHECK(aclrtWaitAndResetNotify(notify, stream, 0));
    struct released rel = {0, -1, dir};
    CHECK(aclrtLaunchHostFunc(stream, on_released, &rel));
    EVENT(dev, "waiting", "id=%u", id);

    /* The stream must be stuck on the wait: nobody has recorded yet (B waits for our file). */
    aclrtStreamStatus st = ACL_STREAM_STATUS_COMPLETE;
    CHECK(aclrtStreamQuery(stream, &st));
    REQUIRE(st == ACL_STREAM_STATUS_NOT_READY, "stream completed before any record (status %d)",
            (int)st);
    aclError r = aclrtSynchronizeStreamWithTimeout(stream, 50);
    REQUIRE(r == ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
            "a 50 ms synchronize before the record returned %d, expected 507046: %s", (int)r,
            recent_msg());
    REQUIRE(rel.t == 0, "the host function after the wait ran before any record");
    EVENT(dev, "blocked", "query NOT_READY, 50 ms sync timed out");
    put_file(dir, "waiting", "1", 1);

    CHECK(aclrtSynchronizeStreamWithTimeout(stream, 20000));
    REQUIRE(rel.t != 0, "synchronize returned but the host function did not run");
    event_at(rel.t, dev, "released", "data=%d", rel.data);
    REQUIRE(rel.data == 123, "the host function after the wait read %d, expected the 123 B wrote "
            "before recording", rel.data);

    CHECK(aclrtDestroyNotify(notify));
    CHECK(aclrtDestroyStreamForce(stream));
    CHECK(aclrtResetDeviceForce(dev));
    CHECK(aclFinalize());
    EVENT(dev, "finished", NULL);
    return 0;
}
