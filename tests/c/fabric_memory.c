/* fabric_memory.c — physical memory shared across the servers of a SuperPod by a FABRIC
 * handle (aclrtMemExportToShareableHandleV2 / aclrtMemSetPidToShareableHandleV2 /
 * aclrtMemImportFromShareableHandleV2 with ACL_MEM_SHARE_HANDLE_TYPE_FABRIC), written only
 * against acl/acl.h. Two processes, each on its own server (on the simulator in cluster
 * mode: two hosts, one etcd):
 *
 *  - the owner allocates physical memory (aclrtMallocPhysical, ACL_HBM_MEM_NORMAL), maps it,
 *    fills it with round 0's pattern, exports a FABRIC handle with PID validation, and an IPC
 *    notify for the importer's SuperPod device id (sdid) and PID
 *    (aclrtNotifySetImportPidInterServer);
 *  - the importer first tries to import before it is whitelisted (207006), then, once the
 *    owner whitelisted its PID (aclrtMemSetPidToShareableHandleV2), imports, reserves and maps
 *    the memory, checks round 0's pattern (a device-to-device copy out of the mapping), then
 *    for each round r = 1..rounds writes round r's pattern into the mapping
 *    (aclrtMemcpyAsync) and records the owner's notify on the same stream; the owner waits
 *    on the notify, reads its memory and checks it holds round r's pattern exactly — a write
 *    lost, applied twice (an old round's bytes after a newer's) or not yet in place when the
 *    wait returns fails it — and acknowledges by a file (ack.r) before the next round. Then a
 *    set (aclrtMemsetAsync + record), checked the same way.
 *
 * end= what happens after the rounds: "clean" (both unmap and free), "free" (the owner unmaps
 * and frees its memory while the importer still holds it mapped: CANN frees shared physical
 * memory once every sharer has freed it, so the owner's device memory stays taken — its free
 * bytes (aclrtGetMemInfo) unchanged — and the importer writes and reads back a new pattern
 * through its mapping; once the importer has unmapped and freed its handle, the owner's free
 * bytes grow by the granule within 30 s), "ikill" (as "free", but the importer SIGKILLs
 * itself still holding the mapping: the owner's memory is released once the importer's 2 s
 * lease has expired, within 30 s), "kill" (the owner SIGKILLs itself: the bytes lived in its
 * process, so the importer's copies fail with 107000 or 507022 within bounded time, no hang).
 * retry=1: the importer writes a round again whose copy failed with 507022 (etcd unreachable
 * past the client's bound, ACL_NOTIFY_SIM_CLUSTER_TIMEOUT); its stream stops on failure, so
 * the record after a failed copy is not sent.
 * save=<dir>: the importer keeps the handle in <dir>/prev.handle; stale=<dir>: the importer
 * first imports the handle an earlier job saved there (107000: it names no live export).
 *
 * usage: fabric_memory <exchange dir> owner|importer rounds=N [end=clean|free|ikill|kill]
 *        [retry=1] [save=<dir>] [stale=<dir>]
 * Prints "FABRIC <role> OK <rounds>" and what each end saw. Exit 0 on success. */
#include "common.h"

#include <signal.h>

/* Bytes the rounds write (the mapping is one granule, 2 MiB). */
#define SPAN (256 * 1024)

static unsigned char pattern(int round, size_t i) {
    return (unsigned char)((size_t)round * 37u + i * 13u + (i >> 9));
}

static const char *arg(int argc, char **argv, const char *name, const char *dflt) {
    size_t n = strlen(name);
    for (int i = 3; i < argc; i++)
        if (strncmp(argv[i], name, n) == 0 && argv[i][n] == '=') return argv[i] + n + 1;
    return dflt;
}

static void *reserve_and_map(aclrtDrvMemHandle h, size_t size) {
    void *va = NULL;
    CHECK(aclrtReserveMemAddress(&va, size, 0, NULL, 0));
    CHECK(aclrtMapMem(va, size, 0, h, 0));
    aclrtMemAccessDesc d;
    memset(&d, 0, sizeof d);
    d.flags = ACL_RT_MEM_ACCESS_FLAGS_READWRITE;
    d.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    d.location.id = 0;
    CHECK(aclrtMemSetAccess(va, size, &d, 1));
    return va;
}

static void fill(unsigned char *host, int round) {
    for (size_t i = 0; i < SPAN; i++) host[i] = pattern(round, i);
}

static void check_round(const unsigned char *host, int round) {
    for (size_t i = 0; i < SPAN; i++)
        REQUIRE(host[i] == pattern(round, i),
                "round %d: byte %zu is %u, expected %u (round %d's would be %u)", round, i,
                host[i], pattern(round, i), round - 1, pattern(round - 1, i));
}

static int owner(const char *dir, int rounds, const char *end) {
    g_role = "owner";
    aclrtStream stream = NULL;
    CHECK(aclrtCreateStream(&stream));
    aclrtPhysicalMemProp prop = device_prop(ACL_HBM_MEM_NORMAL);
    size_t g = 0;
    CHECK(aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g));
    aclrtDrvMemHandle h = NULL;
    CHECK(aclrtMallocPhysical(&h, g, &prop, 0));
    void *va = reserve_and_map(h, g);
    unsigned char *host = NULL;
    CHECK(aclrtMallocHost((void **)&host, SPAN));
    fill(host, 0);
    CHECK(aclrtMemcpy(va, SPAN, host, SPAN, ACL_MEMCPY_HOST_TO_DEVICE));

    aclrtMemFabricHandle fh;
    memset(&fh, 0, sizeof fh);
    CHECK(aclrtMemExportToShareableHandleV2(h, ACL_RT_VMM_EXPORT_FLAG_DEFAULT,
                                            ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, &fh));
    put_file(dir, "handle", &fh, sizeof fh);

    /* The importer's SuperPod device id and PID, then its refused import. */
    char buf[256];
    get_file(dir, "importer", buf, sizeof buf, 30000);
    long long isdid = 0;
    int ipid = 0;
    REQUIRE(sscanf(buf, "%lld %d", &isdid, &ipid) == 2, "bad importer file '%s'", buf);
    get_file(dir, "refused", buf, sizeof buf, 30000);
    int32_t p = ipid;
    CHECK(aclrtMemSetPidToShareableHandleV2(&fh, ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, &p, 1));

    aclrtNotify n = NULL;
    CHECK(aclrtCreateNotify(&n, ACL_NOTIFY_DEFAULT));
    char key[65] = {0};
    CHECK(aclrtNotifyGetExportKey(n, key, sizeof key, ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT));
    /* The entry names the importer's device by its sdid, not its server (CANN's
     * aclrtServerPid, docs/zh/api_ref/25-04_Structs.md). */
    aclrtServerPid sp = {(uint32_t)isdid, &p, 1};
    CHECK(aclrtNotifySetImportPidInterServer(n, &sp, 1));
    put_file(dir, "whitelisted", key, strlen(key));

    char name[32];
    for (int r = 1; r <= rounds + 1; r++) {
        CHECK(aclrtWaitAndResetNotify(n, stream, 30));
        CHECK(aclrtSynchronizeStream(stream));
        memset(host, 0, SPAN);
        CHECK(aclrtMemcpy(host, SPAN, va, SPAN, ACL_MEMCPY_DEVICE_TO_HOST));
        if (r <= rounds) {
            check_round(host, r);
        } else {
            for (size_t i = 0; i < SPAN; i++)
                REQUIRE(host[i] == 0x5a, "the importer's set: byte %zu is %u", i, host[i]);
        }
        snprintf(name, sizeof name, "ack.%d", r);
        put_file(dir, name, "1", 1);
    }
    printf("FABRIC owner OK %d rounds checked\n", rounds);
    fflush(stdout);

    if (strcmp(end, "kill") == 0) {
        put_file(dir, "dying", "1", 1);
        kill(getpid(), SIGKILL);
    }
    if (strcmp(end, "free") == 0 || strcmp(end, "ikill") == 0) {
        /* Freed while the importer still maps it: kept (its bytes still taken) until the
         * importer lets go — by closing it, or by dying (its lease expires). */
        size_t free0 = 0, free1 = 0, total = 0;
        CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &free0, &total));
        CHECK(aclrtUnmapMem(va));
        CHECK(aclrtFreePhysical(h));
        CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &free1, &total));
        REQUIRE(free1 == free0, "the owner's free released memory the importer holds (%zu -> %zu)",
                free0, free1);
        put_file(dir, "freed", "1", 1);
        if (strcmp(end, "free") == 0) get_file(dir, "closed", buf, sizeof buf, 60000);
        int64_t t0 = now_ns();
        while (free1 < free0 + g && now_ns() - t0 < 30000000000LL) {
            sleep_ms(50);
            CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &free1, &total));
        }
        REQUIRE(free1 == free0 + g, "the kept memory was not released once the importer let go "
                "(%zu free bytes, %zu before the free, granule %zu)", free1, free0, g);
        printf("FABRIC kept memory released %.1f s after the importer let go\n",
               (double)(now_ns() - t0) / 1e9);
        CHECK(aclrtReleaseMemAddress(va));
    } else {
        get_file(dir, "closed", buf, sizeof buf, 60000);
        CHECK(aclrtUnmapMem(va));
        CHECK(aclrtReleaseMemAddress(va));
        CHECK(aclrtFreePhysical(h));
    }
    CHECK(aclrtDestroyNotify(n));
    CHECK(aclrtFreeHost(host));
    CHECK(aclrtDestroyStream(stream));
    return 0;
}


/* A new context on the current device (the one `*ctx` names, if any, destroyed first, with its
 * streams) and a stream `*s` of it that stops on failure. */
static void stop_mode_context(aclrtContext *ctx, aclrtStream *s) {
    int32_t dev = 0;
    CHECK(aclrtGetDevice(&dev));
    if (*ctx) CHECK(aclrtDestroyContext(*ctx));
    CHECK(aclrtCreateContext(ctx, dev));
    CHECK(aclrtCreateStream(s));
    CHECK(aclrtSetStreamFailureMode(*s, ACL_STOP_ON_FAILURE));
}

static int importer(const char *dir, int rounds, const char *end, const char *save,
                    const char *stale, int retry) {
    g_role = "importer";
    aclrtStream stream = NULL;
    CHECK(aclrtCreateStream(&stream));
    int64_t sdid = 0; /* what the owner, on another server, whitelists with this PID */
    CHECK(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_SUPER_POD_DEVICE_ID, &sdid));
    int32_t pid = 0;
    CHECK(aclrtDeviceGetBareTgid(&pid));
    char buf[256];
    aclrtDrvMemHandle h = NULL;
    if (stale) {
        /* An earlier job's handle names memory that job freed. */
        aclrtMemFabricHandle old;
        size_t got = get_file(stale, "prev.handle", buf, sizeof buf, 1000);
        REQUIRE(got == sizeof old, "%s/prev.handle holds %zu bytes", stale, got);
        memcpy(&old, buf, sizeof old);
        EXPECT_RC(aclrtMemImportFromShareableHandleV2(&old, ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, 0,
                                                      &h),
                  ACL_ERROR_RT_PARAM_INVALID);
        printf("FABRIC stale handle refused: %s\n", recent_msg());
    }
    int len = snprintf(buf, sizeof buf, "%lld %d", (long long)sdid, (int)pid);
    put_file(dir, "importer", buf, (size_t)len);

    aclrtMemFabricHandle fh;
    size_t got = get_file(dir, "handle", buf, sizeof buf, 30000);
    REQUIRE(got == sizeof fh, "handle file holds %zu bytes", got);
    memcpy(&fh, buf, sizeof fh);
    if (save) put_file(save, "prev.handle", &fh, sizeof fh);
    /* Not whitelisted yet. */
    EXPECT_RC(aclrtMemImportFromShareableHandleV2(&fh, ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, 0, &h),
              ACL_ERROR_RT_NO_PERMISSION);
    printf("FABRIC import before the whitelist refused: %s\n", recent_msg());
    put_file(dir, "refused", "1", 1);

    char key[80] = {0};
    get_file(dir, "whitelisted", key, sizeof key, 30000);
    CHECK(aclrtMemImportFromShareableHandleV2(&fh, ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, 0, &h));
    aclrtNotify n = NULL;
    CHECK(aclrtNotifyImportByKey(&n, key, ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS));
    aclrtPhysicalMemProp prop;
    memset(&prop, 0, sizeof prop);
    CHECK(aclrtMemGetAllocationPropertiesFromHandle(h, &prop));
    aclrtPhysicalMemProp want = device_prop(ACL_HBM_MEM_NORMAL);
    size_t g = 0;
    CHECK(aclrtMemGetAllocationGranularity(&want, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g));
    void *va = reserve_and_map(h, g);

    unsigned char *host = NULL;
    void *local = NULL;
    CHECK(aclrtMallocHost((void **)&host, SPAN));
    CHECK(aclrtMalloc(&local, SPAN, ACL_MEM_MALLOC_HUGE_FIRST));
    /* Round 0: the owner's bytes, read through the mapping. */
    CHECK(aclrtMemcpy(local, SPAN, va, SPAN, ACL_MEMCPY_DEVICE_TO_DEVICE));
    CHECK(aclrtMemcpy(host, SPAN, local, SPAN, ACL_MEMCPY_DEVICE_TO_HOST));
    check_round(host, 0);

    /* A copy that fails must not let its record through (CANN's default failure mode runs
     * the tasks after a failed one): stop on failure, on a stream of a context of its own. A
     * failure there fails that context for good, as CANN's: a retried round starts anew in
     * a new one. */
    aclrtContext home, rounds_ctx = NULL;
    aclrtStream rs = NULL;
    CHECK(aclrtGetCurrentContext(&home));
    stop_mode_context(&rounds_ctx, &rs);
    char name[32];
    int retried = 0;
    for (int r = 1; r <= rounds; r++) {
        fill(host, r);
        CHECK(aclrtMemcpy(local, SPAN, host, SPAN, ACL_MEMCPY_HOST_TO_DEVICE));
        CHECK(aclrtMemcpyAsync(va, SPAN, local, SPAN, ACL_MEMCPY_DEVICE_TO_DEVICE, rs));
        CHECK(aclrtRecordNotify(n, rs));
        aclError rc = aclrtSynchronizeStream(rs);
        char why[1024] = "";
        if (rc != ACL_SUCCESS) snprintf(why, sizeof why, "%s", recent_msg());
        if (rc == ACL_ERROR_RT_IPC_ERROR && retry && retried < 5 &&
            strstr(why, "a copy through") != NULL) {
            /* etcd unreachable past the client's bound (a restart slower than it) during the
             * copy: the round again, its record not sent (the stream stopped). A failed record
             * is not retried: it may have been committed before etcd died, and a second one
             * would be a second record. */
            printf("FABRIC round %d retried: %s\n", r, why);
            stop_mode_context(&rounds_ctx, &rs);
            retried++;
            r--;
            continue;
        }
        REQUIRE(rc == ACL_SUCCESS, "round %d: aclrtSynchronizeStream returned %d: %s", r, (int)rc,
                why);
        snprintf(name, sizeof name, "ack.%d", r);
        get_file(dir, name, buf, sizeof buf, 60000);
    }
    CHECK(aclrtMemsetAsync(va, SPAN, 0x5a, SPAN, rs));
    CHECK(aclrtRecordNotify(n, rs));
    CHECK(aclrtSynchronizeStream(rs));
    CHECK(aclrtDestroyContext(rounds_ctx));
    CHECK(aclrtSetCurrentContext(home));
    snprintf(name, sizeof name, "ack.%d", rounds + 1);
    get_file(dir, name, buf, sizeof buf, 60000);
    printf("FABRIC importer OK %d rounds written\n", rounds);
    fflush(stdout);

    if (strcmp(end, "free") == 0 || strcmp(end, "ikill") == 0) {
        /* The owner freed its handle: the memory is still the importer's to use. */
        get_file(dir, "freed", buf, sizeof buf, 60000);
        fill(host, rounds + 2);
        CHECK(aclrtMemcpy(local, SPAN, host, SPAN, ACL_MEMCPY_HOST_TO_DEVICE));
        CHECK(aclrtMemcpy(va, SPAN, local, SPAN, ACL_MEMCPY_DEVICE_TO_DEVICE));
        CHECK(aclrtMemset(local, SPAN, 0, SPAN));
        CHECK(aclrtMemcpy(local, SPAN, va, SPAN, ACL_MEMCPY_DEVICE_TO_DEVICE));
        memset(host, 0, SPAN);
        CHECK(aclrtMemcpy(host, SPAN, local, SPAN, ACL_MEMCPY_DEVICE_TO_HOST));
        check_round(host, rounds + 2);
        printf("FABRIC write and read after the owner's free: ok\n");
        fflush(stdout);
        if (strcmp(end, "ikill") == 0) kill(getpid(), SIGKILL);
    }
    if (strcmp(end, "kill") == 0) {
        get_file(dir, "dying", buf, sizeof buf, 60000);
        int64_t t0 = now_ns();
        aclError rc = ACL_SUCCESS;
        /* Reads need the owner's answer; each fails within the client's bound once the owner
         * is gone, and copies fail at once when its lease has expired. */
        while (rc == ACL_SUCCESS && now_ns() - t0 < 60000000000LL)
            rc = aclrtMemcpy(local, SPAN, va, SPAN, ACL_MEMCPY_DEVICE_TO_DEVICE);
        double s = (double)(now_ns() - t0) / 1e9;
        REQUIRE(rc == ACL_ERROR_RT_PARAM_INVALID || rc == ACL_ERROR_RT_IPC_ERROR,
                "a read from the killed owner's memory returned %d after %.1f s: %s", (int)rc, s,
                recent_msg());
        printf("FABRIC read after the owner died: %d after %.1f s: %s\n", (int)rc, s,
               recent_msg());
        /* Once its lease is gone, a write says the owner is dead. */
        int64_t t1 = now_ns();
        do {
            rc = aclrtMemcpy(va, SPAN, local, SPAN, ACL_MEMCPY_DEVICE_TO_DEVICE);
            if (rc == ACL_SUCCESS) sleep_ms(200);
        } while (rc == ACL_SUCCESS && now_ns() - t1 < 60000000000LL);
        REQUIRE(rc == ACL_ERROR_RT_PARAM_INVALID && strstr(recent_msg(), "dead"),
                "a write to the killed owner's memory returned %d: %s", (int)rc, recent_msg());
        printf("FABRIC write after the owner died: %d after %.1f s\n", (int)rc,
               (double)(now_ns() - t0) / 1e9);
    }
    CHECK(aclrtUnmapMem(va));
    CHECK(aclrtReleaseMemAddress(va));
    CHECK(aclrtFreePhysical(h));
    put_file(dir, "closed", "1", 1);
    CHECK(aclrtDestroyNotify(n));
    CHECK(aclrtFree(local));
    CHECK(aclrtFreeHost(host));
    CHECK(aclrtDestroyStream(stream));
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s <exchange dir> owner|importer rounds=N [end=...]\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1], *role = argv[2];
    int rounds = atoi(arg(argc, argv, "rounds", "10"));
    const char *end = arg(argc, argv, "end", "clean");
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    int rc = strcmp(role, "owner") == 0
                 ? owner(dir, rounds, end)
                 : importer(dir, rounds, end, arg(argc, argv, "save", NULL),
                            arg(argc, argv, "stale", NULL), atoi(arg(argc, argv, "retry", "0")));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    return rc;
}
