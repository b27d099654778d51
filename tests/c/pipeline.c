/* pipeline.c — a pipeline of N processes (more of them than the machine has CPUs, sharing
 * the devices), written only against CANN's API as a CANN user writes one: each stage owns
 * two device buffers (double buffering), exports them to the stage before it with
 * aclrtIpcMemGetExportKey and a PID whitelist (aclrtIpcMemSetImportPid), and owns two pairs of
 * notifies shared by key with PID whitelists: full[s] (recorded by the stage before, "slot s of
 * your buffers holds a batch") and free[s] (recorded by the stage after, "you may write into
 * my slot s again").
 *
 * Stage r, round k, slot s = k % 2, all queued by the host thread while the streams run:
 *
 *   in  stream: stage 0: wait event sent[s] (from round 2 on: the out stream has sent the
 *               batch of round k - 2 on), aclrtMemcpyAsync host (aclrtMallocHost) -> buf[s];
 *               others: wait full[s];
 *               aclrtReduceAsync buf[s] += add (a device buffer of r + 1 in every word);
 *               record event done[s] (an Ex event)
 *   out stream: wait done[s] (aclrtStreamWaitEvent);
 *               not the last: wait free[s] (from round 2 on), aclrtMemcpyAsync buf[s] -> the
 *               next stage's imported buf[s] (device to device), record its full[s],
 *               record event sent[s];
 *               the last: aclrtMemcpyAsync buf[s] -> host (aclrtMallocHost memory of round k);
 *               not the first: record the stage before's free[s] (its data has left buf[s])
 *
 * The last stage checks every word of every round: base + 1 + 2 + ... + N. The host stays at
 * most four rounds ahead of the out stream (aclrtSynchronizeEvent on an event recorded
 * after each round), so it keeps enqueuing while the streams run.
 *
 * usage: pipeline <N> [rounds, default 64] [words per batch, default 4096] [hosts, default 1]
 * The first process forks the N-1 others before aclInit; stage r uses device
 * r % (aclrtGetDeviceCount), in a context of its own (aclrtCreateContext). With hosts > 1
 * (Ascend910_93, ACL_NOTIFY_SIM_CLUSTER set) the stages are split in order among that many
 * SuperPod servers, each a host of its own (server id h, namespace
 * $ACL_NOTIFY_SIM_NAMESPACE-host<h>): the neighbours on another server are whitelisted with
 * aclrtNotifySetImportPidInterServer / aclrtIpcMemImportPidInterServer, and what crosses
 * hosts (copies, records) goes through etcd. Keys, PIDs, server ids and SuperPod device ids
 * (the sdid a peer on another server whitelists) travel through files in a fresh directory
 * under $TMPDIR, removed at the end. Exit 0 and "pipeline N=<N>: ok". */
#include "common.h"
#include "sim_host.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define MAX_STAGES 32
#define AHEAD 4

static char g_dir[4096];
static int g_n, g_rounds, g_words, g_hosts = 1;

/* Whitelists process `pid` of server `server`, whose device has SuperPod device id `sdid`
 * (this process is on `mine`), for notify `n` and, when `mem_key` is not NULL, for the memory
 * export `mem_key`. */
static void allow(aclrtNotify n, const char *mem_key, long long server, long long sdid,
                  int32_t pid, long long mine) {
    if (server == mine) {
        CHECK(aclrtNotifySetImportPid(n, &pid, 1));
        if (mem_key) CHECK(aclrtIpcMemSetImportPid(mem_key, &pid, 1));
    } else {
        /* The entry names the peer's device by its sdid, not its server (CANN's aclrtServerPid,
         * docs/zh/api_ref/25-04_Structs.md): each side reads its own with aclrtGetDeviceInfo. */
        aclrtServerPid sp = {(uint32_t)sdid, &pid, 1};
        CHECK(aclrtNotifySetImportPidInterServer(n, &sp, 1));
        if (mem_key) CHECK(aclrtIpcMemImportPidInterServer(mem_key, &sp, 1));
    }
}

static uint32_t word(int round, int i) { return (uint32_t)round * 100003u + (uint32_t)i * 3u; }

static void put_text(const char *name, int stage, const char *text) {
    char file[64];
    snprintf(file, sizeof file, "%s.%d", name, stage);
    put_file(g_dir, file, text, strlen(text));
}

static void get_text(const char *name, int stage, char *buf, size_t cap) {
    char file[64];
    snprintf(file, sizeof file, "%s.%d", name, stage);
    get_file(g_dir, file, buf, cap, 60000);
}

static int run_stage(int r) {
    static char role[16];
    snprintf(role, sizeof role, "stage%d", r);
    g_role = role;
    const int n = g_n, first = r == 0, last = r == n - 1;
    const size_t bytes = (size_t)g_words * sizeof(uint32_t);
    if (g_hosts > 1) {
        /* A SuperPod of g_hosts servers, each a host of its own (a namespace) in the cluster
         * that ACL_NOTIFY_SIM_CLUSTER names: the stages are split among them in order. */
        join_sim_host(r * g_hosts / n, "pipeline");
    }

    CHECK(aclInit(NULL));
    uint32_t devices = 0;
    CHECK(aclrtGetDeviceCount(&devices));
    const int32_t dev = (int32_t)(r % (int)devices);
    CHECK(aclrtSetDevice(dev));
    aclrtContext ctx = NULL;
    CHECK(aclrtCreateContext(&ctx, dev));
    aclrtStream in = NULL, out = NULL;
    CHECK(aclrtCreateStream(&in));
    CHECK(aclrtCreateStream(&out));

    int32_t me = 0;
    CHECK(aclrtDeviceGetBareTgid(&me));
    int64_t server = 0, sdid = 0;
    CHECK(aclrtGetDeviceInfo((uint32_t)dev, ACL_DEV_ATTR_SUPER_POD_SERVER_ID, &server));
    CHECK(aclrtGetDeviceInfo((uint32_t)dev, ACL_DEV_ATTR_SUPER_POD_DEVICE_ID, &sdid));
    char text[512];
    snprintf(text, sizeof text, "%lld %lld %d", (long long)server, (long long)sdid, (int)me);
    put_text("pid", r, text);
    int32_t prev_pid = 0, next_pid = 0;
    long long prev_server = 0, next_server = 0, prev_sdid = 0, next_sdid = 0;
    if (!first) {
        get_text("pid", r - 1, text, sizeof text);
        REQUIRE(sscanf(text, "%lld %lld %d", &prev_server, &prev_sdid, &prev_pid) == 3,
                "bad pid line '%s'", text);
    }
    if (!last) {
        get_text("pid", r + 1, text, sizeof text);
        REQUIRE(sscanf(text, "%lld %lld %d", &next_server, &next_sdid, &next_pid) == 3,
                "bad pid line '%s'", text);
    }

    /* Our slots, the addend, the notifies; exported to the neighbours that use them. */
    void *buf[2] = {NULL, NULL}, *add = NULL;
    aclrtNotify full[2] = {NULL, NULL}, freed[2] = {NULL, NULL};
    char buf_key[2][65], full_key[2][65], free_key[2][65];
    for (int s = 0; s < 2; s++) {
        CHECK(aclrtMalloc(&buf[s], bytes, ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK(aclrtCreateNotify(&full[s], ACL_NOTIFY_DEFAULT));
        CHECK(aclrtCreateNotify(&freed[s], ACL_NOTIFY_DEFAULT));
        if (!first) { /* the stage before writes into buf[s] and records full[s] */
            CHECK(aclrtIpcMemGetExportKey(buf[s], bytes, buf_key[s], sizeof buf_key[s], 0));
            CHECK(aclrtNotifyGetExportKey(full[s], full_key[s], sizeof full_key[s],
                                          ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT));
            allow(full[s], buf_key[s], prev_server, prev_sdid, prev_pid, (long long)server);
        }
        if (!last) { /* the stage after records free[s] */
            CHECK(aclrtNotifyGetExportKey(freed[s], free_key[s], sizeof free_key[s],
                                          ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT));
            allow(freed[s], NULL, next_server, next_sdid, next_pid, (long long)server);
        }
    }
    if (!first) {
        snprintf(text, sizeof text, "%s %s %s %s", buf_key[0], buf_key[1], full_key[0],
                 full_key[1]);
        put_text("down", r, text); /* for stage r - 1 */
    }
    if (!last) {
        snprintf(text, sizeof text, "%s %s", free_key[0], free_key[1]);
        put_text("up", r, text); /* for stage r + 1 */
    }
    uint32_t *ones = NULL;
    CHECK(aclrtMallocHost((void **)&ones, bytes));
    for (int i = 0; i < g_words; i++) ones[i] = (uint32_t)r + 1;
    CHECK(aclrtMalloc(&add, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemcpy(add, bytes, ones, bytes, ACL_MEMCPY_HOST_TO_DEVICE));

    /* The neighbours' objects. */
    void *next_buf[2] = {NULL, NULL};
    aclrtNotify next_full[2] = {NULL, NULL}, prev_free[2] = {NULL, NULL};
    char k[4][65];
    if (!last) {
        get_text("down", r + 1, text, sizeof text);
        REQUIRE(sscanf(text, "%64s %64s %64s %64s", k[0], k[1], k[2], k[3]) == 4,
                "bad key line '%s'", text);
        for (int s = 0; s < 2; s++) {
            CHECK(aclrtIpcMemImportByKey(&next_buf[s], k[s],
                                         ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS));
            CHECK(aclrtNotifyImportByKey(&next_full[s], k[2 + s],
                                         ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS));
        }
    }
    if (!first) {
        get_text("up", r - 1, text, sizeof text);
        REQUIRE(sscanf(text, "%64s %64s", k[0], k[1]) == 2, "bad key line '%s'", text);
        for (int s = 0; s < 2; s++) {
            CHECK(aclrtNotifyImportByKey(&prev_free[s], k[s],
                                         ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS));
        }
    }

    /* Host memory: the first stage's input of every round, the last stage's output. */
    uint32_t *host = NULL;
    const size_t host_bytes = bytes * (size_t)g_rounds;
    CHECK(aclrtMallocHost((void **)&host, host_bytes));
    if (first) {
        for (int k2 = 0; k2 < g_rounds; k2++)
            for (int i = 0; i < g_words; i++) host[(size_t)k2 * g_words + i] = word(k2, i);
    } else {
        memset(host, 0, host_bytes);
    }

    aclrtEvent done[2], sent[2], round_end[AHEAD];
    for (int s = 0; s < 2; s++) {
        CHECK(aclrtCreateEventExWithFlag(&done[s], ACL_EVENT_SYNC));
        CHECK(aclrtCreateEventExWithFlag(&sent[s], ACL_EVENT_SYNC));
    }
    for (int a = 0; a < AHEAD; a++) CHECK(aclrtCreateEventExWithFlag(&round_end[a], ACL_EVENT_SYNC));

    for (int round = 0; round < g_rounds; round++) {
        const int s = round % 2;
        uint32_t *h = host + (size_t)round * g_words;
        if (round >= AHEAD) { /* stay at most AHEAD rounds ahead of the streams */
            CHECK(aclrtSynchronizeEvent(round_end[round % AHEAD]));
        }
        if (first) {
            /* buf[s] is ours to fill again once the out stream has sent round - 2 on */
            if (round >= 2) CHECK(aclrtStreamWaitEvent(in, sent[s]));
            CHECK(aclrtMemcpyAsync(buf[s], bytes, h, bytes, ACL_MEMCPY_HOST_TO_DEVICE, in));
        } else {
            CHECK(aclrtWaitAndResetNotify(full[s], in, 30));
        }
        /* ACL_INT32: Atlas A3 does not reduce uint32 (CANN documents it on the 950 family
         * only); a wrapping int32 sum has the same bits. */
        CHECK(aclrtReduceAsync(buf[s], add, (uint64_t)bytes, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM,
                               ACL_INT32, in, NULL));
        CHECK(aclrtRecordEvent(done[s], in));
        CHECK(aclrtStreamWaitEvent(out, done[s]));
        if (!last) {
            if (round >= 2) CHECK(aclrtWaitAndResetNotify(freed[s], out, 30));
            CHECK(aclrtMemcpyAsync(next_buf[s], bytes, buf[s], bytes,
                                   ACL_MEMCPY_DEVICE_TO_DEVICE, out));
            CHECK(aclrtRecordNotify(next_full[s], out));
            CHECK(aclrtRecordEvent(sent[s], out));
        } else {
            CHECK(aclrtMemcpyAsync(h, bytes, buf[s], bytes, ACL_MEMCPY_DEVICE_TO_HOST, out));
        }
        if (!first) CHECK(aclrtRecordNotify(prev_free[s], out));
        CHECK(aclrtRecordEvent(round_end[round % AHEAD], out));
    }
    CHECK(aclrtSynchronizeStreamWithTimeout(in, 60000));
    CHECK(aclrtSynchronizeStreamWithTimeout(out, 60000));

    if (last) {
        const uint32_t sum = (uint32_t)(n * (n + 1) / 2);
        for (int round = 0; round < g_rounds; round++)
            for (int i = 0; i < g_words; i++) {
                uint32_t got = host[(size_t)round * g_words + i], want = word(round, i) + sum;
                REQUIRE(got == want, "round %d word %d is %u, expected %u", round, i, got, want);
            }
    }

    /* Importers let go first, then owners (CANN's order). */
    put_text("checked", r, "1");
    for (int i = 0; i < n; i++) get_text("checked", i, text, sizeof text);
    if (!last) {
        get_text("down", r + 1, text, sizeof text);
        REQUIRE(sscanf(text, "%64s %64s", k[0], k[1]) == 2, "bad key line '%s'", text);
        for (int s = 0; s < 2; s++) {
            CHECK(aclrtIpcMemClose(k[s]));
            CHECK(aclrtDestroyNotify(next_full[s]));
        }
    }
    if (!first)
        for (int s = 0; s < 2; s++) CHECK(aclrtDestroyNotify(prev_free[s]));
    put_text("closed", r, "1");
    for (int i = 0; i < n; i++) get_text("closed", i, text, sizeof text);
    for (int s = 0; s < 2; s++) {
        if (!first) CHECK(aclrtIpcMemClose(buf_key[s]));
        CHECK(aclrtFree(buf[s]));
        CHECK(aclrtDestroyNotify(full[s]));
        CHECK(aclrtDestroyNotify(freed[s]));
        CHECK(aclrtDestroyEvent(done[s]));
        CHECK(aclrtDestroyEvent(sent[s]));
    }
    for (int a = 0; a < AHEAD; a++) CHECK(aclrtDestroyEvent(round_end[a]));
    CHECK(aclrtFree(add));
    CHECK(aclrtFreeHost(host));
    CHECK(aclrtFreeHost(ones));
    CHECK(aclrtDestroyStream(in));
    CHECK(aclrtDestroyStream(out));
    CHECK(aclrtDestroyContext(ctx));
    CHECK(aclrtResetDevice(dev));
    CHECK(aclFinalize());
    return 0;
}

/* Removes the run's exchange directory (only files this program wrote are in it). */
static void remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[8192];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s <N> [rounds] [words per batch] [hosts]\n", argv[0]);
        return 2;
    }
    g_n = atoi(argv[1]);
    g_rounds = argc > 2 ? atoi(argv[2]) : 64;
    g_words = argc > 3 ? atoi(argv[3]) : 4096;
    g_hosts = argc > 4 ? atoi(argv[4]) : 1;
    if (g_n < 2 || g_n > MAX_STAGES || g_rounds < 1 || g_words < 1 || g_hosts < 1 ||
        g_hosts > g_n) {
        fprintf(stderr, "N must be 2 to %d, rounds and words positive, hosts 1 to N\n",
                MAX_STAGES);
        return 2;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/acl-pipeline-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    REQUIRE(mkdtemp(g_dir) != NULL, "mkdtemp %s: %s", g_dir, strerror(errno));
    fflush(stdout);
    pid_t kids[MAX_STAGES];
    for (int r = 1; r < g_n; r++) {
        kids[r] = fork();
        REQUIRE(kids[r] >= 0, "fork: %s", strerror(errno));
        if (kids[r] == 0) _exit(run_stage(r));
    }
    int failed = run_stage(0);
    for (int r = 1; r < g_n; r++) {
        int st = 0;
        REQUIRE(waitpid(kids[r], &st, 0) == kids[r], "waitpid: %s", strerror(errno));
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "[pipeline] stage %d failed (status %#x)\n", r, st);
            failed = 1;
        }
    }
    remove_dir(g_dir);
    if (failed) return 1;
    printf("pipeline N=%d: ok\n", g_n);
    return 0;
}
