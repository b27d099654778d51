/* collective.c — one rank of an HCCL-style collective job, written only against acl/acl.h: a
 * ring all-reduce (reduce-scatter, then all-gather) of int32 buffers, as a collective library
 * runs it over the ranks of a job, one process per rank, on one host or across the servers
 * of a SuperPod (ACL_NOTIFY_SIM_CLUSTER: each server a host of its own).
 *
 * Every rank allocates two buffers of device memory (its data, and where its left neighbour
 * puts partial sums) and two notifies (data: "your left neighbour wrote into you"; ack: "your
 * right neighbour is done with its previous step, you may write into it"), exports all four
 * by IPC key with a PID whitelist naming the neighbour that uses each
 * (aclrtNotifySetImportPid / aclrtIpcMemSetImportPid on its server,
 * aclrtNotifySetImportPidInterServer / aclrtIpcMemImportPidInterServer across servers), and
 * imports its neighbours' halves. One step, queued on one stream (the whole job at once):
 *
 *     wait ack; copy a chunk into the right neighbour's memory; record its data notify;
 *     wait data; (reduce-scatter: add the chunk received into our own); record the left
 *     neighbour's ack
 *
 * Every rank checks every element of the sum. Each job ends with a barrier after which every
 * rank checks that its device's memory is all free again (aclrtGetMemInfo: nothing leaked
 * by any rank of the job), before the next job starts.
 *
 * usage: collective <exchange dir> <rank> <ranks> [option...]
 *   jobs=J      J jobs one after the other in this process (default 1), each creating,
 *               exporting, importing and tearing down everything anew
 *   chunk=C     int32 per chunk (default 256; a rank's buffers hold ranks x C)
 *   wait=T      each notify wait's timeout in seconds (default 30)
 *   late=MS     this rank starts MS ms late (before aclInit); the others wait for it
 *   kill=S      this rank SIGKILLs itself after running S steps of the first job
 *   victim=K    (given to every other rank) rank K is killed so: the first job's stream fails
 *               with 107020 within the wait timeout, rank K+1's message names K dead; every
 *               survivor tears down with 0 and the job ends there
 * Ranks use device rank % aclrtGetDeviceCount. Files in the exchange dir (empty at the start:
 * one of an earlier run is refused): pid.<j>.<r> ("<server> <sdid> <pid>": the SuperPod device
 * id is what a rank on another server whitelists), keys.<j>.<r> and the barriers'. Prints
 * "RANK <r> job <j> ok <ns>" per job and "collective rank <r>: ok"; exit 0 when every check
 * holds. */
#include "common.h"

#include <signal.h>

static const char *g_dir;
static int g_rank, g_n, g_chunk = 256, g_wait = 30, g_victim = -1, g_kill_step = -1;

/* The timeout of the file exchange: a late rank's neighbours wait this long for it. */
#define EXCHANGE_MS 60000

static void put_text(const char *what, int job, int rank, const char *text) {
    char file[64];
    snprintf(file, sizeof file, "%s.%d.%d", what, job, rank);
    put_file(g_dir, file, text, strlen(text));
}

static void get_text(const char *what, int job, int rank, char *text, size_t cap) {
    char file[64];
    snprintf(file, sizeof file, "%s.%d.%d", what, job, rank);
    get_file(g_dir, file, text, cap, EXCHANGE_MS);
}

/* Marks this rank at barrier `what` of `job`, then waits for every other living rank. */
static void barrier(const char *what, int job) {
    char buf[8];
    put_text(what, job, g_rank, "1");
    for (int i = 0; i < g_n; i++) {
        if (i != g_victim) get_text(what, job, i, buf, sizeof buf);
    }
}

/* Element i of rank r's buffer in job j, and of the sum over every rank. */
static int32_t value(int r, int j, size_t i) {
    return (r + 1) * (int32_t)(i % 97 + 1) + j;
}

static int32_t sum(int j, size_t i) {
    return g_n * (g_n + 1) / 2 * (int32_t)(i % 97 + 1) + g_n * j;
}

/* This rank's device's memory, all free (nothing any rank of the job left allocated). */
static void check_all_free(int job, const char *when) {
    size_t free_b = 0, total_b = 0;
    CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &free_b, &total_b));
    REQUIRE(free_b == total_b, "job %d, %s: %zu of the device's %zu bytes are still allocated",
            job, when, total_b - free_b, total_b);
}

/* A neighbour: its server, its device's SuperPod device id and its PID (as whitelisted). */
struct peer {
    long long server, sdid;
    int32_t pid;
};

/* Whitelists `p` for the notify `n` (when not NULL) or the memory export `mkey`. */
static void allow(long long my_server, struct peer p, aclrtNotify n, const char *mkey) {
    int32_t pid = p.pid;
    if (p.server == my_server) {
        if (n) CHECK(aclrtNotifySetImportPid(n, &pid, 1));
        else CHECK(aclrtIpcMemSetImportPid(mkey, &pid, 1));
    } else {
        /* The entry names the peer's device by its sdid, not its server (CANN's aclrtServerPid,
         * docs/zh/api_ref/25-04_Structs.md): each rank reads its own with aclrtGetDeviceInfo. */
        aclrtServerPid sp = {(uint32_t)p.sdid, &pid, 1};
        if (n) CHECK(aclrtNotifySetImportPidInterServer(n, &sp, 1));
        else CHECK(aclrtIpcMemImportPidInterServer(mkey, &sp, 1));
    }
}

/* One job; with a victim, checks the failure the first job ends with instead of the sum. */
static void run_job(int job, long long server, long long sdid, int32_t me) {
    const int n = g_n, r = g_rank, left = (r + n - 1) % n, right = (r + 1) % n;
    const size_t chunk_bytes = (size_t)g_chunk * sizeof(int32_t);
    const size_t total = chunk_bytes * (size_t)n, count = (size_t)g_chunk * (size_t)n;
    char text[320];

    snprintf(text, sizeof text, "%lld %lld %d", server, sdid, (int)me);
    put_text("pid", job, r, text);
    struct peer lp, rp;
    get_text("pid", job, left, text, sizeof text);
    REQUIRE(sscanf(text, "%lld %lld %d", &lp.server, &lp.sdid, &lp.pid) == 3,
            "bad pid file '%s'", text);
    get_text("pid", job, right, text, sizeof text);
    REQUIRE(sscanf(text, "%lld %lld %d", &rp.server, &rp.sdid, &rp.pid) == 3,
            "bad pid file '%s'", text);

    int32_t *host = NULL;
    void *data = NULL, *recv = NULL;
    CHECK(aclrtMallocHost((void **)&host, total));
    CHECK(aclrtMalloc(&data, total, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&recv, total, ACL_MEM_MALLOC_HUGE_FIRST));
    for (size_t i = 0; i < count; i++) host[i] = value(r, job, i);
    CHECK(aclrtMemcpy(data, total, host, total, ACL_MEMCPY_HOST_TO_DEVICE));

    aclrtNotify data_n, ack_n;
    CHECK(aclrtCreateNotify(&data_n, 0));
    CHECK(aclrtCreateNotify(&ack_n, 0));
    char data_nk[65], ack_nk[65], data_mk[65], recv_mk[65];
    CHECK(aclrtNotifyGetExportKey(data_n, data_nk, sizeof data_nk, 0));
    CHECK(aclrtNotifyGetExportKey(ack_n, ack_nk, sizeof ack_nk, 0));
    CHECK(aclrtIpcMemGetExportKey(data, total, data_mk, sizeof data_mk, 0));
    CHECK(aclrtIpcMemGetExportKey(recv, total, recv_mk, sizeof recv_mk, 0));
    allow(server, lp, data_n, NULL);
    allow(server, rp, ack_n, NULL);
    allow(server, lp, NULL, data_mk);
    allow(server, lp, NULL, recv_mk);
    snprintf(text, sizeof text, "%s %s %s %s", data_nk, ack_nk, data_mk, recv_mk);
    put_text("keys", job, r, text);

    char k1[65], k2[65], r_data_mk[65], r_recv_mk[65];
    get_text("keys", job, right, text, sizeof text);
    REQUIRE(sscanf(text, "%64s %64s %64s %64s", k1, k2, r_data_mk, r_recv_mk) == 4,
            "bad keys file '%s'", text);
    aclrtNotify right_data_n, left_ack_n;
    CHECK(aclrtNotifyImportByKey(&right_data_n, k1, ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS));
    void *right_data = NULL, *right_recv = NULL;
    CHECK(aclrtIpcMemImportByKey(&right_data, r_data_mk, ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS));
    CHECK(aclrtIpcMemImportByKey(&right_recv, r_recv_mk, ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS));
    get_text("keys", job, left, text, sizeof text);
    REQUIRE(sscanf(text, "%64s %64s", k1, k2) == 2, "bad keys file '%s'", text);
    CHECK(aclrtNotifyImportByKey(&left_ack_n, k2, ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS));

    aclrtStream s;
    CHECK(aclrtCreateStream(&s));
    /* A failed step (a wait for a dead rank) ends the job: the steps after it would only
     * wait out their own timeouts one after the other (CANN's default mode goes on). */
    CHECK(aclrtSetStreamFailureMode(s, ACL_STOP_ON_FAILURE));
    const int64_t t0 = now_ns();
    const int killing = job == 0 && g_kill_step >= 0;
    const ring_t ring = {.n = n, .rank = r, .chunk_bytes = chunk_bytes, .data = data,
                         .recv = recv, .right_data = right_data, .right_recv = right_recv,
                         .data_n = data_n, .ack_n = ack_n, .right_data_n = right_data_n,
                         .left_ack_n = left_ack_n, .wait_s = (uint32_t)g_wait,
                         .type = ACL_INT32};
    CHECK(aclrtRecordNotify(left_ack_n, s)); /* the left neighbour may write into us */
    for (int step = 0; step < ring_steps(&ring); step++) {
        if (killing && step == g_kill_step) {
            /* Mid-collective: the steps so far done (or failed, on a loaded machine whose
             * neighbours timed out first), the neighbours waiting on us. */
            (void)aclrtSynchronizeStream(s);
            printf("RANK %d killing itself at step %d\n", r, step);
            fflush(stdout);
            raise(SIGKILL);
        }
        ring_step(&ring, step, s);
    }
    const aclError ended = aclrtSynchronizeStream(s);
    const int64_t took = now_ns() - t0;

    if (job == 0 && g_victim >= 0) {
        /* A rank died mid-collective: this one's stream fails, within its wait's timeout. */
        const char *m = recent_msg();
        REQUIRE(ended == ACL_ERROR_RT_TASK_TIMEOUT, "the job with rank %d killed ended with %d, "
                "expected 107020: %s", g_victim, (int)ended, m);
        /* Ended by its wait's timeout (the 107020 above; a wait that never ended would not
         * return, and the program's watch ends that): not before that timeout, a wait begun
         * after t0 (a lower bound only; until 2026-12-07 also under the timeout and 10 s, which
         * a loaded machine could pass). */
        REQUIRE(took >= (int64_t)g_wait * 900000000LL, "the failure took %lld ms, its wait %d s",
                (long long)(took / 1000000), g_wait);
        if (left == g_victim) {
            /* Its data never came: the message names the dead rank. */
            snprintf(text, sizeof text, "pid %d (dead", (int)lp.pid);
            const char *cluster = strstr(m, "lease expired");
            REQUIRE(strstr(m, text) != NULL || cluster != NULL, "the timeout does not name the "
                    "killed rank (pid %d) dead: %s", (int)lp.pid, m);
        }
        printf("RANK %d job %d failed as expected after %lld ms: %.300s\n", r, job,
               (long long)(took / 1000000), m);
    } else {
        REQUIRE(ended == ACL_SUCCESS, "job %d: the ring failed with %d: %s", job, (int)ended,
                recent_msg());
        memset(host, 0, total);
        CHECK(aclrtMemcpy(host, total, data, total, ACL_MEMCPY_DEVICE_TO_HOST));
        for (size_t i = 0; i < count; i++) {
            REQUIRE(host[i] == sum(job, i), "job %d: element %zu is %d, expected %d", job, i,
                    (int)host[i], (int)sum(job, i));
        }
        printf("RANK %d job %d ok %lld\n", r, job, (long long)took);
    }
    fflush(stdout);

    /* Importers let go first, then owners withdraw and free (CANN's order). */
    barrier("checked", job);
    CHECK(aclrtIpcMemClose(r_data_mk));
    CHECK(aclrtIpcMemClose(r_recv_mk));
    CHECK(aclrtDestroyNotify(right_data_n));
    CHECK(aclrtDestroyNotify(left_ack_n));
    barrier("closed", job);
    CHECK(aclrtIpcMemClose(data_mk));
    CHECK(aclrtIpcMemClose(recv_mk));
    CHECK(aclrtFree(data));
    CHECK(aclrtFree(recv));
    CHECK(aclrtFreeHost(host));
    CHECK(aclrtDestroyNotify(data_n));
    CHECK(aclrtDestroyNotify(ack_n));
    CHECK(aclrtDestroyStream(s));
    barrier("freed", job);
    if (g_victim < 0) check_all_free(job, "after every rank freed");
    barrier("counted", job);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s <exchange dir> <rank> <ranks> [jobs=J] [chunk=C] [wait=T] "
                "[late=MS] [kill=S] [victim=K]\n", argv[0]);
        return 2;
    }
    g_dir = argv[1];
    g_rank = atoi(argv[2]);
    g_n = atoi(argv[3]);
    int jobs = 1, late = 0;
    for (int i = 4; i < argc; i++) {
        const char *a = argv[i];
        if (!strncmp(a, "jobs=", 5)) jobs = atoi(a + 5);
        else if (!strncmp(a, "chunk=", 6)) g_chunk = atoi(a + 6);
        else if (!strncmp(a, "wait=", 5)) g_wait = atoi(a + 5);
        else if (!strncmp(a, "late=", 5)) late = atoi(a + 5);
        else if (!strncmp(a, "kill=", 5)) g_kill_step = atoi(a + 5);
        else if (!strncmp(a, "victim=", 7)) g_victim = atoi(a + 7);
        else {
            fprintf(stderr, "unknown option '%s'\n", a);
            return 2;
        }
    }
    set_rank_role(g_rank);
    REQUIRE(g_n >= 2 && g_n <= 64 && g_rank >= 0 && g_rank < g_n && jobs >= 1 && g_chunk >= 1
            && g_wait >= 1 && late >= 0 && g_victim < g_n && g_kill_step < 2 * (g_n - 1),
            "bad arguments");
    REQUIRE(g_kill_step < 0 || g_victim < 0, "kill=S and victim=K go to different ranks");
    char file[32];
    snprintf(file, sizeof file, "pid.0.%d", g_rank);
    require_fresh(g_dir, file);
    if (late) sleep_ms(late);

    CHECK(aclInit(NULL));
    uint32_t devices = 0;
    CHECK(aclrtGetDeviceCount(&devices));
    const int32_t device = (int32_t)((uint32_t)g_rank % devices);
    CHECK(aclrtSetDevice(device));
    int64_t server = 0, sdid = 0;
    CHECK(aclrtGetDeviceInfo((uint32_t)device, ACL_DEV_ATTR_SUPER_POD_SERVER_ID, &server));
    CHECK(aclrtGetDeviceInfo((uint32_t)device, ACL_DEV_ATTR_SUPER_POD_DEVICE_ID, &sdid));
    int32_t me = 0;
    CHECK(aclrtDeviceGetBareTgid(&me));
    for (int j = 0; j < jobs; j++) {
        run_job(j, (long long)server, (long long)sdid, me);
        if (g_victim >= 0) break; /* the job a rank died in ends the run */
    }
    CHECK(aclrtResetDevice(device));
    CHECK(aclFinalize());
    printf("collective rank %d: ok\n", g_rank);
    return 0;
}
