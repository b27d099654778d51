/* fork_busy.c — fork while other threads of the parent are inside the library. Each child,
 * watched by its parent, starts a session of its own with its first call (as CANN's runtime starts one
 * implicitly; no current device there yet, so that call is ACL_ERROR_RT_CONTEXT_NULL), then
 * sets a device, calls aclInit, creates a stream and a notify (and a count notify where the SoC
 * has them), records and waits, finalizes and exits 0; a child that hangs is killed by its
 * parent's watch (common.h wait_child) and counted.
 *
 *   fork_busy control   the parent has a session; two threads loop in control-plane calls
 *                       (create/destroy notify, get id, export key, whitelist,
 *                       aclrtGetDeviceInfo, aclrtGetSocName) while the main thread forks;
 *   fork_busy cycle     one thread loops aclInit/aclFinalize, another the control plane;
 *   fork_busy hostfn    as `control`, but the fork is made by a host function on a stream's
 *                       worker thread (aclrtLaunchHostFunc), and the child works inside it;
 *   fork_busy preinit   the parent has not called aclInit: a thread loops in control-plane
 *                       calls (the first of which starts the session implicitly) while the main
 *                       thread forks, and halfway another thread calls aclInit (then joins the
 *                       control plane): what the library holds before and during the process's
 *                       first session start must not be left held in a child either;
 *   fork_busy nosession the parent has no session; two threads loop in the calls that need
 *                       none (data buffers, allocator descriptors and their registration with
 *                       a stream value), whose process-wide tables a child must not find held.
 *
 * Every child first uses data buffers and an allocator descriptor (no session needed), then
 * checks that it still reads a data buffer the parent made before the threads started.
 *
 * Optional second argument: the number of forks (default 200). Prints
 * "fork_busy <scenario>: <n> forks, <h> hung, <f> failed" and, when all passed, "... ok".
 * Stops after MAX_BAD bad children so that a broken build fails in seconds, not minutes. */
#include "common.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

#define MAX_BAD 3
#define CHILD_LIMIT_S 10

static atomic_int g_stop;
static atomic_long g_calls;
/* Forks made so far, and how many to make (for preinit's late aclInit). */
static atomic_int g_forked, g_forks_wanted;

/* Control-plane calls until told to stop; every code is accepted (a session may come and
 * go under a `cycle` run), only a crash or a hang would show. */
static void *control_loop(void *arg) {
    (void)arg;
    int32_t pid = (int32_t)getpid();
    while (!atomic_load(&g_stop)) {
        aclrtNotify n = NULL;
        char key[65];
        uint32_t id = 0;
        int64_t v = 0;
        if (aclrtCreateNotify(&n, 0) != ACL_SUCCESS) {
            (void)aclrtSetDevice(0);
            (void)aclGetRecentErrMsg();
            atomic_fetch_add(&g_calls, 1);
            continue;
        }
        (void)aclrtGetNotifyId(n, &id);
        (void)aclrtNotifyGetExportKey(n, key, sizeof key, 0);
        (void)aclrtNotifySetImportPid(n, &pid, 1);
        (void)aclrtGetDeviceInfo(0, ACL_DEV_ATTR_SUPER_POD_DEVICE_ID, &v);
        (void)aclrtGetSocName();
        (void)aclrtDestroyNotify(n);
        (void)aclGetRecentErrMsg();
        atomic_fetch_add(&g_calls, 1);
    }
    return NULL;
}

/* An allocator callback: never called (the simulator launches no operators). */
static void *no_alloc(aclrtAllocator a, size_t size) {
    (void)a;
    (void)size;
    return NULL;
}
static void no_free(aclrtAllocator a, aclrtAllocatorBlock b) {
    (void)a;
    (void)b;
}
static void *no_addr(aclrtAllocatorBlock b) {
    (void)b;
    return NULL;
}

/* One round of the calls that need no session: a data buffer made, read, changed, destroyed;
 * an allocator descriptor made, filled, registered under stream value `stream`, read back,
 * unregistered, destroyed. 1 if every answer was right. */
static int sessionless_round(uintptr_t stream) {
    static int obj;
    aclDataBuffer *b = aclCreateDataBuffer(&obj, 64);
    int ok = b != NULL && aclGetDataBufferSizeV2(b) == 64 &&
             aclUpdateDataBuffer(b, &obj, 8) == ACL_SUCCESS && aclGetDataBufferAddr(b) == &obj &&
             aclDestroyDataBuffer(b) == ACL_SUCCESS;
    aclrtAllocatorDesc d = aclrtAllocatorCreateDesc();
    aclrtStream s = (aclrtStream)stream;
    aclrtAllocatorDesc got = NULL;
    ok = ok && d != NULL && aclrtAllocatorSetObjToDesc(d, &obj) == ACL_SUCCESS &&
         aclrtAllocatorSetAllocFuncToDesc(d, no_alloc) == ACL_SUCCESS &&
         aclrtAllocatorSetFreeFuncToDesc(d, no_free) == ACL_SUCCESS &&
         aclrtAllocatorSetGetAddrFromBlockFuncToDesc(d, no_addr) == ACL_SUCCESS &&
         aclrtAllocatorRegister(s, d) == ACL_SUCCESS &&
         aclrtAllocatorGetByStream(s, &got, NULL, NULL, NULL, NULL, NULL) == ACL_SUCCESS &&
         got == d && aclrtAllocatorUnregister(s) == ACL_SUCCESS &&
         aclrtAllocatorDestroyDesc(d) == ACL_SUCCESS;
    return ok;
}

/* Session-less calls until told to stop (each thread its own stream value). */
static void *sessionless_loop(void *arg) {
    uintptr_t stream = (uintptr_t)arg;
    while (!atomic_load(&g_stop)) {
        REQUIRE(sessionless_round(stream), "a session-less call failed: %s", recent_msg());
        atomic_fetch_add(&g_calls, 1);
    }
    return NULL;
}

/* A data buffer the parent made before its threads started: a child reads it as its own. */
static aclDataBuffer *g_parents_buffer;

/* aclInit/aclFinalize cycles until told to stop. */
static void *cycle_loop(void *arg) {
    (void)arg;
    while (!atomic_load(&g_stop)) {
        if (aclInit(NULL) == ACL_SUCCESS) {
            (void)aclrtSetDevice(0);
            aclrtCntNotify c = NULL;
            if (aclrtCntNotifyCreate(&c, 0) == ACL_SUCCESS) {
                (void)aclrtCntNotifyDestroy(c);
            }
            (void)aclFinalize();
        }
        (void)aclGetRecentErrMsg();
        atomic_fetch_add(&g_calls, 1);
    }
    return NULL;
}

/* The process's first aclInit, halfway through the forks; then the control plane. */
static void *late_init(void *arg) {
    while (!atomic_load(&g_stop) && atomic_load(&g_forked) < atomic_load(&g_forks_wanted) / 2) {
        sleep_ms(1);
    }
    CHECK(aclInit(NULL));
    return control_loop(arg);
}

/* What a child does: its own session, from start to end. */
static void child_body(void) {
    g_role = "fork_busy child";
    REQUIRE(sessionless_round(0x5e55), "the child's session-less calls failed: %s", recent_msg());
    /* The parent's buffer: the child's copy of the table, unless a thread of the parent was
     * changing it at the fork (then the child starts with none, and the buffer is dead). */
    size_t size = aclGetDataBufferSizeV2(g_parents_buffer);
    REQUIRE(size == 1024 || size == 0, "the parent's data buffer reads %zu bytes", size);
    aclrtNotify n = NULL;
    aclError e = aclrtCreateNotify(&n, 0);
    REQUIRE(e == ACL_ERROR_RT_CONTEXT_NULL, "the child's first call returned %d: %s", (int)e,
            recent_msg());
    CHECK(aclrtSetDevice(0));
    CHECK(aclInit(NULL));
    aclrtStream s = NULL;
    CHECK(aclrtCreateStream(&s));
    CHECK(aclrtCreateNotify(&n, 0));
    char key[65];
    CHECK(aclrtNotifyGetExportKey(n, key, sizeof key, 0));
    CHECK(aclrtRecordNotify(n, s));
    CHECK(aclrtWaitAndResetNotify(n, s, 5));
    aclrtCntNotify c = NULL;
    e = aclrtCntNotifyCreate(&c, 0);
    REQUIRE(e == ACL_SUCCESS || e == ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
            "aclrtCntNotifyCreate returned %d: %s", (int)e, recent_msg());
    if (e == ACL_SUCCESS) {
        CHECK(aclrtCntNotifyDestroy(c));
    }
    CHECK(aclrtSynchronizeStreamWithTimeout(s, 5000));
    CHECK(aclrtDestroyNotify(n));
    CHECK(aclrtDestroyStream(s));
    CHECK(aclFinalize());
    /* exit, not _exit: what runs at exit (atexit handlers, thread-local destructors, stdio)
     * must not hang in a forked child either. */
    exit(0);
}

static int g_hung, g_failed;

/* Forks one child that runs child_body, waits for it and counts the outcome. */
static void fork_one(void) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        child_body();
    }
    int st = 0;
    const int hung = wait_child(pid, &st, CHILD_LIMIT_S, "fork_busy child");
    int n = atomic_fetch_add(&g_forked, 1) + 1;
    if (hung) {
        g_hung++;
        fprintf(stderr, "fork %d: the child hung (killed after %d s of being able to run)\n", n,
                CHILD_LIMIT_S);
    } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        g_failed++;
        fprintf(stderr, "fork %d: the child ended with status %#x\n", n, st);
    }
}

static void fork_in_host_func(void *arg) {
    (void)arg;
    fork_one();
}

int main(int argc, char **argv) {
    const char *scenario = argc > 1 ? argv[1] : "control";
    int forks = argc > 2 ? atoi(argv[2]) : 200;
    g_role = "fork_busy";
    int control = strcmp(scenario, "control") == 0, cycle = strcmp(scenario, "cycle") == 0,
        hostfn = strcmp(scenario, "hostfn") == 0, preinit = strcmp(scenario, "preinit") == 0,
        nosession = strcmp(scenario, "nosession") == 0;
    REQUIRE(control || cycle || hostfn || preinit || nosession, "unknown scenario %s", scenario);
    static char parents[1024];
    g_parents_buffer = aclCreateDataBuffer(parents, sizeof parents);
    REQUIRE(g_parents_buffer != NULL, "aclCreateDataBuffer: %s", recent_msg());
    atomic_store(&g_forks_wanted, forks);

    aclrtStream s = NULL;
    if (control || hostfn) {
        CHECK(aclInit(NULL));
        CHECK(aclrtSetDevice(0));
        CHECK(aclrtCreateStream(&s));
    }
    pthread_t t[2];
    void *(*first)(void *) = nosession ? sessionless_loop : cycle ? cycle_loop : control_loop;
    void *(*second)(void *) = nosession ? sessionless_loop : preinit ? late_init : control_loop;
    REQUIRE(pthread_create(&t[0], NULL, first, (void *)(uintptr_t)0x5e51) == 0, "pthread_create");
    REQUIRE(pthread_create(&t[1], NULL, second, (void *)(uintptr_t)0x5e52) == 0,
            "pthread_create");
    /* Let the threads get going before the first fork. */
    int64_t deadline = now_ns() + 10000000000LL;
    while (atomic_load(&g_calls) < 10) {
        REQUIRE(now_ns() < deadline, "the threads made no calls");
        sleep_ms(1);
    }

    for (int i = 0; i < forks && g_hung + g_failed < MAX_BAD; i++) {
        if (hostfn) {
            CHECK(aclrtLaunchHostFunc(s, fork_in_host_func, NULL));
            CHECK(aclrtSynchronizeStream(s));
        } else {
            fork_one();
        }
    }

    atomic_store(&g_stop, 1);
    for (int i = 0; i < 2; i++) {
        REQUIRE(pthread_join(t[i], NULL) == 0, "pthread_join");
    }
    printf("fork_busy %s: %d forks, %d hung, %d failed (threads made %ld loops)\n", scenario,
           atomic_load(&g_forked), g_hung, g_failed, atomic_load(&g_calls));
    if (control || hostfn) {
        CHECK(aclrtDestroyStream(s));
    }
    CHECK(aclDestroyDataBuffer(g_parents_buffer));
    if (!cycle && !nosession) {
        CHECK(aclFinalize());
    }
    REQUIRE(g_hung == 0 && g_failed == 0, "%d of %d children hung and %d failed", g_hung,
            atomic_load(&g_forked), g_failed);
    printf("fork_busy %s: ok\n", scenario);
    return 0;
}
