/* finalize_race.c — aclFinalize and aclInit on one thread while three others keep making
 * notify control-plane calls (create, get id, export, destroy). Every call must return
 * success or the code its moment in the session cycle explains — never crash, hang or use a
 * finalized session — and the workers must get work done in the sessions between.
 *
 * Codes allowed to a worker: 0; 107002 (a new session — aclInit's, or one the worker's own
 * call started after aclFinalize, as CANN's runtime does: this thread has not set its device
 * in it yet); 107017 (a handle of a session that ended).
 * Run under valgrind by the test suite when valgrind is installed, so a use of a freed
 * session is reported even where it would not crash. */
#include "common.h"

#include <pthread.h>
#include <stdatomic.h>

#define WORKERS 3

static atomic_int g_stop;
static atomic_long g_ok;

static int allowed(aclError e) {
    return e == ACL_SUCCESS || e == ACL_ERROR_RT_CONTEXT_NULL || e == ACL_ERROR_RT_INVALID_HANDLE;
}

#define STEP(call)                                                                         \
    do {                                                                                   \
        aclError e_ = (call);                                                              \
        REQUIRE(allowed(e_), "%s returned %d: %s", #call, (int)e_, recent_msg());          \
        if (e_ != ACL_SUCCESS) {                                                           \
            goto next;                                                                     \
        }                                                                                  \
    } while (0)

static void *worker(void *arg) {
    (void)arg;
    while (!atomic_load(&g_stop)) {
        aclrtNotify n = NULL;
        uint32_t id = 0;
        char key[65];
        /* The current device belongs to the session: set it again when a new one began. */
        aclError e = aclrtCreateNotify(&n, 0);
        if (e == ACL_ERROR_RT_CONTEXT_NULL) {
            (void)aclrtSetDevice(0);
            continue;
        }
        STEP(e);
        STEP(aclrtGetNotifyId(n, &id));
        STEP(aclrtNotifyGetExportKey(n, key, sizeof key, 0x2));
        STEP(aclrtDestroyNotify(n));
        atomic_fetch_add(&g_ok, 1);
        continue;
    next:
        if (n != NULL) {
            aclError d = aclrtDestroyNotify(n);
            REQUIRE(allowed(d), "aclrtDestroyNotify returned %d: %s", (int)d, recent_msg());
        }
    }
    return NULL;
}

/* argv[1]: session cycles (default 30; fewer under valgrind, which runs one thread at a
 * time). */
int main(int argc, char **argv) {
    g_role = "finalize_race";
    int cycles = argc > 1 ? atoi(argv[1]) : 30;
    REQUIRE(cycles > 0, "cycles %d", cycles);
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    pthread_t th[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        REQUIRE(pthread_create(&th[i], NULL, worker, NULL) == 0, "pthread_create");
    }
    long before = 0;
    int productive = 0;
    for (int c = 0; c < cycles; c++) {
        struct timespec ms = {0, 2 * 1000 * 1000};
        nanosleep(&ms, NULL);
        long now = atomic_load(&g_ok);
        productive += now > before;
        before = now;
        CHECK(aclFinalize());
        nanosleep(&ms, NULL);
        CHECK(aclInit(NULL));
    }
    atomic_store(&g_stop, 1);
    for (int i = 0; i < WORKERS; i++) {
        pthread_join(th[i], NULL);
    }
    CHECK(aclFinalize());
    REQUIRE(productive > 0, "no worker finished a create/id/export/destroy round in any session");
    printf("finalize_race: ok (%ld rounds, %d of %d sessions productive)\n", atomic_load(&g_ok),
           productive, cycles);
    return 0;
}
