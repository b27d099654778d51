/* ring_allreduce.c — a ring all-reduce of float buffers across N processes (2 to 8), each on
 * its own device, written only against CANN's API: reduce-scatter then all-gather, whose steps
 * are ordered only by notifies shared by key with PID whitelists, moving chunks with
 * aclrtMemcpyAsync into the neighbour's buffers (imported with aclrtIpcMemImportByKey) and
 * adding them with aclrtReduceAsync. Every rank checks the exact sum.
 *
 * Each rank r owns two notifies: data_r ("your left neighbour wrote into your buffers",
 * recorded by rank r-1) and ack_r ("your right neighbour is done with its previous step, you
 * may write into it", recorded by rank r+1). One step of rank r, all queued on one stream:
 *
 *     wait ack_r; copy one chunk into rank r+1's buffer; record data_(r+1);
 *     wait data_r; (reduce-scatter: add the chunk rank r-1 sent into our own); record ack_(r-1)
 *
 * The whole algorithm is queued at once; the host only synchronizes at the end.
 *
 * usage: ring_allreduce <exchange dir> <N> [floats per chunk, default 1024]
 * The first process forks the N-1 others before aclInit; rank r uses device r. Files in the
 * exchange dir (empty at the start: one of an earlier run is refused): pid<r>, and the keys
 * k<r>.<name>. Exit 0 and "ring_allreduce N=<N>: ok" when
 * every rank has the exact sum. */
#include <sys/wait.h>

#include "common.h"

static const char *g_dir;
static int g_n, g_chunk;

static void put_key(int rank, const char *name, const char *key) {
    char file[64];
    snprintf(file, sizeof file, "k%d.%s", rank, name);
    put_file(g_dir, file, key, strlen(key));
}

static void get_key(int rank, const char *name, char *key) {
    char file[64];
    snprintf(file, sizeof file, "k%d.%s", rank, name);
    get_file(g_dir, file, key, 65, 30000);
}

static int get_pid(int rank) {
    char file[32], buf[32];
    snprintf(file, sizeof file, "pid%d", rank);
    get_file(g_dir, file, buf, sizeof buf, 30000);
    return atoi(buf);
}

static void mark(const char *what, int rank) {
    char file[64];
    snprintf(file, sizeof file, "%s%d", what, rank);
    put_file(g_dir, file, "1", 1);
}

static void wait_all(const char *what) {
    char file[64], buf[8];
    for (int i = 0; i < g_n; i++) {
        snprintf(file, sizeof file, "%s%d", what, i);
        get_file(g_dir, file, buf, sizeof buf, 60000);
    }
}

static int run_rank(int r) {
    set_rank_role(r);
    const int n = g_n, c = g_chunk, left = (r + n - 1) % n, right = (r + 1) % n;
    const size_t chunk_bytes = (size_t)c * sizeof(float), total = chunk_bytes * (size_t)n;

    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(r));
    int32_t me = 0;
    CHECK(aclrtDeviceGetBareTgid(&me));
    char text[32];
    snprintf(text, sizeof text, "%d", (int)me);
    char file[32];
    snprintf(file, sizeof file, "pid%d", r);
    put_file(g_dir, file, text, strlen(text));
    int32_t left_pid = get_pid(left), right_pid = get_pid(right);

    /* Our buffers: the data, and where the left neighbour puts its partial sums. */
    float *host = NULL;
    void *data = NULL, *recv = NULL;
    CHECK(aclrtMallocHost((void **)&host, total));
    CHECK(aclrtMalloc(&data, total, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&recv, total, ACL_MEM_MALLOC_HUGE_FIRST));
    for (size_t i = 0; i < (size_t)n * c; i++) host[i] = (float)(r + 1) * (float)(i % 97 + 1);
    CHECK(aclrtMemcpy(data, total, host, total, ACL_MEMCPY_HOST_TO_DEVICE));

    /* Our notifies, whitelisted for the neighbour that records each. */
    aclrtNotify data_n, ack_n;
    CHECK(aclrtCreateNotify(&data_n, 0));
    CHECK(aclrtCreateNotify(&ack_n, 0));
    char key[65];
    CHECK(aclrtNotifyGetExportKey(data_n, key, sizeof key, 0));
    CHECK(aclrtNotifySetImportPid(data_n, &left_pid, 1));
    put_key(r, "data_n", key);
    CHECK(aclrtNotifyGetExportKey(ack_n, key, sizeof key, 0));
    CHECK(aclrtNotifySetImportPid(ack_n, &right_pid, 1));
    put_key(r, "ack_n", key);
    /* Our buffers, whitelisted for the left neighbour, which writes into them. */
    char data_key[65], recv_key[65];
    CHECK(aclrtIpcMemGetExportKey(data, total, data_key, sizeof data_key, 0));
    CHECK(aclrtIpcMemSetImportPid(data_key, &left_pid, 1));
    put_key(r, "data_m", data_key);
    CHECK(aclrtIpcMemGetExportKey(recv, total, recv_key, sizeof recv_key, 0));
    CHECK(aclrtIpcMemSetImportPid(recv_key, &left_pid, 1));
    put_key(r, "recv_m", recv_key);

    /* The neighbours' halves. */
    aclrtNotify right_data_n, left_ack_n;
    void *right_data = NULL, *right_recv = NULL;
    char right_data_key[65], right_recv_key[65];
    get_key(right, "data_n", key);
    CHECK(aclrtNotifyImportByKey(&right_data_n, key, ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS));
    get_key(left, "ack_n", key);
    CHECK(aclrtNotifyImportByKey(&left_ack_n, key, ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS));
    get_key(right, "data_m", right_data_key);
    CHECK(aclrtIpcMemImportByKey(&right_data, right_data_key, ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS));
    get_key(right, "recv_m", right_recv_key);
    CHECK(aclrtIpcMemImportByKey(&right_recv, right_recv_key, ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS));

    /* The whole ring, queued at once. */
    aclrtStream s;
    CHECK(aclrtCreateStream(&s));
    const ring_t ring = {.n = n, .rank = r, .chunk_bytes = chunk_bytes, .data = data,
                         .recv = recv, .right_data = right_data, .right_recv = right_recv,
                         .data_n = data_n, .ack_n = ack_n, .right_data_n = right_data_n,
                         .left_ack_n = left_ack_n, .wait_s = 60, .type = ACL_FLOAT};
    CHECK(aclrtRecordNotify(left_ack_n, s)); /* the left neighbour may write into us */
    for (int step = 0; step < ring_steps(&ring); step++) ring_step(&ring, step, s);
    CHECK(aclrtSynchronizeStream(s));

    CHECK(aclrtMemcpy(host, total, data, total, ACL_MEMCPY_DEVICE_TO_HOST));
    const float ranks = (float)(n * (n + 1) / 2);
    for (size_t i = 0; i < (size_t)n * c; i++) {
        const float want = ranks * (float)(i % 97 + 1);
        REQUIRE(host[i] == want, "element %zu is %.1f, expected %.1f", i, host[i], want);
    }

    /* Importers close first, then owners withdraw and free (CANN's order). */
    mark("checked", r);
    wait_all("checked");
    CHECK(aclrtIpcMemClose(right_data_key));
    CHECK(aclrtIpcMemClose(right_recv_key));
    CHECK(aclrtDestroyNotify(right_data_n));
    CHECK(aclrtDestroyNotify(left_ack_n));
    mark("closed", r);
    wait_all("closed");
    CHECK(aclrtIpcMemClose(data_key));
    CHECK(aclrtIpcMemClose(recv_key));
    CHECK(aclrtFree(data));
    CHECK(aclrtFree(recv));
    CHECK(aclrtFreeHost(host));
    CHECK(aclrtDestroyNotify(data_n));
    CHECK(aclrtDestroyNotify(ack_n));
    CHECK(aclrtDestroyStream(s));
    CHECK(aclFinalize());
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s <exchange dir> <N> [floats per chunk]\n", argv[0]);
        return 2;
    }
    g_dir = argv[1];
    g_n = atoi(argv[2]);
    g_chunk = argc > 3 ? atoi(argv[3]) : 1024;
    if (g_n < 2 || g_n > 8 || g_chunk < 1) {
        fprintf(stderr, "N must be 2 to 8 and the chunk positive\n");
        return 2;
    }
    require_fresh(g_dir, "pid0");
    fflush(stdout);
    pid_t kids[8];
    for (int r = 1; r < g_n; r++) {
        kids[r] = fork();
        REQUIRE(kids[r] >= 0, "fork: %s", strerror(errno));
        if (kids[r] == 0) {
            _exit(run_rank(r));
        }
    }
    int failed = run_rank(0);
    for (int r = 1; r < g_n; r++) {
        int st = 0;
        REQUIRE(waitpid(kids[r], &st, 0) == kids[r], "waitpid: %s", strerror(errno));
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "[ring] rank %d failed (status %#x)\n", r, st);
            failed = 1;
        }
    }
    if (failed) return 1;
    printf("ring_allreduce N=%d: ok\n", g_n);
    return 0;
}
