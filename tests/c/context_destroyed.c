/* context_destroyed.c — contexts made on the main thread and used by others, as a CANN
 * application hands them to worker threads (aclrtCreateContext, aclrtSetCurrentContext,
 * aclrtGetCurrentContext): each worker moves data through its context's device and checks it.
 * Then a context destroyed by the main thread while another thread has it current: that
 * thread keeps pointing at it, as CANN's does, and every call of it that needs a context is
 * ACL_ERROR_RT_CONTEXT_NULL (107002: hicann/runtime runtime.cc Runtime::CurrentContext finds
 * the context invalid) — aclrtGetCurrentContext, aclrtGetDevice, aclrtMalloc,
 * aclrtCreateStream — its streams went with the context (107017), and it works again once it
 * sets a live context or a device.
 * Exit 0 and "context_destroyed: ok". */
#include "common.h"

#include <pthread.h>

enum { N = 1024, WORKERS = 4, ROUNDS = 30 };
static aclrtContext g_ctx[2];
static pthread_barrier_t g_bar;

static void *worker(void *arg) {
    int idx = (int)(intptr_t)arg, dev = idx % 2;
    aclrtContext cur = NULL;
    EXPECT_RC(aclrtGetCurrentContext(&cur), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK(aclrtSetCurrentContext(g_ctx[dev]));
    CHECK(aclrtGetCurrentContext(&cur));
    REQUIRE(cur == g_ctx[dev], "worker %d: current context %p, set %p", idx, cur, g_ctx[dev]);
    int32_t d = -1;
    CHECK(aclrtGetDevice(&d));
    REQUIRE(d == dev, "worker %d: device %d, its context's %d", idx, d, dev);
    aclrtStream s;
    CHECK(aclrtCreateStream(&s));
    void *buf;
    CHECK(aclrtMalloc(&buf, N, ACL_MEM_MALLOC_HUGE_FIRST));
    unsigned char *in, *out;
    CHECK(aclrtMallocHost((void **)&in, N));
    CHECK(aclrtMallocHost((void **)&out, N));
    for (int r = 0; r < ROUNDS; r++) {
        memset(in, idx * 16 + r, N);
        memset(out, 0, N);
        CHECK(aclrtMemcpyAsync(buf, N, in, N, ACL_MEMCPY_HOST_TO_DEVICE, s));
        CHECK(aclrtMemcpyAsync(out, N, buf, N, ACL_MEMCPY_DEVICE_TO_HOST, s));
        CHECK(aclrtSynchronizeStream(s));
        for (int i = 0; i < N; i++)
            REQUIRE(out[i] == (unsigned char)(idx * 16 + r), "worker %d round %d byte %d", idx, r, i);
    }
    CHECK(aclrtDestroyStream(s));
    CHECK(aclrtFree(buf));
    CHECK(aclrtFreeHost(in));
    CHECK(aclrtFreeHost(out));
    return NULL;
}

static void *holder(void *arg) {
    (void)arg;
    CHECK(aclrtSetCurrentContext(g_ctx[1]));
    aclrtStream s;
    CHECK(aclrtCreateStream(&s));
    void *kept;
    CHECK(aclrtMalloc(&kept, N, ACL_MEM_MALLOC_HUGE_FIRST));
    pthread_barrier_wait(&g_bar); /* the main thread destroys g_ctx[1] */
    pthread_barrier_wait(&g_bar);
    aclrtContext cur = NULL;
    EXPECT_RC(aclrtGetCurrentContext(&cur), ACL_ERROR_RT_CONTEXT_NULL);
    expect_msg("destroyed", NULL);
    int32_t d = -1;
    EXPECT_RC(aclrtGetDevice(&d), ACL_ERROR_RT_CONTEXT_NULL);
    void *p = NULL;
    EXPECT_RC(aclrtMalloc(&p, N, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_RT_CONTEXT_NULL);
    aclrtStream s2 = NULL;
    EXPECT_RC(aclrtCreateStream(&s2), ACL_ERROR_RT_CONTEXT_NULL);
    EXPECT_RC(aclrtSynchronizeStream(s), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT_RC(aclrtSetCurrentContext(g_ctx[1]), ACL_ERROR_RT_INVALID_HANDLE);
    /* Still pointing at the destroyed context: a second call fails the same way. */
    EXPECT_RC(aclrtMalloc(&p, N, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_RT_CONTEXT_NULL);
    /* A live context again: everything works, the memory made before is still there. */
    CHECK(aclrtSetCurrentContext(g_ctx[0]));
    CHECK(aclrtGetDevice(&d));
    REQUIRE(d == 0, "device %d after setting context 0", d);
    CHECK(aclrtMalloc(&p, N, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtFree(p));
    CHECK(aclrtSetDevice(1));
    CHECK(aclrtCreateStream(&s2));
    CHECK(aclrtMemset(kept, N, 0x5a, N));
    CHECK(aclrtDestroyStream(s2));
    CHECK(aclrtFree(kept));
    CHECK(aclrtResetDevice(1));
    return NULL;
}

int main(void) {
    g_role = "context_destroyed";
    CHECK(aclInit(NULL));
    CHECK(aclrtCreateContext(&g_ctx[0], 0));
    CHECK(aclrtCreateContext(&g_ctx[1], 1));
    aclrtContext cur;
    CHECK(aclrtGetCurrentContext(&cur));
    REQUIRE(cur == g_ctx[1], "the context made last is current: %p", cur);
    pthread_t t[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        REQUIRE(pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i) == 0, "pthread_create");
    for (int i = 0; i < WORKERS; i++) pthread_join(t[i], NULL);

    REQUIRE(pthread_barrier_init(&g_bar, NULL, 2) == 0, "barrier");
    pthread_t h;
    REQUIRE(pthread_create(&h, NULL, holder, NULL) == 0, "pthread_create");
    pthread_barrier_wait(&g_bar);
    CHECK(aclrtDestroyContext(g_ctx[1]));
    pthread_barrier_wait(&g_bar);
    pthread_join(h, NULL);
    /* The destroying thread's own current context was that one: gone for it too. */
    EXPECT_RC(aclrtGetCurrentContext(&cur), ACL_ERROR_RT_CONTEXT_NULL);
    EXPECT_RC(aclrtDestroyContext(g_ctx[1]), ACL_ERROR_RT_INVALID_HANDLE);
    CHECK(aclrtDestroyContext(g_ctx[0]));
    CHECK(aclFinalize());
    printf("context_destroyed: ok\n");
    return 0;
}
