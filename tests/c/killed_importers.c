/* killed_importers.c — life-cycle abuse a multi-process CANN program meets: processes forked
 * after the parent's aclInit (each starting its own session with aclInit) import the parent's
 * device memory by IPC key, and some of them are SIGKILLed while they hold the import, one of
 * them with a copy out of it queued behind a wait that never ends.
 *
 * Per round (ROUNDS of them, in one namespace):
 *   - the parent allocates a buffer, fills it, exports it with a PID whitelist, and forks
 *     CHILDREN children after aclInit; each child calls aclInit, imports the buffer, copies it
 *     back to its host memory and checks every word, tells the parent, then either closes the
 *     import and finalizes (even children) or waits to be killed (odd ones; child 1 with a copy
 *     out of the import queued behind a notify wait nobody records);
 *   - the parent SIGKILLs the odd children, reaps every child, frees its buffer (allowed with
 *     imports outstanding, as CANN allows it), and checks that the device's free memory is
 *     back where the round started once the dead children are reclaimed (a bounded poll);
 *   - the key then imports nothing in a new child (107000 range: the export is gone).
 * At the end: the namespace's files in /dev/shm are the ones it had after the first round
 * (nothing per process or per round left behind), and the parent's aclFinalize succeeds.
 *
 * usage: killed_importers [rounds]; exit 0 and "killed_importers: ok". */
#include "common.h"

#include <dirent.h>
#include <sys/wait.h>

#define CHILDREN 4
#define KEY_LEN 65
#define WORDS 8192
#define BYTES (WORDS * sizeof(uint32_t))

static uint32_t word(int round, int i) { return (uint32_t)round * 100003u + (uint32_t)i * 7u; }

/* The child: its own session, the import, the check; then close or wait to be killed. */
static void child(int rd, int wr, int round, int me) {
    g_role = "killed_importers child";
    /* No alarm: a child that hangs is caught by the parent's read (common.h read_all: it gives
     * up once the child sleeps without using CPU time for about a minute), whose end kills it
     * (fork_piped's PR_SET_PDEATHSIG); one that is merely slow — under valgrind on a loaded
     * machine — is waited for. */
    char key[KEY_LEN] = {0};
    read_all(rd, key, sizeof key);
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(me % 2));
    void *p = NULL;
    CHECK(aclrtIpcMemImportByKey(&p, key, ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS));
    uint32_t *host;
    CHECK(aclrtMallocHost((void **)&host, BYTES));
    aclrtStream s;
    CHECK(aclrtCreateStream(&s));
    /* Memory imported onto another device is copied device to device only (CANN). */
    void *local;
    CHECK(aclrtMalloc(&local, BYTES, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemcpyAsync(local, BYTES, p, BYTES, ACL_MEMCPY_DEVICE_TO_DEVICE, s));
    CHECK(aclrtMemcpyAsync(host, BYTES, local, BYTES, ACL_MEMCPY_DEVICE_TO_HOST, s));
    CHECK(aclrtSynchronizeStream(s));
    for (int i = 0; i < WORDS; i++) {
        REQUIRE(host[i] == word(round, i), "child %d: word %d is %#x, expected %#x", me, i,
                host[i], word(round, i));
    }
    if (me == 1) {
        /* A copy out of the import queued behind a wait nobody records. */
        aclrtNotify n;
        CHECK(aclrtCreateNotify(&n, 0));
        CHECK(aclrtWaitAndResetNotify(n, s, 0));
        CHECK(aclrtMemcpyAsync(local, BYTES, p, BYTES, ACL_MEMCPY_DEVICE_TO_DEVICE, s));
    }
    char ok = 'k';
    write_all(wr, &ok, 1);
    if (me % 2) {
        char never;
        read_all(rd, &never, 1); /* killed meanwhile */
        _exit(3);
    }
    CHECK(aclrtDestroyStream(s));
    CHECK(aclrtFreeHost(host));
    CHECK(aclrtFree(local));
    CHECK(aclrtIpcMemClose(key));
    CHECK(aclFinalize());
    _exit(0);
}

/* A child that imports a key whose export is gone: refused, never a crash or a hang. */
static void late_child(int rd, int wr) {
    g_role = "killed_importers late";
    /* No alarm, as for the other children. */
    char key[KEY_LEN] = {0};
    read_all(rd, key, sizeof key);
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    void *p = NULL;
    aclError e = aclrtIpcMemImportByKey(&p, key, 0);
    REQUIRE(e != ACL_SUCCESS, "a freed export imported (%p)", p);
    const char *m = recent_msg();
    REQUIRE(strlen(m) > 10, "no message for code %d", (int)e);
    printf("late import refused with %d: %s\n", (int)e, m);
    fflush(stdout);
    char ok = 'k';
    write_all(wr, &ok, 1);
    CHECK(aclFinalize());
    _exit(0);
}

/* The free memory of devices 0 and 1 together (the parent's current device stays 0). */
static size_t device_free(void) {
    size_t sum = 0;
    for (int d = 1; d >= 0; d--) {
        size_t f = 0, t = 0;
        CHECK(aclrtSetDevice(d));
        CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &f, &t));
        sum += f;
    }
    return sum;
}

/* The names of the namespace's files in /dev/shm, sorted, joined by spaces. */
static void shm_files(char *out, size_t cap) {
    const char *ns = getenv("ACL_NOTIFY_SIM_NAMESPACE");
    REQUIRE(ns != NULL, "run with ACL_NOTIFY_SIM_NAMESPACE set");
    char prefix[512];
    snprintf(prefix, sizeof prefix, "acl-notify-sim.%s.", ns);
    struct dirent **list;
    int n = scandir("/dev/shm", &list, NULL, alphasort);
    REQUIRE(n >= 0, "scandir /dev/shm: %s", strerror(errno));
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (strncmp(list[i]->d_name, prefix, strlen(prefix)) == 0) {
            strncat(out, list[i]->d_name + strlen(prefix), cap - strlen(out) - 2);
            strncat(out, " ", cap - strlen(out) - 1);
        }
        free(list[i]);
    }
    free(list);
}

int main(int argc, char **argv) {
    g_role = "killed_importers";
    const int rounds = argc > 1 ? atoi(argv[1]) : 3;
    REQUIRE(rounds > 0, "rounds must be positive");
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream s;
    CHECK(aclrtCreateStream(&s));
    uint32_t *host;
    CHECK(aclrtMallocHost((void **)&host, BYTES));
    char files_after_first[8192] = "";
    size_t free_start = 0;
    for (int round = 0; round < rounds; round++) {
        const size_t free0 = device_free();
        if (round == 0) free_start = free0;
        void *d;
        CHECK(aclrtMalloc(&d, BYTES, ACL_MEM_MALLOC_HUGE_FIRST));
        for (int i = 0; i < WORDS; i++) host[i] = word(round, i);
        CHECK(aclrtMemcpyAsync(d, BYTES, host, BYTES, ACL_MEMCPY_HOST_TO_DEVICE, s));
        CHECK(aclrtSynchronizeStream(s));
        char key[KEY_LEN] = {0};
        CHECK(aclrtIpcMemGetExportKey(d, BYTES, key, sizeof key, 0));
        pid_t kids[CHILDREN];
        int rd[CHILDREN], wr[CHILDREN];
        for (int c = 0; c < CHILDREN; c++) {
            kids[c] = fork_piped(&rd[c], &wr[c]);
            if (kids[c] == 0) child(rd[c], wr[c], round, c);
            int32_t pid = kids[c];
            CHECK(aclrtIpcMemSetImportPid(key, &pid, 1));
        }
        /* The parent goes on using its session while the children start theirs. */
        for (int c = 0; c < CHILDREN; c++) write_all(wr[c], key, sizeof key);
        CHECK(aclrtMemsetAsync(host, BYTES, 0, BYTES, s));
        CHECK(aclrtSynchronizeStream(s));
        for (int c = 0; c < CHILDREN; c++) {
            char ok;
            read_all(rd[c], &ok, 1);
        }
        for (int c = 1; c < CHILDREN; c += 2) kill(kids[c], SIGKILL);
        for (int c = 0; c < CHILDREN; c++) {
            int st = 0;
            REQUIRE(waitpid(kids[c], &st, 0) == kids[c], "waitpid: %s", strerror(errno));
            if (c % 2) {
                REQUIRE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "child %d: status %#x", c, st);
            } else {
                REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d: status %#x", c, st);
            }
            close(rd[c]);
            close(wr[c]);
        }
        /* Free with the dead children's imports outstanding. */
        CHECK(aclrtFree(d));
        /* Released once the survivors' gc sees the children dead: looked for until then,
         * given up once this process could run for 60 s (the watch; 5 s of wall time until
         * 2026-12-07, which a loaded machine could outlast). */
        size_t f = device_free();
        wait_watch_t ww = wait_watch(60);
        while (f != free0 && wait_watch_nap(&ww) == NULL) {
            sleep_ms(24); /* with the nap's 1 ms, a look every 25 ms as before */
            f = device_free();
        }
        wait_watch_end(&ww);
        REQUIRE(f == free0,
                "round %d: %zu bytes free on the two devices after the free (waited while this "
                "process could run for 60 s), %zu before the round",
                round, f, free0);
        /* The export is gone: a new child's import is refused. */
        int lrd, lwr;
        pid_t late = fork_piped(&lrd, &lwr);
        if (late == 0) late_child(lrd, lwr);
        write_all(lwr, key, sizeof key);
        char ok;
        read_all(lrd, &ok, 1);
        int st = 0;
        REQUIRE(waitpid(late, &st, 0) == late && WIFEXITED(st) && WEXITSTATUS(st) == 0,
                "late child: status %#x", st);
        close(lrd);
        close(lwr);
        char files[8192];
        shm_files(files, sizeof files);
        if (round == 0) {
            snprintf(files_after_first, sizeof files_after_first, "%s", files);
        } else {
            REQUIRE(strcmp(files, files_after_first) == 0,
                    "round %d: the namespace's files are [%s], after round 0 [%s]", round, files,
                    files_after_first);
        }
        printf("round %d: %d importers (%d killed holding the import), device memory back, "
               "files [%s]\n",
               round, CHILDREN, CHILDREN / 2, files);
        fflush(stdout);
    }
    REQUIRE(device_free() == free_start, "device memory at the end");
    CHECK(aclrtFreeHost(host));
    CHECK(aclrtDestroyStream(s));
    CHECK(aclFinalize());
    printf("killed_importers: ok\n");
    return 0;
}
