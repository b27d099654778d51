/* xdev_pingpong.c — pairs of host threads, each thread in a context of its own on one of two
 * devices, passing a buffer back and forth across the devices, as a CANN program that splits
 * work between two NPUs of one process writes it (aclrtCreateContext per thread, peer access
 * both ways with aclrtDeviceEnablePeerAccess, device-to-device aclrtMemcpyAsync into the peer's
 * memory, a notify of the receiving device recorded from the sending device's stream).
 *
 * Pair p runs on devices (d0, d1) = (p % n, (p + 1) % n) of the n devices. Its thread A owns
 * X (device d0) and notify na (d0), thread B owns Y (d1) and notify nb (d1). Round k:
 *   A's stream: from round 1 on, wait na; aclrtReduceAsync X += 1 (every word);
 *               aclrtMemcpyAsync X -> Y (d0 to d1); record nb;
 *   B's stream: wait nb; aclrtReduceAsync Y += 2; aclrtMemcpyAsync Y -> X (d1 to d0); record na.
 * Each thread queues all its rounds at once, the streams ordered by the notifies alone (the
 * host runs far ahead; the threads start together, so either one may queue first). Each
 * thread brackets its rounds with two ACL_EVENT_TIME_LINE events (the second also
 * ACL_EVENT_SYNC, which a stream may wait on); after joining, the main
 * thread sets A's context current, makes a third stream wait on both threads' end events
 * (aclrtStreamWaitEvent on events of two devices), copies X to the host and checks every
 * word: base + 3 * rounds; both threads' aclrtEventElapsedTime are positive.
 *
 * usage: xdev_pingpong [pairs, default 4] [rounds, default 200] [words, default 4096].
 * Run with ACL_NOTIFY_SIM_DEVICES >= 2. Exit 0 and "xdev_pingpong: ok". */
#include "common.h"

#include <pthread.h>

#define MAX_PAIRS 16

static int g_rounds, g_words;

struct side {
    int dev;
    aclrtContext ctx;
    aclrtStream s;
    void *buf;  /* X or Y */
    void *add;  /* ones or twos */
    aclrtNotify mine;  /* waited on by this side */
    aclrtEvent t0, t1;
    float ms;
};

struct pair {
    int p;
    struct side a, b;
    pthread_barrier_t go;
};

static void setup_side(struct side *x, int dev, uint32_t addend, uint32_t base) {
    const size_t bytes = (size_t)g_words * 4;
    CHECK(aclrtCreateContext(&x->ctx, dev));
    x->dev = dev;
    CHECK(aclrtCreateStream(&x->s));
    CHECK(aclrtMalloc(&x->buf, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&x->add, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    uint32_t *h = NULL;
    CHECK(aclrtMallocHost((void **)&h, bytes));
    for (int i = 0; i < g_words; i++) h[i] = addend;
    CHECK(aclrtMemcpy(x->add, bytes, h, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    for (int i = 0; i < g_words; i++) h[i] = base + (uint32_t)i * 5u;
    CHECK(aclrtMemcpy(x->buf, bytes, h, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtFreeHost(h));
    CHECK(aclrtCreateNotify(&x->mine, ACL_NOTIFY_DEFAULT));
    CHECK(aclrtCreateEventWithFlag(&x->t0, ACL_EVENT_TIME_LINE));
    CHECK(aclrtCreateEventWithFlag(&x->t1, ACL_EVENT_TIME_LINE | ACL_EVENT_SYNC));
}

static void *run_a(void *arg) {
    struct pair *pr = (struct pair *)arg;
    struct side *a = &pr->a, *b = &pr->b;
    const size_t bytes = (size_t)g_words * 4;
    CHECK(aclrtSetCurrentContext(a->ctx));
    pthread_barrier_wait(&pr->go);
    CHECK(aclrtRecordEvent(a->t0, a->s));
    for (int k = 0; k < g_rounds; k++) {
        if (k > 0) CHECK(aclrtWaitAndResetNotify(a->mine, a->s, 60));
        CHECK(aclrtReduceAsync(a->buf, a->add, bytes, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_INT32,
                               a->s, NULL));
        CHECK(aclrtMemcpyAsync(b->buf, bytes, a->buf, bytes, ACL_MEMCPY_DEVICE_TO_DEVICE, a->s));
        CHECK(aclrtRecordNotify(b->mine, a->s));
    }
    CHECK(aclrtWaitAndResetNotify(a->mine, a->s, 60)); /* B's last copy into X */
    CHECK(aclrtRecordEvent(a->t1, a->s));
    return NULL;
}

static void *run_b(void *arg) {
    struct pair *pr = (struct pair *)arg;
    struct side *a = &pr->a, *b = &pr->b;
    const size_t bytes = (size_t)g_words * 4;
    CHECK(aclrtSetCurrentContext(b->ctx));
    pthread_barrier_wait(&pr->go);
    CHECK(aclrtRecordEvent(b->t0, b->s));
    for (int k = 0; k < g_rounds; k++) {
        CHECK(aclrtWaitAndResetNotify(b->mine, b->s, 60));
        CHECK(aclrtReduceAsync(b->buf, b->add, bytes, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_INT32,
                               b->s, NULL));
        CHECK(aclrtMemcpyAsync(a->buf, bytes, b->buf, bytes, ACL_MEMCPY_DEVICE_TO_DEVICE, b->s));
        CHECK(aclrtRecordNotify(a->mine, b->s));
    }
    CHECK(aclrtRecordEvent(b->t1, b->s));
    return NULL;
}

int main(int argc, char **argv) {
    g_role = "xdev_pingpong";
    const int pairs = argc > 1 ? atoi(argv[1]) : 4;
    g_rounds = argc > 2 ? atoi(argv[2]) : 200;
    g_words = argc > 3 ? atoi(argv[3]) : 4096;
    REQUIRE(pairs >= 1 && pairs <= MAX_PAIRS && g_rounds >= 1 && g_words >= 1,
            "usage: xdev_pingpong [pairs 1..%d] [rounds] [words]", MAX_PAIRS);
    CHECK(aclInit(NULL));
    uint32_t n = 0;
    CHECK(aclrtGetDeviceCount(&n));
    REQUIRE(n >= 2, "run with ACL_NOTIFY_SIM_DEVICES >= 2 (have %u)", n);
    /* Peer access both ways between every two devices the pairs use. */
    for (uint32_t d = 0; d < n; d++) {
        CHECK(aclrtSetDevice((int32_t)d));
        for (int side = -1; side <= 1; side += 2) {
            const uint32_t peer = (d + n + (uint32_t)side) % n;
            if (peer == d) continue;
            int32_t can = 0;
            CHECK(aclrtDeviceCanAccessPeer(&can, (int32_t)d, (int32_t)peer));
            REQUIRE(can == 1, "device %u cannot access device %u", d, peer);
            aclError r = aclrtDeviceEnablePeerAccess((int32_t)peer, 0);
            REQUIRE(r == ACL_SUCCESS,
                    "aclrtDeviceEnablePeerAccess(%u -> %u) returned %d: %s", d, peer, (int)r,
                    recent_msg());
        }
    }

    struct pair pr[MAX_PAIRS];
    for (int p = 0; p < pairs; p++) {
        pr[p].p = p;
        setup_side(&pr[p].a, p % (int)n, 1, 1000u * (uint32_t)p);
        setup_side(&pr[p].b, (p + 1) % (int)n, 2, 0);
        REQUIRE(pthread_barrier_init(&pr[p].go, NULL, 2) == 0, "pthread_barrier_init");
    }
    pthread_t th[2 * MAX_PAIRS];
    for (int p = 0; p < pairs; p++) {
        REQUIRE(pthread_create(&th[2 * p], NULL, run_a, &pr[p]) == 0, "pthread_create");
        REQUIRE(pthread_create(&th[2 * p + 1], NULL, run_b, &pr[p]) == 0, "pthread_create");
    }
    for (int i = 0; i < 2 * pairs; i++) REQUIRE(pthread_join(th[i], NULL) == 0, "pthread_join");

    const size_t bytes = (size_t)g_words * 4;
    uint32_t *h = NULL;
    CHECK(aclrtMallocHost((void **)&h, bytes));
    for (int p = 0; p < pairs; p++) {
        struct side *a = &pr[p].a, *b = &pr[p].b;
        CHECK(aclrtSetCurrentContext(a->ctx));
        aclrtStream check = NULL;
        CHECK(aclrtCreateStream(&check));
        CHECK(aclrtStreamWaitEvent(check, a->t1));
        CHECK(aclrtStreamWaitEvent(check, b->t1)); /* an event of the other device */
        memset(h, 0, bytes);
        CHECK(aclrtMemcpyAsync(h, bytes, a->buf, bytes, ACL_MEMCPY_DEVICE_TO_HOST, check));
        CHECK(aclrtSynchronizeStreamWithTimeout(check, 60000));
        for (int i = 0; i < g_words; i++) {
            const uint32_t want = 1000u * (uint32_t)p + (uint32_t)i * 5u + 3u * (uint32_t)g_rounds;
            REQUIRE(h[i] == want, "pair %d word %d is %u, expected %u", p, i, h[i], want);
        }
        CHECK(aclrtSynchronizeEvent(b->t1));
        CHECK(aclrtEventElapsedTime(&a->ms, a->t0, a->t1));
        CHECK(aclrtSetCurrentContext(b->ctx));
        CHECK(aclrtEventElapsedTime(&b->ms, b->t0, b->t1));
        REQUIRE(a->ms > 0.0f && b->ms > 0.0f, "pair %d elapsed %f and %f ms", p, (double)a->ms,
                (double)b->ms);
        CHECK(aclrtSetCurrentContext(a->ctx));
        CHECK(aclrtDestroyStream(check));
    }
    CHECK(aclrtFreeHost(h));
    for (int p = 0; p < pairs; p++) {
        struct side *sides[2] = {&pr[p].a, &pr[p].b};
        for (int i = 0; i < 2; i++) {
            struct side *x = sides[i];
            CHECK(aclrtSetCurrentContext(x->ctx));
            CHECK(aclrtDestroyNotify(x->mine));
            CHECK(aclrtDestroyEvent(x->t0));
            CHECK(aclrtDestroyEvent(x->t1));
            CHECK(aclrtFree(x->buf));
            CHECK(aclrtFree(x->add));
            CHECK(aclrtDestroyStream(x->s));
            CHECK(aclrtDestroyContext(x->ctx));
        }
        pthread_barrier_destroy(&pr[p].go);
    }
    CHECK(aclFinalize());
    printf("xdev_pingpong: ok (%d pairs, %d rounds, pair 0 %.1f ms)\n", pairs, g_rounds,
           (double)pr[0].a.ms);
    return 0;
}
