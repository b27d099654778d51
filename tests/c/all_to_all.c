/* all_to_all.c — one rank of an all-to-all exchange (the pattern of an expert-parallel
 * dispatch): every rank sends a chunk to every other rank, round after round, through IPC memory
 * and notifies, written only against acl/acl.h, one process per rank.
 *
 * Every rank allocates a receive buffer of one chunk per rank and exports it by IPC key with a
 * PID whitelist naming every other rank (aclrtIpcMemSetImportPid), and creates two notifies per
 * peer: data[s] ("s wrote its chunk into you") whitelisted for s, ack[d] ("d read what you sent
 * it, you may write again") whitelisted for d. It imports every other rank's buffer and the
 * notifies that are its to record. One round, queued on one stream while the previous ones may
 * still run (the host checks each round's data once its stream got there):
 *
 *     for each peer d: (after round 0: wait ack from d); copy my chunk for d into d's buffer at
 *     my slot; record d's data notify for me
 *     for each peer s: wait data from s
 *     copy the receive buffer to the host; record each peer's ack notify for me
 *
 * Every rank checks every element it received, every round, and at the end (every rank having
 * freed) that its device's memory is all free. Waits are bounded (wait=T seconds each). Ranks
 * use device rank % aclrtGetDeviceCount.
 *
 * usage: all_to_all <exchange dir> <rank> <ranks> [rounds=R] [chunk=C] [wait=T]
 * Prints "all_to_all rank <r>: ok <rounds> rounds"; exit 0 when every check holds. */
#include "common.h"

static const char *g_dir;
static int g_rank, g_n, g_chunk = 64, g_wait = 30, g_rounds = 20;

#define EXCHANGE_MS 60000
#define MAX_RANKS 64

static void put_text(const char *what, int rank, const char *text) {
    char file[64];
    snprintf(file, sizeof file, "%s.%d", what, rank);
    put_file(g_dir, file, text, strlen(text));
}

static void get_text(const char *what, int rank, char *text, size_t cap) {
    char file[64];
    snprintf(file, sizeof file, "%s.%d", what, rank);
    get_file(g_dir, file, text, cap, EXCHANGE_MS);
}

/* Element i of what rank s sends rank d in round k. */
static int32_t value(int s, int d, int k, size_t i) {
    return (int32_t)((s * 131 + d * 17 + k * 7 + (int)i) & 0x7fffffff);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s <exchange dir> <rank> <ranks> [rounds=R] [chunk=C] [wait=T]\n",
                argv[0]);
        return 2;
    }
    g_dir = argv[1];
    g_rank = atoi(argv[2]);
    g_n = atoi(argv[3]);
    for (int i = 4; i < argc; i++) {
        const char *a = argv[i];
        if (!strncmp(a, "rounds=", 7)) g_rounds = atoi(a + 7);
        else if (!strncmp(a, "chunk=", 6)) g_chunk = atoi(a + 6);
        else if (!strncmp(a, "wait=", 5)) g_wait = atoi(a + 5);
        else {
            fprintf(stderr, "unknown option '%s'\n", a);
            return 2;
        }
    }
    set_rank_role(g_rank);
    const int n = g_n, r = g_rank;
    REQUIRE(n >= 2 && n <= MAX_RANKS && r >= 0 && r < n && g_rounds >= 1 && g_chunk >= 1
            && g_wait >= 1, "bad arguments");
    char file[32];
    snprintf(file, sizeof file, "pid.%d", r);
    require_fresh(g_dir, file);

    CHECK(aclInit(NULL));
    uint32_t devices = 0;
    CHECK(aclrtGetDeviceCount(&devices));
    const int32_t device = (int32_t)((uint32_t)r % devices);
    CHECK(aclrtSetDevice(device));
    int32_t me = 0;
    CHECK(aclrtDeviceGetBareTgid(&me));
    aclrtStream stream;
    CHECK(aclrtCreateStream(&stream));

    /* PIDs. */
    char text[64 + MAX_RANKS * 140];
    snprintf(text, sizeof text, "%d", (int)me);
    put_text("pid", r, text);
    int32_t pids[MAX_RANKS], others[MAX_RANKS];
    int no = 0;
    for (int p = 0; p < n; p++) {
        get_text("pid", p, text, sizeof text);
        REQUIRE(sscanf(text, "%d", &pids[p]) == 1, "bad pid file '%s'", text);
        if (p != r) others[no++] = pids[p];
    }

    /* My buffers, notifies and their keys. */
    const size_t chunk_bytes = (size_t)g_chunk * sizeof(int32_t), total = chunk_bytes * (size_t)n;
    void *recv = NULL, *send = NULL;
    int32_t *host_send = NULL, *host_recv = NULL;
    CHECK(aclrtMalloc(&recv, total, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&send, total, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMallocHost((void **)&host_send, total));
    CHECK(aclrtMallocHost((void **)&host_recv, total));
    char recv_key[65];
    CHECK(aclrtIpcMemGetExportKey(recv, total, recv_key, sizeof recv_key, 0));
    CHECK(aclrtIpcMemSetImportPid(recv_key, others, (size_t)no));
    aclrtNotify data[MAX_RANKS] = {0}, ack[MAX_RANKS] = {0};
    size_t at = (size_t)snprintf(text, sizeof text, "%s", recv_key);
    for (int p = 0; p < n; p++) {
        if (p == r) continue;
        char dk[65], ak[65];
        CHECK(aclrtCreateNotify(&data[p], 0));
        CHECK(aclrtCreateNotify(&ack[p], 0));
        CHECK(aclrtNotifyGetExportKey(data[p], dk, sizeof dk, 0));
        CHECK(aclrtNotifyGetExportKey(ack[p], ak, sizeof ak, 0));
        CHECK(aclrtNotifySetImportPid(data[p], &pids[p], 1));
        CHECK(aclrtNotifySetImportPid(ack[p], &pids[p], 1));
        at += (size_t)snprintf(text + at, sizeof text - at, " %d:%s:%s", p, dk, ak);
    }
    put_text("keys", r, text);

    /* Every peer's buffer, and its notifies that are mine to record. */
    void *peer_buf[MAX_RANKS] = {0};
    aclrtNotify peer_data[MAX_RANKS] = {0}, peer_ack[MAX_RANKS] = {0};
    char peer_key[MAX_RANKS][65];
    for (int p = 0; p < n; p++) {
        if (p == r) continue;
        get_text("keys", p, text, sizeof text);
        char *save = NULL, *tok = strtok_r(text, " ", &save);
        REQUIRE(tok && strlen(tok) == 64, "rank %d's keys: no memory key", p);
        snprintf(peer_key[p], sizeof peer_key[p], "%s", tok);
        int found = 0;
        while ((tok = strtok_r(NULL, " ", &save))) {
            int who = -1;
            char dk[65], ak[65];
            REQUIRE(sscanf(tok, "%d:%64[^:]:%64s", &who, dk, ak) == 3, "rank %d's keys: '%s'", p,
                    tok);
            if (who != r) continue;
            CHECK(aclrtNotifyImportByKey(&peer_data[p], dk, 0));
            CHECK(aclrtNotifyImportByKey(&peer_ack[p], ak, 0));
            found = 1;
        }
        REQUIRE(found, "rank %d exported no notifies for rank %d", p, r);
        CHECK(aclrtIpcMemImportByKey(&peer_buf[p], peer_key[p], 0));
    }

    const uint32_t wait_ms = (uint32_t)g_wait * 1000u;
    for (int k = 0; k < g_rounds; k++) {
        /* What I send this round, slot d for rank d. */
        for (int d = 0; d < n; d++) {
            for (size_t i = 0; i < (size_t)g_chunk; i++)
                host_send[(size_t)d * (size_t)g_chunk + i] = value(r, d, k, i);
        }
        CHECK(aclrtMemcpyAsync(send, total, host_send, total, ACL_MEMCPY_HOST_TO_DEVICE, stream));
        for (int j = 1; j < n; j++) {
            const int d = (r + j) % n; /* everyone starts with a different peer */
            if (k > 0) CHECK(aclrtWaitAndResetNotify(ack[d], stream, wait_ms));
            char *dst = (char *)peer_buf[d] + (size_t)r * chunk_bytes;
            const char *src = (const char *)send + (size_t)d * chunk_bytes;
            CHECK(aclrtMemcpyAsync(dst, chunk_bytes, src, chunk_bytes,
                                   ACL_MEMCPY_DEVICE_TO_DEVICE, stream));
            CHECK(aclrtRecordNotify(peer_data[d], stream));
        }
        for (int s = 0; s < n; s++)
            if (s != r) CHECK(aclrtWaitAndResetNotify(data[s], stream, wait_ms));
        CHECK(aclrtMemcpyAsync(host_recv, total, recv, total, ACL_MEMCPY_DEVICE_TO_HOST, stream));
        for (int s = 0; s < n; s++)
            if (s != r) CHECK(aclrtRecordNotify(peer_ack[s], stream));
        /* The host_send buffer is refilled next round: the round's stream must have copied it. */
        aclError e = aclrtSynchronizeStreamWithTimeout(stream, (int32_t)(2 * g_n * wait_ms));
        REQUIRE(e == ACL_SUCCESS, "round %d: the exchange failed with %d: %s", k, (int)e,
                recent_msg());
        for (int s = 0; s < n; s++) {
            if (s == r) continue;
            for (size_t i = 0; i < (size_t)g_chunk; i++) {
                const int32_t got = host_recv[(size_t)s * (size_t)g_chunk + i];
                REQUIRE(got == value(s, r, k, i), "round %d: element %zu from rank %d is %d, "
                        "expected %d", k, i, s, (int)got, (int)value(s, r, k, i));
            }
        }
    }

    /* Tear down: my imports first, then (once every rank closed its imports) my exports. */
    for (int p = 0; p < n; p++) {
        if (p == r) continue;
        CHECK(aclrtIpcMemClose(peer_key[p]));
        CHECK(aclrtDestroyNotify(peer_data[p]));
        CHECK(aclrtDestroyNotify(peer_ack[p]));
    }
    put_text("closed", r, "1");
    for (int p = 0; p < n; p++) get_text("closed", p, text, sizeof text);
    CHECK(aclrtIpcMemClose(recv_key));
    for (int p = 0; p < n; p++) {
        if (p == r) continue;
        CHECK(aclrtDestroyNotify(data[p]));
        CHECK(aclrtDestroyNotify(ack[p]));
    }
    CHECK(aclrtFree(recv));
    CHECK(aclrtFree(send));
    CHECK(aclrtFreeHost(host_send));
    CHECK(aclrtFreeHost(host_recv));
    /* Once every rank freed, nothing of the job is left on this rank's device. */
    put_text("freed", r, "1");
    for (int p = 0; p < n; p++) get_text("freed", p, text, sizeof text);
    size_t free_b = 0, total_b = 0;
    CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &free_b, &total_b));
    REQUIRE(free_b == total_b, "%zu of the device's %zu bytes are still allocated",
            total_b - free_b, total_b);
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtResetDevice(device));
    CHECK(aclFinalize());
    printf("all_to_all rank %d: ok %d rounds\n", r, g_rounds);
    return 0;
}
