/* lifecycle.c — what runs around aclInit and aclFinalize: the init and finalize callbacks
 * other libraries register (aclInitCallbackRegister, aclFinalizeCallbackRegister, their
 * UnRegisters) and aclFinalizeReference's count of aclInit calls, as hicann/runtime's
 * src/acl/aclrt_impl/init_callback_manager.cpp and acl.cpp run them.
 *
 * Checked: registration codes (NULL function, unknown type, a second callback of one type,
 * unregistering what is not registered); aclInit runs the init callbacks in CANN's type order
 * (MODEL, OP_EXECUTOR with a file, DVPP, OTHER in registration order) with the file's bytes;
 * one registered after aclInit runs at once; a failing init callback fails aclInit with its
 * code and leaves the process uninitialised (the next aclInit answers 0, not 100002); a
 * callback may make runtime calls, but not aclInit (refused, not a hang); repeated aclInit
 * counts references that aclFinalizeReference gives back, finalising (finalize callbacks in
 * order OP_COMPILER, MODEL, DVPP, OTHER) with the last; a failing finalize callback fails the
 * finalisation, which then has not happened; 100037 once there is nothing to give back.
 *
 * usage: lifecycle DIR. Exit 0 and "lifecycle: ok". */
#include "common.h"

static char g_log[256];
static int g_logged;
static void logc(char c) {
    if (g_logged < 255) g_log[g_logged++] = c;
}

static const char *g_want_cfg;
static int g_bad_cfg, g_bad_ud;
static int g_tag_model = 'M', g_tag_exec = 'E', g_tag_dvpp = 'D', g_tag_a = 'a', g_tag_b = 'b';

static aclError init_cb(const char *cfg, size_t len, void *ud) {
    if (len != strlen(g_want_cfg) || memcmp(cfg, g_want_cfg, len) != 0) g_bad_cfg++;
    if (ud == NULL) {
        g_bad_ud++;
        return ACL_SUCCESS;
    }
    logc((char)*(int *)ud);
    return ACL_SUCCESS;
}
static aclError init_cb2(const char *cfg, size_t len, void *ud) { return init_cb(cfg, len, ud); }

/* An init callback that makes runtime calls, and tries aclInit. */
static aclError g_nested_rc = -1;
static uint32_t g_count_in_cb;
static aclError init_calls_runtime(const char *cfg, size_t len, void *ud) {
    (void)cfg;
    (void)len;
    (void)ud;
    logc('R');
    if (aclrtGetDeviceCount(&g_count_in_cb) != ACL_SUCCESS) return ACL_ERROR_INVALID_PARAM;
    g_nested_rc = aclInit(NULL);
    return ACL_SUCCESS;
}

static int g_fail_init = 1;
static aclError init_fails(const char *cfg, size_t len, void *ud) {
    (void)cfg;
    (void)len;
    (void)ud;
    logc('F');
    return g_fail_init ? ACL_ERROR_RT_PARAM_INVALID : ACL_SUCCESS;
}

static int g_fail_fini = 1;
static aclError fini_cb(void *ud) {
    logc((char)*(int *)ud);
    return ACL_SUCCESS;
}
static aclError fini_model(void *ud) {
    logc((char)*(int *)ud);
    if (g_fail_fini) {
        g_fail_fini = 0;
        return ACL_ERROR_FAILURE;
    }
    return ACL_SUCCESS;
}
static aclError fini_other(void *ud) { return fini_cb(ud); }

static void expect_log(const char *want, const char *when) {
    g_log[g_logged] = 0;
    REQUIRE(strcmp(g_log, want) == 0, "%s: the callbacks ran as \"%s\", expected \"%s\"", when,
            g_log, want);
    g_logged = 0;
}

int main(int argc, char **argv) {
    g_role = "lifecycle";
    REQUIRE(argc == 2, "usage: lifecycle DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/acl.json", argv[1]);
    static const char cfg[] = "{\"dump\": {\"dump_path\": \"/tmp\"}}";
    FILE *f = fopen(path, "w");
    REQUIRE(f != NULL && fputs(cfg, f) >= 0 && fclose(f) == 0, "cannot write %s", path);
    g_want_cfg = cfg;

    /* Registration codes. */
    EXPECT_RC(aclInitCallbackRegister(ACL_REG_TYPE_ACL_MODEL, NULL, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclInitCallbackRegister((aclRegisterCallbackType)42, init_cb, &g_tag_model),
              ACL_ERROR_INVALID_PARAM);
    CHECK(aclInitCallbackRegister(ACL_REG_TYPE_OTHER, init_cb, &g_tag_a));
    CHECK(aclInitCallbackRegister(ACL_REG_TYPE_ACL_DVPP, init_cb, &g_tag_dvpp));
    CHECK(aclInitCallbackRegister(ACL_REG_TYPE_OTHER, init_cb2, &g_tag_b));
    CHECK(aclInitCallbackRegister(ACL_REG_TYPE_ACL_MODEL, init_cb, &g_tag_model));
    EXPECT_RC(aclInitCallbackRegister(ACL_REG_TYPE_ACL_MODEL, init_cb2, &g_tag_model),
              ACL_ERROR_INTERNAL_ERROR);
    CHECK(aclInitCallbackRegister(ACL_REG_TYPE_ACL_OP_EXECUTOR, init_cb, &g_tag_exec));
    EXPECT_RC(aclInitCallbackUnRegister(ACL_REG_TYPE_ACL_DVPP, init_cb2), ACL_ERROR_INTERNAL_ERROR);
    EXPECT_RC(aclInitCallbackUnRegister(ACL_REG_TYPE_ACL_DVPP, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclFinalizeCallbackUnRegister(ACL_REG_TYPE_OTHER, fini_cb), ACL_ERROR_INTERNAL_ERROR);
    REQUIRE(g_logged == 0, "a callback ran before aclInit");

    /* aclInit with a file: MODEL, OP_EXECUTOR, DVPP, then the OTHERs in order. */
    CHECK(aclInit(path));
    expect_log("MEDab", "aclInit with a file");
    REQUIRE(g_bad_cfg == 0, "a callback did not get the file's contents");
    /* Registered once initialised: runs at once. */
    CHECK(aclInitCallbackRegister(ACL_REG_TYPE_ACL_RETR, init_cb, &g_tag_a));
    expect_log("a", "an init callback registered after aclInit");
    CHECK(aclInitCallbackUnRegister(ACL_REG_TYPE_ACL_RETR, init_cb));

    /* References: two more aclInit, given back one at a time. */
    EXPECT_RC(aclInit(path), ACL_ERROR_REPEAT_INITIALIZE);
    EXPECT_RC(aclInit(path), ACL_ERROR_REPEAT_INITIALIZE);
    REQUIRE(g_logged == 0, "a repeated aclInit ran the callbacks");
    CHECK(aclFinalizeCallbackRegister(ACL_REG_TYPE_OTHER, fini_other, &g_tag_b));
    CHECK(aclFinalizeCallbackRegister(ACL_REG_TYPE_ACL_MODEL, fini_model, &g_tag_model));
    CHECK(aclFinalizeCallbackRegister(ACL_REG_TYPE_ACL_OP_COMPILER, fini_cb, &g_tag_exec));
    EXPECT_RC(aclFinalizeCallbackRegister(ACL_REG_TYPE_ACL_MODEL, fini_cb, &g_tag_a),
              ACL_ERROR_INTERNAL_ERROR);
    uint64_t refs = 99;
    CHECK(aclFinalizeReference(&refs));
    REQUIRE(refs == 2, "aclFinalizeReference left %llu references, expected 2",
            (unsigned long long)refs);
    CHECK(aclFinalizeReference(NULL));
    REQUIRE(g_logged == 0, "a finalize callback ran before the last reference went");
    /* The last one: the MODEL callback fails once, so nothing is finalised. */
    EXPECT_RC(aclFinalizeReference(&refs), ACL_ERROR_FAILURE);
    REQUIRE(refs == 1, "a failed finalisation left %llu references", (unsigned long long)refs);
    expect_log("EM", "a finalisation failing in its MODEL callback");
    aclrtStream s = NULL;
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtCreateStream(&s));
    CHECK(aclFinalizeReference(&refs));
    REQUIRE(refs == 0, "the last aclFinalizeReference left %llu", (unsigned long long)refs);
    expect_log("EMb", "the finalisation");
    EXPECT_RC(aclFinalizeReference(&refs), ACL_ERROR_REPEAT_FINALIZE);
    REQUIRE(refs == 0, "aclFinalizeReference with nothing to give back wrote %llu",
            (unsigned long long)refs);
    EXPECT_RC(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
    REQUIRE(g_logged == 0, "a repeated finalisation ran the callbacks");
    /* The stream went with the session (this call starts a new one, as any runtime call). */
    EXPECT_RC(aclrtDestroyStream(s), ACL_ERROR_RT_INVALID_HANDLE);

    /* A failing init callback: aclInit fails with its code, and the process is not
     * initialised; without a file, OP_EXECUTOR's does not run. A callback may make runtime
     * calls, but its aclInit is refused. */
    CHECK(aclInitCallbackRegister(ACL_REG_TYPE_OTHER, init_fails, NULL));
    g_want_cfg = "";
    EXPECT_RC(aclInit(NULL), ACL_ERROR_RT_PARAM_INVALID);
    expect_log("MDabF", "aclInit without a file, its last callback failing");
    g_fail_init = 0;
    CHECK(aclInitCallbackUnRegister(ACL_REG_TYPE_ACL_MODEL, init_cb));
    CHECK(aclInitCallbackRegister(ACL_REG_TYPE_ACL_MODEL, init_calls_runtime, NULL));
    CHECK(aclInit(NULL));
    expect_log("RDabF", "aclInit after a failed one");
    REQUIRE(g_count_in_cb > 0, "aclrtGetDeviceCount in an init callback counted no device");
    REQUIRE(g_nested_rc == ACL_ERROR_INVALID_PARAM, "aclInit inside an init callback "
            "returned %d", (int)g_nested_rc);
    /* aclFinalize runs the finalize callbacks whatever the count. */
    EXPECT_RC(aclInit(NULL), ACL_ERROR_REPEAT_INITIALIZE);
    CHECK(aclFinalizeCallbackUnRegister(ACL_REG_TYPE_ACL_MODEL, fini_model));
    EXPECT_RC(aclFinalizeCallbackUnRegister(ACL_REG_TYPE_ACL_MODEL, fini_model),
              ACL_ERROR_INTERNAL_ERROR);
    CHECK(aclFinalize());
    expect_log("Eb", "aclFinalize");
    printf("lifecycle: ok\n");
    return 0;
}
