/* errors.c — SPEC §3 row by row, through the C ABI only: every check of every function, in
 * the order the SPEC gives, for the SoC named on the command line (the test runs it once per
 * SoC with ACL_NOTIFY_SIM_SOC set to that name and ACL_NOTIFY_SIM_DEVICES >= 4).
 *
 * The rows that need a notify held by another process (imported handles, whitelists, peer
 * access, keys of destroyed notifies, foreign handles) are checked by a child process forked
 * before aclInit, driven over two pipes. Every failing call must also leave a message naming
 * the call and its code for aclGetRecentErrMsg().
 *
 * usage: errors <SoC name>; exit 0 when every row holds, 1 otherwise (each failure printed). */
#include "common.h"

#include "acl/aclnsim.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

/* ---- the SPEC §4 table, written out independently of the Rust one ------------------------ */

struct caps {
    const char *name;
    int notify, ipc, batch, inter, devonly;
    uint32_t max;
    /* The chip aclrtGetSocName names when ACL_NOTIFY_SIM_SOC gives only the family. */
    const char *chip;
    /* A batch reset takes IPC notifies (imported, or exported by their owner) as any other
     * (910B, 910_93), rather than refusing them with 507009 (the 950 family). */
    int ipc_reset;
    /* Peer access between devices (not on 310B and IPV350: CANN's device chapter). */
    int peer;
};

static const struct caps CAPS[] = {
    {"Ascend950PR", 1, 1, 1, 0, 1, 65535, "Ascend950PR_9599", 0, 1},
    {"Ascend950DT", 1, 0, 1, 0, 1, 65535, "Ascend950DT_9591", 0, 1},
    {"Ascend910_93", 1, 1, 1, 1, 1, 8192, "Ascend910_9391", 1, 1},
    {"Ascend910B", 1, 1, 1, 0, 1, 8192, "Ascend910B1", 1, 1},
    {"Ascend310B", 1, 0, 0, 0, 0, 2048, "Ascend310B1", 0, 0},
    {"Ascend310P", 1, 1, 0, 0, 1, 1024, "Ascend310P3", 0, 1},
    {"Ascend910", 1, 1, 0, 0, 0, 1024, "Ascend910A", 0, 1},
    {"IPV350", 0, 0, 0, 0, 0, 0, "IPV350", 0, 0},
};

/* What a batch reset of one IPC notify returns on this SoC. */
#define IPC_BATCH_RESET() IF(soc->batch, soc->ipc_reset ? ACL_SUCCESS : ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT)

static const struct caps *soc;
static int failures = 0;

/* What a feature-gated call returns: `ok` where the SoC has the feature, else 207000. */
#define IF(cap, ok) ((cap) ? (ok) : ACL_ERROR_RT_FEATURE_NOT_SUPPORT)

static void check_code(const char *what, int line, aclError got, aclError want) {
    if (got != want) {
        fprintf(stderr, "[%s %s] line %d: %s returned %d, expected %d\n  %s\n", g_role,
                soc ? soc->name : "?", line, what, (int)got, (int)want, recent_msg());
        failures++;
        return;
    }
    if (got == ACL_SUCCESS) {
        return;
    }
    /* The message must name the call and the code. */
    char name[64] = "";
    size_t n = strcspn(what, "(");
    if (n < sizeof name && strncmp(what, "acl", 3) == 0) {
        memcpy(name, what, n);
        name[n] = '\0';
    }
    const char *m = aclGetRecentErrMsg();
    char code[16];
    snprintf(code, sizeof code, "%d", (int)want);
    if (!m || (name[0] && !strstr(m, name)) || !strstr(m, code)) {
        fprintf(stderr, "[%s %s] line %d: %s: aclGetRecentErrMsg() = \"%s\" does not name %s "
                "and %s\n", g_role, soc ? soc->name : "?", line, what, m ? m : "(null)", name,
                code);
        failures++;
    }
}

#define EXPECT(call, want) check_code(#call, __LINE__, (call), (want))
#define EXPECT_TRUE(cond, ...)                                                             \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "[%s %s] line %d: %s: ", g_role, soc ? soc->name : "?",         \
                    __LINE__, #cond);                                                      \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fprintf(stderr, "\n");                                                         \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

/* ---- parent <-> child lines over pipes (bounded waits) ----------------------------------- */

static void send_line(int fd, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
    va_end(ap);
    buf[n++] = '\n';
    REQUIRE(write(fd, buf, (size_t)n) == n, "pipe write failed: %s", strerror(errno));
}

/* Reads a line from the other process; exits 1 when it closed the pipe, or when it stayed
 * still (asleep, using no CPU) for common.h's WATCH_STILL_LOOKS looks: failed or hung. */
static void recv_line(int fd, char *buf, size_t cap) {
    size_t n = 0;
    while (n + 1 < cap) {
        await_fd(fd);
        char c;
        ssize_t r = read(fd, &c, 1);
        REQUIRE(r == 1, "the other process closed the pipe (it failed; see its messages)");
        if (c == '\n') {
            break;
        }
        buf[n++] = c;
    }
    buf[n] = '\0';
}

/* ---- helpers ------------------------------------------------------------------------------ */

static void noop_host(void *arg) { *(volatile int *)arg = 1; }

static void *bogus(uintptr_t v) { return (void *)v; }

static int contains_int(const char *m, long v) {
    char s[32];
    snprintf(s, sizeof s, "%ld", v);
    return m && strstr(m, s) != NULL;
}

/* ---- rows that need a thread without a current device ------------------------------------- */

struct thread_args {
    aclrtNotify n;
    aclrtStream s0;
    int ipc;
};

static void *no_device_thread(void *p) {
    struct thread_args *a = (struct thread_args *)p;
    int32_t d = -1;
    EXPECT(aclrtGetDevice(&d), ACL_ERROR_RT_CONTEXT_NULL);
    aclrtNotify n = NULL;
    EXPECT(aclrtCreateNotify(&n, 0), ACL_ERROR_RT_CONTEXT_NULL);
    aclrtStream s = NULL;
    EXPECT(aclrtCreateStream(&s), ACL_ERROR_RT_CONTEXT_NULL);
    if (a->n) {
        /* Handle checks come before the current-device check, which comes before 107003. */
        EXPECT(aclrtRecordNotify(a->n, NULL), ACL_ERROR_RT_CONTEXT_NULL);
        EXPECT(aclrtRecordNotify(a->n, a->s0), ACL_ERROR_RT_CONTEXT_NULL);
        EXPECT(aclrtWaitAndResetNotify(a->n, a->s0, 1), ACL_ERROR_RT_CONTEXT_NULL);
        EXPECT(aclrtRecordNotify(a->n, bogus(0x1234)), ACL_ERROR_RT_INVALID_HANDLE);
        /* A handle made on another thread is valid here. */
        uint32_t id;
        EXPECT(aclrtGetNotifyId(a->n, &id), ACL_SUCCESS);
    }
    EXPECT(aclrtSynchronizeStream(NULL), ACL_ERROR_RT_CONTEXT_NULL);
    /* ImportByKey: the flag check (low 32 bits) comes before the device check. */
    EXPECT(aclrtNotifyImportByKey(&n, "k", 4), IF(a->ipc, ACL_ERROR_RT_PARAM_INVALID));
    EXPECT(aclrtNotifyImportByKey(&n, "k", 0xFFFFFFFF00000003ULL),
           IF(a->ipc, ACL_ERROR_RT_CONTEXT_NULL));
    return NULL;
}

/* ---- the child: an importer in another process -------------------------------------------- */

static int child_main(int rd, int wr) {
    g_role = "errors-child";
    char line[1024];
    CHECK(aclInit(NULL));
    int32_t me = 0;
    CHECK(aclrtDeviceGetBareTgid(&me));
    send_line(wr, "PID %d", (int)me);
    recv_line(rd, line, sizeof line);

    CHECK(aclrtSetDevice(1));
    aclrtNotify mine = NULL;
    if (soc->notify) {
        CHECK(aclrtCreateNotify(&mine, 0));
    }
    if (strncmp(line, "NOIPC", 5) == 0) {
        aclrtNotify n = NULL;
        EXPECT(aclrtNotifyImportByKey(&n, "an2-0000000000000000000000000000000000000000000000000000000000", 0),
               ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    } else {
        char kA[65], kB[65], kC[65], kD[65];
        unsigned idB = 0, idD = 0;
        REQUIRE(sscanf(line, "KEYS %64s %64s %64s %64s %u %u", kA, kB, kC, kD, &idB, &idD) == 6,
                "bad line '%s'", line);
        aclrtNotify n = NULL;
        /* Not whitelisted (same device as the owner, so peer access is not the reason). */
        CHECK(aclrtSetDevice(0));
        EXPECT(aclrtNotifyImportByKey(&n, kA, 0), ACL_ERROR_RT_NO_PERMISSION);
        /* The key of a notify that no longer exists. */
        EXPECT(aclrtNotifyImportByKey(&n, kC, 0), ACL_ERROR_RT_INVALID_HANDLE);
        /* Malformed keys. */
        char bad[65];
        memcpy(bad, kB, sizeof bad);
        bad[30] = bad[30] == 'a' ? 'b' : 'a';
        EXPECT(aclrtNotifyImportByKey(&n, bad, 0), ACL_ERROR_RT_PARAM_INVALID);
        EXPECT(aclrtNotifyImportByKey(&n, "", 0), ACL_ERROR_RT_PARAM_INVALID);
        EXPECT(aclrtNotifyImportByKey(&n, "not a key", 0), ACL_ERROR_RT_PARAM_INVALID);

        /* From device 1 (owner on device 0), without peer access and without the flag: the
         * import enables peer access itself, as the real driver does (npu_driver.cc). */
        CHECK(aclrtSetDevice(1));
        int32_t can = -1;
        CHECK(aclrtDeviceCanAccessPeer(&can, 1, 0));
        aclrtNotify nB = NULL, nD = NULL, nB2 = NULL;
        EXPECT(aclrtNotifyImportByKey(&nB, kB, ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT), ACL_SUCCESS);
        EXPECT(aclrtNotifyImportByKey(&nB2, kB, ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS),
               ACL_SUCCESS);
        EXPECT(aclrtDestroyNotify(nB2), ACL_SUCCESS);
        /* Upper 32 bits of the flags are ignored. */
        EXPECT(aclrtNotifyImportByKey(&nD, kD, 0xABCD000000000000ULL), ACL_SUCCESS);

        /* What an importer may not do. */
        uint32_t id = 0;
        EXPECT(aclrtGetNotifyId(nB, &id), ACL_SUCCESS);
        EXPECT_TRUE(id == idB, "importer sees id %u, owner %u", id, idB);
        EXPECT(aclrtGetNotifyId(nD, &id), ACL_SUCCESS);
        EXPECT_TRUE(id == idD, "importer sees id %u, owner %u", id, idD);
        char key[65];
        EXPECT(aclrtNotifyGetExportKey(nB, key, sizeof key, 0), ACL_ERROR_RT_INTERNAL_ERROR);
        int32_t pid = 1;
        EXPECT(aclrtNotifySetImportPid(nB, &pid, 1), ACL_ERROR_RT_NO_PERMISSION);
        /* An imported notify in a batch reset: as the real runtime does per SoC. */
        EXPECT(aclrtNotifyBatchReset(&nB, 1), IPC_BATCH_RESET());
        /* Waiting is only possible on the owner's device. */
        EXPECT(aclrtWaitAndResetNotify(nB, NULL, 1), ACL_ERROR_RT_PARAM_INVALID);
        /* Recording is: it releases the owner's wait (checked by the parent). */
        EXPECT(aclrtRecordNotify(nB, NULL), ACL_SUCCESS);
        EXPECT(aclrtSynchronizeStreamWithTimeout(NULL, 10000), ACL_SUCCESS);
        EXPECT(aclrtDestroyNotify(nB), ACL_SUCCESS);
        EXPECT(aclrtDestroyNotify(nD), ACL_SUCCESS);
        EXPECT(aclrtDestroyNotify(nB), ACL_ERROR_RT_INVALID_HANDLE);
    }
    send_line(wr, "DONE %llx", (unsigned long long)(uintptr_t)mine);
    recv_line(rd, line, sizeof line);
    if (mine) {
        EXPECT(aclrtDestroyNotify(mine), ACL_SUCCESS);
    }
    CHECK(aclFinalize());
    return failures ? 1 : 0;
}

/* ---- the parent ---------------------------------------------------------------------------- */

int main(int argc, char **argv) {
    g_role = "errors";
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc < 2) {
        fprintf(stderr, "usage: %s <SoC name>\n", argv[0]);
        return 2;
    }
    for (size_t i = 0; i < sizeof CAPS / sizeof CAPS[0]; i++) {
        if (strcmp(CAPS[i].name, argv[1]) == 0) {
            soc = &CAPS[i];
        }
    }
    REQUIRE(soc != NULL, "unknown SoC %s", argv[1]);

    /* Fork before anything initialises: the child is a clean second process. */
    int to_child[2], to_parent[2];
    REQUIRE(pipe(to_child) == 0 && pipe(to_parent) == 0, "pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t child = fork();
    REQUIRE(child >= 0, "fork: %s", strerror(errno));
    if (child == 0) {
        close(to_child[1]);
        close(to_parent[0]);
        _exit(child_main(to_child[0], to_parent[1]));
    }
    close(to_child[0]);
    close(to_parent[1]);
    int rd = to_parent[0], wr = to_child[1];

    /* -- before aclInit: the chip name; then the first runtime call starts the session, as
     *    CANN's runtime does (its entry points do not check initialisation) --------------- */
    aclrtNotify n = NULL;
    const char *early = aclrtGetSocName();
    REQUIRE(early && strcmp(early, soc->chip) == 0, "aclrtGetSocName() before aclInit = %s, "
            "expected %s", early ? early : "(null)", soc->chip);
    EXPECT(aclrtCreateNotify(NULL, 0), ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtCreateNotify(&n, 7), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT(aclrtDestroyNotify(NULL), ACL_ERROR_INVALID_PARAM);
    uint32_t early_count = 0;
    EXPECT(aclrtGetDeviceCount(&early_count), ACL_SUCCESS);
    EXPECT_TRUE(early_count >= 4, "device count before aclInit: %u", early_count);
    EXPECT(aclrtDestroyNotify(bogus(0x10)), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT(aclrtCreateNotify(&n, 0), ACL_ERROR_RT_CONTEXT_NULL);
    int32_t pid = 0;
    EXPECT(aclrtDeviceGetBareTgid(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtDeviceGetBareTgid(&pid), ACL_SUCCESS);
    EXPECT_TRUE(pid == (int32_t)getpid(), "bare tgid %d != getpid %d", (int)pid, (int)getpid());
    EXPECT_TRUE(aclGetRecentErrMsg() == NULL, "messages were not cleared by the last read");
    int64_t attr = -1;
    EXPECT(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_SUPER_POD_DEVICE_ID, &attr), ACL_SUCCESS);

    /* aclInit after the session started implicitly succeeds as usual; a second one does not. */
    EXPECT(aclInit(NULL), ACL_SUCCESS);
    EXPECT(aclInit(NULL), ACL_ERROR_REPEAT_INITIALIZE);

    /* -- devices -------------------------------------------------------------------------- */
    uint32_t count = 0;
    EXPECT(aclrtGetDeviceCount(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtGetDeviceCount(&count), ACL_SUCCESS);
    REQUIRE(count >= 4, "run with ACL_NOTIFY_SIM_DEVICES >= 4 (have %u)", count);
    const char *name = aclrtGetSocName();
    REQUIRE(name && strcmp(name, soc->chip) == 0, "aclrtGetSocName() = %s, expected %s",
            name ? name : "(null)", soc->chip);
    /* aclrtGetDeviceInfo answers what a notify program needs: the sdid of an aclrtServerPid
     * (each device's own, in the simulator's layout: tag 0x5D, server, device), the server id,
     * the chip id (the device), the SuperPOD id (0); nothing else. */
    uint32_t server = 0;
    EXPECT(aclnsimGetServerId(&server), ACL_SUCCESS);
    EXPECT(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_SUPER_POD_DEVICE_ID, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtGetDeviceInfo(count, ACL_DEV_ATTR_SUPER_POD_DEVICE_ID, &attr),
           ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT(aclrtGetDeviceInfo(0x80000000u, ACL_DEV_ATTR_SUPER_POD_DEVICE_ID, &attr),
           ACL_ERROR_RT_INVALID_DEVICEID);
    int64_t sdid0 = -1, sdid1 = -1;
    EXPECT(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_SUPER_POD_DEVICE_ID, &sdid0), ACL_SUCCESS);
    EXPECT(aclrtGetDeviceInfo(1, ACL_DEV_ATTR_SUPER_POD_DEVICE_ID, &sdid1), ACL_SUCCESS);
    EXPECT_TRUE(sdid0 != sdid1, "devices 0 and 1 share SuperPOD device id %lld", (long long)sdid0);
    EXPECT_TRUE(sdid1 != (int64_t)server, "device 1's SuperPOD device id is the server id %u",
                server);
    for (int64_t d = 0; d < 2; d++) {
        const int64_t v = d ? sdid1 : sdid0;
        EXPECT_TRUE(v >> 24 == 0x5D && ((v >> 8) & 0xFFFF) == (int64_t)server && (v & 0xFF) == d,
                    "device %lld's SuperPOD device id %#llx does not parse back to server %u, "
                    "device %lld", (long long)d, (long long)v, server, (long long)d);
    }
    EXPECT(aclrtGetDeviceInfo(1, ACL_DEV_ATTR_SUPER_POD_SERVER_ID, &attr), ACL_SUCCESS);
    EXPECT_TRUE(attr == (int64_t)server, "server id %lld, server %u", (long long)attr, server);
    EXPECT(aclrtGetDeviceInfo(2, ACL_DEV_ATTR_PHY_CHIP_ID, &attr), ACL_SUCCESS);
    EXPECT_TRUE(attr == 2, "chip id of device 2: %lld", (long long)attr);
    EXPECT(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_SUPER_POD_ID, &attr), ACL_SUCCESS);
    EXPECT_TRUE(attr == 0, "SuperPOD id %lld", (long long)attr);
    /* An attribute the simulator does not model (the cores: tests/c/reslimit.c). */
    EXPECT(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_L2_CACHE_SIZE, &attr),
           ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    int32_t dev = -1;
    EXPECT(aclrtGetDevice(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtGetDevice(&dev), ACL_ERROR_RT_CONTEXT_NULL);
    EXPECT(aclrtCreateNotify(&n, 0), ACL_ERROR_RT_CONTEXT_NULL);
    EXPECT(aclrtSetDevice(-1), ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT(aclrtSetDevice((int32_t)count), ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT(aclrtResetDevice((int32_t)count), ACL_ERROR_RT_INVALID_DEVICEID);
    int32_t can = -1;
    EXPECT(aclrtDeviceCanAccessPeer(NULL, 0, 1), ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtDeviceCanAccessPeer(&can, 0, (int32_t)count), ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT(aclrtDeviceCanAccessPeer(&can, (int32_t)count, 0), ACL_ERROR_RT_INVALID_DEVICEID);
    /* CANN's order (hicann/runtime src/acl/aclrt_impl/memory.cpp): a device paired with itself
     * is refused at the ACL layer (100000) before either id is looked at; a SoC without peer
     * access refuses below it (207000), once both ids are known. */
    EXPECT(aclrtDeviceCanAccessPeer(&can, (int32_t)count, (int32_t)count),
           ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtDeviceCanAccessPeer(&can, 0, 0), ACL_ERROR_INVALID_PARAM);
    can = -1;
    EXPECT(aclrtDeviceCanAccessPeer(&can, 0, 1), IF(soc->peer, ACL_SUCCESS));
    EXPECT_TRUE(soc->peer ? can == 1 : can == -1, "canAccessPeer %d", (int)can);
    /* Enable: reserved flags first (ACL_ERROR_FEATURE_UNSUPPORTED), even without a current
     * device, then the current device. */
    EXPECT(aclrtDeviceEnablePeerAccess(1, 1), ACL_ERROR_FEATURE_UNSUPPORTED);
    EXPECT(aclrtDeviceEnablePeerAccess(1, 0), ACL_ERROR_RT_CONTEXT_NULL);
    EXPECT(aclrtDeviceDisablePeerAccess(1), ACL_ERROR_RT_CONTEXT_NULL);

    /* A second device for the "stream of another device" rows. */
    EXPECT(aclrtSetDevice(1), ACL_SUCCESS);
    aclrtStream s1 = NULL;
    EXPECT(aclrtCreateStream(&s1), ACL_SUCCESS);
    EXPECT(aclrtSetDevice(0), ACL_SUCCESS);
    EXPECT(aclrtGetDevice(&dev), ACL_SUCCESS);
    EXPECT_TRUE(dev == 0, "aclrtGetDevice gave %d", (int)dev);
    EXPECT(aclrtDeviceEnablePeerAccess(1, 1), ACL_ERROR_FEATURE_UNSUPPORTED);
    EXPECT(aclrtDeviceEnablePeerAccess(0, 1), ACL_ERROR_FEATURE_UNSUPPORTED);
    /* Enable and disable alike (memory.cpp): the current device itself (100000), then an
     * unknown peer (107001), then the SoC (207000 without peer access). Access never enabled
     * is left to CANN's driver: nothing to undo here. */
    EXPECT(aclrtDeviceEnablePeerAccess(0, 0), ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtDeviceEnablePeerAccess((int32_t)count, 0), ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT(aclrtDeviceEnablePeerAccess(-1, 0), ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT(aclrtDeviceDisablePeerAccess(0), ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtDeviceDisablePeerAccess((int32_t)count), ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT(aclrtDeviceDisablePeerAccess(1), IF(soc->peer, ACL_SUCCESS));
    EXPECT(aclrtDeviceEnablePeerAccess(1, 0), IF(soc->peer, ACL_SUCCESS));
    EXPECT(aclrtDeviceDisablePeerAccess(1), IF(soc->peer, ACL_SUCCESS));

    /* -- streams -------------------------------------------------------------------------- */
    aclrtStream s0 = NULL;
    EXPECT(aclrtCreateStream(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtCreateStream(&s0), ACL_SUCCESS);
    EXPECT_TRUE(s0 != NULL && s0 != s1, "stream handles %p %p", s0, s1);
    aclrtStreamStatus st = ACL_STREAM_STATUS_RESERVED;
    EXPECT(aclrtStreamQuery(NULL, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtStreamQuery(NULL, &st), ACL_SUCCESS);
    EXPECT_TRUE(st == ACL_STREAM_STATUS_COMPLETE, "idle default stream status %d", (int)st);
    EXPECT(aclrtStreamQuery(s1, &st), ACL_ERROR_RT_STREAM_CONTEXT);
    EXPECT(aclrtSynchronizeStream(s1), ACL_ERROR_RT_STREAM_CONTEXT);
    EXPECT(aclrtSynchronizeStream(bogus(0xdeadbeef)), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT(aclrtSynchronizeStreamWithTimeout(s0, -2), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT(aclrtSynchronizeStreamWithTimeout(s0, 0), ACL_SUCCESS);
    EXPECT(aclrtDestroyStream(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtDestroyStreamForce(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtDestroyStream(bogus(0x5a)), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT(aclrtDestroyStream(s1), ACL_ERROR_RT_STREAM_CONTEXT);
    volatile int ran = 0;
    EXPECT(aclrtLaunchHostFunc(s0, NULL, NULL), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT(aclrtLaunchHostFunc(s0, noop_host, (void *)&ran), ACL_SUCCESS);
    EXPECT(aclrtSynchronizeStream(s0), ACL_SUCCESS);
    EXPECT_TRUE(ran == 1, "host function did not run before synchronize returned");
    aclrtStream dead = NULL;
    EXPECT(aclrtCreateStream(&dead), ACL_SUCCESS);
    EXPECT(aclrtDestroyStream(dead), ACL_SUCCESS);
    EXPECT(aclrtDestroyStream(dead), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT(aclrtSetOpWaitTimeout(0), ACL_SUCCESS);

    /* -- aclrtCreateNotify ---------------------------------------------------------------- */
    EXPECT(aclrtCreateNotify(NULL, 5), ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtCreateNotify(&n, 2), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT(aclrtCreateNotify(&n, 0xFFFFFFFF00000000ULL), ACL_ERROR_RT_PARAM_INVALID);
    aclrtNotify dev_only = NULL;
    EXPECT(aclrtCreateNotify(&dev_only, ACL_NOTIFY_DEVICE_USE_ONLY), IF(soc->devonly, 0));
    if (soc->devonly) {
        EXPECT(aclrtDestroyNotify(dev_only), ACL_SUCCESS);
    }
    EXPECT(aclrtCreateNotify(&n, ACL_NOTIFY_DEFAULT), IF(soc->notify, 0));
    if (!soc->notify) {
        n = NULL;
    }

    /* -- aclrtDestroyNotify: garbage, other kinds, stale ---------------------------------- */
    int local = 0;
    EXPECT(aclrtDestroyNotify(bogus(1)), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT(aclrtDestroyNotify(bogus(0xdeadbeef)), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT(aclrtDestroyNotify(bogus(UINTPTR_MAX)), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT(aclrtDestroyNotify(&local), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT(aclrtDestroyNotify(s0), ACL_ERROR_RT_INVALID_HANDLE);
    if (n) {
        EXPECT(aclrtDestroyNotify((char *)n + 1), ACL_ERROR_RT_INVALID_HANDLE);
        aclrtNotify stale = NULL;
        EXPECT(aclrtCreateNotify(&stale, 0), ACL_SUCCESS);
        EXPECT(aclrtDestroyNotify(stale), ACL_SUCCESS);
        EXPECT(aclrtDestroyNotify(stale), ACL_ERROR_RT_INVALID_HANDLE);
        EXPECT(aclrtRecordNotify(stale, NULL), ACL_ERROR_RT_INVALID_HANDLE);
        uint32_t id;
        EXPECT(aclrtGetNotifyId(stale, &id), ACL_ERROR_RT_INVALID_HANDLE);
    }

    /* -- record / wait ------------------------------------------------------------------- */
    EXPECT(aclrtRecordNotify(NULL, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtWaitAndResetNotify(NULL, NULL, 0), ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtRecordNotify(bogus(0x77), NULL), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT(aclrtWaitAndResetNotify(s0, s0, 0), ACL_ERROR_RT_INVALID_HANDLE);
    if (n) {
        EXPECT(aclrtRecordNotify(n, bogus(0x99)), ACL_ERROR_RT_INVALID_HANDLE);
        EXPECT(aclrtRecordNotify(n, n), ACL_ERROR_RT_INVALID_HANDLE);
        EXPECT(aclrtRecordNotify(n, dead), ACL_ERROR_RT_INVALID_HANDLE);
        EXPECT(aclrtWaitAndResetNotify(n, dead, 1), ACL_ERROR_RT_INVALID_HANDLE);
        EXPECT(aclrtRecordNotify(n, s1), ACL_ERROR_RT_STREAM_CONTEXT);
        EXPECT(aclrtWaitAndResetNotify(n, s1, 1), ACL_ERROR_RT_STREAM_CONTEXT);
        EXPECT(aclrtLaunchHostFunc(s1, noop_host, (void *)&ran), ACL_ERROR_RT_STREAM_CONTEXT);
        /* A record that lands first leaves the flag set for the later wait (NULL stream =
         * the default stream). */
        EXPECT(aclrtRecordNotify(n, NULL), ACL_SUCCESS);
        EXPECT(aclrtSynchronizeStream(NULL), ACL_SUCCESS);
        EXPECT(aclrtWaitAndResetNotify(n, s0, 5), ACL_SUCCESS);
        EXPECT(aclrtSynchronizeStreamWithTimeout(s0, 10000), ACL_SUCCESS);
    }

    /* A thread without a current device (and its own error messages). */
    (void)aclrtDestroyNotify(bogus(0x1)); /* leaves one message on this thread */
    struct thread_args ta = {n, s0, soc->ipc};
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, no_device_thread, &ta) == 0, "pthread_create");
    pthread_join(th, NULL);
    const char *mine = aclGetRecentErrMsg();
    EXPECT_TRUE(mine && strstr(mine, "aclrtDestroyNotify") && !strstr(mine, "aclrtCreateStream") &&
                    !strstr(mine, "aclrtGetDevice"),
                "this thread's messages are mixed with another thread's: %s",
                mine ? mine : "(null)");

    /* -- garbage handles: random values, and live handles with bits flipped --------------- */
    {
        uint64_t x = 0x9e3779b97f4a7c15ULL ^ (uint64_t)getpid();
        for (int i = 0; i < 20000; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
            void *g = bogus((uintptr_t)x);
            if (n && i % 2) {
                g = bogus((uintptr_t)n ^ (1ULL << (x % 64)));
            }
            if (g == NULL || g == n || g == s0 || g == s1) {
                continue;
            }
            uint32_t gid;
            aclrtStreamStatus gst;
            /* Every code kept, so that a failure says which call let it through and what it
             * answered (one failed once in a loaded run, 2026-12-07, without saying). */
            aclError got[4] = {
                aclrtGetNotifyId(g, &gid),
                aclrtRecordNotify(g, NULL),
                aclrtStreamQuery(g, &gst),
                n ? aclrtRecordNotify(n, g) : ACL_ERROR_RT_INVALID_HANDLE,
            };
            int bad = 0;
            for (int k = 0; k < 4; k++) {
                bad |= got[k] != ACL_ERROR_RT_INVALID_HANDLE;
            }
            if (bad) {
                EXPECT_TRUE(0,
                            "garbage handle %p (%s; live notify %p) was not rejected with 107017: "
                            "aclrtGetNotifyId %d, aclrtRecordNotify(g, NULL) %d, "
                            "aclrtStreamQuery %d, aclrtRecordNotify(n, g) %d; last message: %s",
                            g, (n && i % 2) ? "a live notify with a bit flipped" : "random", n,
                            got[0], got[1], got[2], got[3], aclGetRecentErrMsg());
                break;
            }
        }
        (void)aclGetRecentErrMsg();
    }

    /* -- aclrtGetNotifyId ----------------------------------------------------------------- */
    uint32_t id = 0;
    EXPECT(aclrtGetNotifyId(NULL, &id), ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtGetNotifyId(NULL, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtGetNotifyId(bogus(0x42), NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtGetNotifyId(bogus(0x42), &id), ACL_ERROR_RT_INVALID_HANDLE);
    if (n) {
        EXPECT(aclrtGetNotifyId(n, &id), ACL_SUCCESS);
        EXPECT_TRUE(id < soc->max, "notify id %u >= %u", id, soc->max);
    }

    /* -- aclrtNotifyBatchReset ------------------------------------------------------------ */
    aclrtNotify arr[3] = {n, NULL, bogus(0x3)};
    EXPECT(aclrtNotifyBatchReset(NULL, 0), ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtNotifyBatchReset(NULL, 2), ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtNotifyBatchReset(arr, 0), ACL_ERROR_RT_PARAM_INVALID);
    arr[0] = NULL;
    EXPECT(aclrtNotifyBatchReset(arr, 1), IF(soc->batch, ACL_ERROR_RT_PARAM_INVALID));
    arr[0] = bogus(0x3);
    EXPECT(aclrtNotifyBatchReset(arr, 1), IF(soc->batch, ACL_ERROR_RT_INVALID_HANDLE));
    if (n) {
        arr[0] = n;
        EXPECT(aclrtNotifyBatchReset(arr, 1), IF(soc->batch, 0));
        EXPECT(aclrtNotifyBatchReset(arr, 2), IF(soc->batch, ACL_ERROR_RT_PARAM_INVALID));
        arr[1] = bogus(0x3);
        EXPECT(aclrtNotifyBatchReset(arr, 2), IF(soc->batch, ACL_ERROR_RT_INVALID_HANDLE));
        /* Stops at the first failure: the element after it is not even read. */
        arr[1] = NULL;
        EXPECT(aclrtNotifyBatchReset(arr, 3), IF(soc->batch, ACL_ERROR_RT_PARAM_INVALID));
    }

    /* -- aclrtNotifyGetExportKey ---------------------------------------------------------- */
    char key[128];
    EXPECT(aclrtNotifyGetExportKey(NULL, key, 65, 0), ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtNotifyGetExportKey(bogus(0x8), NULL, 65, 0), ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtNotifyGetExportKey(bogus(0x8), key, 65, 0), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT(aclrtNotifyGetExportKey(bogus(0x8), key, 1, 7), ACL_ERROR_RT_INVALID_HANDLE);
    if (n) {
        aclrtNotify e = NULL;
        EXPECT(aclrtCreateNotify(&e, 0), ACL_SUCCESS);
        EXPECT(aclrtNotifyGetExportKey(e, key, 64, 7), ACL_ERROR_RT_PARAM_INVALID);
        EXPECT(aclrtNotifyGetExportKey(e, key, 65, 7), IF(soc->ipc, ACL_ERROR_RT_PARAM_INVALID));
        EXPECT(aclrtNotifyGetExportKey(e, key, 65, 1), IF(soc->ipc, ACL_ERROR_RT_PARAM_INVALID));
        EXPECT(aclrtNotifyGetExportKey(e, key, 65, 3), IF(soc->ipc, ACL_ERROR_RT_PARAM_INVALID));
        memset(key, 'x', sizeof key);
        EXPECT(aclrtNotifyGetExportKey(e, key, 65, 0), IF(soc->ipc, 0));
        if (soc->ipc) {
            size_t len = strnlen(key, sizeof key);
            EXPECT_TRUE(len > 0 && len <= 64, "key length %zu", len);
            EXPECT_TRUE(key[65] == 'x', "wrote past the 65 bytes asked for");
            EXPECT(aclrtNotifyGetExportKey(e, key, 65, 0), ACL_ERROR_RT_INTERNAL_ERROR);
            EXPECT(aclrtNotifyGetExportKey(e, key, 65, 2), ACL_ERROR_RT_INTERNAL_ERROR);
        }
        EXPECT(aclrtDestroyNotify(e), ACL_SUCCESS);
        /* A destroyed (well-formed) handle: its 107017 comes before every other argument's
         * error, and a call whose other arguments are fine reports it too. */
        EXPECT(aclrtNotifyGetExportKey(e, key, 1, 7), ACL_ERROR_RT_INVALID_HANDLE);
        EXPECT(aclrtNotifyGetExportKey(e, key, 65, 7), ACL_ERROR_RT_INVALID_HANDLE);
        EXPECT(aclrtNotifyGetExportKey(e, key, 65, 0), ACL_ERROR_RT_INVALID_HANDLE);
        EXPECT(aclrtNotifyGetExportKey(e, key, 65, 2), ACL_ERROR_RT_INVALID_HANDLE);
    }

    /* -- aclrtNotifySetImportPid ---------------------------------------------------------- */
    int32_t pids[70];
    for (int i = 0; i < 70; i++) {
        pids[i] = 100000 + i;
    }
    EXPECT(aclrtNotifySetImportPid(NULL, pids, 1), ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtNotifySetImportPid(bogus(0x9), NULL, 1), ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtNotifySetImportPid(bogus(0x9), pids, 1), IF(soc->ipc, ACL_ERROR_RT_INVALID_HANDLE));
    EXPECT(aclrtNotifySetImportPid(bogus(0x9), pids, 0), IF(soc->ipc, ACL_ERROR_RT_INVALID_HANDLE));
    /* A count larger than any array: the handle is still checked first. The calls below with
     * counts past 70 also show that the library reads no further than one PID past the limit
     * of 64 (the array has 70). */
    EXPECT(aclrtNotifySetImportPid(bogus(0x9), pids, SIZE_MAX), IF(soc->ipc, ACL_ERROR_RT_INVALID_HANDLE));
    if (n) {
        EXPECT(aclrtNotifySetImportPid(n, pids, 0), IF(soc->ipc, ACL_ERROR_RT_PARAM_INVALID));
        /* Not exported. */
        EXPECT(aclrtNotifySetImportPid(n, pids, 1), IF(soc->ipc, ACL_ERROR_RT_PARAM_INVALID));
        EXPECT(aclrtNotifySetImportPid(n, pids, 0x10000000), IF(soc->ipc, ACL_ERROR_RT_PARAM_INVALID));
    }
    if (soc->ipc) {
        aclrtNotify w = NULL, o = NULL;
        EXPECT(aclrtCreateNotify(&w, 0), ACL_SUCCESS);
        EXPECT(aclrtCreateNotify(&o, 0), ACL_SUCCESS);
        EXPECT(aclrtNotifyGetExportKey(w, key, 65, 0), ACL_SUCCESS);
        EXPECT(aclrtNotifyGetExportKey(o, key, 65, 2), ACL_SUCCESS);
        EXPECT(aclrtNotifySetImportPid(o, pids, 1), ACL_ERROR_RT_NO_PERMISSION);
        /* num > INT32_MAX: 107000 (the real runtime passes num on as an int32_t), before the
         * whitelist's own checks; INT32_MAX itself is an over-long whitelist. */
        EXPECT(aclrtNotifySetImportPid(o, pids, SIZE_MAX), ACL_ERROR_RT_PARAM_INVALID);
        EXPECT(aclrtNotifySetImportPid(w, pids, 65), ACL_ERROR_RT_OVER_LIMIT);
        EXPECT(aclrtNotifySetImportPid(w, pids, 0x10000000), ACL_ERROR_RT_OVER_LIMIT);
        EXPECT(aclrtNotifySetImportPid(w, pids, (size_t)INT32_MAX), ACL_ERROR_RT_OVER_LIMIT);
        EXPECT(aclrtNotifySetImportPid(w, pids, (size_t)INT32_MAX + 1), ACL_ERROR_RT_PARAM_INVALID);
        EXPECT(aclrtNotifySetImportPid(w, pids, SIZE_MAX), ACL_ERROR_RT_PARAM_INVALID);
        EXPECT(aclrtNotifySetImportPid(w, pids, 60), ACL_SUCCESS);
        /* Repeated calls add; duplicates are not counted twice. */
        EXPECT(aclrtNotifySetImportPid(w, pids, 60), ACL_SUCCESS);
        EXPECT(aclrtNotifySetImportPid(w, pids + 60, 4), ACL_SUCCESS);
        EXPECT(aclrtNotifySetImportPid(w, pids + 64, 1), ACL_ERROR_RT_OVER_LIMIT);
        EXPECT(aclrtDestroyNotify(w), ACL_SUCCESS);
        EXPECT(aclrtDestroyNotify(o), ACL_SUCCESS);
    }

    /* -- aclrtNotifySetImportPidInterServer (NULLs are 107000 here) ----------------------- */
    int32_t one = 4242;
    /* Entries name device 0 of this server by its SuperPOD device id. */
    int64_t dev0 = 0, dev1 = 0;
    EXPECT(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_SUPER_POD_DEVICE_ID, &dev0), ACL_SUCCESS);
    EXPECT(aclrtGetDeviceInfo(1, ACL_DEV_ATTR_SUPER_POD_DEVICE_ID, &dev1), ACL_SUCCESS);
    aclrtServerPid sp[3] = {{(uint32_t)dev0, &one, 1}, {(uint32_t)dev0, NULL, 1},
                            {(uint32_t)dev0, &one, 1}};
    EXPECT(aclrtNotifySetImportPidInterServer(NULL, sp, 1), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT(aclrtNotifySetImportPidInterServer(bogus(0xb), NULL, 1), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT(aclrtNotifySetImportPidInterServer(bogus(0xb), sp, 0), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT(aclrtNotifySetImportPidInterServer(bogus(0xb), sp, 1), ACL_ERROR_RT_INVALID_HANDLE);
    if (n) {
        aclrtServerPid bad_pid = {0, NULL, 1}, bad_num = {0, &one, 2}, zero = {0, &one, 0};
        EXPECT(aclrtNotifySetImportPidInterServer(n, &bad_pid, 1), ACL_ERROR_RT_PARAM_INVALID);
        EXPECT(aclrtNotifySetImportPidInterServer(n, &bad_num, 1), ACL_ERROR_RT_PARAM_INVALID);
        EXPECT(aclrtNotifySetImportPidInterServer(n, &zero, 1), ACL_ERROR_RT_PARAM_INVALID);
        /* Valid entry: the SoC check, then as SetImportPid (not exported → 107000). */
        EXPECT(aclrtNotifySetImportPidInterServer(n, sp, 1), IF(soc->inter, ACL_ERROR_RT_PARAM_INVALID));
    }
    if (soc->inter) {
        aclrtNotify w = NULL, o = NULL;
        EXPECT(aclrtCreateNotify(&w, 0), ACL_SUCCESS);
        EXPECT(aclrtCreateNotify(&o, 0), ACL_SUCCESS);
        EXPECT(aclrtNotifyGetExportKey(w, key, 65, 0), ACL_SUCCESS);
        EXPECT(aclrtNotifyGetExportKey(o, key, 65, 2), ACL_SUCCESS);
        EXPECT(aclrtNotifySetImportPidInterServer(o, sp, 1), ACL_ERROR_RT_NO_PERMISSION);
        EXPECT(aclrtNotifySetImportPidInterServer(w, sp, 1), ACL_SUCCESS);
        EXPECT(aclrtNotifySetImportPidInterServer(w, sp, 3), ACL_ERROR_RT_PARAM_INVALID);
        /* An sdid that names no device: the server id (what this simulator answered for the
         * SuperPOD device id before, and a device on hardware), and a device past the count. */
        aclrtServerPid by_server = {server, &one, 1}, past = {(uint32_t)dev0 + count, &one, 1};
        aclError rc = aclrtNotifySetImportPidInterServer(w, &by_server, 1);
        const char *m = recent_msg();
        EXPECT_TRUE(rc == ACL_ERROR_RT_PARAM_INVALID && strstr(m, "names no device") != NULL,
                    "the server id as an sdid: %d, %s", (int)rc, m);
        rc = aclrtNotifySetImportPidInterServer(w, &past, 1);
        m = recent_msg();
        EXPECT_TRUE(rc == ACL_ERROR_RT_PARAM_INVALID && strstr(m, "devices (0 to") != NULL,
                    "an sdid past the device count: %d, %s", (int)rc, m);
        EXPECT(aclrtDestroyNotify(w), ACL_SUCCESS);
        EXPECT(aclrtDestroyNotify(o), ACL_SUCCESS);
    }

    /* -- aclrtNotifyImportByKey (own process; the rest is in the child) ------------------- */
    aclrtNotify imp = NULL;
    EXPECT(aclrtNotifyImportByKey(NULL, "k", 0), ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtNotifyImportByKey(&imp, NULL, 0), ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtNotifyImportByKey(&imp, "k", 4), IF(soc->ipc, ACL_ERROR_RT_PARAM_INVALID));
    EXPECT(aclrtNotifyImportByKey(&imp, "k", 0x100000004ULL), IF(soc->ipc, ACL_ERROR_RT_PARAM_INVALID));
    EXPECT(aclrtNotifyImportByKey(&imp, "k", 3), IF(soc->ipc, ACL_ERROR_RT_PARAM_INVALID));

    /* -- the child: imported handles, whitelists, peer access ----------------------------- */
    char line[1024];
    recv_line(rd, line, sizeof line);
    int child_pid = 0;
    REQUIRE(sscanf(line, "PID %d", &child_pid) == 1 && child_pid == (int)child,
            "child said '%s' (fork gave pid %d)", line, (int)child);
    aclrtNotify nA = NULL, nB = NULL, nC = NULL, nD = NULL;
    uint32_t idB = 0, idD = 0;
    if (soc->ipc) {
        char kA[65], kB[65], kC[65], kD[65];
        EXPECT(aclrtCreateNotify(&nA, 0), ACL_SUCCESS);
        EXPECT(aclrtNotifyGetExportKey(nA, kA, 65, 0), ACL_SUCCESS);
        /* The owner's own notify, once exported, in a batch reset: as for an imported one. */
        EXPECT(aclrtNotifyBatchReset(&nA, 1), IPC_BATCH_RESET());
        EXPECT(aclrtCreateNotify(&nB, 0), ACL_SUCCESS);
        EXPECT(aclrtNotifyGetExportKey(nB, kB, 65, ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION),
               ACL_SUCCESS);
        EXPECT(aclrtGetNotifyId(nB, &idB), ACL_SUCCESS);
        EXPECT(aclrtCreateNotify(&nC, 0), ACL_SUCCESS);
        EXPECT(aclrtNotifyGetExportKey(nC, kC, 65, 0), ACL_SUCCESS);
        EXPECT(aclrtDestroyNotify(nC), ACL_SUCCESS);
        EXPECT(aclrtCreateNotify(&nD, 0), ACL_SUCCESS);
        EXPECT(aclrtNotifyGetExportKey(nD, kD, 65, 0), ACL_SUCCESS);
        EXPECT(aclrtGetNotifyId(nD, &idD), ACL_SUCCESS);
        int32_t cp = child_pid;
        if (soc->inter) {
            /* Entries apply in order up to the first bad one: the child's stays. */
            /* The child imports nD on device 1. */
            aclrtServerPid e[2] = {{(uint32_t)dev1, &cp, 1}, {(uint32_t)dev1, NULL, 1}};
            EXPECT(aclrtNotifySetImportPidInterServer(nD, e, 2), ACL_ERROR_RT_PARAM_INVALID);
        } else {
            EXPECT(aclrtNotifySetImportPid(nD, &cp, 1), ACL_SUCCESS);
        }
        /* The owner waits on nB; the child's record releases it. */
        EXPECT(aclrtWaitAndResetNotify(nB, s0, 0), ACL_SUCCESS);
        send_line(wr, "KEYS %s %s %s %s %u %u", kA, kB, kC, kD, idB, idD);
    } else {
        send_line(wr, "NOIPC");
    }
    recv_line(rd, line, sizeof line);
    unsigned long long foreign = 0;
    REQUIRE(sscanf(line, "DONE %llx", &foreign) == 1, "child said '%s'", line);
    if (soc->ipc) {
        EXPECT(aclrtSynchronizeStreamWithTimeout(s0, 10000), ACL_SUCCESS);
    }
    if (foreign) {
        /* A live handle of another process is garbage here. */
        EXPECT(aclrtGetNotifyId(bogus((uintptr_t)foreign), &id), ACL_ERROR_RT_INVALID_HANDLE);
        EXPECT(aclrtDestroyNotify(bogus((uintptr_t)foreign)), ACL_ERROR_RT_INVALID_HANDLE);
    }
    send_line(wr, "BYE");
    int status = 0;
    const int hung = wait_child(child, &status, 60, "errors: the importer");
    EXPECT_TRUE(!hung && WIFEXITED(status) && WEXITSTATUS(status) == 0,
                "the child (importer) failed: status %#x%s", status, hung ? " (hung)" : "");

    /* -- wait timeout, reported by synchronize (one SoC: it takes seconds) --------------- */
    if (strcmp(soc->name, "Ascend910B") == 0) {
        /* Batch reset stops at the NULL, but the element before it is reset: the wait on it
         * then times out after 1 s and the synchronize explains who could have recorded. */
        EXPECT(aclrtRecordNotify(nD, s0), ACL_SUCCESS);
        EXPECT(aclrtSynchronizeStream(s0), ACL_SUCCESS);
        aclrtNotify two[2] = {nD, NULL};
        EXPECT(aclrtNotifyBatchReset(two, 2), ACL_ERROR_RT_PARAM_INVALID);
        EXPECT(aclrtWaitAndResetNotify(nD, s0, 1), ACL_SUCCESS);
        int64_t t0 = now_ns();
        aclError r = aclrtSynchronizeStream(s0);
        int64_t ms = (now_ns() - t0) / 1000000;
        const char *m = aclGetRecentErrMsg();
        EXPECT_TRUE(r == ACL_ERROR_RT_TASK_TIMEOUT, "synchronize after a timed-out wait: %d", (int)r);
        /* A lower bound only (under 10 s too until 2026-12-07): late under load, never early. */
        EXPECT_TRUE(ms >= 900, "a 1 s wait timed out after %lld ms", (long long)ms);
        EXPECT_TRUE(m && strstr(m, "aclrtSynchronizeStream") && strstr(m, "107020"),
                    "message: %s", m ? m : "(null)");
        EXPECT_TRUE(contains_int(m, (long)getpid()), "message does not name the owner %d: %s",
                    (int)getpid(), m ? m : "(null)");
        EXPECT_TRUE(contains_int(m, (long)child_pid),
                    "message does not name the whitelisted pid %d: %s", child_pid, m ? m : "(null)");
        EXPECT_TRUE(contains_int(m, (long)idD), "message does not name notify %u: %s", idD,
                    m ? m : "(null)");
        printf("wait-timeout message: %s\n", m ? m : "(null)");
        EXPECT(aclrtSynchronizeStream(s0), ACL_SUCCESS); /* reported once */
        /* UINT32_MAX on a 910B waits for ever, like 0, whatever aclrtSetOpWaitTimeout says
         * (only Ascend310P takes that value; the conformance suite covers it). */
        EXPECT(aclrtSetOpWaitTimeout(1), ACL_SUCCESS);
        EXPECT(aclrtWaitAndResetNotify(nD, s0, UINT32_MAX), ACL_SUCCESS);
        EXPECT(aclrtSynchronizeStreamWithTimeout(s0, 2500), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
        EXPECT(aclrtRecordNotify(nD, NULL), ACL_SUCCESS);
        EXPECT(aclrtSynchronizeStreamWithTimeout(s0, 10000), ACL_SUCCESS);
        EXPECT(aclrtSetOpWaitTimeout(0), ACL_SUCCESS);
    }
    if (soc->ipc) {
        EXPECT(aclrtDestroyNotify(nA), ACL_SUCCESS);
        EXPECT(aclrtDestroyNotify(nB), ACL_SUCCESS);
        EXPECT(aclrtDestroyNotify(nD), ACL_SUCCESS);
    }

    /* -- device out of notify ids (device 2, untouched so far) --------------------------- */
    if (soc->notify) {
        EXPECT(aclrtSetDevice(2), ACL_SUCCESS);
        size_t cap = (size_t)soc->max + 1, made = 0;
        aclrtNotify *all = (aclrtNotify *)calloc(cap, sizeof *all);
        REQUIRE(all != NULL, "calloc");
        aclError r = ACL_SUCCESS;
        while (made < cap && (r = aclrtCreateNotify(&all[made], 0)) == ACL_SUCCESS) {
            made++;
        }
        EXPECT_TRUE(r == ACL_ERROR_RT_NO_NOTIFY_RESOURCE && made == soc->max,
                    "created %zu notifies, then got %d; expected %u then 207009", made, (int)r,
                    soc->max);
        (void)aclGetRecentErrMsg();
        for (size_t i = 0; i < made; i++) {
            if (aclrtDestroyNotify(all[i]) != ACL_SUCCESS) {
                EXPECT(aclrtDestroyNotify(all[i]), ACL_SUCCESS);
                break;
            }
        }
        free(all);
        aclrtNotify again = NULL;
        EXPECT(aclrtCreateNotify(&again, 0), ACL_SUCCESS); /* ids came back */
        EXPECT(aclrtDestroyNotify(again), ACL_SUCCESS);
    }

    /* -- aclrtResetDevice releases the device's streams and notifies --------------------- */
    EXPECT(aclrtSetDevice(3), ACL_SUCCESS);
    aclrtStream s3 = NULL;
    EXPECT(aclrtCreateStream(&s3), ACL_SUCCESS);
    aclrtNotify n3 = NULL;
    EXPECT(aclrtCreateNotify(&n3, 0), IF(soc->notify, 0));
    EXPECT(aclrtResetDevice(3), ACL_SUCCESS);
    EXPECT(aclrtGetDevice(&dev), ACL_ERROR_RT_CONTEXT_NULL);
    EXPECT(aclrtSetDevice(3), ACL_SUCCESS);
    EXPECT(aclrtSynchronizeStream(s3), ACL_ERROR_RT_INVALID_HANDLE);
    if (soc->notify) {
        EXPECT(aclrtDestroyNotify(n3), ACL_ERROR_RT_INVALID_HANDLE);
    }

    /* -- finalize, and a second session ---------------------------------------------------- */
    EXPECT(aclrtSetDevice(0), ACL_SUCCESS);
    EXPECT(aclFinalize(), ACL_SUCCESS);
    EXPECT(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
    /* The next runtime call starts a new session: the old session's handles are stale. */
    EXPECT(aclrtGetDevice(&dev), ACL_ERROR_RT_CONTEXT_NULL);
    EXPECT(aclrtSetDevice(0), ACL_SUCCESS);
    EXPECT(aclrtSynchronizeStream(s0), ACL_ERROR_RT_INVALID_HANDLE);
    /* That session is no aclInit: until one, aclFinalize stays repeated (CANN's
     * aclFinalizeFlag), and ends nothing. */
    EXPECT(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
    EXPECT(aclrtGetDevice(&dev), ACL_SUCCESS);
    EXPECT(aclInit(NULL), ACL_SUCCESS);
    EXPECT(aclrtGetDevice(&dev), ACL_SUCCESS);
    if (n) {
        EXPECT(aclrtRecordNotify(n, NULL), ACL_ERROR_RT_INVALID_HANDLE);
    }
    EXPECT(aclFinalize(), ACL_SUCCESS);

    if (failures) {
        fprintf(stderr, "errors [%s]: %d failure(s)\n", soc->name, failures);
        return 1;
    }
    printf("errors [%s]: every row holds\n", soc->name);
    return 0;
}
