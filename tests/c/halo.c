/* halo.c — a halo exchange as a CANN user writes it: N ranks (processes forked before aclInit,
 * more of them than the machine has CPUs), each on device r % (device count), each in a
 * context of its own (aclrtCreateContext), trading keys and PIDs with a hub process over pipes.
 *
 * Rank r fills a device buffer with aclrtMemcpyAsync on a stream held back by a local notify
 * (its "gate"), exports the buffer to its right neighbour and a notify ("in_r") to its left
 * one, PID-whitelisted, and imports the left neighbour's buffer and the right neighbour's
 * notify. Its fill stream records in_(r+1) after the fill; its receive stream waits on in_r,
 * then copies the left neighbour's buffer into its own (device to device) and records an
 * event; a second thread, in the same context (aclrtSetCurrentContext), makes its own stream
 * wait on that event (aclrtStreamWaitEvent) and copies the result to the host, where it is
 * checked word by word against the left neighbour's pattern.
 *
 * Before any gate opens, every receive stream must be blocked: aclrtSynchronizeStreamWithTimeout
 * answers 507046 and aclrtStreamQuery NOT_READY; the hub opens the gates only when every rank
 * has seen that, so the host enqueues while streams are blocked and the whole ring is ordered
 * by notifies alone. Also checked: aclrtSynchronizeEvent and aclrtEventElapsedTime on the fill,
 * the NULL stream of a created context, imports of keys whitelisted for another rank (207006),
 * malformed keys, a wait on an imported notify from another device (107000), a double
 * aclrtFree, and aclFinalize returning promptly with a never-ending wait and copies still
 * queued (no destroy, no synchronize before it).
 *
 * usage: halo <N> [words per rank, default 4096]. Exit 0 and "halo N=<N>: ok". Every wait is
 * bounded: the hub gives up after 60 s of silence from a rank. */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include "common.h"

#define MAX_RANKS 32

static int g_n, g_words;

/* ---- line messages over a pipe, never waiting for ever ----------------------------------- */

static void put_line(int fd, const char *line) {
    size_t len = strlen(line), done = 0;
    while (done < len) {
        ssize_t w = write(fd, line + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        REQUIRE(w > 0, "write to pipe: %s", strerror(errno));
        done += (size_t)w;
    }
}

/* Reads one '\n'-terminated line (byte by byte: the pipe carries nothing after it that
 * belongs to anyone else). Exits 1 after `timeout_ms` without one, or on end of file. */
static void get_line(int fd, char *buf, size_t cap, int timeout_ms, const char *what) {
    size_t n = 0;
    int64_t deadline = now_ns() + (int64_t)timeout_ms * 1000000LL;
    for (;;) {
        int64_t left = (deadline - now_ns()) / 1000000LL;
        REQUIRE(left > 0, "no %s within %d ms", what, timeout_ms);
        struct pollfd p = {fd, POLLIN, 0};
        int pr = poll(&p, 1, (int)left);
        if (pr < 0 && errno == EINTR) continue;
        REQUIRE(pr >= 0, "poll: %s", strerror(errno));
        if (pr == 0) continue;
        char c;
        ssize_t r = read(fd, &c, 1);
        if (r < 0 && errno == EINTR) continue;
        REQUIRE(r == 1, "end of pipe while waiting for %s", what);
        if (c == '\n') {
            buf[n] = '\0';
            return;
        }
        REQUIRE(n + 1 < cap, "%s longer than %zu bytes", what, cap);
        buf[n++] = c;
    }
}

/* ---- a rank ------------------------------------------------------------------------------ */

static uint32_t pattern(int rank, int i) { return (uint32_t)rank * 1000003u + (uint32_t)i * 7u + 1u; }

struct checker {
    aclrtContext ctx;
    int device;
    aclrtEvent copied;
    void *recv;
    uint32_t *out;
    int left;
    int ok;
};

/* The second thread: the rank's context, its own stream, ordered after the receive stream's
 * copy by an event. */
static void *check_thread(void *arg) {
    struct checker *c = (struct checker *)arg;
    CHECK(aclrtSetCurrentContext(c->ctx));
    aclrtContext cur = NULL;
    CHECK(aclrtGetCurrentContext(&cur));
    REQUIRE(cur == c->ctx, "current context %p, set %p", cur, c->ctx);
    int32_t dev = -1;
    CHECK(aclrtGetDevice(&dev));
    REQUIRE(dev == c->device, "thread's device %d, context's %d", (int)dev, c->device);
    aclrtStream t;
    CHECK(aclrtCreateStream(&t));
    CHECK(aclrtStreamWaitEvent(t, c->copied));
    const size_t bytes = (size_t)g_words * sizeof(uint32_t);
    CHECK(aclrtMemcpyAsync(c->out, bytes, c->recv, bytes, ACL_MEMCPY_DEVICE_TO_HOST, t));
    CHECK(aclrtSynchronizeStreamWithTimeout(t, 60000));
    for (int i = 0; i < g_words; i++) {
        REQUIRE(c->out[i] == pattern(c->left, i), "word %d is %u, expected %u (rank %d's)", i,
                c->out[i], pattern(c->left, i), c->left);
    }
    CHECK(aclrtDestroyStream(t));
    c->ok = 1;
    return NULL;
}

static int run_rank(int r, int rd, int wr) {
    static char role[16];
    snprintf(role, sizeof role, "rank%d", r);
    g_role = role;
    const int n = g_n, left = (r + n - 1) % n, right = (r + 1) % n;
    const size_t bytes = (size_t)g_words * sizeof(uint32_t);
    char line[64 * 4 * MAX_RANKS], msg[256];

    CHECK(aclInit(NULL));
    uint32_t ndev = 0;
    CHECK(aclrtGetDeviceCount(&ndev));
    REQUIRE(ndev > 0, "no devices");
    const int dev = r % (int)ndev, right_dev = right % (int)ndev;
    aclrtContext ctx;
    CHECK(aclrtCreateContext(&ctx, dev)); /* also makes it current */
    int32_t me = 0;
    CHECK(aclrtDeviceGetBareTgid(&me));
    snprintf(msg, sizeof msg, "pid %d\n", (int)me);
    put_line(wr, msg);

    aclrtStream fill, recvs;
    CHECK(aclrtCreateStream(&fill));
    CHECK(aclrtCreateStream(&recvs));
    uint32_t *host = NULL, *out = NULL;
    void *buf = NULL, *recv = NULL;
    CHECK(aclrtMallocHost((void **)&host, bytes));
    CHECK(aclrtMallocHost((void **)&out, bytes));
    CHECK(aclrtMalloc(&buf, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&recv, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    for (int i = 0; i < g_words; i++) host[i] = pattern(r, i);
    memset(out, 0, bytes);

    /* The fill, held back by the gate. */
    aclrtNotify gate, in;
    aclrtEvent started, filled, copied;
    CHECK(aclrtCreateNotify(&gate, 0));
    CHECK(aclrtCreateEvent(&started));
    CHECK(aclrtCreateEvent(&filled));
    CHECK(aclrtCreateEvent(&copied));
    CHECK(aclrtWaitAndResetNotify(gate, fill, 60));
    CHECK(aclrtRecordEvent(started, fill));
    CHECK(aclrtMemcpyAsync(buf, bytes, host, bytes, ACL_MEMCPY_HOST_TO_DEVICE, fill));
    CHECK(aclrtRecordEvent(filled, fill));

    /* PIDs of everyone, then our exports. */
    get_line(rd, line, sizeof line, 60000, "the PIDs");
    int32_t pids[MAX_RANKS];
    {
        char *p = line + 5;
        REQUIRE(strncmp(line, "pids ", 5) == 0, "bad line %s", line);
        for (int i = 0; i < n; i++) pids[i] = (int32_t)strtol(p, &p, 10);
    }
    REQUIRE(pids[r] == me, "hub says our PID is %d, we are %d", (int)pids[r], (int)me);
    char mkey[65], nkey[65];
    CHECK(aclrtIpcMemGetExportKey(buf, bytes, mkey, sizeof mkey, 0));
    CHECK(aclrtIpcMemSetImportPid(mkey, &pids[right], 1));
    CHECK(aclrtCreateNotify(&in, 0));
    CHECK(aclrtNotifyGetExportKey(in, nkey, sizeof nkey, 0));
    CHECK(aclrtNotifySetImportPid(in, &pids[left], 1));
    REQUIRE(strchr(mkey, ' ') == NULL && strchr(nkey, ' ') == NULL, "keys with spaces");
    snprintf(msg, sizeof msg, "keys %s %s\n", mkey, nkey);
    put_line(wr, msg);
    get_line(rd, line, sizeof line, 60000, "the keys");
    static char mkeys[MAX_RANKS][65], nkeys[MAX_RANKS][65];
    {
        REQUIRE(strncmp(line, "keys ", 5) == 0, "bad line %s", line);
        char *p = line + 5;
        for (int i = 0; i < n; i++) {
            int used = 0;
            REQUIRE(sscanf(p, "%64s %64s%n", mkeys[i], nkeys[i], &used) == 2, "bad keys %s", p);
            p += used;
        }
    }

    /* Keys whitelisted for someone else, and keys that are no keys. */
    void *p = NULL;
    aclrtNotify nope = NULL;
    if (n >= 3) {
        EXPECT_RC(aclrtIpcMemImportByKey(&p, mkeys[right], ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS),
                  ACL_ERROR_RT_NO_PERMISSION);
        EXPECT_RC(aclrtNotifyImportByKey(&nope, nkeys[left], 0), ACL_ERROR_RT_NO_PERMISSION);
    }
    EXPECT_RC(aclrtIpcMemImportByKey(&p, "not-a-key", ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS),
              ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtNotifyImportByKey(&nope, "not-a-key", 0), ACL_ERROR_RT_PARAM_INVALID);

    /* Our neighbours' halves. */
    void *left_buf = NULL;
    aclrtNotify right_in;
    CHECK(aclrtIpcMemImportByKey(&left_buf, mkeys[left], ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS));
    CHECK(aclrtNotifyImportByKey(&right_in, nkeys[right], ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS));
    if (right_dev != dev) {
        /* Only the owner's device waits on a notify. */
        EXPECT_RC(aclrtWaitAndResetNotify(right_in, recvs, 1), ACL_ERROR_RT_PARAM_INVALID);
    }

    /* The ring, queued: our fill tells the right neighbour; our receive waits for the left. */
    CHECK(aclrtRecordNotify(right_in, fill));
    CHECK(aclrtWaitAndResetNotify(in, recvs, 60));
    CHECK(aclrtMemcpyAsync(recv, bytes, left_buf, bytes, ACL_MEMCPY_DEVICE_TO_DEVICE, recvs));
    CHECK(aclrtRecordEvent(copied, recvs));
    struct checker chk = {ctx, dev, copied, recv, out, left, 0};
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, check_thread, &chk) == 0, "pthread_create");

    /* Nothing can have been recorded yet: every gate is closed. */
    EXPECT_RC(aclrtSynchronizeStreamWithTimeout(recvs, 20), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
    aclrtStreamStatus st = ACL_STREAM_STATUS_COMPLETE;
    CHECK(aclrtStreamQuery(recvs, &st));
    REQUIRE(st == ACL_STREAM_STATUS_NOT_READY, "receive stream status %d before any gate", (int)st);
    put_line(wr, "armed\n");
    get_line(rd, line, sizeof line, 60000, "go");
    CHECK(aclrtRecordNotify(gate, NULL)); /* the context's default stream */

    CHECK(aclrtSynchronizeEvent(filled));
    float ms = -1;
    CHECK(aclrtEventElapsedTime(&ms, started, filled));
    REQUIRE(ms >= 0 && ms < 60000, "fill took %f ms", ms);
    REQUIRE(pthread_join(th, NULL) == 0, "pthread_join");
    REQUIRE(chk.ok, "the checking thread failed");
    CHECK(aclrtSynchronizeStreamWithTimeout(fill, 60000));
    CHECK(aclrtSynchronizeStreamWithTimeout(recvs, 60000));

    /* A double free. */
    void *tmp = NULL;
    CHECK(aclrtMalloc(&tmp, 256, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtFree(tmp));
    EXPECT_RC(aclrtFree(tmp), ACL_ERROR_RT_PARAM_INVALID);

    /* Importers close first; owners withdraw once every importer has. */
    CHECK(aclrtIpcMemClose(mkeys[left]));
    CHECK(aclrtDestroyNotify(right_in));
    put_line(wr, "closed\n");
    get_line(rd, line, sizeof line, 60000, "fin");
    CHECK(aclrtIpcMemClose(mkey));
    CHECK(aclrtDestroyNotify(in));
    CHECK(aclrtFree(buf));

    /* Work still queued at aclFinalize: a wait nobody records, copies behind it. It gives the
     * stream up as one that waits for ever (0 and a note), not at its drain's bound (60 s, then
     * 507046). Judged by that answer, not by a time: this runs under memcheck too, and a loaded
     * machine can stretch any time. */
    aclrtNotify never;
    CHECK(aclrtCreateNotify(&never, 0));
    CHECK(aclrtWaitAndResetNotify(never, fill, 0));
    for (int i = 0; i < 4; i++) {
        CHECK(aclrtMemcpyAsync(recv, bytes, host, bytes, ACL_MEMCPY_HOST_TO_DEVICE, fill));
    }
    const int64_t t0 = now_ns();
    CHECK(aclFinalize());
    const int64_t took_ms = (now_ns() - t0) / 1000000;
    const char *fm = recent_msg();
    REQUIRE(strstr(fm, "aclFinalize: discarded the tasks still queued on 1 stream(s)") != NULL &&
                strstr(fm, "nothing in this process was going to make") != NULL,
            "aclFinalize (%lld ms) did not give up the wait nobody records: %s",
            (long long)took_ms, fm);
    return 0;
}

/* ---- the hub: relays PIDs and keys, opens the gates when every rank is armed --------------- */

/* Reads one line "<word> <values>" from each rank (`what` names it in a timeout), then sends
 * every rank the line "<all_word>" followed by each rank's " <values>", in rank order. `line`
 * (`cap` bytes) is scratch space. */
static void gather_and_share(const int *to_rank, const int *from_rank, const char *word,
                             const char *all_word, const char *what, char *line, size_t cap) {
    static char all[64 * 4 * MAX_RANKS];
    size_t n = strlen(word);
    strcpy(all, all_word);
    for (int r = 0; r < g_n; r++) {
        get_line(from_rank[r], line, cap, 60000, what);
        REQUIRE(strncmp(line, word, n) == 0 && line[n] == ' ', "rank %d sent %s", r, line);
        strcat(all, line + n);
    }
    strcat(all, "\n");
    for (int r = 0; r < g_n; r++) put_line(to_rank[r], all);
}

int main(int argc, char **argv) {
    g_role = "hub";
    if (argc < 2) {
        fprintf(stderr, "usage: %s <N> [words per rank]\n", argv[0]);
        return 2;
    }
    g_n = atoi(argv[1]);
    g_words = argc > 2 ? atoi(argv[2]) : 4096;
    if (g_n < 2 || g_n > MAX_RANKS || g_words < 1) {
        fprintf(stderr, "N must be 2 to %d and the words positive\n", MAX_RANKS);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    int to_rank[MAX_RANKS], from_rank[MAX_RANKS];
    pid_t kids[MAX_RANKS];
    fflush(stdout);
    for (int r = 0; r < g_n; r++) {
        int down[2], up[2];
        REQUIRE(pipe(down) == 0 && pipe(up) == 0, "pipe: %s", strerror(errno));
        kids[r] = fork();
        REQUIRE(kids[r] >= 0, "fork: %s", strerror(errno));
        if (kids[r] == 0) {
            for (int i = 0; i < r; i++) {
                close(to_rank[i]);
                close(from_rank[i]);
            }
            close(down[1]);
            close(up[0]);
            _exit(run_rank(r, down[0], up[1]));
        }
        close(down[0]);
        close(up[1]);
        to_rank[r] = down[1];
        from_rank[r] = up[0];
    }
    static char line[64 * 4 * MAX_RANKS];
    /* PIDs, then keys. */
    gather_and_share(to_rank, from_rank, "pid", "pids", "a rank's PID", line, sizeof line);
    gather_and_share(to_rank, from_rank, "keys", "keys", "a rank's keys", line, sizeof line);
    /* Armed → go; closed → fin. */
    const char *steps[][2] = {{"armed", "go\n"}, {"closed", "fin\n"}};
    for (int s = 0; s < 2; s++) {
        for (int r = 0; r < g_n; r++) {
            get_line(from_rank[r], line, sizeof line, 60000, steps[s][0]);
            REQUIRE(strcmp(line, steps[s][0]) == 0, "rank %d sent %s", r, line);
        }
        for (int r = 0; r < g_n; r++) put_line(to_rank[r], steps[s][1]);
    }
    int failed = 0;
    for (int r = 0; r < g_n; r++) {
        int st = 0;
        REQUIRE(waitpid(kids[r], &st, 0) == kids[r], "waitpid: %s", strerror(errno));
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "[hub] rank %d failed (status %#x)\n", r, st);
            failed = 1;
        }
    }
    if (failed) return 1;
    printf("halo N=%d: ok\n", g_n);
    return 0;
}
