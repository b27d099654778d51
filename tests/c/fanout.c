/* fanout.c — one producer broadcasting to K consumer processes (more processes than the
 * machine has CPUs), written only against CANN's API: double-buffered IPC memory that every
 * consumer imports, and a notify pair per buffer per consumer.
 *
 * The producer (device 0) owns two device buffers buf[0..1], exported once each with
 * aclrtIpcMemGetExportKey and whitelisted for every consumer's PID (aclrtIpcMemSetImportPid
 * with K PIDs), and per consumer c two notifies free[c][s] ("consumer c has copied slot s out"),
 * exported to c alone. Consumer c (device (c + 1) % device count: some share the producer's
 * device, the others reach it through peer access) owns full[c][s] ("slot s holds a new
 * batch"), exported to the producer.
 *
 * Producer, round k, slot s = k % 2, one stream:
 *   from round 2 on, wait free[c][s] of every consumer (aclrtWaitAndResetNotify);
 *   aclrtMemcpyAsync staging[s] (aclrtMallocHost, filled by the host with round k's bytes)
 *   -> buf[s]; record event staged[s]; record every consumer's full[c][s].
 *   The host refills staging[s] only once staged[s] of round k - 2 has completed
 *   (aclrtSynchronizeEvent), so it enqueues while the stream runs.
 * Consumer c, two host threads in one context (aclrtSetCurrentContext in the second):
 *   copier, stream in:  wait full[c][s]; from round 2 on, wait event drained[s] (recorded by the
 *                       checker's stream once round k - 2 left mine[s]); aclrtMemcpyAsync
 *                       buf[s] (imported) -> mine[s] (device to device); record the
 *                       producer's free[c][s]; record event copied[s];
 *   checker, stream out: aclrtStreamWaitEvent(out, copied[s]) once the copier enqueued round
 *                       k's record (host order by a condition variable); aclrtMemcpyAsync
 *                       mine[s] -> host[k % 4]; record drained[s] and landed[k % 4]; the host
 *                       checks every byte of round k - 3 after aclrtSynchronizeEvent.
 * At the end consumers close the imports, the producer frees, everyone finalizes; the
 * producer's aclrtEventElapsedTime over the run is positive.
 *
 * With "kill" the last consumer SIGKILLs itself at round rounds / 2, just after queuing its
 * copy out of the producer's memory. The producer polls aclrtSynchronizeEventWithTimeout and
 * waitpid: once it finds the consumer dead it records that consumer's free notifies itself
 * (releasing the waits for them already queued) and waits for it no more; the others get
 * every batch. Its device 0 memory must then be all back at the end (the dead consumer's
 * import reclaimed): run kill mode alone in its namespace, as a device's free memory is the
 * whole machine's.
 *
 * usage: fanout <K consumers> [rounds, default 64] [bytes per batch, default 65536] [hosts]
 *        [kill]
 * The producer forks the consumers before aclInit; keys, PIDs, server ids and SuperPod device
 * ids (the sdid a peer on another server whitelists) travel over pipes. With
 * hosts > 1 (Ascend910_93, ACL_NOTIFY_SIM_CLUSTER set) process i (the producer 0, consumer c
 * c + 1) runs on SuperPod server i % hosts, a host of its own (namespace
 * $ACL_NOTIFY_SIM_NAMESPACE-host<h>): the other servers' consumers are whitelisted with
 * aclrtIpcMemImportPidInterServer / aclrtNotifySetImportPidInterServer, and they pull each
 * batch out of the producer's memory on another host (the copy goes through etcd). Exit 0
 * and "fanout K=<K>: ok". */
#include "common.h"
#include "sim_host.h"

#include <pthread.h>

#define MAX_CONSUMERS 16
#define HOST_SLOTS 4
#define KEY 65

static int g_k, g_rounds, g_hosts = 1;
/* "kill" mode: the last consumer SIGKILLs itself at round g_rounds / 2, just after queuing its
 * copy out of the producer's memory (mid-transfer); -1 otherwise. */
static int g_victim = -1;
static size_t g_bytes;

/* With hosts > 1: process `index` (the producer 0, consumer c c + 1) runs on SuperPod server
 * index % hosts, a host of its own (namespace $ACL_NOTIFY_SIM_NAMESPACE-host<h>) in the
 * cluster that ACL_NOTIFY_SIM_CLUSTER names. Before aclInit. */
static void join_host(int index) {
    if (g_hosts > 1) join_sim_host(index % g_hosts, "fanout");
}

/* This process's SuperPod server (0 off a SuperPod). */
static uint32_t my_server(int32_t dev) {
    int64_t server = 0;
    CHECK(aclrtGetDeviceInfo((uint32_t)dev, ACL_DEV_ATTR_SUPER_POD_SERVER_ID, &server));
    return (uint32_t)server;
}

/* The SuperPod device id of this process's device `dev`: what a process on another server
 * puts in the sdid of the aclrtServerPid that whitelists this one (CANN's aclrtServerPid,
 * docs/zh/api_ref/25-04_Structs.md: a per-device id, not the server's). */
static uint32_t my_sdid(int32_t dev) {
    int64_t sdid = 0;
    CHECK(aclrtGetDeviceInfo((uint32_t)dev, ACL_DEV_ATTR_SUPER_POD_DEVICE_ID, &sdid));
    return (uint32_t)sdid;
}

/* Whitelists process `pid` of server `server`, whose device has SuperPod device id `sdid`
 * (this one's server: `mine`), for notify `n`. */
static void allow_notify(aclrtNotify n, uint32_t server, uint32_t sdid, int32_t pid,
                         uint32_t mine) {
    if (server == mine) {
        CHECK(aclrtNotifySetImportPid(n, &pid, 1));
    } else {
        aclrtServerPid sp = {sdid, &pid, 1};
        CHECK(aclrtNotifySetImportPidInterServer(n, &sp, 1));
    }
}

static uint8_t byte_of(int round, size_t i) {
    return (uint8_t)((unsigned)round * 131u + (unsigned)i * 7u + (unsigned)(i >> 9));
}

struct hello {
    int32_t pid;
    uint32_t server;
    uint32_t sdid;
};

struct to_consumer {
    int32_t producer_pid;
    uint32_t producer_server;
    uint32_t producer_sdid;
    char buf[2][KEY];
    char free_[2][KEY];
};

struct to_producer {
    char full[2][KEY];
};

/* ---- a consumer ------------------------------------------------------------------------- */

struct consumer {
    int c, dev;
    aclrtContext ctx;
    void *mine[2];
    uint8_t *host[HOST_SLOTS];
    aclrtEvent copied[2], drained[2], landed[HOST_SLOTS];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int enqueued; /* rounds whose copied record the copier has enqueued */
    int drained_enqueued; /* rounds whose drained record the checker has enqueued */
    unsigned long long checked;
};

static void check_round(struct consumer *k, int round) {
    const uint8_t *h = k->host[round % HOST_SLOTS];
    for (size_t i = 0; i < g_bytes; i++) {
        REQUIRE(h[i] == byte_of(round, i), "consumer %d round %d byte %zu is %u, expected %u",
                k->c, round, i, h[i], byte_of(round, i));
    }
    k->checked += g_bytes;
}

static void *checker(void *arg) {
    struct consumer *k = (struct consumer *)arg;
    CHECK(aclrtSetCurrentContext(k->ctx));
    aclrtStream out = NULL;
    CHECK(aclrtCreateStream(&out));
    for (int round = 0; round < g_rounds; round++) {
        const int s = round % 2;
        pthread_mutex_lock(&k->mu);
        while (k->enqueued <= round) pthread_cond_wait(&k->cv, &k->mu);
        pthread_mutex_unlock(&k->mu);
        if (round >= HOST_SLOTS) { /* host[round % 4] held round - 4: checked below already */
            CHECK(aclrtSynchronizeEvent(k->landed[round % HOST_SLOTS]));
        }
        CHECK(aclrtStreamWaitEvent(out, k->copied[s]));
        CHECK(aclrtMemcpyAsync(k->host[round % HOST_SLOTS], g_bytes, k->mine[s], g_bytes,
                               ACL_MEMCPY_DEVICE_TO_HOST, out));
        CHECK(aclrtRecordEvent(k->drained[s], out));
        CHECK(aclrtRecordEvent(k->landed[round % HOST_SLOTS], out));
        pthread_mutex_lock(&k->mu);
        k->drained_enqueued = round + 1;
        pthread_cond_broadcast(&k->cv);
        pthread_mutex_unlock(&k->mu);
        if (round >= HOST_SLOTS - 1) {
            const int old = round - (HOST_SLOTS - 1);
            CHECK(aclrtSynchronizeEvent(k->landed[old % HOST_SLOTS]));
            check_round(k, old);
        }
    }
    CHECK(aclrtSynchronizeStream(out));
    for (int old = g_rounds - (HOST_SLOTS - 1); old < g_rounds; old++) {
        if (old >= 0) check_round(k, old);
    }
    CHECK(aclrtDestroyStream(out));
    return NULL;
}

static int run_consumer(int c, int rd, int wr) {
    static char role[24];
    snprintf(role, sizeof role, "consumer%d", c);
    g_role = role;
    struct consumer k;
    memset(&k, 0, sizeof k);
    k.c = c;
    pthread_mutex_init(&k.mu, NULL);
    pthread_cond_init(&k.cv, NULL);

    join_host(c + 1);
    CHECK(aclInit(NULL));
    uint32_t devices = 0;
    CHECK(aclrtGetDeviceCount(&devices));
    k.dev = (int)((uint32_t)(c + 1) % devices);
    CHECK(aclrtCreateContext(&k.ctx, k.dev));
    if (k.dev != 0) CHECK(aclrtDeviceEnablePeerAccess(0, 0));
    struct hello me;
    CHECK(aclrtDeviceGetBareTgid(&me.pid));
    me.server = my_server(k.dev);
    me.sdid = my_sdid(k.dev);
    write_all(wr, &me, sizeof me);

    struct to_consumer in;
    read_all(rd, &in, sizeof in);
    void *buf[2] = {NULL, NULL};
    aclrtNotify freed[2] = {NULL, NULL}, full[2] = {NULL, NULL};
    struct to_producer back;
    memset(&back, 0, sizeof back);
    for (int s = 0; s < 2; s++) {
        CHECK(aclrtIpcMemImportByKey(&buf[s], in.buf[s], 0));
        CHECK(aclrtNotifyImportByKey(&freed[s], in.free_[s], 0));
        CHECK(aclrtCreateNotify(&full[s], ACL_NOTIFY_DEFAULT));
        CHECK(aclrtNotifyGetExportKey(full[s], back.full[s], KEY,
                                      ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT));
        allow_notify(full[s], in.producer_server, in.producer_sdid, in.producer_pid,
                     me.server);
        CHECK(aclrtMalloc(&k.mine[s], g_bytes, ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK(aclrtCreateEvent(&k.copied[s]));
        CHECK(aclrtCreateEvent(&k.drained[s]));
    }
    for (int h = 0; h < HOST_SLOTS; h++) {
        CHECK(aclrtMallocHost((void **)&k.host[h], g_bytes));
        memset(k.host[h], 0xee, g_bytes);
        CHECK(aclrtCreateEvent(&k.landed[h]));
    }
    write_all(wr, &back, sizeof back);

    aclrtStream s_in = NULL;
    CHECK(aclrtCreateStream(&s_in));
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, checker, &k) == 0, "pthread_create");
    for (int round = 0; round < g_rounds; round++) {
        const int s = round % 2;
        CHECK(aclrtWaitAndResetNotify(full[s], s_in, 60));
        if (round >= 2) {
            /* drained[s] of round - 2 must be the latest record the wait captures */
            pthread_mutex_lock(&k.mu);
            while (k.drained_enqueued <= round - 2) pthread_cond_wait(&k.cv, &k.mu);
            pthread_mutex_unlock(&k.mu);
            CHECK(aclrtStreamWaitEvent(s_in, k.drained[s]));
        }
        CHECK(aclrtMemcpyAsync(k.mine[s], g_bytes, buf[s], g_bytes, ACL_MEMCPY_DEVICE_TO_DEVICE,
                               s_in));
        if (c == g_victim && round == g_rounds / 2) raise(SIGKILL);
        CHECK(aclrtRecordNotify(freed[s], s_in));
        /* copied[s] of round - 2 must have been waited on before this record replaces it */
        if (round >= 2) {
            pthread_mutex_lock(&k.mu);
            while (k.drained_enqueued <= round - 2) pthread_cond_wait(&k.cv, &k.mu);
            pthread_mutex_unlock(&k.mu);
        }
        CHECK(aclrtRecordEvent(k.copied[s], s_in));
        pthread_mutex_lock(&k.mu);
        k.enqueued = round + 1;
        pthread_cond_broadcast(&k.cv);
        pthread_mutex_unlock(&k.mu);
    }
    REQUIRE(pthread_join(th, NULL) == 0, "pthread_join");
    CHECK(aclrtSynchronizeStream(s_in));
    REQUIRE(k.checked == (unsigned long long)g_rounds * g_bytes, "checked %llu bytes of %llu",
            k.checked, (unsigned long long)g_rounds * g_bytes);

    /* Checked: tell the producer, wait for its word to let go (importers first). */
    char ok = 'k';
    write_all(wr, &ok, 1);
    read_all(rd, &ok, 1);
    REQUIRE(ok == 'c', "producer said '%c', expected 'c'", ok);
    for (int s = 0; s < 2; s++) {
        CHECK(aclrtIpcMemClose(in.buf[s]));
        CHECK(aclrtDestroyNotify(freed[s]));
        CHECK(aclrtDestroyNotify(full[s]));
        CHECK(aclrtFree(k.mine[s]));
        CHECK(aclrtDestroyEvent(k.copied[s]));
        CHECK(aclrtDestroyEvent(k.drained[s]));
    }
    for (int h = 0; h < HOST_SLOTS; h++) {
        CHECK(aclrtFreeHost(k.host[h]));
        CHECK(aclrtDestroyEvent(k.landed[h]));
    }
    CHECK(aclrtDestroyStream(s_in));
    CHECK(aclrtDestroyContext(k.ctx));
    CHECK(aclFinalize());
    ok = 'd';
    write_all(wr, &ok, 1);
    return 0;
}

/* ---- the producer ----------------------------------------------------------------------- */

/* Waits for event `e` while watching the consumers: one that died (reaped here; its status in
 * status[c]) will never record its free notifies again, so the producer records them itself
 * on stream `rescue`, which releases the waits for them already queued, and waits for it no
 * more. Any answer but the wait's "not yet" (a wait timed out: 107020) fails. */
static void sync_watching(aclrtEvent e, int n, const pid_t *kids, int *dead, int *status,
                          aclrtNotify (*freed)[2], aclrtStream rescue) {
    for (;;) {
        const aclError r = aclrtSynchronizeEventWithTimeout(e, 200);
        if (r == ACL_SUCCESS) return;
        REQUIRE(r == ACL_ERROR_RT_EVENT_SYNC_TIMEOUT,
                "aclrtSynchronizeEventWithTimeout returned %d: %s", (int)r, recent_msg());
        for (int c = 0; c < n; c++) {
            if (dead[c] || waitpid(kids[c], &status[c], WNOHANG) != kids[c]) continue;
            dead[c] = 1;
            printf("fanout: consumer %d ended (status %#x); recording its free notifies\n", c,
                   status[c]);
            for (int s = 0; s < 2; s++) CHECK(aclrtRecordNotify(freed[c][s], rescue));
        }
    }
}

static int run_producer(int n, const int *rd, const int *wr, const pid_t *kids, int *status) {
    g_role = "producer";
    join_host(0);
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    int32_t me = 0;
    CHECK(aclrtDeviceGetBareTgid(&me));
    const uint32_t server = my_server(0), sdid = my_sdid(0);
    size_t free0 = 0, total0 = 0;
    CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &free0, &total0));
    struct hello who[MAX_CONSUMERS];
    for (int c = 0; c < n; c++) read_all(rd[c], &who[c], sizeof who[c]);

    void *buf[2] = {NULL, NULL};
    char buf_key[2][KEY];
    aclrtNotify freed[MAX_CONSUMERS][2], full[MAX_CONSUMERS][2];
    for (int s = 0; s < 2; s++) {
        CHECK(aclrtMalloc(&buf[s], g_bytes, ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK(aclrtIpcMemGetExportKey(buf[s], g_bytes, buf_key[s], KEY, 0));
        /* Every consumer's PID: those of this server in one list, the others one entry each,
         * named by the consumer's SuperPod device id. */
        int32_t local[MAX_CONSUMERS], remote[MAX_CONSUMERS];
        aclrtServerPid sp[MAX_CONSUMERS];
        size_t nl = 0, nsp = 0;
        for (int c = 0; c < n; c++) {
            if (who[c].server == server) {
                local[nl++] = who[c].pid;
            } else {
                remote[nsp] = who[c].pid;
                sp[nsp].sdid = who[c].sdid;
                sp[nsp].pid = &remote[nsp];
                sp[nsp].num = 1;
                nsp++;
            }
        }
        if (nl > 0) CHECK(aclrtIpcMemSetImportPid(buf_key[s], local, nl));
        if (nsp > 0) CHECK(aclrtIpcMemImportPidInterServer(buf_key[s], sp, nsp));
    }
    for (int c = 0; c < n; c++) {
        struct to_consumer m;
        memset(&m, 0, sizeof m);
        m.producer_pid = me;
        m.producer_server = server;
        m.producer_sdid = sdid;
        for (int s = 0; s < 2; s++) {
            memcpy(m.buf[s], buf_key[s], KEY);
            CHECK(aclrtCreateNotify(&freed[c][s], ACL_NOTIFY_DEFAULT));
            CHECK(aclrtNotifyGetExportKey(freed[c][s], m.free_[s], KEY,
                                          ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT));
            allow_notify(freed[c][s], who[c].server, who[c].sdid, who[c].pid, server);
        }
        write_all(wr[c], &m, sizeof m);
    }
    for (int c = 0; c < n; c++) {
        struct to_producer b;
        read_all(rd[c], &b, sizeof b);
        for (int s = 0; s < 2; s++) CHECK(aclrtNotifyImportByKey(&full[c][s], b.full[s], 0));
    }

    aclrtStream st = NULL, rescue = NULL;
    CHECK(aclrtCreateStream(&st));
    CHECK(aclrtCreateStream(&rescue));
    int dead[MAX_CONSUMERS] = {0};
    uint8_t *staging[2];
    aclrtEvent staged[2], t0 = NULL, t1 = NULL;
    for (int s = 0; s < 2; s++) {
        CHECK(aclrtMallocHost((void **)&staging[s], g_bytes));
        CHECK(aclrtCreateEvent(&staged[s]));
    }
    CHECK(aclrtCreateEventWithFlag(&t0, ACL_EVENT_TIME_LINE));
    CHECK(aclrtCreateEventWithFlag(&t1, ACL_EVENT_TIME_LINE));
    CHECK(aclrtRecordEvent(t0, st));
    for (int round = 0; round < g_rounds; round++) {
        const int s = round % 2;
        if (round >= 2) sync_watching(staged[s], n, kids, dead, status, freed, rescue);
        for (size_t i = 0; i < g_bytes; i++) staging[s][i] = byte_of(round, i);
        if (round >= 2)
            for (int c = 0; c < n; c++)
                if (!dead[c]) CHECK(aclrtWaitAndResetNotify(freed[c][s], st, 60));
        CHECK(aclrtMemcpyAsync(buf[s], g_bytes, staging[s], g_bytes, ACL_MEMCPY_HOST_TO_DEVICE,
                               st));
        CHECK(aclrtRecordEvent(staged[s], st));
        for (int c = 0; c < n; c++)
            if (!dead[c]) CHECK(aclrtRecordNotify(full[c][s], st));
    }
    CHECK(aclrtRecordEvent(t1, st));
    sync_watching(t1, n, kids, dead, status, freed, rescue);
    CHECK(aclrtSynchronizeStream(st));
    CHECK(aclrtSynchronizeStream(rescue));
    if (g_victim >= 0) {
        /* The victim died at round g_rounds / 2: the producer found it by round + 2 at the
         * latest (its free notify of that slot never came). */
        REQUIRE(dead[g_victim] && WIFSIGNALED(status[g_victim]) &&
                    WTERMSIG(status[g_victim]) == SIGKILL,
                "consumer %d was to die by SIGKILL (dead %d, status %#x)", g_victim,
                dead[g_victim], status[g_victim]);
    }
    float ms = -1.0f;
    CHECK(aclrtEventElapsedTime(&ms, t0, t1));
    REQUIRE(ms > 0.0f, "elapsed time over %d rounds is %f ms", g_rounds, (double)ms);

    for (int c = 0; c < n; c++) {
        if (c == g_victim) continue;
        char ok = 0;
        read_all(rd[c], &ok, 1);
        REQUIRE(ok == 'k', "consumer %d said '%c', expected 'k'", c, ok);
    }
    for (int c = 0; c < n; c++) {
        char go = 'c';
        if (c != g_victim) write_all(wr[c], &go, 1);
    }
    for (int c = 0; c < n; c++) {
        if (c == g_victim) continue;
        char ok = 0;
        read_all(rd[c], &ok, 1);
        REQUIRE(ok == 'd', "consumer %d said '%c', expected 'd'", c, ok);
    }
    for (int s = 0; s < 2; s++) {
        CHECK(aclrtIpcMemClose(buf_key[s]));
        CHECK(aclrtFree(buf[s]));
        CHECK(aclrtFreeHost(staging[s]));
        CHECK(aclrtDestroyEvent(staged[s]));
        for (int c = 0; c < n; c++) {
            CHECK(aclrtDestroyNotify(freed[c][s]));
            CHECK(aclrtDestroyNotify(full[c][s]));
        }
    }
    CHECK(aclrtDestroyEvent(t0));
    CHECK(aclrtDestroyEvent(t1));
    CHECK(aclrtDestroyStream(st));
    CHECK(aclrtDestroyStream(rescue));
    if (g_victim >= 0) {
        /* Everything of this run is back: the victim's import of buf[] was reclaimed with it.
         * (A device's free memory is the whole machine's: this holds only for a run alone in
         * its namespace, as the kill mode's are.) */
        size_t after = 0, total = 0;
        CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &after, &total));
        REQUIRE(after == free0, "device 0 has %zu bytes free at the end, %zu at the start",
                after, free0);
    }
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("fanout: %d rounds of %zu bytes to %d consumers in %.1f ms of stream time\n", g_rounds,
           g_bytes, n, (double)ms);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s <K consumers> [rounds] [bytes per batch] [hosts] [kill]\n",
                argv[0]);
        return 2;
    }
    g_k = atoi(argv[1]);
    g_rounds = argc > 2 ? atoi(argv[2]) : 64;
    g_bytes = argc > 3 ? (size_t)atol(argv[3]) : 65536;
    g_hosts = argc > 4 ? atoi(argv[4]) : 1;
    if (argc > 5 && strcmp(argv[5], "kill") == 0) g_victim = atoi(argv[1]) - 1;
    if (g_k < (g_victim >= 0 ? 2 : 1) || g_k > MAX_CONSUMERS || g_rounds < 1 || g_bytes < 1 || g_hosts < 1 ||
        g_hosts > g_k + 1) {
        fprintf(stderr, "K must be 1 to %d, rounds and bytes positive, hosts 1 to K + 1\n",
                MAX_CONSUMERS);
        return 2;
    }
    fflush(stdout);
    int rd[MAX_CONSUMERS], wr[MAX_CONSUMERS];
    pid_t kids[MAX_CONSUMERS];
    for (int c = 0; c < g_k; c++) {
        kids[c] = fork_piped(&rd[c], &wr[c]);
        if (kids[c] == 0) {
            for (int o = 0; o < c; o++) { /* the pipes of the consumers before this one */
                close(rd[o]);
                close(wr[o]);
            }
            _exit(run_consumer(c, rd[c], wr[c]));
        }
    }
    int status[MAX_CONSUMERS] = {0};
    int failed = run_producer(g_k, rd, wr, kids, status);
    for (int c = 0; c < g_k; c++) {
        if (c == g_victim) continue; /* reaped by the producer, its death checked there */
        int st = 0;
        if (wait_child(kids[c], &st, 0, "consumer")) failed = 1;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "[fanout] consumer %d failed (status %#x)\n", c, st);
            failed = 1;
        }
    }
    if (failed) return 1;
    printf("fanout K=%d: ok\n", g_k);
    return 0;
}
