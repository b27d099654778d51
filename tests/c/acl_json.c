/* acl_json.c — aclInit's configuration file as CANN reads it (hicann/runtime aclInitImpl,
 * GetStrFromConfigPath, json_parser.cpp; docs/zh/FAQ "如何理解默认Device和默认Stream机制"):
 * a path that does not exist → ACL_ERROR_INVALID_FILE; not JSON, or nested more than 10 deep
 * → ACL_ERROR_PARSE_FILE; a default_device that is no number → ACL_ERROR_INVALID_PARAM, one
 * that does not exist → ACL_ERROR_RT_INVALID_DEVICEID; each failure leaves the process
 * uninitialised. An empty file or "{}" configures nothing. "defaultDevice" makes its device
 * the device of every thread that set none (an implicit aclrtSetDevice), also when the session
 * had started before aclInit; aclFinalize forgets it. Also the process-level queries CANN's
 * samples make right after aclInit: aclrtGetRunMode (ACL_HOST) and aclrtGetVersion (the
 * headers' ACL_*_VERSION), both before aclInit too.
 * usage: acl_json <scratch dir> (run with ACL_NOTIFY_SIM_DEVICES=4). Exit 0 and
 * "acl_json: ok". */
#include <pthread.h>

#include "common.h"

/* aclrtGetVersion is deprecated in CANN's header, as in ours; it is still checked here. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

static const char *g_dir;

/* dir/name holding `text`; returns the path (static storage, one at a time). */
static const char *config(const char *name, const char *text) {
    static char path[4096];
    put_file(g_dir, name, text, strlen(text));
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    return path;
}

static void *thread_device(void *arg) {
    int32_t *d = (int32_t *)arg;
    void *p = NULL;
    CHECK(aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtGetDevice(d));
    CHECK(aclrtFree(p));
    return NULL;
}

int main(int argc, char **argv) {
    g_role = "acl_json";
    REQUIRE(argc == 2, "usage: acl_json <scratch dir>");
    g_dir = argv[1];
    char missing[4096];
    snprintf(missing, sizeof missing, "%s/no-such-acl.json", g_dir);

    /* Before any session, and with their NULL checks. */
    aclrtRunMode mode = ACL_DEVICE;
    CHECK(aclrtGetRunMode(&mode));
    REQUIRE(mode == ACL_HOST, "run mode %d", (int)mode);
    EXPECT_RC(aclrtGetRunMode(NULL), ACL_ERROR_INVALID_PARAM);
    int32_t major = -1, minor = -1, patch = -1;
    CHECK(aclrtGetVersion(&major, &minor, &patch));
    REQUIRE(major == ACL_MAJOR_VERSION && minor == ACL_MINOR_VERSION && patch == ACL_PATCH_VERSION,
            "version %d.%d.%d", (int)major, (int)minor, (int)patch);
    EXPECT_RC(aclrtGetVersion(&major, NULL, &patch), ACL_ERROR_INVALID_PARAM);

    /* Refused files: the process stays uninitialised (aclFinalize has nothing to end). */
    EXPECT_RC(aclInit(missing), ACL_ERROR_INVALID_FILE);
    REQUIRE(strstr(recent_msg(), "no-such-acl.json") != NULL, "%s", recent_msg());
    EXPECT_RC(aclInit(config("bad.json", "{\"defaultDevice\": ")), ACL_ERROR_PARSE_FILE);
    EXPECT_RC(aclInit(config("deep.json", "{\"a\":[[[[[[[[[[[1]]]]]]]]]]]}")), ACL_ERROR_PARSE_FILE);
    EXPECT_RC(aclInit(config("nan.json", "{\"defaultDevice\": {\"default_device\": \"one\"}}")),
              ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclInit(config("far.json", "{\"defaultDevice\": {\"default_device\": \"9\"}}")),
              ACL_ERROR_RT_INVALID_DEVICEID);
    REQUIRE(strstr(recent_msg(), "defaultDevice") != NULL, "%s", recent_msg());

    /* Nothing configured: as with NULL. */
    CHECK(aclInit(config("empty.json", "")));
    void *p = NULL;
    EXPECT_RC(aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK(aclFinalize());
    CHECK(aclInit(config("none.json", "{\"dump\": {\"dump_list\": []}}")));
    EXPECT_RC(aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK(aclFinalize());

    /* The FAQ's example: no aclrtSetDevice at all. */
    CHECK(aclInit(config("acl.json", "{\n  \"defaultDevice\": {\n    \"default_device\": \"2\"\n  }\n}\n")));
    CHECK(aclrtMalloc(&p, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    int32_t d = -1;
    CHECK(aclrtGetDevice(&d));
    REQUIRE(d == 2, "the default device made current is %d", (int)d);
    CHECK(aclrtMemset(p, 4096, 7, 4096));
    CHECK(aclrtMemcpyAsync(p, 16, p, 16, ACL_MEMCPY_DEVICE_TO_DEVICE, NULL));
    CHECK(aclrtSynchronizeStream(NULL));
    pthread_t t;
    int32_t td = -1;
    REQUIRE(pthread_create(&t, NULL, thread_device, &td) == 0, "pthread_create");
    REQUIRE(pthread_join(t, NULL) == 0, "pthread_join");
    REQUIRE(td == 2, "another thread's implicit device is %d", (int)td);
    CHECK(aclrtSetDevice(1)); /* an explicit device still wins */
    CHECK(aclrtGetDevice(&d));
    REQUIRE(d == 1, "device %d after aclrtSetDevice(1)", (int)d);
    CHECK(aclrtSetDevice(2));
    CHECK(aclrtFree(p));
    CHECK(aclrtResetDeviceForce(2));
    CHECK(aclrtResetDeviceForce(1));
    CHECK(aclFinalize());

    /* aclFinalize forgot it; a session started before aclInit takes it at aclInit. */
    uint32_t n = 0;
    CHECK(aclrtGetDeviceCount(&n));
    EXPECT_RC(aclrtGetDevice(&d), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK(aclInit(config("acl3.json", "{\"defaultDevice\": {\"default_device\": \"3\"}}")));
    CHECK(aclrtGetDevice(&d));
    REQUIRE(d == 3, "device %d", (int)d);
    CHECK(aclFinalize());
    printf("acl_json: ok\n");
    return 0;
}
