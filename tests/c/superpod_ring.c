/* superpod_ring.c — one rank of a ring of notifies across the servers of a SuperPod, written
 * only against acl/acl.h. Rank r creates a notify on its device, exports it with PID
 * validation, whitelists rank r-1 (aclrtNotifySetImportPid when r-1 is on its server,
 * aclrtNotifySetImportPidInterServer with r-1's (SuperPod device id, PID) when it is on
 * another server), imports
 * rank r+1's notify, then passes a token ROUNDS times: wait on its own notify, record r+1's
 * (rank 0 records first), all queued on one stream.
 *
 * The token carries data: each rank also exports a buffer of device memory (MSG bytes) to
 * rank r-1 the same way (aclrtIpcMemSetImportPid / aclrtIpcMemImportPidInterServer) and
 * imports rank r+1's. Before each record a rank copies the message it holds into rank r+1's
 * buffer (aclrtMemcpyAsync, device to device, on the same stream, so the copy is ordered
 * before the record); rank 0 puts a fresh message of each round in, and after the round
 * comes back checks that its own buffer holds it. On the simulator in cluster mode
 * (ACL_NOTIFY_SIM_CLUSTER) the ranks of different servers run as different hosts: their
 * records and copies cross through etcd. `cargo xtask demo --hosts 2` runs 2 hosts x 4 ranks.
 *
 * usage: superpod_ring <exchange dir> <rank> <ranks> <rounds>
 * Files in <exchange dir>: key.<r> ("<server> <sdid> <pid> <notify key> <memory key>", by
 * rank r; sdid: its device's ACL_DEV_ATTR_SUPER_POD_DEVICE_ID)
 * and ready.<r> (rank r has whitelisted r-1). Prints "RING <rank> <rounds> <total ns>", rank 0
 * "RING DATA OK <rounds> messages", and timeline events. Exit 0 on success. */
#include "common.h"

/* Bytes of each round's message. */
#define MSG 4096

/* Byte i of round `round`'s message. */
static unsigned char msg_byte(int round, size_t i) {
    return (unsigned char)((size_t)round * 131u + i * 7u + (i >> 8));
}

int main(int argc, char **argv) {
    g_role = "rank";
    if (argc < 5) {
        fprintf(stderr, "usage: %s <exchange dir> <rank> <ranks> <rounds>\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    int rank = atoi(argv[2]), ranks = atoi(argv[3]), rounds = atoi(argv[4]);
    REQUIRE(ranks >= 2 && rank >= 0 && rank < ranks && rounds > 0, "bad arguments");
    int prev = (rank + ranks - 1) % ranks, next = (rank + 1) % ranks;
    int32_t dev = rank % 4;

    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(dev));
    aclrtStream stream = NULL;
    CHECK(aclrtCreateStream(&stream));
    int64_t server = 0, sdid = 0;
    CHECK(aclrtGetDeviceInfo((uint32_t)dev, ACL_DEV_ATTR_SUPER_POD_SERVER_ID, &server));
    CHECK(aclrtGetDeviceInfo((uint32_t)dev, ACL_DEV_ATTR_SUPER_POD_DEVICE_ID, &sdid));
    int32_t pid = 0;
    CHECK(aclrtDeviceGetBareTgid(&pid));

    aclrtNotify own = NULL;
    CHECK(aclrtCreateNotify(&own, ACL_NOTIFY_DEFAULT));
    char key[65] = {0};
    CHECK(aclrtNotifyGetExportKey(own, key, sizeof key, ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT));
    /* The buffer rank r-1 writes each round's message into. */
    void *inbox = NULL;
    CHECK(aclrtMalloc(&inbox, MSG, ACL_MEM_MALLOC_HUGE_FIRST));
    char mkey[65] = {0};
    CHECK(aclrtIpcMemGetExportKey(inbox, MSG, mkey, sizeof mkey, ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT));
    char line[256], name[32];
    int len = snprintf(line, sizeof line, "%lld %lld %d %s %s", (long long)server,
                       (long long)sdid, (int)pid, key, mkey);
    snprintf(name, sizeof name, "key.%d", rank);
    put_file(dir, name, line, (size_t)len);
    EVENT(dev, "exported", "server=%lld", (long long)server);

    /* Whitelist the predecessor, on this server or another. */
    char buf[256];
    snprintf(name, sizeof name, "key.%d", prev);
    get_file(dir, name, buf, sizeof buf, 20000);
    long long pserver = 0, psdid = 0;
    int ppid = 0;
    REQUIRE(sscanf(buf, "%lld %lld %d", &pserver, &psdid, &ppid) == 3, "bad key file '%s'",
            buf);
    if (pserver == server) {
        int32_t p = ppid;
        CHECK(aclrtNotifySetImportPid(own, &p, 1));
        CHECK(aclrtIpcMemSetImportPid(mkey, &p, 1));
    } else {
        int32_t p = ppid;
        /* The entry names r-1's device by its sdid, not its server (CANN's aclrtServerPid,
         * docs/zh/api_ref/25-04_Structs.md). */
        aclrtServerPid sp = {(uint32_t)psdid, &p, 1};
        CHECK(aclrtNotifySetImportPidInterServer(own, &sp, 1));
        CHECK(aclrtIpcMemImportPidInterServer(mkey, &sp, 1));
    }
    snprintf(name, sizeof name, "ready.%d", rank);
    put_file(dir, name, "1", 1);
    EVENT(dev, "whitelisted", "rank=%d server=%lld", prev, pserver);

    /* Import the successor's notify once it has whitelisted this rank. */
    snprintf(name, sizeof name, "key.%d", next);
    get_file(dir, name, buf, sizeof buf, 20000);
    long long nserver = 0, nsdid = 0;
    int npid = 0;
    char nkey[65] = {0}, nmkey[65] = {0};
    REQUIRE(sscanf(buf, "%lld %lld %d %64s %64s", &nserver, &nsdid, &npid, nkey, nmkey) == 5,
            "bad key file '%s'", buf);
    snprintf(name, sizeof name, "ready.%d", next);
    get_file(dir, name, buf, sizeof buf, 20000);
    aclrtNotify succ = NULL;
    CHECK(aclrtNotifyImportByKey(&succ, nkey, ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS));
    void *succ_inbox = NULL;
    CHECK(aclrtIpcMemImportByKey(&succ_inbox, nmkey, ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS));
    EVENT(dev, "imported", "rank=%d server=%lld", next, nserver);

    /* Rank 0: every round's message, put on the device before the ring starts, and where
     * each comes back. */
    size_t all = (size_t)rounds * MSG;
    unsigned char *host = NULL;
    void *sent = NULL, *back = NULL;
    if (rank == 0) {
        CHECK(aclrtMallocHost((void **)&host, all));
        for (int i = 0; i < rounds; i++)
            for (size_t b = 0; b < MSG; b++) host[(size_t)i * MSG + b] = msg_byte(i, b);
        CHECK(aclrtMalloc(&sent, all, ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK(aclrtMalloc(&back, all, ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK(aclrtMemcpy(sent, all, host, all, ACL_MEMCPY_HOST_TO_DEVICE));
    }

    int64_t t0 = now_ns();
    for (int i = 0; i < rounds; i++) {
        if (rank == 0) {
            CHECK(aclrtMemcpyAsync(succ_inbox, MSG, (char *)sent + (size_t)i * MSG, MSG,
                                   ACL_MEMCPY_DEVICE_TO_DEVICE, stream));
            CHECK(aclrtRecordNotify(succ, stream));
            CHECK(aclrtWaitAndResetNotify(own, stream, 20));
            CHECK(aclrtMemcpyAsync((char *)back + (size_t)i * MSG, MSG, inbox, MSG,
                                   ACL_MEMCPY_DEVICE_TO_DEVICE, stream));
        } else {
            CHECK(aclrtWaitAndResetNotify(own, stream, 20));
            CHECK(aclrtMemcpyAsync(succ_inbox, MSG, inbox, MSG, ACL_MEMCPY_DEVICE_TO_DEVICE,
                                   stream));
            CHECK(aclrtRecordNotify(succ, stream));
        }
    }
    CHECK(aclrtSynchronizeStream(stream));
    int64_t total = now_ns() - t0;
    EVENT(dev, "done", "rounds=%d", rounds);
    printf("RING %d %d %lld\n", rank, rounds, (long long)total);
    if (rank == 0) {
        memset(host, 0, all);
        CHECK(aclrtMemcpy(host, all, back, all, ACL_MEMCPY_DEVICE_TO_HOST));
        for (int i = 0; i < rounds; i++)
            for (size_t b = 0; b < MSG; b++)
                REQUIRE(host[(size_t)i * MSG + b] == msg_byte(i, b),
                        "round %d: byte %zu came back as %u, sent %u", i, b,
                        host[(size_t)i * MSG + b], msg_byte(i, b));
        printf("RING DATA OK %d messages\n", rounds);
        CHECK(aclrtFree(sent));
        CHECK(aclrtFree(back));
        CHECK(aclrtFreeHost(host));
    }
    fflush(stdout);

    CHECK(aclrtIpcMemClose(nmkey));
    CHECK(aclrtDestroyNotify(succ));
    CHECK(aclrtDestroyNotify(own));
    CHECK(aclrtIpcMemClose(mkey));
    CHECK(aclrtFree(inbox));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtResetDevice(dev));
    CHECK(aclFinalize());
    return 0;
}
