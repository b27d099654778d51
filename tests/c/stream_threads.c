/* stream_threads.c — a process that may start no more threads (its RLIMIT_NPROC reached, as a
 * job's per-user limit or a machine's pid_max ends it), as CANN programs with many streams on
 * a busy host meet it. The simulator runs each stream on a thread of its own, so
 * aclrtCreateStream needs one; CANN's code when a stream's resources cannot be had is 207005
 * (ACL_ERROR_RT_RESOURCE_ALLOC_FAIL, hicann/runtime src/runtime/core/src/common/
 * errcode_manage.cc: RT_ERROR_STREAM_NEW -> ACL_ERROR_RT_RESOURCE_ALLOC_FAIL).
 *
 * Checked, with the limit reached: aclrtCreateStream, aclrtCreateStreamWithConfig and
 * aclrtCreateContext on another device answer 207005 with a message that says the system
 * refused the stream's thread (its answer) and which limits there are, create nothing
 * (aclrtGetStreamAvailableNum unchanged), and crash nothing; a stream made before goes on
 * working (a notify wait released by a record from another stream made before, a copy, a
 * synchronize); once the limit is lifted, streams are made again and everything tears down
 * with 0.
 *
 * RLIMIT_NPROC binds no process of uid 0 (the kernel exempts root's user, and CAP_SYS_RESOURCE
 * or CAP_SYS_ADMIN): run as root, the program makes its real uid 65534 and drops those two
 * capabilities from its effective set before aclInit, keeping its effective uid (files).
 *
 * usage: stream_threads. Exit 0 and "stream_threads: ok". */
#include "common.h"

#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>

/* Makes RLIMIT_NPROC bind this process (see the header). */
static void bind_nproc_limit(void) {
    if (geteuid() != 0) return;
    REQUIRE(setresuid(65534, 0, 0) == 0, "setresuid: %s", strerror(errno));
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    REQUIRE(syscall(SYS_capget, &h, d) == 0, "capget: %s", strerror(errno));
    d[CAP_SYS_RESOURCE / 32].effective &= ~(1u << (CAP_SYS_RESOURCE % 32));
    d[CAP_SYS_ADMIN / 32].effective &= ~(1u << (CAP_SYS_ADMIN % 32));
    REQUIRE(syscall(SYS_capset, &h, d) == 0, "capset: %s", strerror(errno));
}

static struct rlimit g_nproc;

/* No thread may start while the limit holds: this user has at least this process. */
static void limit_threads(void) {
    struct rlimit one = g_nproc;
    one.rlim_cur = 1;
    REQUIRE(setrlimit(RLIMIT_NPROC, &one) == 0, "setrlimit: %s", strerror(errno));
}

static void lift_limit(void) {
    REQUIRE(setrlimit(RLIMIT_NPROC, &g_nproc) == 0, "setrlimit: %s", strerror(errno));
}

/* The call's answer must be 207005 with a message that says the system refused the stream's
 * thread, and which limits there are. */
#define EXPECT_NO_THREAD(call)                                                             \
    do {                                                                                   \
        EXPECT_RC(call, ACL_ERROR_RT_RESOURCE_ALLOC_FAIL);                                 \
        expect_msg("worker thread", "refused", "RLIMIT_NPROC", NULL);                      \
    } while (0)

int main(void) {
    g_role = "stream_threads";
    bind_nproc_limit();
    REQUIRE(getrlimit(RLIMIT_NPROC, &g_nproc) == 0, "getrlimit: %s", strerror(errno));

    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream a = NULL, b = NULL;
    CHECK(aclrtCreateStream(&a));
    CHECK(aclrtCreateStream(&b));
    aclrtNotify n = NULL;
    CHECK(aclrtCreateNotify(&n, ACL_NOTIFY_DEFAULT));
    enum { WORDS = 1024 };
    uint32_t *host = NULL, *back = NULL;
    void *dev = NULL;
    CHECK(aclrtMallocHost((void **)&host, WORDS * 4));
    CHECK(aclrtMallocHost((void **)&back, WORDS * 4));
    CHECK(aclrtMalloc(&dev, WORDS * 4, ACL_MEM_MALLOC_HUGE_FIRST));
    for (int i = 0; i < WORDS; i++) host[i] = 0x5eed0000u + (uint32_t)i;

    uint32_t avail = 0, avail_after = 0;
    CHECK(aclrtGetStreamAvailableNum(&avail));
    limit_threads();
    aclrtStream c = (aclrtStream)0x1;
    EXPECT_NO_THREAD(aclrtCreateStream(&c));
    REQUIRE(c == (aclrtStream)0x1 || c == NULL, "a failed create gave a stream %p", c);
    aclrtStream d = (aclrtStream)0x1;
    EXPECT_NO_THREAD(aclrtCreateStreamWithConfig(&d, 0, ACL_STREAM_FAST_LAUNCH));
    aclrtContext ctx = NULL;
    aclError r = aclrtCreateContext(&ctx, 1);
    if (r != ACL_SUCCESS) {
        /* A context brings its default stream: refused like a stream, or made. */
        REQUIRE(r == ACL_ERROR_RT_RESOURCE_ALLOC_FAIL, "aclrtCreateContext returned %d: %s",
                (int)r, recent_msg());
        expect_msg("worker thread", "refused", "RLIMIT_NPROC", NULL);
    } else {
        CHECK(aclrtDestroyContext(ctx));
    }
    /* Nothing was taken by the refused creates (aclrtGetStreamAvailableNum). */
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtGetStreamAvailableNum(&avail_after));
    REQUIRE(avail_after == avail, "%u streams available after the refusals, %u before",
            avail_after, avail);
    /* The streams made before work on: a wait on one released by the other's record. */
    CHECK(aclrtWaitAndResetNotify(n, a, 30));
    CHECK(aclrtMemcpyAsync(dev, WORDS * 4, host, WORDS * 4, ACL_MEMCPY_HOST_TO_DEVICE, a));
    CHECK(aclrtMemcpyAsync(back, WORDS * 4, dev, WORDS * 4, ACL_MEMCPY_DEVICE_TO_HOST, a));
    CHECK(aclrtRecordNotify(n, b));
    CHECK(aclrtSynchronizeStream(a));
    CHECK(aclrtSynchronizeStream(b));
    for (int i = 0; i < WORDS; i++)
        REQUIRE(back[i] == host[i], "word %d is %#x, expected %#x", i, back[i], host[i]);

    lift_limit();
    CHECK(aclrtCreateStream(&c));
    CHECK(aclrtCreateStreamWithConfig(&d, 0, ACL_STREAM_FAST_LAUNCH));
    CHECK(aclrtDestroyStream(c));
    CHECK(aclrtDestroyStream(d));
    CHECK(aclrtDestroyNotify(n));
    CHECK(aclrtFree(dev));
    CHECK(aclrtFreeHost(host));
    CHECK(aclrtFreeHost(back));
    CHECK(aclrtDestroyStream(a));
    CHECK(aclrtDestroyStream(b));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("stream_threads: ok\n");
    return 0;
}
