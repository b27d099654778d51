/* ipc_memory.c — IPC memory through the C ABI, one run per SoC of SPEC §4:
 *   - argument checks in CANN's order (ACL layer NULLs → ACL_ERROR_INVALID_PARAM; runtime
 *     argument checks → ACL_ERROR_RT_PARAM_INVALID, the inter-server call and set-attr check
 *     their NULLs there too);
 *   - ACL_ERROR_RT_FEATURE_NOT_SUPPORT for every call on the SoCs CANN documents without IPC
 *     memory (Ascend310B, IPV350), and for aclrtIpcMemImportPidInterServer /
 *     aclrtIpcMemSetAttr off Ascend910_93;
 *   - on the others, a second process (forked before aclInit, on device 1): refused before
 *     it is whitelisted (207006), refused without peer access (207006, also once access was
 *     enabled and disabled again: aclrtDeviceDisablePeerAccess), then it maps the same
 *     bytes, is held to the exported range and to device-to-device copies, writes back, and
 *     closes; the owner sees the write, withdraws the export and frees.
 * usage: ipc_memory <exchange dir> <SoC name>. Exit 0 and "ipc_memory <SoC>: ok". */
#include <sys/wait.h>

#include "common.h"

enum { SIZE = 8192 };

static const char *g_dir;

/* The importer: device 1. */
static int importer(void) {
    g_role = "importer";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(1));
    int32_t me = 0;
    CHECK(aclrtDeviceGetBareTgid(&me));
    /* Its PID and the SuperPOD device id of the device it imports on, for the owner's entry. */
    int64_t sdid = 0;
    CHECK(aclrtGetDeviceInfo(1, ACL_DEV_ATTR_SUPER_POD_DEVICE_ID, &sdid));
    char text[64], key[80];
    snprintf(text, sizeof text, "%d %lld", (int)me, (long long)sdid);
    put_file(g_dir, "pid", text, strlen(text));
    get_file(g_dir, "key", key, sizeof key, 30000);
    void *p = NULL;
    EXPECT_RC(aclrtIpcMemImportByKey(&p, key, 0), ACL_ERROR_RT_NO_PERMISSION);
    REQUIRE(strstr(recent_msg(), "not whitelisted") != NULL, "%s", recent_msg());
    put_file(g_dir, "refused", "1", 1);
    get_file(g_dir, "whitelisted", text, sizeof text, 30000);
    /* Peer access enabled and disabled again is no peer access. */
    CHECK(aclrtDeviceEnablePeerAccess(0, 0));
    CHECK(aclrtDeviceDisablePeerAccess(0));
    EXPECT_RC(aclrtIpcMemImportByKey(&p, key, 0), ACL_ERROR_RT_NO_PERMISSION);
    REQUIRE(strstr(recent_msg(), "peer access") != NULL, "%s", recent_msg());
    CHECK(aclrtIpcMemImportByKey(&p, key, ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS));
    EXPECT_RC(aclrtIpcMemImportByKey(&p, key, ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS),
              ACL_ERROR_RT_PARAM_INVALID);
    unsigned char buf[SIZE / 2];
    /* Memory of device 0 imported onto device 1: device-to-device copies only. */
    EXPECT_RC(aclrtMemcpy(buf, sizeof buf, p, sizeof buf, ACL_MEMCPY_DEVICE_TO_HOST),
              ACL_ERROR_RT_PARAM_INVALID);
    void *mine = NULL;
    CHECK(aclrtMalloc(&mine, SIZE, ACL_MEM_MALLOC_HUGE_FIRST));
    aclrtStream s;
    CHECK(aclrtCreateStream(&s));
    CHECK(aclrtMemcpyAsync(mine, SIZE, p, SIZE / 2, ACL_MEMCPY_DEVICE_TO_DEVICE, s));
    CHECK(aclrtSynchronizeStream(s));
    CHECK(aclrtMemcpy(buf, sizeof buf, mine, sizeof buf, ACL_MEMCPY_DEVICE_TO_HOST));
    for (int i = 0; i < SIZE / 2; i++) {
        REQUIRE(buf[i] == (unsigned char)(i * 3 + 1), "byte %d is %d", i, buf[i]);
    }
    /* The exported range is the second half: one byte more is refused. */
    EXPECT_RC(aclrtMemcpyAsync(p, SIZE, mine, SIZE / 2 + 1, ACL_MEMCPY_DEVICE_TO_DEVICE, s),
              ACL_ERROR_RT_PARAM_INVALID);
    REQUIRE(strstr(recent_msg(), "1 bytes past") != NULL, "%s", recent_msg());
    CHECK(aclrtMemset(mine, SIZE, 0x5a, 16));
    CHECK(aclrtMemcpyAsync(p, SIZE / 2, mine, 16, ACL_MEMCPY_DEVICE_TO_DEVICE, s));
    CHECK(aclrtSynchronizeStream(s));
    CHECK(aclrtIpcMemClose(key));
    EXPECT_RC(aclrtMemcpyAsync(p, SIZE / 2, mine, 16, ACL_MEMCPY_DEVICE_TO_DEVICE, s),
              ACL_ERROR_RT_PARAM_INVALID);
    put_file(g_dir, "closed", "1", 1);
    CHECK(aclrtFree(mine));
    CHECK(aclrtDestroyStream(s));
    CHECK(aclFinalize());
    return 0;
}

int main(int argc, char **argv) {
    REQUIRE(argc == 3, "usage: ipc_memory <exchange dir> <SoC>");
    g_dir = argv[1];
    const char *soc = argv[2];
    const int has_ipc = strcmp(soc, "Ascend310B") != 0 && strcmp(soc, "IPV350") != 0;
    const int a3 = strcmp(soc, "Ascend910_93") == 0;
    pid_t child = -1;
    if (has_ipc) {
        fflush(stdout);
        child = fork();
        REQUIRE(child >= 0, "fork: %s", strerror(errno));
        if (child == 0) _exit(importer());
    }
    g_role = "owner";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    void *d = NULL;
    CHECK(aclrtMalloc(&d, SIZE, ACL_MEM_MALLOC_HUGE_FIRST));
    char key[65];
    int32_t pid = 1;
    aclrtServerPid sp = {0, &pid, 1}, sp_null = {0, NULL, 1};

    /* Argument checks, on every SoC. */
    EXPECT_RC(aclrtIpcMemGetExportKey(NULL, SIZE, key, sizeof key, 0), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtIpcMemGetExportKey(d, SIZE, NULL, sizeof key, 0), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtIpcMemGetExportKey(d, 0, key, sizeof key, 0), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtIpcMemGetExportKey(d, SIZE, key, 0, 0), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtIpcMemGetExportKey(d, SIZE, key, sizeof key, 2), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtIpcMemSetImportPid(NULL, &pid, 1), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtIpcMemSetImportPid("k", NULL, 1), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtIpcMemSetImportPid("k", &pid, 0), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtIpcMemImportPidInterServer(NULL, &sp, 1), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtIpcMemImportPidInterServer("k", NULL, 1), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtIpcMemImportPidInterServer("k", &sp, 0), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtIpcMemImportPidInterServer("k", &sp_null, 1), ACL_ERROR_RT_PARAM_INVALID);
    void *p = NULL;
    EXPECT_RC(aclrtIpcMemImportByKey(NULL, "k", 0), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtIpcMemImportByKey(&p, NULL, 0), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtIpcMemImportByKey(&p, "k", 2), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtIpcMemClose(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtIpcMemSetAttr(NULL, ACL_RT_IPC_MEM_ATTR_ACCESS_LINK, 0),
              ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtIpcMemSetAttr("k", (aclrtIpcMemAttrType)1, 0), ACL_ERROR_RT_PARAM_INVALID);
    /* acl_rt.h defines link values 0..3; the runtime refuses 4 and up before the SoC. */
    EXPECT_RC(aclrtIpcMemSetAttr("k", ACL_RT_IPC_MEM_ATTR_ACCESS_LINK, 4),
              ACL_ERROR_RT_PARAM_INVALID);

    if (!has_ipc) {
        const char *fake = "an2-0000000000000000-00000000000000000000000000000000-00000000";
        EXPECT_RC(aclrtIpcMemGetExportKey(d, SIZE, key, sizeof key, 0),
                  ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        EXPECT_RC(aclrtIpcMemSetImportPid(fake, &pid, 1), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        EXPECT_RC(aclrtIpcMemImportPidInterServer(fake, &sp, 1), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        EXPECT_RC(aclrtIpcMemImportByKey(&p, fake, 0), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        EXPECT_RC(aclrtIpcMemClose(fake), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        EXPECT_RC(aclrtIpcMemSetAttr(fake, ACL_RT_IPC_MEM_ATTR_ACCESS_LINK, 0),
                  ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        EXPECT_RC(aclrtIpcMemSetAttr(fake, ACL_RT_IPC_MEM_ATTR_ACCESS_LINK,
                                     ACL_RT_IPC_MEM_ATTR_ACCESS_LINK_UB_MULTI_PORT_PATH),
                  ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        CHECK(aclrtFree(d));
        CHECK(aclFinalize());
        printf("ipc_memory %s: ok\n", soc);
        return 0;
    }

    /* Export the second half, filled with a pattern. */
    unsigned char pattern[SIZE];
    for (int i = 0; i < SIZE; i++) pattern[i] = (unsigned char)((i - SIZE / 2) * 3 + 1);
    CHECK(aclrtMemcpy(d, SIZE, pattern, SIZE, ACL_MEMCPY_HOST_TO_DEVICE));
    char *half = (char *)d + SIZE / 2;
    EXPECT_RC(aclrtIpcMemGetExportKey(half, SIZE / 2, key, 64, 0), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtIpcMemGetExportKey(half, SIZE, key, sizeof key, 0), ACL_ERROR_RT_PARAM_INVALID);
    REQUIRE(strstr(recent_msg(), "bytes past") != NULL, "%s", recent_msg());
    CHECK(aclrtIpcMemGetExportKey(half, SIZE / 2, key, sizeof key, 0));
    REQUIRE(strlen(key) == 64, "key %s", key);
    char again[65];
    CHECK(aclrtIpcMemGetExportKey(half, SIZE / 2, again, sizeof again, 0));
    REQUIRE(strcmp(key, again) == 0, "a second export of the range gave another key");
    EXPECT_RC(aclrtIpcMemSetImportPid("not a key", &pid, 1), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtIpcMemImportByKey(&p, key, 0), ACL_ERROR_RT_PARAM_INVALID); /* our own */
    if (a3) {
        CHECK(aclrtIpcMemSetAttr(key, ACL_RT_IPC_MEM_ATTR_ACCESS_LINK,
                                 ACL_RT_IPC_MEM_ATTR_ACCESS_LINK_HCCS));
        /* The UB paths are Ascend950's links (CANN's rt_inner_mem.h). */
        EXPECT_RC(aclrtIpcMemSetAttr(key, ACL_RT_IPC_MEM_ATTR_ACCESS_LINK,
                                     ACL_RT_IPC_MEM_ATTR_ACCESS_LINK_UB_ONE_PORT_PATH),
                  ACL_ERROR_RT_LINK_TYPE_NOT_SUPPORTED);
    } else {
        EXPECT_RC(aclrtIpcMemSetAttr(key, ACL_RT_IPC_MEM_ATTR_ACCESS_LINK, 0),
                  ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        EXPECT_RC(aclrtIpcMemSetAttr(key, ACL_RT_IPC_MEM_ATTR_ACCESS_LINK,
                                     ACL_RT_IPC_MEM_ATTR_ACCESS_LINK_UB_ONE_PORT_PATH),
                  ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        EXPECT_RC(aclrtIpcMemImportPidInterServer(key, &sp, 1), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    }
    put_file(g_dir, "key", key, strlen(key));
    char text[64];
    get_file(g_dir, "pid", text, sizeof text, 30000);
    int importer_pid_i = 0;
    long long importer_sdid = 0;
    REQUIRE(sscanf(text, "%d %lld", &importer_pid_i, &importer_sdid) == 2, "pid file '%s'", text);
    int32_t importer_pid = importer_pid_i;
    get_file(g_dir, "refused", text, sizeof text, 30000);
    if (a3) {
        aclrtServerPid entry = {(uint32_t)importer_sdid, &importer_pid, 1};
        CHECK(aclrtIpcMemImportPidInterServer(key, &entry, 1));
    } else {
        CHECK(aclrtIpcMemSetImportPid(key, &importer_pid, 1));
    }
    put_file(g_dir, "whitelisted", "1", 1);
    get_file(g_dir, "closed", text, sizeof text, 30000);
    unsigned char back[16];
    CHECK(aclrtMemcpy(back, sizeof back, half, sizeof back, ACL_MEMCPY_DEVICE_TO_HOST));
    for (int i = 0; i < 16; i++) REQUIRE(back[i] == 0x5a, "the importer's write: %d", back[i]);
    CHECK(aclrtIpcMemClose(key));
    EXPECT_RC(aclrtIpcMemSetImportPid(key, &importer_pid, 1), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclrtFree(d));
    int st = 0;
    REQUIRE(waitpid(child, &st, 0) == child, "waitpid");
    REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the importer failed (status %#x)", st);
    CHECK(aclFinalize());
    printf("ipc_memory %s: ok\n", soc);
    return 0;
}
