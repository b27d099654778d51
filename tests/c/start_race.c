/* start_race.c — processes of one job starting at the same moment in a fresh namespace, as
 * ranks do: round after round, N processes are forked, held at a barrier (a pipe whose write
 * end the parent closes) and released together; each makes its first runtime calls (half of
 * them aclInit first, the others not: the first runtime call starts their session, as in
 * errors.c), so that they create or attach to the namespace's files (notify file, device
 * memory file) at once. Every process must start: a failure prints the round, the namespace
 * and the library's message (a header taken for corrupt names the ready word it read). Once
 * all have started (a second barrier), each checks that the files it maps are still the
 * namespace's (not removed: /proc/self/maps says "(deleted)"), so that two processes going
 * on with two different files of one namespace — each alone, neither failing — is caught.
 *
 * usage: start_race <seconds> <processes>; runs rounds for about that long (at least one)
 * in namespaces $ACL_NOTIFY_SIM_NAMESPACE-r<round>, removing each round's files after it;
 * prints "start_race: ok, <rounds> rounds of <n> processes" and exits 0 when every process of
 * every round started, else exits 1. */
#include "common.h"

#include <dirent.h>
#include <sys/wait.h>

#define MAX_PROCS 16

/* Waits until the parent closes the write end of `barrier` (read returns end of file). */
static void wait_at(int barrier) {
    char c;
    REQUIRE(read(barrier, &c, 1) == 0, "barrier: %s", strerror(errno));
}

/* Fails if a file of namespace `ns` this process maps was removed from /dev/shm. */
static void expect_mapped_files_in_place(const char *ns) {
    char needle[256], line[1024];
    snprintf(needle, sizeof needle, "/dev/shm/acl-notify-sim.%s.", ns);
    FILE *maps = fopen("/proc/self/maps", "r");
    REQUIRE(maps != NULL, "/proc/self/maps: %s", strerror(errno));
    int seen = 0;
    while (fgets(line, sizeof line, maps)) {
        if (strstr(line, needle)) {
            seen++;
            REQUIRE(strstr(line, "(deleted)") == NULL,
                    "maps a file of its namespace that was removed meanwhile (another process "
                    "of the namespace uses another file): %s", line);
        }
    }
    fclose(maps);
    REQUIRE(seen > 0, "maps no file of namespace %s", ns);
}

/* One process of a round: wait at the barrier, start, tell the parent, wait until everybody
 * has, check the files, end. */
static int starter(int go, int started, int check, int index, const char *ns) {
    wait_at(go);
    if (index % 2 == 0) {
        CHECK(aclInit(NULL));
    }
    CHECK(aclrtSetDevice(0));
    aclrtNotify n = NULL;
    CHECK(aclrtCreateNotify(&n, 0));
    void *mem = NULL;
    CHECK(aclrtMalloc(&mem, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    REQUIRE(write(started, "s", 1) == 1, "write: %s", strerror(errno));
    wait_at(check);
    expect_mapped_files_in_place(ns);
    CHECK(aclrtFree(mem));
    CHECK(aclrtDestroyNotify(n));
    CHECK(aclFinalize());
    return 0;
}

/* Removes the files of namespace `ns` (/dev/shm/acl-notify-sim.<ns>.<kind><n>). */
static void remove_namespace(const char *ns) {
    char prefix[256];
    snprintf(prefix, sizeof prefix, "acl-notify-sim.%s.", ns);
    DIR *d = opendir("/dev/shm");
    REQUIRE(d != NULL, "opendir /dev/shm: %s", strerror(errno));
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *rest = e->d_name + strlen(prefix);
        /* The namespace's own files: the kind (letters) right after the prefix, no dot. */
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 && strchr(rest, '.') == NULL) {
            char path[512];
            snprintf(path, sizeof path, "/dev/shm/%s", e->d_name);
            unlink(path);
        }
    }
    closedir(d);
}

int main(int argc, char **argv) {
    g_role = "start_race";
    setvbuf(stdout, NULL, _IONBF, 0);
    REQUIRE(argc == 3, "usage: %s <seconds> <processes>", argv[0]);
    double seconds = atof(argv[1]);
    int n = atoi(argv[2]);
    REQUIRE(n >= 2 && n <= MAX_PROCS, "processes: 2..%d", MAX_PROCS);
    const char *base = getenv("ACL_NOTIFY_SIM_NAMESPACE");
    REQUIRE(base && *base, "ACL_NOTIFY_SIM_NAMESPACE is not set");
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rounds = 0, failed = 0;
    do {
        char ns[200];
        snprintf(ns, sizeof ns, "%s-r%d", base, rounds);
        REQUIRE(setenv("ACL_NOTIFY_SIM_NAMESPACE", ns, 1) == 0, "setenv");
        int go[2], started[2], check[2];
        REQUIRE(pipe(go) == 0 && pipe(started) == 0 && pipe(check) == 0, "pipe: %s",
                strerror(errno));
        pid_t kids[MAX_PROCS];
        fflush(NULL);
        for (int i = 0; i < n; i++) {
            kids[i] = fork();
            REQUIRE(kids[i] >= 0, "fork: %s", strerror(errno));
            if (kids[i] == 0) {
                close(go[1]);
                close(check[1]);
                close(started[0]);
                g_role = "start_race-child";
                _exit(starter(go[0], started[1], check[0], i, ns));
            }
        }
        close(go[0]);
        close(check[0]);
        close(started[1]);
        close(go[1]); /* go */
        /* Every process has started (or died: its end of `started` closes with it). */
        char c;
        for (int i = 0; i < n && (await_fd(started[0]), read(started[0], &c, 1) == 1); i++) {
        }
        close(started[0]);
        close(check[1]); /* check */
        for (int i = 0; i < n; i++) {
            /* A process that hangs is a failure, not a stuck test: 60 s of its being able to
             * run (common.h wait_child). */
            int st = 0;
            (void)wait_child(kids[i], &st, 60, "start_race");
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                failed++;
                fprintf(stderr, "[start_race] round %d (namespace %s): process %d of %d %s %d\n",
                        rounds, ns, i, n, WIFEXITED(st) ? "exited" : "killed by signal",
                        WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            }
        }
        remove_namespace(ns);
        rounds++;
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9 <
             seconds);
    REQUIRE(failed == 0, "%d of %d processes failed to start (%d rounds)", failed, rounds * n,
            rounds);
    printf("start_race: ok, %d rounds of %d processes\n", rounds, n);
    return 0;
}
