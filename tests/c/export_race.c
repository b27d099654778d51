/* export_race.c — the adversarial C suite's concurrent-export case (issue 22): six threads call
 * aclrtNotifyGetExportKey on one handle at once, 5,000 times. Exactly one call must return 0
 * each time (the others 507000), and the key it wrote must import, after the owner whitelists
 * this process (107017 here meant a losing thread had overwritten the winner's nonce; the
 * notify then stayed exported and could never be imported).
 *
 *   export_race export     the rounds above; prints "export_race export: ok" when all passed. */
#include "common.h"
#include "join.h"

#include <pthread.h>
#include <stdatomic.h>

#define THREADS 6
#define ROUNDS 5000

static pthread_barrier_t g_start, g_done;
static aclrtNotify g_notify;
static atomic_int g_stop;
static aclError g_ret[THREADS];
static char g_key[THREADS][65];

static void *exporter(void *arg) {
    int i = (int)(intptr_t)arg;
    CHECK(aclrtSetDevice(0));
    for (;;) {
        pthread_barrier_wait(&g_start);
        if (atomic_load(&g_stop)) {
            return NULL;
        }
        g_ret[i] = aclrtNotifyGetExportKey(g_notify, g_key[i], sizeof g_key[i], 0);
        (void)aclGetRecentErrMsg();
        pthread_barrier_wait(&g_done);
    }
}

int main(int argc, char **argv) {
    g_role = "export_race";
    REQUIRE(argc == 2 && strcmp(argv[1], "export") == 0, "usage: export_race export");
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    int32_t me = 0;
    CHECK(aclrtDeviceGetBareTgid(&me));
    pthread_barrier_init(&g_start, NULL, THREADS + 1);
    pthread_barrier_init(&g_done, NULL, THREADS + 1);
    pthread_t t[THREADS];
    start_threads(t, THREADS, exporter);
    for (int round = 0; round < ROUNDS; round++) {
        CHECK(aclrtCreateNotify(&g_notify, 0));
        pthread_barrier_wait(&g_start);
        pthread_barrier_wait(&g_done);
        int winner = -1, wins = 0;
        for (int i = 0; i < THREADS; i++) {
            if (g_ret[i] == ACL_SUCCESS) {
                winner = i;
                wins++;
            } else {
                REQUIRE(g_ret[i] == ACL_ERROR_RT_INTERNAL_ERROR,
                        "round %d: a losing export returned %d", round, (int)g_ret[i]);
            }
        }
        REQUIRE(wins == 1, "round %d: %d exports returned 0", round, wins);
        CHECK(aclrtNotifySetImportPid(g_notify, &me, 1));
        aclrtNotify imported = NULL;
        aclError e = aclrtNotifyImportByKey(&imported, g_key[winner], 0);
        REQUIRE(e == ACL_SUCCESS, "round %d: the winning key does not import: %d\n  %s", round,
                (int)e, recent_msg());
        CHECK(aclrtDestroyNotify(imported));
        CHECK(aclrtDestroyNotify(g_notify));
    }
    atomic_store(&g_stop, 1);
    pthread_barrier_wait(&g_start);
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
    }
    CHECK(aclFinalize());
    printf("export_race export: ok\n");
    return 0;
}
