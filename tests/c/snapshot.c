/* snapshot.c — process snapshots through the C ABI, on the SoC named by argv[1]:
 * - Ascend910B, devices 0 and 1 set: a stage callback registered for each of the six stages
 *   is called once per device, at its stage, in order (lock, backup pre/post, restore
 *   pre/post, unlock); a second registration is 507913, bad stages / NULL / unknown callbacks
 *   107000; a callback returning non-zero stops the lock (507912) and leaves the process
 *   running. The state machine's codes: unlock without a lock 507907, backup unlocked 507908,
 *   restore without a backup 507909, a second lock 507906, another pid or a reserved argument
 *   100000. Data: a backup waits for a stream's queued set (held by a host function) and saves
 *   device memory and managed memory; the host scribbles the managed memory under the lock; a
 *   second thread's aclrtMemset waits while the process is locked (it has not run 150 ms
 *   later); the restore puts the managed bytes back; after the unlock the waiting set runs and
 *   every byte is what it must be. Under the lock an export (aclrtIpcMemGetExportKey) and a
 *   getter CANN holds back (aclrtHostGetDevicePointer) wait for the unlock; queries and a
 *   synchronize on another thread finish.
 * - Ascend310P: no snapshots (207000).
 * Exit 0 and "snapshot <soc>: ok" when every check holds. */
#include <pthread.h>

#include "common.h"

#define PAGE (2u << 20)

static int g_log[64][2];
static int g_logged = 0;

static uint32_t note(int32_t device, void *args) {
    int stage = (int)(intptr_t)args;
    REQUIRE(g_logged < 64, "too many callbacks");
    g_log[g_logged][0] = stage;
    g_log[g_logged][1] = device;
    g_logged++;
    return 0;
}

static uint32_t refuse(int32_t device, void *args) {
    (void)device;
    (void)args;
    return 7;
}

static void slow(void *arg) {
    (void)arg;
    sleep_ms(100);
}

static void *d_global;
static volatile int g_set_done = 0;

static void *late_set(void *arg) {
    (void)arg;
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtMemset(d_global, 4096, 0xEE, 4096));
    g_set_done = 1;
    return NULL;
}

static volatile int g_export_ready = 0, g_export_go = 0, g_export_done = 0;
static char g_key[65];

/* An export is no query though its name says "Get": it waits for the unlock too. The thread
 * sets its device before the lock (aclrtSetDevice would wait), then exports when told. */
static void *late_export(void *arg) {
    (void)arg;
    CHECK(aclrtSetDevice(0));
    g_export_ready = 1;
    for (int i = 0; !g_export_go; i++) {
        REQUIRE(i < 10000, "never told to export");
        sleep_ms(1);
    }
    CHECK(aclrtIpcMemGetExportKey(d_global, 4096, g_key, sizeof g_key, 0));
    g_export_done = 1;
    return NULL;
}

/* A getter CANN holds back (rtHostGetDevicePointer waits under the lock): not on the
 * read-only list, so it waits like every call not on it. Its code does not matter here. */
static volatile int g_getptr_done = 0;
static char g_host_buf[64];

static void *late_getptr(void *arg) {
    (void)arg;
    CHECK(aclrtSetDevice(0));
    for (int i = 0; !g_export_go; i++) {
        REQUIRE(i < 10000, "never told to get the pointer");
        sleep_ms(1);
    }
    void *dev = NULL;
    (void)aclrtHostGetDevicePointer(g_host_buf, &dev, 0);
    g_getptr_done = 1;
    return NULL;
}

/* Read-only calls run under the lock, on another thread too: queries, a synchronize. */
static aclrtStream g_query_stream;
static volatile int g_queries_ready = 0, g_queries_go = 0, g_queries_done = 0;

static void *locked_queries(void *arg) {
    (void)arg;
    int32_t dev = -1;
    uint32_t count = 0;
    aclrtStreamStatus st;
    CHECK(aclrtSetDevice(0));
    g_queries_ready = 1;
    for (int i = 0; !g_queries_go; i++) {
        REQUIRE(i < 10000, "never told to query");
        sleep_ms(1);
    }
    CHECK(aclrtGetDevice(&dev));
    CHECK(aclrtGetDeviceCount(&count));
    CHECK(aclrtStreamQuery(g_query_stream, &st));
    CHECK(aclrtSynchronizeStream(g_query_stream));
    REQUIRE(dev == 0 && count >= 2, "device %d of %u", dev, count);
    g_queries_done = 1;
    return NULL;
}

static void expect_log(const int *stages, int n) {
    REQUIRE(g_logged == 2 * n, "%d callbacks, expected %d", g_logged, 2 * n);
    for (int i = 0; i < n; i++) {
        for (int d = 0; d < 2; d++) {
            int *e = g_log[2 * i + d];
            REQUIRE(e[0] == stages[i] && e[1] == d, "callback %d was stage %d device %d, expected %d %d",
                    2 * i + d, e[0], e[1], stages[i], d);
        }
    }
    g_logged = 0;
}

int main(int argc, char **argv) {
    g_role = "snapshot";
    const char *soc = argc > 1 ? argv[1] : "Ascend910B";
    int pid = (int)getpid();
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(1));
    CHECK(aclrtSetDevice(0));
    if (strcmp(soc, "Ascend910B") != 0) {
        EXPECT_RC(aclrtSnapShotProcessLock(pid, NULL), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        CHECK(aclrtResetDevice(0));
        CHECK(aclrtResetDevice(1));
        CHECK(aclFinalize());
        printf("snapshot %s: ok\n", soc);
        return 0;
    }

    /* Registration. */
    for (int s = ACL_RT_SNAPSHOT_LOCK_PRE; s <= ACL_RT_SNAPSHOT_UNLOCK_POST; s++) {
        CHECK(aclrtSnapShotCallbackRegister((aclrtSnapShotStage)s, note, (void *)(intptr_t)s));
    }
    EXPECT_RC(aclrtSnapShotCallbackRegister(ACL_RT_SNAPSHOT_LOCK_PRE, note, NULL),
              ACL_ERROR_SNAPSHOT_REGISTER_CALLBACK_FAILED);
    EXPECT_RC(aclrtSnapShotCallbackRegister((aclrtSnapShotStage)6, note, NULL),
              ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtSnapShotCallbackRegister(ACL_RT_SNAPSHOT_LOCK_PRE, NULL, NULL),
              ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtSnapShotCallbackUnregister(ACL_RT_SNAPSHOT_LOCK_PRE, refuse),
              ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("has not been registered", NULL);

    /* The state machine's refusals, and the ACL layer's. */
    EXPECT_RC(aclrtSnapShotProcessUnlock(pid, NULL), ACL_ERROR_SNAPSHOT_UNLOCK_FAILED);
    EXPECT_RC(aclrtSnapShotProcessBackup(pid, NULL), ACL_ERROR_SNAPSHOT_BACKUP_FAILED);
    EXPECT_RC(aclrtSnapShotProcessRestore(pid, NULL), ACL_ERROR_SNAPSHOT_RESTORE_FAILED);
    expect_msg("no backup", NULL);
    EXPECT_RC(aclrtSnapShotProcessLock(pid + 1, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtSnapShotProcessLock(pid, (void *)8), ACL_ERROR_INVALID_PARAM);
    aclrtSnapShotBackupArgs bargs;
    memset(&bargs, 0, sizeof bargs);
    EXPECT_RC(aclrtSnapShotProcessBackup(pid, &bargs), ACL_ERROR_INVALID_PARAM);
    REQUIRE(g_logged == 0, "callbacks ran for refused calls (%d)", g_logged);

    /* A failing LOCK_PRE callback: no lock. */
    CHECK(aclrtSnapShotCallbackRegister(ACL_RT_SNAPSHOT_LOCK_PRE, refuse, NULL));
    EXPECT_RC(aclrtSnapShotProcessLock(pid, NULL), ACL_ERROR_SNAPSHOT_CALLBACK_FAILED);
    expect_msg("ACL_RT_SNAPSHOT_LOCK_PRE", "returned 7", NULL);
    CHECK(aclrtSnapShotCallbackUnregister(ACL_RT_SNAPSHOT_LOCK_PRE, refuse));
    EXPECT_RC(aclrtSnapShotProcessUnlock(pid, NULL), ACL_ERROR_SNAPSHOT_UNLOCK_FAILED);
    g_logged = 0;

    /* Data: device memory, a queued set, managed memory. */
    void *d = NULL, *d2 = NULL;
    char *m = NULL;
    CHECK(aclrtMalloc(&d, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&d2, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    d_global = d;
    CHECK(aclrtMemset(d, 4096, 0x11, 4096));
    CHECK(aclrtMemset(d2, 4096, 0x00, 4096));
    CHECK(aclrtMemAllocManaged((void **)&m, PAGE, ACL_RT_MEM_ATTACH_GLOBAL));
    for (size_t i = 0; i < PAGE; i++) m[i] = (char)(i * 7 + 3);
    aclrtStream s;
    CHECK(aclrtCreateStream(&s));
    CHECK(aclrtLaunchHostFunc(s, slow, NULL));
    CHECK(aclrtMemsetAsync(d2, 4096, 0x77, 4096, s));

    pthread_t tx, tp;
    REQUIRE(pthread_create(&tx, NULL, late_export, NULL) == 0, "pthread_create");
    REQUIRE(pthread_create(&tp, NULL, late_getptr, NULL) == 0, "pthread_create");
    pthread_t tq;
    g_query_stream = s;
    REQUIRE(pthread_create(&tq, NULL, locked_queries, NULL) == 0, "pthread_create");
    for (int i = 0; !g_queries_ready; i++) {
        REQUIRE(i < 10000, "the querying thread never set its device");
        sleep_ms(1);
    }
    for (int i = 0; !g_export_ready; i++) {
        REQUIRE(i < 10000, "the exporting thread never set its device");
        sleep_ms(1);
    }

    CHECK(aclrtSnapShotProcessLock(pid, NULL));
    EXPECT_RC(aclrtSnapShotProcessLock(pid, NULL), ACL_ERROR_SNAPSHOT_LOCK_FAILED);
    EXPECT_RC(aclrtSnapShotProcessRestore(pid, NULL), ACL_ERROR_SNAPSHOT_RESTORE_FAILED);
    g_logged = 0;
    CHECK(aclrtSnapShotProcessBackup(pid, NULL));
    {
        int want[] = {ACL_RT_SNAPSHOT_BACKUP_PRE, ACL_RT_SNAPSHOT_BACKUP_POST};
        expect_log(want, 2);
    }
    /* Under the lock: the host scribbles managed memory; another thread's set waits. */
    for (size_t i = 0; i < PAGE; i++) m[i] = 0x55;
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, late_set, NULL) == 0, "pthread_create");
    g_export_go = 1;
    sleep_ms(150);
    REQUIRE(!g_set_done, "aclrtMemset ran while the process was locked");
    REQUIRE(!g_export_done, "aclrtIpcMemGetExportKey ran while the process was locked");
    REQUIRE(!g_getptr_done, "aclrtHostGetDevicePointer ran while the process was locked");
    /* Queries and a synchronize of an idle stream finish while the process is locked. */
    g_queries_go = 1;
    for (int i = 0; !g_queries_done; i++) {
        REQUIRE(i < 30000, "read-only calls did not run under the lock in 30 s");
        sleep_ms(1);
    }
    REQUIRE(pthread_join(tq, NULL) == 0, "pthread_join");
    CHECK(aclrtSnapShotProcessRestore(pid, NULL));
    {
        int want[] = {ACL_RT_SNAPSHOT_RESTORE_PRE, ACL_RT_SNAPSHOT_RESTORE_POST};
        expect_log(want, 2);
    }
    for (size_t i = 0; i < PAGE; i++) {
        REQUIRE(m[i] == (char)(i * 7 + 3), "managed byte %zu is %d after the restore", i, m[i]);
    }
    /* Backed up again (the last one counts), then unlocked. */
    CHECK(aclrtSnapShotProcessBackup(pid, NULL));
    g_logged = 0;
    REQUIRE(!g_set_done, "aclrtMemset ran while the process was backed up");
    CHECK(aclrtSnapShotProcessUnlock(pid, NULL));
    {
        int want[] = {ACL_RT_SNAPSHOT_UNLOCK_POST};
        expect_log(want, 1);
    }
    REQUIRE(pthread_join(t, NULL) == 0, "pthread_join");
    REQUIRE(g_set_done, "the waiting set did not run after the unlock");
    REQUIRE(pthread_join(tx, NULL) == 0, "pthread_join");
    REQUIRE(g_export_done, "the waiting export did not run after the unlock");
    REQUIRE(pthread_join(tp, NULL) == 0, "pthread_join");
    REQUIRE(g_getptr_done, "the waiting aclrtHostGetDevicePointer did not run after the unlock");
    CHECK(aclrtIpcMemClose(g_key));

    unsigned char back[4096];
    CHECK(aclrtMemcpy(back, 4096, d, 4096, ACL_MEMCPY_DEVICE_TO_HOST));
    for (int i = 0; i < 4096; i++) REQUIRE(back[i] == 0xEE, "d byte %d is %#x", i, back[i]);
    CHECK(aclrtMemcpy(back, 4096, d2, 4096, ACL_MEMCPY_DEVICE_TO_HOST));
    for (int i = 0; i < 4096; i++) REQUIRE(back[i] == 0x77, "d2 byte %d is %#x", i, back[i]);

    /* A whole cycle's callbacks, in order. */
    CHECK(aclrtSnapShotProcessLock(pid, NULL));
    CHECK(aclrtSnapShotProcessBackup(pid, NULL));
    CHECK(aclrtSnapShotProcessRestore(pid, NULL));
    CHECK(aclrtSnapShotProcessUnlock(pid, NULL));
    {
        int want[] = {ACL_RT_SNAPSHOT_LOCK_PRE,     ACL_RT_SNAPSHOT_BACKUP_PRE,
                      ACL_RT_SNAPSHOT_BACKUP_POST,  ACL_RT_SNAPSHOT_RESTORE_PRE,
                      ACL_RT_SNAPSHOT_RESTORE_POST, ACL_RT_SNAPSHOT_UNLOCK_POST};
        expect_log(want, 6);
    }
    for (int st = ACL_RT_SNAPSHOT_LOCK_PRE; st <= ACL_RT_SNAPSHOT_UNLOCK_POST; st++) {
        CHECK(aclrtSnapShotCallbackUnregister((aclrtSnapShotStage)st, note));
    }
    CHECK(aclrtSnapShotProcessLock(pid, NULL));
    CHECK(aclrtSnapShotProcessUnlock(pid, NULL));
    REQUIRE(g_logged == 0, "unregistered callbacks ran");

    CHECK(aclrtDestroyStream(s));
    CHECK(aclrtFree(m));
    CHECK(aclrtFree(d));
    CHECK(aclrtFree(d2));
    CHECK(aclrtResetDevice(0));
    CHECK(aclrtResetDevice(1));
    CHECK(aclFinalize());
    printf("snapshot %s: ok\n", soc);
    return 0;
}
