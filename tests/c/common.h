/* common.h — helpers shared by acl-notify's C test programs and the demo: checked calls that
 * print aclGetRecentErrMsg() on failure, a monotonic clock shared by all processes of the
 * machine, timeline events, and a file-based exchange between processes that never waits
 * forever. Header-only; every function is static. */
#ifndef ACL_NOTIFY_TESTS_COMMON_H_
#define ACL_NOTIFY_TESTS_COMMON_H_

#define _GNU_SOURCE 1
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "acl/acl.h"
/* Memory pools (pool_props), declared apart from acl.h as CANN does. */
#include "acl/acl_rt_memory_soma.h"

/* Name of this program in messages ("owner", "importer", "errors", ...). */
static const char *g_role = "test";

static inline void fail_exit(void) {
    fflush(stdout);
    fflush(stderr);
    _exit(1);
}

static inline const char *recent_msg(void) {
    const char *m = aclGetRecentErrMsg();
    return m ? m : "(no message)";
}

/* Runs an ACL call that must succeed; on failure prints the call, the code and the library's
 * explanation, then exits 1. */
#define CHECK(call)                                                                        \
    do {                                                                                   \
        aclError check_ret_ = (call);                                                      \
        if (check_ret_ != ACL_SUCCESS) {                                                   \
            fprintf(stderr, "[%s] %s:%d: %s returned %d\n  %s\n", g_role, __FILE__,         \
                    __LINE__, #call, (int)check_ret_, recent_msg());                       \
            fail_exit();                                                                   \
        }                                                                                  \
    } while (0)

/* Asserts a condition; on failure prints it (and a printf-style explanation) and exits 1. */
#define REQUIRE(cond, ...)                                                                 \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "[%s] %s:%d: requirement failed: %s\n  ", g_role, __FILE__,      \
                    __LINE__, #cond);                                                      \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fprintf(stderr, "\n");                                                         \
            fail_exit();                                                                   \
        }                                                                                  \
    } while (0)

/* Asserts that an ACL call returns `want`; on failure prints the call, both codes and the
 * library's explanation, then exits 1. */
#define EXPECT_RC(call, want)                                                              \
    do {                                                                                   \
        aclError r_ = (call);                                                              \
        REQUIRE(r_ == (want), "%s returned %d, expected %d: %s", #call, (int)r_, (int)(want), \
                recent_msg());                                                             \
    } while (0)

/* Asserts that the thread's recent messages (aclGetRecentErrMsg, which clears them) hold each
 * of the NULL-terminated words; on failure prints the first missing one and the messages. */
static inline void expect_msg(const char *first, ...) {
    const char *m = recent_msg();
    va_list ap;
    va_start(ap, first);
    for (const char *w = first; w; w = va_arg(ap, const char *)) {
        REQUIRE(strstr(m, w) != NULL, "message lacks \"%s\": %s", w, m);
    }
    va_end(ap);
}

/* Names this program "rank<r>" in messages: one rank of a job of several processes. */
static inline void set_rank_role(int rank) {
    static char role[16];
    snprintf(role, sizeof role, "rank%d", rank);
    g_role = role;
}

/* CLOCK_MONOTONIC in ns: one clock for every process of the machine, so timestamps taken in
 * different processes can be compared. */
static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* A host function holding its stream for *(int *)arg ms: only for a call that itself
 * synchronizes the stream (aclrtFreeWithDevSync, a copy to pageable memory), where a gate the
 * same thread opens could not be opened. It gives the call queued work to wait for; a run
 * that overtakes it still checks the call's outcome, so it cannot fail by timing. */
static inline void hold_ms(void *arg) { sleep_ms(*(int *)arg); }

/* One timeline line on stdout:
 *   EVENT <role> <pid> <device> <step> <monotonic ns> <detail...>
 * read by tests/tests/c_abi.rs and by `cargo xtask demo`. */
static inline void event_at(int64_t t, int device, const char *step, const char *fmt, ...) {
    char detail[256] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(detail, sizeof detail, fmt, ap);
        va_end(ap);
    }
    printf("EVENT %s %d %d %s %lld %s\n", g_role, (int)getpid(), device, step, (long long)t,
           detail);
    fflush(stdout);
}

#define EVENT(device, step, ...) event_at(now_ns(), (device), (step), __VA_ARGS__)

/* ---- Watching the program's other processes: progress, not wall time -------------------------
 *
 * A process of a test that waits for another one (read_all: for its peer's bytes; wait_child:
 * for a child to end) must not wait for ever on one that hangs, and must not give up on one
 * that is merely slow: under valgrind on a loaded machine, starved of CPU, or paused (SIGSTOP)
 * for a while. Wall time cannot tell these apart (an alarm() or a deadline of wall time kills a
 * run paused for longer than it, or starved), so a watch looks, every WATCH_LOOK_MS,
 * at the processes it waits for (/proc) and counts two things only:
 *
 * - still looks in a row: looks that found none of them busy — none used CPU time since the
 *   look before, none running or waiting for a CPU, none stopped, none in an uninterruptible
 *   sleep. WATCH_STILL_LOOKS of them: they sleep for good (waiting for this one, or hung).
 * - the time they could run: each look adds the time since the one before (at most
 *   WATCH_LOOK_MS: a look that comes late, the watcher itself paused or starved, counts as one),
 *   less the share of it that their most delayed thread spent waiting for a CPU
 *   (/proc/.../schedstat's run delay), and nothing while one of them is stopped. On a quiet
 *   machine that is the wall time; at load 30 a runnable thread that gets a CPU a tenth of the
 *   time counts a tenth of it. A wait with a limit gives up once it reaches the limit: a child
 *   that spins for ever fails after `limit` seconds of being able to run, whatever the load.
 *
 * Until 2026-12-07 read_all gave up after 60 s of wall time (session 23 made it count still
 * looks) and children bounded themselves with alarm() (session 24 made those wait_child). */
#ifndef WATCH_LOOK_MS
#define WATCH_LOOK_MS 1000
#endif
#ifndef WATCH_STILL_LOOKS
#define WATCH_STILL_LOOKS 60
#endif
/* The threads a watch remembers between looks (their run delays); more are looked at, but
 * their delay is not counted. */
#define WATCH_THREADS 512

/* One thread's run delay (ns) at a look. */
typedef struct {
    long tid;
    unsigned long long delay;
} watch_thread_t;

/* What one look found (see watch_step). */
typedef struct {
    unsigned long long cpu; /* the watched processes' CPU time, clock ticks */
    int busy;               /* a thread running, runnable or in an uninterruptible sleep */
    int stopped;            /* a thread stopped (a signal, a tracer) */
    int others;             /* processes watched */
    unsigned long long max_delay; /* the largest run delay one thread gained since the look before, ns */
    int n;                  /* threads remembered in t */
    watch_thread_t t[WATCH_THREADS];
} watch_look_t;

typedef struct {
    pid_t only;       /* the process watched; 0: the other processes of this one's group */
    unsigned limit_s; /* give up after this much time they could run; 0: no limit */
    int64_t at;       /* when the last look was taken (now_ns) */
    int still;        /* still looks in a row */
    int64_t ran_ns;   /* the time they could run, so far */
    watch_look_t last;
} watch_t;

/* Whether a thread in state `c` (proc(5): /proc/PID/stat's third field) is busy: running or
 * runnable, or in an uninterruptible sleep. Stopped (T, t) is told apart (watch_look_t). */
static inline int state_busy(char c) { return c == 'R' || c == 'D'; }
static inline int state_stopped(char c) { return c == 'T' || c == 't'; }

/* Reads /proc/<pid>/stat or /proc/<pid>/task/<tid>/stat (`path`): the state, the process
 * group and the CPU time (user + system ticks). 0 if it cannot be read (the process is gone). */
static inline int read_stat(const char *path, char *state, long *pgrp, unsigned long long *cpu) {
    char buf[1024];
    FILE *f = fopen(path, "r");
    if (f == NULL) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    /* "pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
     * stime ...": comm may hold spaces and parentheses, so parse from the last ')'. */
    char *p = strrchr(buf, ')');
    if (p == NULL) return 0;
    unsigned long long ut = 0, st = 0;
    if (sscanf(p + 1, " %c %*d %ld %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", state, pgrp, &ut,
               &st) != 4) {
        return 0;
    }
    *cpu = ut + st;
    return 1;
}

/* A thread's run delay: the time it spent runnable, waiting for a CPU (ns; schedstat's second
 * field). 0 if it cannot be read. */
static inline unsigned long long read_delay(const char *task_dir) {
    char path[400];
    snprintf(path, sizeof path, "%s/schedstat", task_dir);
    FILE *f = fopen(path, "r");
    if (f == NULL) return 0;
    unsigned long long on_cpu = 0, delay = 0;
    if (fscanf(f, "%llu %llu", &on_cpu, &delay) != 2) delay = 0;
    fclose(f);
    return delay;
}

/* Looks at every thread of process `pid` into `g`; `before` is the previous look (its run
 * delays). */
static inline void look_threads(long pid, watch_look_t *g, const watch_look_t *before) {
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%ld/task", pid);
    DIR *t = opendir(dir);
    if (t == NULL) return;
    struct dirent *te;
    while ((te = readdir(t)) != NULL) {
        if (te->d_name[0] == '.') continue;
        char tdir[320], tpath[340], state = 0;
        long tg = 0;
        unsigned long long tcpu = 0;
        snprintf(tdir, sizeof tdir, "%s/%s", dir, te->d_name);
        snprintf(tpath, sizeof tpath, "%s/stat", tdir);
        if (!read_stat(tpath, &state, &tg, &tcpu)) continue;
        if (state_busy(state)) g->busy = 1;
        if (state_stopped(state)) g->stopped = 1;
        const long tid = atol(te->d_name);
        const unsigned long long delay = read_delay(tdir);
        unsigned long long was = 0;
        int known = 0;
        for (int i = 0; i < before->n; i++) {
            if (before->t[i].tid == tid) {
                was = before->t[i].delay;
                known = 1;
                break;
            }
        }
        /* A thread new since the look before: what it waited, it waited since (or it was not
         * seen then): count it, as most of it fell in the gap. */
        const unsigned long long gained = known && delay >= was ? delay - was : (known ? 0 : delay);
        if (gained > g->max_delay) g->max_delay = gained;
        if (g->n < WATCH_THREADS) {
            g->t[g->n].tid = tid;
            g->t[g->n].delay = delay;
            g->n++;
        }
    }
    closedir(t);
}

/* One look at the processes `w` watches (see the section's comment). */
static inline void watch_look(const watch_t *w, watch_look_t *g) {
    memset(g, 0, offsetof(watch_look_t, t));
    const long me = (long)getpid(), group = (long)getpgrp();
    if (w->only > 0) {
        char path[64], state = 0;
        long pgrp = 0;
        unsigned long long cpu = 0;
        snprintf(path, sizeof path, "/proc/%ld/stat", (long)w->only);
        if (read_stat(path, &state, &pgrp, &cpu)) {
            g->others = 1;
            g->cpu = cpu;
            look_threads((long)w->only, g, &w->last);
        }
        return;
    }
    DIR *d = opendir("/proc");
    if (d == NULL) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end = NULL;
        long pid = strtol(e->d_name, &end, 10);
        if (pid <= 0 || *end != 0 || pid == me) continue;
        char path[64], state = 0;
        long pgrp = 0;
        unsigned long long cpu = 0;
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        if (!read_stat(path, &state, &pgrp, &cpu) || pgrp != group) continue;
        g->others++;
        g->cpu += cpu;
        /* The process's state is its main thread's: look at every thread. */
        look_threads(pid, g, &w->last);
    }
    closedir(d);
}

/* Starts watching process `only` (0: the other processes of this one's group), giving up after
 * `limit_s` seconds of their being able to run (0: no limit; still looks only). */
static inline void watch_start(watch_t *w, pid_t only, unsigned limit_s) {
    memset(w, 0, offsetof(watch_t, last));
    w->only = only;
    w->limit_s = limit_s;
    w->last.n = 0;
    watch_look(w, &w->last);
    w->at = now_ns();
}

/* Takes the next look; NULL while the wait may go on, else why it should give up. */
static inline const char *watch_step(watch_t *w) {
    static __thread char why[256];
    watch_look_t *now = (watch_look_t *)malloc(sizeof *now);
    REQUIRE(now != NULL, "out of memory");
    watch_look(w, now);
    const int64_t t = now_ns(), gap = t - w->at;
    w->at = t;
    const int moved = now->busy || now->stopped || now->cpu != w->last.cpu;
    w->still = moved ? 0 : w->still + 1;
    if (!now->stopped && gap > 0) {
        const int64_t look = (int64_t)WATCH_LOOK_MS * 1000000LL;
        const int64_t counted = gap < look ? gap : look;
        const double free_share =
            (double)now->max_delay >= (double)gap ? 0.0 : 1.0 - (double)now->max_delay / (double)gap;
        w->ran_ns += (int64_t)((double)counted * free_share);
    }
    const int others = now->others;
    memcpy(&w->last, now, sizeof *now);
    free(now);
    if (w->still >= WATCH_STILL_LOOKS) {
        snprintf(why, sizeof why, "the other %d process(es) of this test stayed asleep without "
                 "using CPU time for %d looks %d ms apart (failed or hung)", others,
                 WATCH_STILL_LOOKS, WATCH_LOOK_MS);
        return why;
    }
    if (w->limit_s > 0 && w->ran_ns >= (int64_t)w->limit_s * 1000000000LL) {
        snprintf(why, sizeof why, "it could run for %u s (time it was not stopped or waiting "
                 "for a CPU) without ending (a hang)", w->limit_s);
        return why;
    }
    return NULL;
}

/* Waits until pipe `fd` has bytes to read or is at end of file (its other end closed); exits
 * 1, saying why, when the other processes of the group stayed still for WATCH_STILL_LOOKS
 * looks in a row (see the watch above; no limit on time: a slow peer is waited for, however
 * long). The watch starts only once a look finds nothing. */
static inline void await_fd(int fd) {
    watch_t *w = NULL;
    for (;;) {
        struct pollfd p;
        p.fd = fd;
        p.events = POLLIN;
        p.revents = 0;
        int ready = poll(&p, 1, WATCH_LOOK_MS);
        if (ready < 0 && errno == EINTR) continue;
        REQUIRE(ready >= 0, "poll on pipe: %s", strerror(errno));
        if (ready > 0) break;
        if (w == NULL) {
            w = (watch_t *)malloc(sizeof *w);
            REQUIRE(w != NULL, "out of memory");
            watch_start(w, 0, 0);
            continue;
        }
        const char *why = watch_step(w);
        REQUIRE(why == NULL, "read from pipe: nothing came, and %s", why);
    }
    free(w);
}

/* Reads exactly `n` bytes from pipe `fd`; exits 1, saying why, at end of file, on an error, or
 * when the other processes of the group stayed still for WATCH_STILL_LOOKS looks in a row
 * (await_fd). */
static inline void read_all(int fd, void *buf, size_t n) {
    size_t done = 0;
    while (done < n) {
        await_fd(fd);
        ssize_t r = read(fd, (char *)buf + done, n - done);
        if (r < 0 && errno == EINTR) continue;
        REQUIRE(r > 0, "read from pipe: %s", r == 0 ? "end of file" : strerror(errno));
        done += (size_t)r;
    }
}

/* The watch of this process while it waits for what another thread or process does (a gate
 * opened, a file written): made only at the wait's first look, WATCH_LOOK_MS in (most such
 * waits end at once), that first look's time counted as time the process could run; then a
 * look every WATCH_LOOK_MS, giving up once it could run for `limit_s` seconds (the watch above:
 * not while it is stopped, nor the share its most delayed thread waited for a CPU). */
typedef struct {
    watch_t *w;
    unsigned limit_s;
    int64_t next_look;
} wait_watch_t;

static inline wait_watch_t wait_watch(unsigned limit_s) {
    wait_watch_t ww = {NULL, limit_s, now_ns() + (int64_t)WATCH_LOOK_MS * 1000000LL};
    return ww;
}

/* Naps 1 ms, then looks if a look is due: NULL while the wait may go on, else why it should
 * give up (watch_step's answer). */
static inline const char *wait_watch_nap(wait_watch_t *ww) {
    sleep_ms(1);
    const int64_t t = now_ns();
    if (t < ww->next_look) return NULL;
    ww->next_look = t + (int64_t)WATCH_LOOK_MS * 1000000LL;
    if (ww->w == NULL) {
        ww->w = (watch_t *)malloc(sizeof *ww->w);
        REQUIRE(ww->w != NULL, "out of memory");
        watch_start(ww->w, getpid(), ww->limit_s);
        ww->w->ran_ns = (int64_t)WATCH_LOOK_MS * 1000000LL;
        return NULL;
    }
    return watch_step(ww->w);
}

static inline void wait_watch_end(wait_watch_t *ww) {
    free(ww->w);
    ww->w = NULL;
}

/* A gate that a stream's host function (gate_hold) holds its stream at until the program
 * opens it (gate_open): what the program does meanwhile comes before the stream's next tasks
 * whatever the load, a matter of order and not of a timed hold (a 150 ms sleep was overtaken
 * under valgrind). Bounded: a gate left shut lets the stream go once this process could run
 * for 60 s (the watch above: not while it is stopped, nor the share its most delayed thread
 * waited for a CPU), so a test that forgets to open it fails on what it checks rather than
 * hanging. (Until 2026-12-07: 60,000 sleeps of 1 ms, which a starved opener could outlast.)
 * `gave_up` says the hold ended so, the gate still shut: a call that the program makes while
 * the gate is shut and that must not wait for the held stream checks it (gate_not_waited_for)
 * instead of its time (a call that waited returns only once the hold gives up). */
typedef struct {
    int open; /* GCC's __atomic builtins: common.h is compiled as C++ too */
    int gave_up;
} gate_t;

static inline void gate_hold(void *arg) {
    gate_t *g = (gate_t *)arg;
    wait_watch_t ww = wait_watch(60);
    while (!__atomic_load_n(&g->open, __ATOMIC_ACQUIRE)) {
        if (wait_watch_nap(&ww) != NULL) {
            __atomic_store_n(&g->gave_up, 1, __ATOMIC_RELEASE);
            break;
        }
    }
    wait_watch_end(&ww);
}

/* Fails the program, naming `call`, if `g`'s hold gave up before the gate was opened: `call`,
 * made while the gate was shut, waited for the held stream. */
static inline void gate_not_waited_for(gate_t *g, const char *call) {
    REQUIRE(!__atomic_load_n(&g->gave_up, __ATOMIC_ACQUIRE),
            "%s waited for the stream held by a host function (the hold gave up, the gate "
            "still shut)",
            call);
}

static inline void gate_open(gate_t *g) { __atomic_store_n(&g->open, 1, __ATOMIC_RELEASE); }

/* Waits for child `pid` to end (its status in *status) while it makes progress: if it stays
 * still for WATCH_STILL_LOOKS looks, or could run for `limit_s` seconds (0: no limit) without
 * ending (see the watch above), it is killed (SIGKILL), reaped, and why is printed on stderr
 * under `what`. Returns 0 when the child ended on its own, 1 when the watch killed it. This
 * is the bound of a child that must not hang, in place of an alarm() of wall time. */
static inline int wait_child(pid_t pid, int *status, unsigned limit_s, const char *what) {
    watch_t *w = (watch_t *)malloc(sizeof *w);
    REQUIRE(w != NULL, "out of memory");
    watch_start(w, pid, limit_s);
    /* waitpid every 5 ms (a pidfd would need syscall(), which a program that included a
     * system header before this one with -std=c11 does not declare). */
    int64_t next_look = now_ns() + (int64_t)WATCH_LOOK_MS * 1000000LL;
    int killed = 0;
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid) break;
        REQUIRE(r == 0 || errno == EINTR, "waitpid: %s", strerror(errno));
        sleep_ms(5);
        if (now_ns() < next_look) continue;
        next_look = now_ns() + (int64_t)WATCH_LOOK_MS * 1000000LL;
        const char *why = watch_step(w);
        if (why != NULL && waitpid(pid, status, WNOHANG) == 0) {
            fprintf(stderr, "[%s] %s: child %d killed: %s\n", g_role, what, (int)pid, why);
            kill(pid, SIGKILL);
            REQUIRE(waitpid(pid, status, 0) == pid, "waitpid: %s", strerror(errno));
            killed = 1;
            break;
        }
    }
    free(w);
    return killed;
}

/* Writes the `n` bytes at `buf` to pipe `fd` (at most PIPE_BUF: one write); exits 1 if it
 * cannot. */
static inline void write_all(int fd, const void *buf, size_t n) {
    REQUIRE(write(fd, buf, n) == (ssize_t)n, "write to pipe: %s", strerror(errno));
}

/* Forks a child that talks with this process over two pipes and dies with it
 * (PR_SET_PDEATHSIG: a parent that failed never leaves it reading for ever). On each side
 * `*rd` and `*wr` are that side's ends (the other side's are closed there, so a read sees end
 * of file once the other process is gone). Returns fork's value: 0 in the child. */
static inline pid_t fork_piped(int *rd, int *wr) {
    int to_child[2], to_parent[2];
    REQUIRE(pipe(to_child) == 0 && pipe(to_parent) == 0, "pipe: %s", strerror(errno));
    const pid_t parent = getpid();
    pid_t child = fork();
    REQUIRE(child >= 0, "fork: %s", strerror(errno));
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1);
        close(to_child[1]);
        close(to_parent[0]);
        *rd = to_child[0];
        *wr = to_parent[1];
    } else {
        close(to_child[0]);
        close(to_parent[1]);
        *rd = to_parent[0];
        *wr = to_child[1];
    }
    return child;
}

/* Writes `len` bytes to dir/name atomically (a temporary file renamed into place), so a
 * reader never sees a partial file. */
static inline void put_file(const char *dir, const char *name, const void *data, size_t len) {
    char tmp[4096], path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s/.%s.%d.tmp", dir, name, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    REQUIRE(f != NULL, "cannot create %s: %s", tmp, strerror(errno));
    REQUIRE(fwrite(data, 1, len, f) == len, "cannot write %s", tmp);
    REQUIRE(fclose(f) == 0, "cannot close %s", tmp);
    REQUIRE(rename(tmp, path) == 0, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
}

/* Exits 1, saying why, when dir/name exists already: a file this program writes into the
 * exchange directory, left there by an earlier run, which the other side would read as this
 * run's (a stale key or PID). Each run needs an empty exchange directory. */
static inline void require_fresh(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    REQUIRE(access(path, F_OK) != 0, "%s exists already: the exchange directory holds the files "
            "of an earlier run, which the other processes would take for this run's; give each "
            "run an empty directory (rm -rf %s; mkdir %s)", path, dir, dir);
}

/* Waits for dir/name to appear and reads it into buf (NUL-terminated); returns the length.
 * Exits 1 (naming the file) once this process could run for `timeout_ms` (or
 * $ACL_NOTIFY_EXCHANGE_TIMEOUT_MS if set) without it: nothing waits forever. Counted by the
 * watch above (not while the process is stopped; a look that comes late counts as one), not
 * by wall time, which a pause of the job (SIGSTOP) ran out. */
static inline size_t get_file(const char *dir, const char *name, char *buf, size_t cap,
                              long timeout_ms) {
    const char *override = getenv("ACL_NOTIFY_EXCHANGE_TIMEOUT_MS");
    if (override && atol(override) > 0) {
        timeout_ms = atol(override);
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    /* The limit in whole seconds (at least one). */
    wait_watch_t ww = wait_watch((unsigned)((timeout_ms + 999) / 1000));
    for (;;) {
        FILE *f = fopen(path, "rb");
        if (f) {
            size_t n = fread(buf, 1, cap - 1, f);
            fclose(f);
            buf[n] = '\0';
            wait_watch_end(&ww);
            return n;
        }
        const char *why = wait_watch_nap(&ww);
        REQUIRE(why == NULL, "timed out after %ld ms waiting for %s (the other process did "
                "not get that far; counted as time this process could run: %s)", timeout_ms,
                path, why);
    }
}

/* Prints model `m` with aclmdlRIDebugJsonPrint into the file `path`, reads it into buf
 * (NUL-terminated) and removes the file; requires a JSON array. Returns the length. */
static inline size_t read_json_print(aclmdlRI m, const char *path, char *buf, size_t cap) {
    CHECK(aclmdlRIDebugJsonPrint(m, path, 0));
    FILE *f = fopen(path, "r");
    REQUIRE(f != NULL, "aclmdlRIDebugJsonPrint wrote no file %s", path);
    const size_t got = fread(buf, 1, cap - 1, f);
    buf[got] = '\0';
    fclose(f);
    remove(path);
    REQUIRE(got > 0 && buf[0] == '[', "aclmdlRIDebugJsonPrint wrote: %s", buf);
    return got;
}

/* The physical-memory properties CANN's VMM samples pass to aclrtMallocPhysical: pinned,
 * no shareable handle type, on device 0, with page attribute `attr`. */
static inline aclrtPhysicalMemProp device_prop(aclrtMemAttr attr) {
    aclrtPhysicalMemProp prop;
    memset(&prop, 0, sizeof prop);
    prop.handleType = ACL_MEM_HANDLE_TYPE_NONE;
    prop.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
    prop.memAttr = attr;
    prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    return prop;
}

/* The memory-pool properties CANN's pool samples pass to aclrtMemPoolCreate: pinned, no
 * shareable handle type, on device `device`, at most `max_size` bytes. */
static inline aclrtMemPoolProps pool_props(int device, size_t max_size) {
    aclrtMemPoolProps p;
    memset(&p, 0, sizeof p);
    p.allocType = ACL_MEM_ALLOCATION_TYPE_PINNED;
    p.handleType = ACL_MEM_HANDLE_TYPE_NONE;
    p.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = device;
    p.maxSize = max_size;
    return p;
}

/* Makes `device` current; its free device memory in bytes (aclrtGetMemInfo). */
static inline size_t free_bytes_on(int device) {
    size_t free_b = 0, total = 0;
    CHECK(aclrtSetDevice(device));
    CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &free_b, &total));
    return free_b;
}

/* One rank's part of a ring all-reduce over `n` ranks, as a collective library runs it: its
 * buffers and notifies, and the halves of its neighbours' it imported. Each buffer holds n
 * chunks of `chunk_bytes`. */
typedef struct {
    int n, rank;
    size_t chunk_bytes;
    /* Ours: the data, and where the left neighbour puts its partial sums. */
    void *data, *recv;
    /* The right neighbour's two buffers, imported. */
    void *right_data, *right_recv;
    /* Ours: data ("the left neighbour wrote into us"), ack ("the right neighbour is done with
     * its previous step: we may write into it"). */
    aclrtNotify data_n, ack_n;
    /* The neighbours', imported: the right one's data notify, the left one's ack. */
    aclrtNotify right_data_n, left_ack_n;
    /* Each notify wait's timeout, in seconds. */
    uint32_t wait_s;
    /* The element type aclrtReduceAsync adds. */
    aclDataType type;
} ring_t;

/* The steps of a ring all-reduce: n - 1 of reduce-scatter, then n - 1 of all-gather. */
static inline int ring_steps(const ring_t *g) { return 2 * (g->n - 1); }

/* Queues step `step` of the ring on stream `s`:
 *
 *     wait ack; copy a chunk into the right neighbour's memory; record its data notify;
 *     wait data; (reduce-scatter: add the chunk received into our own); record the left
 *     neighbour's ack
 *
 * Before step 0 the rank records the left neighbour's ack once (it may write into us). */
static inline void ring_step(const ring_t *g, int step, aclrtStream s) {
    const int n = g->n, r = g->rank;
    const size_t cb = g->chunk_bytes;
    const int rs = step < n - 1, t = rs ? step : step - (n - 1);
    const int send = rs ? (r - t + n) % n : (r + 1 - t + n) % n;
    char *dst = (char *)(rs ? g->right_recv : g->right_data) + (size_t)send * cb;
    CHECK(aclrtWaitAndResetNotify(g->ack_n, s, g->wait_s));
    CHECK(aclrtMemcpyAsync(dst, cb, (char *)g->data + (size_t)send * cb, cb,
                           ACL_MEMCPY_DEVICE_TO_DEVICE, s));
    CHECK(aclrtRecordNotify(g->right_data_n, s));
    CHECK(aclrtWaitAndResetNotify(g->data_n, s, g->wait_s));
    if (rs) {
        const int got = (r - t - 1 + 2 * n) % n;
        CHECK(aclrtReduceAsync((char *)g->data + (size_t)got * cb,
                               (char *)g->recv + (size_t)got * cb, cb,
                               ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, g->type, s, NULL));
    }
    CHECK(aclrtRecordNotify(g->left_ack_n, s));
}

#endif /* ACL_NOTIFY_TESTS_COMMON_H_ */
