/* ipc_notify_memory.c — the two-process flow of CANN's IPC notify documentation, with the
 * memory the notify guards: process A (device 2) allocates device memory and exports it,
 * creates a notify and exports it, queues a wait on the notify followed by a host function
 * that reads the memory; process B (device 3) enables peer access, imports both, queues a
 * host function that writes a value into the shared memory (standing in for a kernel), then
 * records the notify. A must read B's value, and only after B's record.
 *
 * A host function has no current device (it runs on the stream's thread), so the stand-ins
 * set one, and move the bytes with aclrtMemcpy: B's write goes through a buffer of its own
 * device, since memory imported from another device takes device-to-device copies only.
 *
 * usage: ipc_notify_memory <exchange dir> <whitelist|open>. The first process forks the
 * second before aclInit. Exit 0 and "ipc_notify_memory <mode>: ok". */
#include <sys/wait.h>

#include "common.h"

static const char *g_dir;
static int g_open;

struct task {
    int device;
    int *dev_ptr;
    int value;
    int64_t t;
};

/* B's stand-in kernel: dev_ptr[0] = value. */
static void write_value(void *arg) {
    struct task *w = (struct task *)arg;
    CHECK(aclrtSetDevice(w->device));
    void *staging = NULL;
    CHECK(aclrtMalloc(&staging, sizeof(int), ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemcpy(staging, sizeof(int), &w->value, sizeof(int), ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtMemcpy(w->dev_ptr, sizeof(int), staging, sizeof(int),
                      ACL_MEMCPY_DEVICE_TO_DEVICE));
    CHECK(aclrtFree(staging));
    w->t = now_ns();
}

/* A's stand-in kernel: value = dev_ptr[0]. */
static void read_value(void *arg) {
    struct task *r = (struct task *)arg;
    r->t = now_ns();
    CHECK(aclrtSetDevice(r->device));
    CHECK(aclrtMemcpy(&r->value, sizeof(int), r->dev_ptr, sizeof(int),
                      ACL_MEMCPY_DEVICE_TO_HOST));
}

static int process_b(void) {
    g_role = "B";
    const int device = 3, peer = 2;
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(device));
    aclrtStream s;
    CHECK(aclrtCreateStream(&s));
    int32_t can = 0;
    CHECK(aclrtDeviceCanAccessPeer(&can, device, peer));
    REQUIRE(can == 1, "no peer access between %d and %d", device, peer);
    CHECK(aclrtDeviceEnablePeerAccess(peer, 0));
    int32_t pid = 0;
    CHECK(aclrtDeviceGetBareTgid(&pid));
    char text[80], mem_key[80], notify_key[80];
    snprintf(text, sizeof text, "%d", (int)pid);
    put_file(g_dir, "pid", text, strlen(text));
    get_file(g_dir, "mem_key", mem_key, sizeof mem_key, 30000);
    get_file(g_dir, "notify_key", notify_key, sizeof notify_key, 30000);
    void *p = NULL;
    CHECK(aclrtIpcMemImportByKey(&p, mem_key, 0));
    aclrtNotify n;
    CHECK(aclrtNotifyImportByKey(&n, notify_key, 0));
    /* Let A's wait be queued and blocked first. */
    get_file(g_dir, "waiting", text, sizeof text, 30000);
    sleep_ms(100);
    struct task w = {device, (int *)p, 123, 0};
    CHECK(aclrtLaunchHostFunc(s, write_value, &w));
    CHECK(aclrtRecordNotify(n, s));
    CHECK(aclrtSynchronizeStream(s));
    snprintf(text, sizeof text, "%lld", (long long)w.t);
    put_file(g_dir, "written", text, strlen(text));
    CHECK(aclrtIpcMemClose(mem_key));
    CHECK(aclrtDestroyNotify(n));
    put_file(g_dir, "closed", "1", 1);
    CHECK(aclrtDestroyStream(s));
    CHECK(aclFinalize());
    return 0;
}

int main(int argc, char **argv) {
    REQUIRE(argc == 3 && (!strcmp(argv[2], "whitelist") || !strcmp(argv[2], "open")),
            "usage: ipc_notify_memory <exchange dir> <whitelist|open>");
    g_dir = argv[1];
    g_open = !strcmp(argv[2], "open");
    fflush(stdout);
    pid_t b = fork();
    REQUIRE(b >= 0, "fork: %s", strerror(errno));
    if (b == 0) _exit(process_b());

    g_role = "A";
    const int device = 2;
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(device));
    aclrtStream s;
    CHECK(aclrtCreateStream(&s));
    const size_t size = 1 << 20;
    int *p = NULL;
    CHECK(aclrtMalloc((void **)&p, size, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemset(p, size, 0, size));
    char mem_key[65], notify_key[65], text[80];
    CHECK(aclrtIpcMemGetExportKey(p, size, mem_key, sizeof mem_key,
                                  g_open ? ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION : 0));
    aclrtNotify n;
    CHECK(aclrtCreateNotify(&n, 0));
    CHECK(aclrtNotifyGetExportKey(n, notify_key, sizeof notify_key,
                                  g_open ? ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION : 0));
    if (!g_open) {
        get_file(g_dir, "pid", text, sizeof text, 30000);
        int32_t pid = atoi(text);
        CHECK(aclrtIpcMemSetImportPid(mem_key, &pid, 1));
        CHECK(aclrtNotifySetImportPid(n, &pid, 1));
    }
    put_file(g_dir, "mem_key", mem_key, strlen(mem_key));
    put_file(g_dir, "notify_key", notify_key, strlen(notify_key));
    struct task r = {device, p, -1, 0};
    CHECK(aclrtWaitAndResetNotify(n, s, 30));
    CHECK(aclrtLaunchHostFunc(s, read_value, &r));
    aclrtStreamStatus st;
    CHECK(aclrtStreamQuery(s, &st));
    REQUIRE(st == ACL_STREAM_STATUS_NOT_READY, "the wait did not block (status %d)", (int)st);
    put_file(g_dir, "waiting", "1", 1);
    CHECK(aclrtSynchronizeStream(s));
    get_file(g_dir, "written", text, sizeof text, 30000);
    const long long written = atoll(text);
    REQUIRE(r.value == 123, "A read %d, B wrote 123", r.value);
    REQUIRE(r.t > written, "A read at %lld, before B's write at %lld", (long long)r.t, written);
    get_file(g_dir, "closed", text, sizeof text, 30000);
    CHECK(aclrtIpcMemClose(mem_key));
    CHECK(aclrtFree(p));
    CHECK(aclrtDestroyNotify(n));
    CHECK(aclrtDestroyStream(s));
    CHECK(aclFinalize());
    int status = 0;
    REQUIRE(waitpid(b, &status, 0) == b, "waitpid");
    REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0, "B failed (status %#x)", status);
    printf("ipc_notify_memory %s: ok\n", argv[2]);
    return 0;
}
