/* ipc_importer.c — process B of CANN's two-process notify sample (SPEC §7), written only
 * against acl/acl.h: on device 3 it sends its PID to A (in "whitelist" mode), imports the
 * notify from A's key, writes the data A's stream will read, waits until A reports its stream
 * blocked, then records the notify on its own stream.
 *
 * usage: ipc_importer <exchange dir> <whitelist|open> [device=3] [peer=2]
 * The exchange directory must be empty at the start (see ipc_owner.c).
 * Timeline events go to stdout (see common.h). Exit 0 on success. */
#include "common.h"

int main(int argc, char **argv) {
    g_role = "importer";
    if (argc < 3 || (strcmp(argv[2], "whitelist") != 0 && strcmp(argv[2], "open") != 0)) {
        fprintf(stderr, "usage: %s <exchange dir> <whitelist|open> [device] [peer]\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    int whitelist = strcmp(argv[2], "whitelist") == 0;
    int32_t dev = argc > 3 ? atoi(argv[3]) : 3;
    int32_t peer = argc > 4 ? atoi(argv[4]) : 2;

    require_fresh(dir, "pid");
    require_fresh(dir, "data");
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

    if (whitelist) {
        int32_t pid = 0;
        CHECK(aclrtDeviceGetBareTgid(&pid));
        REQUIRE(pid == (int32_t)getpid(), "bare tgid %d differs from getpid %d", (int)pid,
                (int)getpid());
        char buf[32];
        int n = snprintf(buf, sizeof buf, "%d", (int)pid);
        put_file(dir, "pid", buf, (size_t)n);
        EVENT(dev, "sent-pid", "pid=%d", (int)pid);
    }

    char key[128];
    get_file(dir, "key", key, sizeof key, 10000);
    aclrtNotify notify = NULL;
    CHECK(aclrtNotifyImportByKey(&notify, key, ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT));
    uint32_t id = 0;
    CHECK(aclrtGetNotifyId(notify, &id));
    EVENT(dev, "imported", "id=%u", id);

    put_file(dir, "data", "123", 3);

    char buf[8];
    get_file(dir, "waiting", buf, sizeof buf, 10000);
    EVENT(dev, "recorded", "id=%u", id);
    CHECK(aclrtRecordNotify(notify, stream));
    CHECK(aclrtSynchronizeStreamWithTimeout(stream, 10000));

    CHECK(aclrtDestroyNotify(notify));
    CHECK(aclrtDestroyStreamForce(stream));
    CHECK(aclrtResetDeviceForce(dev));
    CHECK(aclFinalize());
    EVENT(dev, "finished", NULL);
    return 0;
}
