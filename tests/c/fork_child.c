/* fork_child.c — a process forked after aclInit does not inherit a working session (its
 * parent's streams and worker threads are not in it): as in a process before its first
 * aclInit, its first runtime call starts a session of its own (as CANN's runtime starts one
 * implicitly), never waiting for the parent's threads; that session refuses the parent's
 * handles (107017) and knows no current device until the child sets one; aclInit afterwards
 * succeeds; aclFinalize in a child that made no call returns at once; the parent's session is
 * unaffected.
 * Also: stream errors name the caller's handle (a sync timeout on a created stream, a sync on
 * a destroyed one). Exit 0 when every check holds. */
#include "common.h"

#include <inttypes.h>
#include <signal.h>
#include <sys/wait.h>

/* The parent's notify, which a child's own session must refuse. */
static aclrtNotify g_parent_notify;

/* The child that uses the library: its first call starts a session of its own. */
static void child_uses_the_library(void) {
    g_role = "fork_child";
    aclrtNotify n = NULL;
    /* The thread's current device was one of the parent's session: none in the child's. */
    aclError e = aclrtCreateNotify(&n, 0);
    REQUIRE(e == ACL_ERROR_RT_CONTEXT_NULL, "create in the child returned %d", (int)e);
    (void)recent_msg();
    aclrtStream s = NULL;
    CHECK(aclrtSetDevice(0));
    CHECK(aclInit(NULL)); /* after the implicit start: succeeds, changes nothing else */
    CHECK(aclrtCreateStream(&s));
    CHECK(aclrtCreateNotify(&n, 0));
    CHECK(aclrtRecordNotify(n, s));
    CHECK(aclrtWaitAndResetNotify(n, s, 5));
    CHECK(aclrtSynchronizeStreamWithTimeout(s, 5000));
    /* The parent's handle is not one of the child's session. */
    e = aclrtRecordNotify(g_parent_notify, s);
    REQUIRE(e == ACL_ERROR_RT_INVALID_HANDLE, "record of the parent's notify returned %d",
            (int)e);
    (void)recent_msg();
    CHECK(aclrtDestroyNotify(n));
    CHECK(aclrtDestroyStream(s));
    CHECK(aclFinalize());
    _exit(0);
}

/* The child that only finalizes what it inherited. */
static void child_finalizes(void) {
    g_role = "fork_finalize";
    CHECK(aclFinalize());
    _exit(0);
}

static void run_child(void (*body)(void), const char *what) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        body();
    }
    /* A hang is a failure, not a stuck test: 30 s of the child's being able to run. */
    int st = 0;
    const int hung = wait_child(pid, &st, 30, what);
    REQUIRE(!hung && WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: child status %#x%s", what, st,
            hung ? " (hung: killed by the parent's watch)" : "");
}

int main(void) {
    g_role = "fork_parent";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream s = NULL, blocked = NULL;
    CHECK(aclrtCreateStream(&s));
    CHECK(aclrtCreateStream(&blocked));
    aclrtNotify n = NULL, gate = NULL;
    CHECK(aclrtCreateNotify(&n, 0));
    CHECK(aclrtCreateNotify(&gate, 0));
    g_parent_notify = n;
    /* The parent has worker threads (and a stream blocked on a wait) when it forks. */
    CHECK(aclrtWaitAndResetNotify(gate, blocked, 0));

    run_child(child_uses_the_library, "a child that uses the library");
    run_child(child_finalizes, "a child that finalizes");

    /* The parent's session is intact. */
    CHECK(aclrtRecordNotify(n, s));
    CHECK(aclrtWaitAndResetNotify(n, s, 5));
    CHECK(aclrtSynchronizeStreamWithTimeout(s, 5000));

    /* A sync timeout names the caller's stream handle. */
    char want[64];
    snprintf(want, sizeof want, "stream %#" PRIxPTR " still has tasks", (uintptr_t)blocked);
    aclError e = aclrtSynchronizeStreamWithTimeout(blocked, 50);
    REQUIRE(e == ACL_ERROR_RT_STREAM_SYNC_TIMEOUT, "sync of the blocked stream returned %d",
            (int)e);
    const char *m = recent_msg();
    REQUIRE(strstr(m, want) != NULL, "`%s` missing: %s", want, m);
    CHECK(aclrtRecordNotify(gate, s));
    CHECK(aclrtSynchronizeStreamWithTimeout(blocked, 5000));

    /* A sync on a destroyed stream names the caller's handle too. */
    CHECK(aclrtDestroyStream(blocked));
    e = aclrtSynchronizeStream(blocked);
    REQUIRE(e == ACL_ERROR_RT_INVALID_HANDLE, "sync of a destroyed stream returned %d", (int)e);
    snprintf(want, sizeof want, "stream %#" PRIxPTR " is not a live stream", (uintptr_t)blocked);
    m = recent_msg();
    REQUIRE(strstr(m, want) != NULL, "`%s` missing: %s", want, m);

    CHECK(aclrtDestroyNotify(n));
    CHECK(aclrtDestroyNotify(gate));
    CHECK(aclrtDestroyStream(s));
    CHECK(aclFinalize());
    printf("fork_child: ok\n");
    return 0;
}
