/* ipc_event_chain.c — a producer/consumer chain of N processes (more than the machine's
 * CPUs) moving ITEMS items through rings of device memory shared by IPC key, ordered by IPC
 * events re-recorded item after item, as CANN's ipcevent sample orders its two processes
 * (hicann/runtime example/2_advanced_features/ipcevent), with the host channel (a pipe) that
 * sample uses to say "recorded" and back-pressure both on the device and on the host.
 *
 * Link i (stage i -> stage i + 1): stage i owns a ring of SLOTS device buffers (exported by
 * key, whitelisted for stage i + 1) and two IPC events per slot, full[k] and free[k] (their
 * handles sent down the pipe). For item n in slot k = n % SLOTS:
 *   stage i (upstream):   once stage i + 1 said "freed n - SLOTS": wait free[k] on its
 *                         stream; write the item into ring[k]; record full[k]; say "full n";
 *   stage i + 1:          once told "full n": wait full[k]; copy ring[k] (device to device)
 *                         on into its own ring (stamping its stage number into word i + 1),
 *                         or, the last stage, into its own buffer and to the host; record
 *                         free[k]; say "freed n".
 * The producer fills pinned host buffers (refilled once the copy of the item SLOTS earlier
 * has run, by an aclrtCreateEvent event re-recorded each item); the consumer checks every
 * word of every item. Each process runs in a context of its own on device i % devices.
 *
 * usage: ipc_event_chain <N> [items]; the first process forks the others before aclInit.
 * Run with ACL_NOTIFY_SIM_SOC set to a SoC with IPC events. Exit 0 and
 * "ipc_event_chain N=<N>: ok". */
#include "common.h"

#include <sys/wait.h>

#define MAX_STAGES 8
#define SLOTS 4
#define WORDS 256
#define BYTES (WORDS * sizeof(uint32_t))
#define KEY_LEN 65
#define WAIT_MS 20000

static int g_n, g_items, g_stage;

static uint32_t payload(int n, int i) { return (uint32_t)n * 2654435761u + (uint32_t)i; }

/* The stamp stage `me` writes into word `me` of every item it passes on. */
static uint32_t stamp_of(int me) { return 0x57a9e000u + (uint32_t)me; }

/* Item n as the consumer gets it: the producer's payload, words 1 .. N-1 stamped. */
static void check_item(const uint32_t *got, int n) {
    for (int i = 0; i < WORDS; i++) {
        const uint32_t want = i >= 1 && i < g_n ? stamp_of(i) : payload(n, i);
        REQUIRE(got[i] == want, "item %d word %d is %#x, expected %#x", n, i, got[i], want);
    }
}

/* What travels down a pipe when a link is set up. */
struct link_setup {
    char key[KEY_LEN];
    aclrtIpcEventHandle full[SLOTS], free[SLOTS];
};

/* One message on a link's pipes: "full n" downstream, "freed n" upstream. */
static void say(int fd, int n) { write_all(fd, &n, sizeof n); }
static void hear(int fd, int want) {
    int n = -1;
    read_all(fd, &n, sizeof n);
    REQUIRE(n == want, "stage %d: heard item %d, expected %d", g_stage, n, want);
}

static void stage(int me, int up_rd, int up_wr, int down_rd, int down_wr) {
    g_stage = me;
    static char role[32];
    snprintf(role, sizeof role, "ipc_event_chain %d", me);
    g_role = role;
    const int last = me == g_n - 1, first = me == 0;
    CHECK(aclInit(NULL));
    uint32_t devices = 0;
    CHECK(aclrtGetDeviceCount(&devices));
    const int dev = me % (int)devices;
    aclrtContext ctx;
    CHECK(aclrtCreateContext(&ctx, dev));
    aclrtStream s;
    CHECK(aclrtCreateStream(&s));

    /* Downstream link: my ring and events, exported to stage me + 1. */
    void *ring[SLOTS] = {0};
    aclrtEvent full[SLOTS] = {0}, freed[SLOTS] = {0};
    if (!last) {
        int32_t next_pid = 0;
        read_all(down_rd, &next_pid, sizeof next_pid);
        struct link_setup ls;
        memset(&ls, 0, sizeof ls);
        void *all;
        CHECK(aclrtMalloc(&all, SLOTS * BYTES, ACL_MEM_MALLOC_HUGE_FIRST));
        for (int k = 0; k < SLOTS; k++) ring[k] = (char *)all + k * BYTES;
        CHECK(aclrtIpcMemGetExportKey(all, SLOTS * BYTES, ls.key, sizeof ls.key, 0));
        CHECK(aclrtIpcMemSetImportPid(ls.key, &next_pid, 1));
        for (int k = 0; k < SLOTS; k++) {
            CHECK(aclrtCreateEventExWithFlag(&full[k], ACL_EVENT_IPC));
            CHECK(aclrtCreateEventExWithFlag(&freed[k], ACL_EVENT_IPC));
            CHECK(aclrtIpcGetEventHandle(full[k], &ls.full[k]));
            CHECK(aclrtIpcGetEventHandle(freed[k], &ls.free[k]));
        }
        write_all(down_wr, &ls, sizeof ls);
    }
    /* Upstream link: stage me - 1's ring and events, opened. */
    void *in_ring = NULL;
    aclrtEvent in_full[SLOTS] = {0}, in_freed[SLOTS] = {0};
    char in_key[KEY_LEN] = {0};
    if (!first) {
        int32_t pid = getpid();
        write_all(up_wr, &pid, sizeof pid);
        struct link_setup ls;
        read_all(up_rd, &ls, sizeof ls);
        memcpy(in_key, ls.key, sizeof in_key);
        CHECK(aclrtIpcMemImportByKey(&in_ring, in_key,
                                     ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS));
        for (int k = 0; k < SLOTS; k++) {
            CHECK(aclrtIpcOpenEventHandle(ls.full[k], &in_full[k]));
            CHECK(aclrtIpcOpenEventHandle(ls.free[k], &in_freed[k]));
        }
    }

    /* The producer's host buffers and the consumer's; an event per slot on the host side. */
    uint32_t *host[SLOTS] = {0};
    aclrtEvent host_done[SLOTS] = {0};
    void *local = NULL;
    uint32_t *stamp = NULL;
    if (first || last) {
        for (int k = 0; k < SLOTS; k++) {
            CHECK(aclrtMallocHost((void **)&host[k], BYTES));
            CHECK(aclrtCreateEvent(&host_done[k]));
        }
    }
    if (!first) {
        CHECK(aclrtMalloc(&local, SLOTS * BYTES, ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK(aclrtMallocHost((void **)&stamp, sizeof *stamp));
        *stamp = stamp_of(me);
    }

    const int64_t t0 = now_ns();
    int64_t checked = 0;
    for (int n = 0; n < g_items; n++) {
        const int k = n % SLOTS;
        void *mine = local ? (char *)local + k * BYTES : NULL;
        /* In: the producer from its host buffer, the others from the ring above. */
        if (first) {
            if (n >= SLOTS) CHECK(aclrtSynchronizeEvent(host_done[k]));
            for (int i = 0; i < WORDS; i++) host[k][i] = payload(n, i);
        } else {
            hear(up_rd, n);
            CHECK(aclrtStreamWaitEvent(s, in_full[k]));
            CHECK(aclrtMemcpyAsync(mine, BYTES, (char *)in_ring + k * BYTES, BYTES,
                                   ACL_MEMCPY_DEVICE_TO_DEVICE, s));
            CHECK(aclrtRecordEvent(in_freed[k], s));
            say(up_wr, n);
            CHECK(aclrtMemcpyAsync((char *)mine + me * sizeof(uint32_t), sizeof(uint32_t), stamp,
                                   sizeof(uint32_t), ACL_MEMCPY_HOST_TO_DEVICE, s));
        }
        /* Out: to the ring below, or (the consumer) to the host. */
        if (!last) {
            if (n >= SLOTS) {
                hear(down_rd, n - SLOTS);
                CHECK(aclrtStreamWaitEvent(s, freed[k]));
            }
            if (first) {
                CHECK(aclrtMemcpyAsync(ring[k], BYTES, host[k], BYTES, ACL_MEMCPY_HOST_TO_DEVICE,
                                       s));
                CHECK(aclrtRecordEvent(host_done[k], s));
            } else {
                CHECK(aclrtMemcpyAsync(ring[k], BYTES, mine, BYTES, ACL_MEMCPY_DEVICE_TO_DEVICE,
                                       s));
            }
            CHECK(aclrtRecordEvent(full[k], s));
            say(down_wr, n);
        } else {
            if (n >= SLOTS) {
                /* Check item n - SLOTS, whose copy to host[k] was recorded by host_done[k]. */
                CHECK(aclrtSynchronizeEvent(host_done[k]));
                check_item(host[k], n - SLOTS);
                checked++;
            }
            CHECK(aclrtMemcpyAsync(host[k], BYTES, mine, BYTES, ACL_MEMCPY_DEVICE_TO_HOST, s));
            CHECK(aclrtRecordEvent(host_done[k], s));
        }
    }
    CHECK(aclrtSynchronizeStreamWithTimeout(s, WAIT_MS));
    if (last) {
        for (int n = g_items > SLOTS ? g_items - SLOTS : 0; n < g_items; n++) {
            check_item(host[n % SLOTS], n);
            checked++;
        }
        REQUIRE(checked == g_items, "checked %lld items of %d", (long long)checked, g_items);
        printf("ipc_event_chain: %d items of %zu bytes through %d processes, every word checked, "
               "in %.2f s\n",
               g_items, (size_t)BYTES, g_n, (double)(now_ns() - t0) / 1e9);
    }
    /* Tear down once the neighbours are done with what they opened. */
    if (!last) {
        for (int n = g_items > SLOTS ? g_items - SLOTS : 0; n < g_items; n++) hear(down_rd, n);
        hear(down_rd, -1);
    }
    if (!first) {
        for (int k = 0; k < SLOTS; k++) {
            CHECK(aclrtDestroyEvent(in_full[k]));
            CHECK(aclrtDestroyEvent(in_freed[k]));
        }
        CHECK(aclrtIpcMemClose(in_key));
        say(up_wr, -1);
    }
    CHECK(aclrtDestroyStream(s));
    CHECK(aclrtDestroyContext(ctx));
    CHECK(aclFinalize());
}

int main(int argc, char **argv) {
    g_role = "ipc_event_chain";
    g_n = argc > 1 ? atoi(argv[1]) : 4;
    g_items = argc > 2 ? atoi(argv[2]) : 10000;
    REQUIRE(g_n >= 2 && g_n <= MAX_STAGES && g_items > 0,
            "usage: ipc_event_chain <N, 2..%d> [items]", MAX_STAGES);
    /* pipes[i]: link i, between stage i and stage i + 1, one pipe each way. */
    int down[MAX_STAGES][2], up[MAX_STAGES][2];
    for (int i = 0; i + 1 < g_n; i++) {
        REQUIRE(pipe(down[i]) == 0 && pipe(up[i]) == 0, "pipe: %s", strerror(errno));
    }
    pid_t kids[MAX_STAGES] = {0};
    const pid_t parent = getpid();
    for (int me = 1; me < g_n; me++) {
        kids[me] = fork();
        REQUIRE(kids[me] >= 0, "fork: %s", strerror(errno));
        if (kids[me] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent) _exit(1);
            /* Keep this stage's ends only. */
            for (int i = 0; i + 1 < g_n; i++) {
                if (i != me - 1) {
                    close(down[i][0]);
                    close(up[i][1]);
                }
                if (i != me) {
                    close(down[i][1]);
                    close(up[i][0]);
                }
            }
            const int last = me == g_n - 1;
            stage(me, down[me - 1][0], up[me - 1][1], last ? -1 : up[me][0],
                  last ? -1 : down[me][1]);
            fflush(stdout);
            _exit(0);
        }
    }
    for (int i = 0; i + 1 < g_n; i++) {
        if (i != 0) {
            close(down[i][1]);
            close(up[i][0]);
        }
        close(down[i][0]);
        close(up[i][1]);
    }
    stage(0, -1, -1, up[0][0], down[0][1]);
    int bad = 0;
    for (int me = 1; me < g_n; me++) {
        /* A stage that hangs is a failure, not a stuck test: 120 s of its being able to run
         * (common.h wait_child). */
        int st = 0;
        (void)wait_child(kids[me], &st, 120, "ipc_event_chain stage");
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "[ipc_event_chain] stage %d ended with status %#x\n", me, st);
            bad++;
        }
    }
    REQUIRE(bad == 0, "%d stages failed (above)", bad);
    printf("ipc_event_chain N=%d: ok\n", g_n);
    return 0;
}
