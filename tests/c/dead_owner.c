/* dead_owner.c — an owner SIGKILLed while another process imports its notify and memory
 * (SPEC §2: a process that dies is treated as having destroyed what it held; README, IPC
 * memory: a dead owner has freed what it owned, its importers keeping their mappings until
 * they close). Process A (device 0) exports a notify and 4 KiB of memory to B (device 1),
 * whitelisted; B imports both, then A is killed. B still reads A's bytes and records the
 * notify; importing the notify's key again fails while B holds it (107017, its owner died: a
 * death invalidates the key as a destroy does); once B has let both go, importing either key
 * again fails: 107017 for the notify (every holder destroyed it or died), 107000 for the memory (its owner died) — before the
 * fix both imports succeeded, until some survivor happened to reclaim A's references.
 * usage: dead_owner. Exit 0 and "dead_owner: ok". */
#include <signal.h>
#include <sys/wait.h>

#include "common.h"

int main(void) {
    int to_b[2], to_a[2];
    REQUIRE(pipe(to_b) == 0 && pipe(to_a) == 0, "pipe");
    fflush(stdout);
    pid_t a = fork();
    REQUIRE(a >= 0, "fork");
    if (a == 0) {
        g_role = "owner";
        CHECK(aclInit(NULL));
        CHECK(aclrtSetDevice(0));
        int32_t b_pid = 0;
        read_all(to_a[0], &b_pid, sizeof b_pid);
        void *d = NULL;
        CHECK(aclrtMalloc(&d, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK(aclrtMemset(d, 4096, 0x5a, 4096));
        char keys[2][65];
        aclrtNotify n;
        CHECK(aclrtIpcMemGetExportKey(d, 4096, keys[0], sizeof keys[0], 0));
        CHECK(aclrtIpcMemSetImportPid(keys[0], &b_pid, 1));
        CHECK(aclrtCreateNotify(&n, 0));
        CHECK(aclrtNotifyGetExportKey(n, keys[1], sizeof keys[1], 0));
        CHECK(aclrtNotifySetImportPid(n, &b_pid, 1));
        write_all(to_b[1], keys, sizeof keys);
        for (;;) pause(); /* until B's parent kills it */
    }
    g_role = "importer";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(1));
    int32_t me = 0;
    CHECK(aclrtDeviceGetBareTgid(&me));
    write_all(to_a[1], &me, sizeof me);
    char keys[2][65];
    read_all(to_b[0], keys, sizeof keys);
    void *p = NULL, *mine = NULL;
    aclrtNotify n;
    aclrtStream s;
    CHECK(aclrtCreateStream(&s));
    CHECK(aclrtIpcMemImportByKey(&p, keys[0], ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS));
    CHECK(aclrtNotifyImportByKey(&n, keys[1], 0));
    REQUIRE(kill(a, SIGKILL) == 0, "kill: %s", strerror(errno));
    REQUIRE(waitpid(a, NULL, 0) == a, "waitpid: %s", strerror(errno));

    /* What B holds stays usable. */
    CHECK(aclrtMalloc(&mine, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemcpy(mine, 4096, p, 4096, ACL_MEMCPY_DEVICE_TO_DEVICE));
    unsigned char h[4096];
    CHECK(aclrtMemcpy(h, sizeof h, mine, sizeof h, ACL_MEMCPY_DEVICE_TO_HOST));
    for (int i = 0; i < 4096; i++) REQUIRE(h[i] == 0x5a, "byte %d is %#x", i, h[i]);
    CHECK(aclrtRecordNotify(n, s));
    CHECK(aclrtSynchronizeStreamWithTimeout(s, 10000));

    /* While B still holds the notify, its key imports nothing: the owner's death invalidates
     * it as the owner's destroy does (SPEC §2). Before, this import succeeded. */
    aclrtNotify again;
    EXPECT_RC(aclrtNotifyImportByKey(&again, keys[1], 0), ACL_ERROR_RT_INVALID_HANDLE);
    char held_msg[1024];
    snprintf(held_msg, sizeof held_msg, "%s", recent_msg()); /* reading it clears it */
    REQUIRE(strstr(held_msg, "owner") != NULL && strstr(held_msg, "died") != NULL, "%s", held_msg);

    /* Let go: nobody alive holds either any more. */
    CHECK(aclrtIpcMemClose(keys[0]));
    CHECK(aclrtDestroyNotify(n));
    EXPECT_RC(aclrtNotifyImportByKey(&n, keys[1], 0), ACL_ERROR_RT_INVALID_HANDLE);
    REQUIRE(strstr(recent_msg(), "died") != NULL, "%s", recent_msg());
    EXPECT_RC(aclrtIpcMemImportByKey(&p, keys[0], ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS),
              ACL_ERROR_RT_PARAM_INVALID);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", recent_msg()); /* reading it clears it */
    REQUIRE(strstr(msg, "owner") != NULL && strstr(msg, "died") != NULL, "%s", msg);
    CHECK(aclrtFree(mine));
    CHECK(aclrtDestroyStream(s));
    CHECK(aclFinalize());
    printf("dead_owner: ok\n");
    return 0;
}
