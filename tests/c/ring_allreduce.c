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
 * With R rounds (R > 1) the all-reduces follow one another on the device while the host
 * thread keeps enqueuing, at most two rounds ahead of what it has checked:
 *
 *   comm stream: wait event out_done (the previous round's sum has left `data`); copy the
 *                round's input (pinned host memory) in; the ring's steps; record `ready`;
 *   out stream:  wait `ready`; copy `data` out to the round's pinned result buffer; record
 *                out_done and host_done[k % 2];
 *   host:        before round k, aclrtSynchronizeEvent(host_done[k % 2]), check round k - 2's
 *                every element, refill the input buffer.
 *
 * After the last round each rank records an IPC event (ACL_EVENT_IPC) on its comm stream,
 * says so in the exchange dir, and makes a stream wait on every other rank's event
 * (aclrtIpcOpenEventHandle, aclrtStreamWaitEvent) before withdrawing what the others import:
 * a barrier on the devices.
 *
 * usage: ring_allreduce <exchange dir> <N> [floats per chunk, default 1024] [rounds R, 1]
 * The first process forks the N-1 others before aclInit; rank r uses device r. Files in the
 * exchange dir (empty at the start: one of an earlier run is refused): pid<r>, and the keys
 * k<r>.<name>. Exit 0 and "ring_allreduce N=<N>: ok" (R > 1: "ring_allreduce N=<N> R=<R>:
 * ok") when every rank has the exact sum (of every round). */
#include <sys/wait.h>

#include "common.h"

static const char *g_dir;
static int g_n, g_chunk, g_rounds;

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

/* Rank r's input of round k, element i; the sum over the ranks is exact in float. */
static float input(int r, int k, size_t i) { return (float)(r + 1) * (float)(i % 97 + 1) + (float)k; }

/* R rounds, pipelined (see the top), then the IPC event barrier; the ring's buffers, notifies
 * and imports are the caller's. */
static void rounds(const ring_t *ring, size_t total) {
    const int n = ring->n, r = ring->rank;
    const size_t elems = total / sizeof(float);
    float *in[2], *out[2];
    for (int b = 0; b < 2; b++) {
        CHECK(aclrtMallocHost((void **)&in[b], total));
        CHECK(aclrtMallocHost((void **)&out[b], total));
    }
    aclrtStream comm, outs, barrier;
    CHECK(aclrtCreateStream(&comm));
    CHECK(aclrtCreateStream(&outs));
    CHECK(aclrtCreateStream(&barrier));
    aclrtEvent ready, out_done, host_done[2], fin;
    CHECK(aclrtCreateEvent(&ready));
    CHECK(aclrtCreateEvent(&out_done));
    CHECK(aclrtCreateEvent(&host_done[0]));
    CHECK(aclrtCreateEvent(&host_done[1]));
    aclrtIpcEventHandle fin_h;
    CHECK(aclrtCreateEventExWithFlag(&fin, ACL_EVENT_IPC));
    CHECK(aclrtIpcGetEventHandle(fin, &fin_h));
    char file[64];
    snprintf(file, sizeof file, "k%d.fin", r);
    put_file(g_dir, file, &fin_h, sizeof fin_h);

    const float ranks = (float)(n * (n + 1) / 2);
    CHECK(aclrtRecordNotify(ring->left_ack_n, comm)); /* the left neighbour may write into us */
    for (int k = 0; k < g_rounds + 2; k++) {
        const int b = k % 2;
        if (k >= 2) {
            /* Round k - 2 is out: check it; its buffers are the host's again. */
            CHECK(aclrtSynchronizeEvent(host_done[b]));
            for (size_t i = 0; i < elems; i++) {
                const float want = ranks * (float)(i % 97 + 1) + (float)(n * (k - 2));
                REQUIRE(out[b][i] == want, "round %d element %zu is %.1f, expected %.1f", k - 2,
                        i, out[b][i], want);
            }
        }
        if (k >= g_rounds) continue;
        for (size_t i = 0; i < elems; i++) in[b][i] = input(r, k, i);
        if (k > 0) CHECK(aclrtStreamWaitEvent(comm, out_done));
        CHECK(aclrtMemcpyAsync(ring->data, total, in[b], total, ACL_MEMCPY_HOST_TO_DEVICE, comm));
        for (int step = 0; step < ring_steps(ring); step++) ring_step(ring, step, comm);
        CHECK(aclrtRecordEvent(ready, comm));
        CHECK(aclrtStreamWaitEvent(outs, ready));
        CHECK(aclrtMemcpyAsync(out[b], total, ring->data, total, ACL_MEMCPY_DEVICE_TO_HOST, outs));
        CHECK(aclrtRecordEvent(out_done, outs));
        CHECK(aclrtRecordEvent(host_done[b], outs));
    }

    /* The barrier: an IPC event wait passes once the record issued before it has run, so each
     * rank waits only after every rank said it recorded. */
    CHECK(aclrtRecordEvent(fin, comm));
    mark("fin", r);
    wait_all("fin");
    aclrtEvent others[8] = {0};
    for (int j = 0; j < n; j++) {
        if (j == r) continue;
        aclrtIpcEventHandle h;
        char raw[sizeof h + 1];
        snprintf(file, sizeof file, "k%d.fin", j);
        REQUIRE(get_file(g_dir, file, raw, sizeof raw, 30000) == sizeof h,
                "rank %d's event handle", j);
        memcpy(&h, raw, sizeof h);
        CHECK(aclrtIpcOpenEventHandle(h, &others[j]));
        CHECK(aclrtStreamWaitEvent(barrier, others[j]));
    }
    CHECK(aclrtSynchronizeStream(barrier));
    CHECK(aclrtSynchronizeStream(comm));
    CHECK(aclrtSynchronizeStream(outs));
    /* Our event goes only once every rank opened it: a handle whose event every holder
     * destroyed opens nothing (107017). */
    mark("opened", r);
    wait_all("opened");
    for (int j = 0; j < n; j++)
        if (others[j]) CHECK(aclrtDestroyEvent(others[j]));
    for (int b = 0; b < 2; b++) {
        CHECK(aclrtFreeHost(in[b]));
        CHECK(aclrtFreeHost(out[b]));
        CHECK(aclrtDestroyEvent(host_done[b]));
    }
    CHECK(aclrtDestroyEvent(ready));
    CHECK(aclrtDestroyEvent(out_done));
    CHECK(aclrtDestroyEvent(fin));
    CHECK(aclrtDestroyStream(comm));
    CHECK(aclrtDestroyStream(outs));
    CHECK(aclrtDestroyStream(barrier));
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

    const ring_t ring = {.n = n, .rank = r, .chunk_bytes = chunk_bytes, .data = data,
                         .recv = recv, .right_data = right_data, .right_recv = right_recv,
                         .data_n = data_n, .ack_n = ack_n, .right_data_n = right_data_n,
                         .left_ack_n = left_ack_n, .wait_s = 60, .type = ACL_FLOAT};
    if (g_rounds > 1) {
        rounds(&ring, total);
    } else {
        /* The whole ring, queued at once. */
        aclrtStream s;
        CHECK(aclrtCreateStream(&s));
        CHECK(aclrtRecordNotify(left_ack_n, s)); /* the left neighbour may write into us */
        for (int step = 0; step < ring_steps(&ring); step++) ring_step(&ring, step, s);
        CHECK(aclrtSynchronizeStream(s));
        CHECK(aclrtDestroyStream(s));

        CHECK(aclrtMemcpy(host, total, data, total, ACL_MEMCPY_DEVICE_TO_HOST));
        const float ranks = (float)(n * (n + 1) / 2);
        for (size_t i = 0; i < (size_t)n * c; i++) {
            const float want = ranks * (float)(i % 97 + 1);
            REQUIRE(host[i] == want, "element %zu is %.1f, expected %.1f", i, host[i], want);
        }
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
    CHECK(aclFinalize());
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s <exchange dir> <N> [floats per chunk] [rounds]\n", argv[0]);
        return 2;
    }
    g_dir = argv[1];
    g_n = atoi(argv[2]);
    g_chunk = argc > 3 ? atoi(argv[3]) : 1024;
    g_rounds = argc > 4 ? atoi(argv[4]) : 1;
    if (g_n < 2 || g_n > 8 || g_chunk < 1 || g_rounds < 1) {
        fprintf(stderr, "N must be 2 to 8, the chunk and the rounds positive\n");
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
    if (g_rounds > 1)
        printf("ring_allreduce N=%d R=%d: ok\n", g_n, g_rounds);
    else
        printf("ring_allreduce N=%d: ok\n", g_n);
    return 0;
}
