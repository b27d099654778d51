/* value.c — memory-semantics synchronisation as CANN's multistream sample uses it
 * (aclrtValueWrite / aclrtValueWait): a stream stalls until the 64-bit value at a device
 * address meets a condition that another stream, or another process through IPC memory,
 * writes.
 *
 * Checked: a wait holds its stream (query NOT_READY, a bounded synchronize 507046 naming the
 * value wait) until another stream's write, and the data copied before the write is there
 * after the wait; the four conditions (GEQ with wrap-around, EQ, AND, NOR); a wait released by
 * another process's write into IPC memory it imported; the codes of misuse (NULL address, bad
 * flags, host memory, a range leaving its allocation); memory freed under a wait fails its
 * stream; aclrtStreamAbort ends a wait; aclFinalize returns promptly with one still queued.
 * With "unsupported": every call answers 207000 (run on a SoC without value tasks).
 *
 * usage: value [unsupported]. Exit 0 and "value: ok". */
#include "common.h"

#include <signal.h>
#include <sys/wait.h>

static volatile int g_released;
static void released(void *arg) {
    (void)arg;
    g_released = 1;
}

/* Waits on `stream` for the word at `p` to meet `flag` against `value` after `word` was
 * stored there: returns whether the wait passed, within 0.3 s when it is expected not to and
 * 20 s when it is expected to (a process paused meanwhile, as a benchmark window pauses the
 * others, must not fail it). */
static int passes_within(aclrtStream stream, uint64_t *p, uint64_t word, uint64_t value,
                         uint32_t flag, int32_t ms) {
    CHECK(aclrtMemcpy(p, 8, &word, 8, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtValueWait(p, value, flag, stream));
    aclError r = aclrtSynchronizeStreamWithTimeout(stream, ms);
    if (r == ACL_SUCCESS) return 1;
    REQUIRE(r == ACL_ERROR_RT_STREAM_SYNC_TIMEOUT, "synchronize returned %d: %s", (int)r,
            recent_msg());
    /* Release it for the next case. */
    CHECK(aclrtStreamAbort(stream));
    CHECK(aclrtSynchronizeStreamWithTimeout(stream, 5000));
    return 0;
}
#define passes(s, p, w, v, f) passes_within((s), (p), (w), (v), (f), 20000)
#define blocks(s, p, w, v, f) (!passes_within((s), (p), (w), (v), (f), 300))

int main(int argc, char **argv) {
    g_role = "value";
    if (argc > 1 && strcmp(argv[1], "unsupported") == 0) {
        CHECK(aclInit(NULL));
        CHECK(aclrtSetDevice(0));
        void *d = NULL;
        CHECK(aclrtMalloc(&d, 64, ACL_MEM_MALLOC_HUGE_FIRST));
        EXPECT_RC(aclrtValueWrite(d, 1, 0, NULL), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        EXPECT_RC(aclrtValueWait(d, 1, ACL_STREAM_WAIT_VALUE_EQ, NULL),
                  ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        CHECK(aclFinalize());
        printf("value: ok (unsupported)\n");
        return 0;
    }

    int rd, wr; /* this side's ends of the pipes to the other process */
    pid_t child = fork_piped(&rd, &wr);
    if (child == 0) {
        /* Another process: writes the value into the owner's memory it imports. */
        g_role = "writer";
        CHECK(aclInit(NULL));
        CHECK(aclrtSetDevice(1));
        aclrtStream s = NULL;
        CHECK(aclrtCreateStream(&s));
        int32_t me = 0;
        CHECK(aclrtDeviceGetBareTgid(&me));
        write_all(wr, &me, sizeof me);
        char key[65];
        read_all(rd, key, sizeof key);
        void *p = NULL;
        CHECK(aclrtIpcMemImportByKey(&p, key, ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS));
        char go;
        read_all(rd, &go, 1);
        CHECK(aclrtValueWrite(p, 7, 0, s));
        CHECK(aclrtSynchronizeStreamWithTimeout(s, 10000));
        write_all(wr, "w", 1);
        read_all(rd, &go, 1);
        CHECK(aclrtIpcMemClose(key));
        CHECK(aclFinalize());
        _exit(0);
    }

    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream a = NULL, b = NULL;
    CHECK(aclrtCreateStream(&a));
    CHECK(aclrtCreateStream(&b));
    uint64_t *flag = NULL, *data = NULL, *host = NULL;
    CHECK(aclrtMalloc((void **)&flag, 8, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc((void **)&data, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMallocHost((void **)&host, 4096));
    CHECK(aclrtMemset(flag, 8, 0, 8));

    /* Misuse. */
    EXPECT_RC(aclrtValueWait(NULL, 1, ACL_STREAM_WAIT_VALUE_EQ, a), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtValueWrite(NULL, 1, 0, a), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtValueWait(flag, 1, 4, a), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtValueWrite(flag, 1, 1, a), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtValueWait(host, 1, ACL_STREAM_WAIT_VALUE_EQ, a), ACL_ERROR_RT_PARAM_INVALID);
    const char *m = recent_msg();
    REQUIRE(strstr(m, "not device memory") != NULL, "host memory not named: %s", m);
    EXPECT_RC(aclrtValueWrite((char *)data + 4092, 1, 0, a), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtValueWrite((char *)data + 4, 1, 0, a), ACL_ERROR_RT_PARAM_INVALID);
    m = recent_msg();
    REQUIRE(strstr(m, "not 8-byte aligned") != NULL, "misalignment not named: %s", m);
    EXPECT_RC(aclrtValueWait((char *)data + 4, 1, ACL_STREAM_WAIT_VALUE_EQ, a),
              ACL_ERROR_RT_PARAM_INVALID);

    /* Another stream's write releases the wait; what it copied before is there. */
    CHECK(aclrtValueWait(flag, 100, ACL_STREAM_WAIT_VALUE_EQ, a));
    CHECK(aclrtMemcpyAsync(host, 4096, data, 4096, ACL_MEMCPY_DEVICE_TO_HOST, a));
    CHECK(aclrtLaunchHostFunc(a, released, NULL));
    aclrtStreamStatus st = ACL_STREAM_STATUS_COMPLETE;
    EXPECT_RC(aclrtSynchronizeStreamWithTimeout(a, 100), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
    m = recent_msg();
    REQUIRE(strstr(m, "value wait") != NULL, "the busy stream does not name its value wait: %s",
            m);
    CHECK(aclrtStreamQuery(a, &st));
    REQUIRE(st == ACL_STREAM_STATUS_NOT_READY && !g_released, "the wait did not hold its stream");
    for (int i = 0; i < 512; i++) host[i] = 0xABCD0000u + (uint64_t)i;
    CHECK(aclrtMemcpyAsync(data, 4096, host, 4096, ACL_MEMCPY_HOST_TO_DEVICE, b));
    CHECK(aclrtValueWrite(flag, 99, 0, b)); /* not yet */
    CHECK(aclrtSynchronizeStreamWithTimeout(b, 5000));
    for (int i = 0; i < 512; i++) host[i] = 0;
    EXPECT_RC(aclrtSynchronizeStreamWithTimeout(a, 100), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
    REQUIRE(!g_released, "a write of 99 released a wait for 100");
    CHECK(aclrtValueWrite(flag, 100, 0, b));
    CHECK(aclrtSynchronizeStreamWithTimeout(a, 10000));
    REQUIRE(g_released, "the host function after the wait did not run");
    for (int i = 0; i < 512; i++)
        REQUIRE(host[i] == 0xABCD0000u + (uint64_t)i, "word %d after the wait is %#llx", i,
                (unsigned long long)host[i]);

    /* The conditions. */
    REQUIRE(passes(a, flag, 5, 3, ACL_STREAM_WAIT_VALUE_GEQ), "GEQ 5 >= 3");
    REQUIRE(blocks(a, flag, 2, 3, ACL_STREAM_WAIT_VALUE_GEQ), "GEQ 2 >= 3");
    REQUIRE(passes(a, flag, 1, UINT64_MAX, ACL_STREAM_WAIT_VALUE_GEQ), "GEQ wraps: 1 - (-1)");
    REQUIRE(passes(a, flag, 9, 9, ACL_STREAM_WAIT_VALUE_EQ), "EQ 9");
    REQUIRE(passes(a, flag, 6, 2, ACL_STREAM_WAIT_VALUE_AND), "AND 6 & 2");
    REQUIRE(blocks(a, flag, 4, 2, ACL_STREAM_WAIT_VALUE_AND), "AND 4 & 2");
    REQUIRE(passes(a, flag, 0, 0, ACL_STREAM_WAIT_VALUE_NOR), "NOR ~(0 | 0)");
    REQUIRE(blocks(a, flag, UINT64_MAX, 0, ACL_STREAM_WAIT_VALUE_NOR), "NOR ~(-1 | 0)");

    /* Another process's write into the IPC memory it imported releases the wait. */
    uint64_t *shared = NULL;
    CHECK(aclrtMalloc((void **)&shared, 8, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemset(shared, 8, 0, 8));
    char key[65] = {0};
    CHECK(aclrtIpcMemGetExportKey(shared, 8, key, sizeof key, 0));
    int32_t pid = 0;
    read_all(rd, &pid, sizeof pid);
    CHECK(aclrtIpcMemSetImportPid(key, &pid, 1));
    write_all(wr, key, sizeof key);
    g_released = 0;
    CHECK(aclrtValueWait(shared, 7, ACL_STREAM_WAIT_VALUE_EQ, a));
    CHECK(aclrtLaunchHostFunc(a, released, NULL));
    EXPECT_RC(aclrtSynchronizeStreamWithTimeout(a, 100), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
    write_all(wr, "g", 1);
    CHECK(aclrtSynchronizeStreamWithTimeout(a, 10000));
    REQUIRE(g_released, "another process's write did not release the wait");
    char w;
    read_all(rd, &w, 1);
    write_all(wr, "q", 1);
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child, "waitpid: %s", strerror(errno));
    REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the writer failed (status %#x)",
            status);

    /* Memory freed under a wait fails its stream; an abort ends one. */
    uint64_t *doomed = NULL;
    CHECK(aclrtMalloc((void **)&doomed, 8, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemset(doomed, 8, 0, 8));
    CHECK(aclrtValueWait(doomed, 1, ACL_STREAM_WAIT_VALUE_EQ, a));
    sleep_ms(20);
    CHECK(aclrtFree(doomed));
    EXPECT_RC(aclrtSynchronizeStreamWithTimeout(a, 10000), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclrtValueWait(flag, 12345, ACL_STREAM_WAIT_VALUE_EQ, a));
    CHECK(aclrtStreamAbort(a));
    CHECK(aclrtSynchronizeStreamWithTimeout(a, 10000));

    /* aclFinalize with a wait that nothing will release still queued: it gives the wait up as
     * one that waits for ever (0 and a note), not at its drain's bound (60 s, then 507046).
     * Judged by that answer, not by a time (a loaded machine can stretch any). */
    CHECK(aclrtValueWait(flag, 12345, ACL_STREAM_WAIT_VALUE_EQ, a));
    int64_t t0 = now_ns();
    CHECK(aclFinalize());
    double took = (double)(now_ns() - t0) / 1e9;
    const char *fm = recent_msg();
    REQUIRE(strstr(fm, "aclFinalize: discarded the tasks still queued on 1 stream(s)") != NULL &&
                strstr(fm, "nothing in this process was going to make") != NULL,
            "aclFinalize (%.1f s) did not give up a value wait nothing releases: %s", took, fm);
    printf("value: ok (aclFinalize %.3f s)\n", took);
    return 0;
}
