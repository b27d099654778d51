/* task_info_cache.c — aclrtCacheLastTaskOpInfo and aclrtCacheLastTaskExtendInfo through the C
 * ABI, with CANN's checks in its order (hicann/runtime src/acl/aclrt_impl/kernel.cpp;
 * src/runtime/api/api_c_standard_soc.cc; src/runtime/api/impl/api_error.cc and api_impl.cc).
 *
 * Checked, on a chip with ACL Graph (Ascend910B, Ascend950PR, Ascend310P):
 * - a thread that gave no task yet, and one whose last task was queued on a stream that does
 *   not capture: 507000 each, with its message;
 * - operator information: NULL and a size of 0 100000, more than 64 KiB 107000; refused with
 *   507000 while the capture's ACL_STREAM_ATTR_CACHE_OP_INFO is off, accepted once it is on;
 * - extended information: NULL and a size of 0 107000; in a capture of three copies, the
 *   first's "first", the second's "second-old" replaced by "second", the third's 5000 bytes
 *   cut to 4096: aclmdlRIDebugJsonPrint shows each with its own task ("seq") and nothing of
 *   "second-old"; a host function and a 2-D copy queued meanwhile on a stream that does not
 *   capture are the thread's last task: the information given after each is refused (507000)
 *   and shown nowhere; after the capture's end the stream is in no model: 507000; a notify
 *   record and a notify wait queued then (no capture anywhere) are the thread's last task, so
 *   the refusal names their stream ("neither captures"), not the ended capture's.
 * On any other chip: operator information NULL/size 0 100000 first, then 207000; extended
 * information 207000 even for NULL.
 *
 * usage: task_info_cache SOC. Exit 0 and "task_info_cache: ok". */
#include "common.h"

#define RT_INTERNAL 507000

static char json[65536];

/* The JSON print of `m`, read into `json`. */
static void print_json(aclmdlRI m) {
    read_json_print(m, "task_info_cache.json", json, sizeof json);
}

/* The event (one JSON object of the array, no object nested deeper than its "args") holding
 * "seq":<seq>, copied into `out`. */
static void event_of(int seq, char *out, size_t cap) {
    char key[32];
    snprintf(key, sizeof key, "\"seq\":%d,", seq);
    const char *at = strstr(json, key);
    REQUIRE(at != NULL, "no task %d in %s", seq, json);
    const char *start = at;
    while (start > json && !(start[0] == '{' && start[1] == '"' && start[-1] != ':')) start--;
    /* It ends where the next event starts, or with the array. */
    const char *end = strstr(at, ",{\"");
    if (end == NULL) end = json + strlen(json);
    REQUIRE((size_t)(end - start) < cap, "event %d too long", seq);
    memcpy(out, start, (size_t)(end - start));
    out[end - start] = 0;
}

static void nop(void *args) { (void)args; }

int main(int argc, char **argv) {
    g_role = "task_info_cache";
    const char *soc = argc > 1 ? argv[1] : "Ascend910B";
    const int graph = strcmp(soc, "Ascend910B") == 0 || strcmp(soc, "Ascend950PR") == 0 ||
                      strcmp(soc, "Ascend310P") == 0 || strcmp(soc, "Ascend950DT") == 0 ||
                      strcmp(soc, "Ascend910_93") == 0;
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    const char op[8] = {1, 2, 3, 4, 5, 6, 7, 8};

    EXPECT_RC(aclrtCacheLastTaskOpInfo(NULL, 8), ACL_ERROR_INVALID_PARAM);
    expect_msg("infoPtr", "NULL", NULL);
    EXPECT_RC(aclrtCacheLastTaskOpInfo(op, 0), ACL_ERROR_INVALID_PARAM);
    expect_msg("infoSize", NULL);
    if (!graph) {
        EXPECT_RC(aclrtCacheLastTaskOpInfo(op, 8), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        expect_msg(soc, NULL);
        EXPECT_RC(aclrtCacheLastTaskExtendInfo(NULL, 0), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        expect_msg(soc, NULL);
        CHECK(aclrtResetDevice(0));
        CHECK(aclFinalize());
        printf("task_info_cache: ok\n");
        return 0;
    }
    static char big[64 * 1024 + 1];
    EXPECT_RC(aclrtCacheLastTaskOpInfo(big, sizeof big), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("65537", "65536", NULL);
    EXPECT_RC(aclrtCacheLastTaskExtendInfo(NULL, 4), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("extendInfoPtr", "NULL", NULL);
    EXPECT_RC(aclrtCacheLastTaskExtendInfo("x", 0), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("infoSize", NULL);
    /* No task yet on this thread. */
    EXPECT_RC(aclrtCacheLastTaskExtendInfo("x", 1), RT_INTERNAL);
    expect_msg("no task", NULL);

    aclrtStream s, plain;
    CHECK(aclrtCreateStream(&s));
    CHECK(aclrtCreateStream(&plain));
    void *a, *b;
    CHECK(aclrtMalloc(&a, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&b, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    /* The last task queued on a stream that captures nothing. */
    CHECK(aclrtMemcpyAsync(b, 64, a, 64, ACL_MEMCPY_DEVICE_TO_DEVICE, plain));
    EXPECT_RC(aclrtCacheLastTaskExtendInfo("x", 1), RT_INTERNAL);
    expect_msg("neither captures", NULL);
    EXPECT_RC(aclrtCacheLastTaskOpInfo(op, 8), RT_INTERNAL);
    expect_msg("neither captures", NULL);
    CHECK(aclrtSynchronizeStream(plain));

    CHECK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    CHECK(aclrtMemcpyAsync(b, 64, a, 64, ACL_MEMCPY_DEVICE_TO_DEVICE, s));
    CHECK(aclrtCacheLastTaskExtendInfo("first", 5));
    /* The operator-information switch is off. */
    EXPECT_RC(aclrtCacheLastTaskOpInfo(op, 8), RT_INTERNAL);
    expect_msg("ACL_STREAM_ATTR_CACHE_OP_INFO", NULL);
    aclrtStreamAttrValue on = {0};
    on.cacheOpInfoSwitch = 1;
    CHECK(aclrtSetStreamAttribute(s, ACL_STREAM_ATTR_CACHE_OP_INFO, &on));
    CHECK(aclrtCacheLastTaskOpInfo(op, 8));
    CHECK(aclrtMemcpyAsync(a, 64, b, 64, ACL_MEMCPY_DEVICE_TO_DEVICE, s));
    CHECK(aclrtCacheLastTaskExtendInfo("second-old", 10));
    CHECK(aclrtCacheLastTaskExtendInfo("second", 6));
    CHECK(aclrtCacheLastTaskOpInfo(op, 4));
    /* A task the capture does not store, queued on another stream meanwhile, is the thread's
     * last task too (CANN sets it at every submission): the information is refused, not put
     * on the second copy. */
    CHECK(aclrtLaunchHostFunc(plain, nop, NULL));
    EXPECT_RC(aclrtCacheLastTaskExtendInfo("stray", 5), RT_INTERNAL);
    expect_msg("neither captures", NULL);
    CHECK(aclrtMemcpy2dAsync(b, 16, a, 16, 16, 2, ACL_MEMCPY_DEVICE_TO_DEVICE, plain));
    EXPECT_RC(aclrtCacheLastTaskOpInfo(op, 8), RT_INTERNAL);
    expect_msg("neither captures", NULL);
    CHECK(aclrtSynchronizeStream(plain));
    CHECK(aclrtMemcpyAsync(b, 64, a, 64, ACL_MEMCPY_DEVICE_TO_DEVICE, s));
    static char longer[5000];
    memset(longer, 'z', sizeof longer);
    CHECK(aclrtCacheLastTaskExtendInfo(longer, sizeof longer));
    aclmdlRI m = NULL;
    CHECK(aclmdlRICaptureEnd(s, &m));
    /* The stream's capture ended: its last task is in no model now. */
    EXPECT_RC(aclrtCacheLastTaskExtendInfo("late", 4), RT_INTERNAL);
    expect_msg("no longer bound", NULL);
    /* With no capture anywhere, a notify record and a notify wait are the thread's last task
     * too (CANN's TaskSubmit sets it for every task, these included): the refusal names the
     * notify's stream, not the ended capture's. */
    aclrtNotify nt;
    CHECK(aclrtCreateNotify(&nt, ACL_NOTIFY_DEFAULT));
    CHECK(aclrtRecordNotify(nt, plain));
    EXPECT_RC(aclrtCacheLastTaskExtendInfo("rec", 3), RT_INTERNAL);
    expect_msg("neither captures", NULL);
    /* A second capture's copy is the last task again, then the wait. */
    aclmdlRI m2 = NULL;
    CHECK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    CHECK(aclrtMemcpyAsync(b, 64, a, 64, ACL_MEMCPY_DEVICE_TO_DEVICE, s));
    CHECK(aclmdlRICaptureEnd(s, &m2));
    CHECK(aclrtWaitAndResetNotify(nt, plain, 0));
    EXPECT_RC(aclrtCacheLastTaskExtendInfo("wait", 4), RT_INTERNAL);
    expect_msg("neither captures", NULL);
    CHECK(aclrtSynchronizeStream(plain));
    CHECK(aclmdlRIDestroy(m2));
    CHECK(aclrtDestroyNotify(nt));

    print_json(m);
    REQUIRE(strstr(json, "second-old") == NULL, "the replaced info is still shown: %s", json);
    REQUIRE(strstr(json, "stray") == NULL, "info given after an uncaptured task is shown: %s",
            json);
    static char ev[16384];
    event_of(0, ev, sizeof ev);
    REQUIRE(strstr(ev, "\"extend_info\":\"first\"") != NULL, "task 0: %s", ev);
    event_of(1, ev, sizeof ev);
    REQUIRE(strstr(ev, "\"extend_info\":\"second\"") != NULL, "task 1: %s", ev);
    event_of(2, ev, sizeof ev);
    const char *z = strstr(ev, "\"extend_info\":\"");
    REQUIRE(z != NULL, "task 2: %s", ev);
    z += strlen("\"extend_info\":\"");
    size_t n = 0;
    while (z[n] == 'z') n++;
    REQUIRE(n == 4096 && z[n] == '"', "task 2 kept %zu bytes, not 4096", n);

    CHECK(aclmdlRIDestroy(m));
    CHECK(aclrtFree(a));
    CHECK(aclrtFree(b));
    CHECK(aclrtDestroyStream(s));
    CHECK(aclrtDestroyStream(plain));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("task_info_cache: ok\n");
    return 0;
}
