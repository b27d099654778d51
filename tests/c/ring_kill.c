/* ring_kill.c — a job of N processes (16: more than the machine's CPUs) passing a token around
 * a ring, and one of them SIGKILLed mid-job, as a crashed rank of a real job is. Each rank
 * owns an inbox: a notify and a buffer of device memory, both exported with a PID whitelist
 * naming its left neighbour, which imports them. One hop: the sender stages the token's words
 * on its device, copies them into the receiver's imported buffer (device to device) and
 * records the receiver's notify; the receiver waits, copies the buffer back and checks every
 * word. Rank 0 starts each round and checks the token that comes back.
 *
 * At round KILL_ROUND rank K (argv[3]) takes the token and SIGKILLs itself. Checked then:
 * every survivor's wait fails with 107020 (ACL_ERROR_RT_TASK_TIMEOUT) rather than hanging,
 * and rank K+1's message names the dead rank ("pid P (dead)"); rank K-1 still writes into the
 * dead rank's memory and records its notify (what a dead owner shared stays usable for its
 * importers), and every survivor tears down (close, free, destroy, reset, aclFinalize) with 0.
 * A wait that the token is known to come for has 30 s (a loaded machine); the ones that wait
 * for a token that will not come, 1 s.
 *
 * usage: ring_kill <exchange dir> <N> <K>; ranks use device r % aclrtGetDeviceCount. Rank 0
 * forks the others before aclInit. Exit 0 and "ring_kill: ok" when every check holds. */
#include "common.h"

#include <sys/wait.h>

#define WORDS 256
#define BYTES (WORDS * sizeof(uint32_t))
#define ROUNDS 6
#define KILL_ROUND 3

static const char *g_dir;
static int g_n, g_kill;

static void put_text(const char *what, int rank, const char *text) {
    char file[64];
    snprintf(file, sizeof file, "%s%d", what, rank);
    put_file(g_dir, file, text, strlen(text));
}

static void get_text(const char *what, int rank, char *text, size_t cap) {
    char file[64];
    snprintf(file, sizeof file, "%s%d", what, rank);
    get_file(g_dir, file, text, cap, 60000);
}

static uint32_t token(int round, int sender, int i) {
    return (uint32_t)(round * 100000 + sender * 1000 + i);
}

/* Whether rank r's wait of `round` is one the token comes for. Ranks after K wait in round
 * KILL_ROUND for the token K took; rank 0 and the ranks before K in the round after. */
static int token_comes(int r, int round) {
    if (round < KILL_ROUND) return 1;
    if (round > KILL_ROUND) return 0;
    return r != 0 && r <= g_kill;
}

/* One rank's objects (each process is one rank). */
static int g_rank, g_left;
static int32_t g_left_pid;
static aclrtStream g_stream;
static aclrtNotify g_inbox, g_outbox;
static uint32_t *g_buf, *g_host;
static void *g_right_buf, *g_stage;

/* Stages the round's token and hands it into the right neighbour's inbox. */
static void send_token(int round) {
    for (int i = 0; i < WORDS; i++) g_host[i] = token(round, g_rank, i);
    CHECK(aclrtMemcpyAsync(g_stage, BYTES, g_host, BYTES, ACL_MEMCPY_HOST_TO_DEVICE, g_stream));
    CHECK(aclrtMemcpyAsync(g_right_buf, BYTES, g_stage, BYTES, ACL_MEMCPY_DEVICE_TO_DEVICE,
                           g_stream));
    CHECK(aclrtRecordNotify(g_outbox, g_stream));
    CHECK(aclrtSynchronizeStream(g_stream));
}

/* Waits for the round's token and checks it; returns the wait's failure (checked to be the
 * expected timeout, naming the killed rank when it was the sender). */
static aclError receive_token(int round) {
    const int comes = token_comes(g_rank, round);
    CHECK(aclrtWaitAndResetNotify(g_inbox, g_stream, comes ? 30 : 1));
    aclError failure = aclrtSynchronizeStream(g_stream);
    if (failure != ACL_SUCCESS) {
        const char *m = recent_msg();
        REQUIRE(!comes, "round %d: the wait failed (%d): %s", round, (int)failure, m);
        REQUIRE(failure == ACL_ERROR_RT_TASK_TIMEOUT, "round %d: the wait for a token that "
                "will not come failed with %d, expected 107020: %s", round, (int)failure, m);
        if (g_left == g_kill) {
            char dead[48];
            snprintf(dead, sizeof dead, "pid %d (dead)", (int)g_left_pid);
            REQUIRE(strstr(m, dead) != NULL, "the timeout does not name the killed rank (%s): "
                    "%s", dead, m);
            printf("rank%d: %.200s\n", g_rank, m);
        }
        return failure;
    }
    REQUIRE(comes, "round %d: a token came that was never sent", round);
    CHECK(aclrtMemcpy(g_host, BYTES, g_buf, BYTES, ACL_MEMCPY_DEVICE_TO_HOST));
    for (int i = 0; i < WORDS; i++) {
        REQUIRE(g_host[i] == token(round, g_left, i), "round %d: word %d is %u, expected %u",
                round, i, g_host[i], token(round, g_left, i));
    }
    return ACL_SUCCESS;
}

static int run_rank(int r) {
    static char role[16];
    snprintf(role, sizeof role, "rank%d", r);
    g_role = role;
    g_rank = r;
    g_left = (r + g_n - 1) % g_n;
    const int right = (r + 1) % g_n;
    CHECK(aclInit(NULL));
    uint32_t devices = 0;
    CHECK(aclrtGetDeviceCount(&devices));
    const int32_t device = (int32_t)(r % (int)devices);
    CHECK(aclrtSetDevice(device));
    int32_t me = 0;
    CHECK(aclrtDeviceGetBareTgid(&me));
    char text[72];
    snprintf(text, sizeof text, "%d", (int)me);
    put_text("pid", r, text);
    get_text("pid", g_left, text, sizeof text);
    g_left_pid = atoi(text);
    CHECK(aclrtCreateStream(&g_stream));

    /* The inbox, for the left neighbour only. */
    CHECK(aclrtCreateNotify(&g_inbox, 0));
    char key[65] = {0}, mem_key[65] = {0};
    CHECK(aclrtNotifyGetExportKey(g_inbox, key, sizeof key, 0));
    CHECK(aclrtNotifySetImportPid(g_inbox, &g_left_pid, 1));
    put_text("notify", r, key);
    CHECK(aclrtMalloc((void **)&g_buf, BYTES, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemset(g_buf, BYTES, 0, BYTES));
    CHECK(aclrtIpcMemGetExportKey(g_buf, BYTES, mem_key, sizeof mem_key, 0));
    CHECK(aclrtIpcMemSetImportPid(mem_key, &g_left_pid, 1));
    put_text("mem", r, mem_key);

    /* The right neighbour's inbox. */
    char right_key[72], right_mem_key[72];
    get_text("notify", right, right_key, sizeof right_key);
    get_text("mem", right, right_mem_key, sizeof right_mem_key);
    CHECK(aclrtNotifyImportByKey(&g_outbox, right_key, 0));
    CHECK(aclrtIpcMemImportByKey(&g_right_buf, right_mem_key,
                                 ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS));
    CHECK(aclrtMallocHost((void **)&g_host, BYTES));
    CHECK(aclrtMalloc(&g_stage, BYTES, ACL_MEM_MALLOC_HUGE_FIRST));
    put_text("ready", r, "1");
    for (int i = 0; i < g_n; i++) get_text("ready", i, text, sizeof text);

    int rounds_done = 0;
    aclError failure = ACL_SUCCESS;
    for (int round = 0; round < ROUNDS; round++) {
        if (r == 0) send_token(round);
        failure = receive_token(round);
        if (failure != ACL_SUCCESS) break;
        if (r == g_kill && round == KILL_ROUND) {
            fflush(stdout);
            raise(SIGKILL);
        }
        if (r != 0) send_token(round);
        rounds_done++;
    }
    REQUIRE(failure == ACL_ERROR_RT_TASK_TIMEOUT && rounds_done >= KILL_ROUND,
            "%d rounds, then %d: expected at least %d, then 107020", rounds_done, (int)failure,
            KILL_ROUND);
    if (right == g_kill) {
        /* The dead rank's inbox stays usable for its importer. */
        CHECK(aclrtMemcpy(g_right_buf, BYTES, g_stage, BYTES, ACL_MEMCPY_DEVICE_TO_DEVICE));
        CHECK(aclrtRecordNotify(g_outbox, g_stream));
        CHECK(aclrtSynchronizeStream(g_stream));
    }
    CHECK(aclrtIpcMemClose(right_mem_key));
    CHECK(aclrtIpcMemClose(mem_key));
    CHECK(aclrtFree(g_buf));
    CHECK(aclrtFree(g_stage));
    CHECK(aclrtFreeHost(g_host));
    CHECK(aclrtDestroyNotify(g_outbox));
    CHECK(aclrtDestroyNotify(g_inbox));
    CHECK(aclrtDestroyStream(g_stream));
    CHECK(aclrtResetDevice(device));
    CHECK(aclFinalize());
    printf("rank%d: %d rounds, then the expected timeout; torn down\n", r, rounds_done);
    return 0;
}

int main(int argc, char **argv) {
    REQUIRE(argc == 4, "usage: ring_kill <exchange dir> <N> <K>");
    g_dir = argv[1];
    g_n = atoi(argv[2]);
    g_kill = atoi(argv[3]);
    REQUIRE(g_n >= 3 && g_n <= 64 && g_kill > 0 && g_kill < g_n - 1,
            "N must be 3 to 64 and K 1 to N-2");
    for (int r = 0; r < g_n; r++) {
        char file[32];
        snprintf(file, sizeof file, "pid%d", r);
        require_fresh(g_dir, file);
    }
    pid_t kids[64] = {0};
    for (int r = 1; r < g_n; r++) {
        pid_t p = fork();
        REQUIRE(p >= 0, "fork: %s", strerror(errno));
        if (p == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            int rc = run_rank(r);
            fflush(stdout);
            _exit(rc);
        }
        kids[r] = p;
    }
    int rc = run_rank(0), bad = 0;
    for (int r = 1; r < g_n; r++) {
        int st = 0;
        REQUIRE(waitpid(kids[r], &st, 0) == kids[r], "waitpid: %s", strerror(errno));
        int want_killed = r == g_kill;
        int ok = want_killed ? (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
                             : (WIFEXITED(st) && WEXITSTATUS(st) == 0);
        if (!ok) {
            printf("rank%d ended with wait status %#x\n", r, st);
            bad++;
        }
    }
    REQUIRE(rc == 0 && bad == 0, "%d ranks ended otherwise than expected", bad);
    printf("ring_kill: ok\n");
    return 0;
}
