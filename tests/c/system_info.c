/* system_info.c — the process- and device-level queries of hicann/runtime's quickstart samples
 * (0_quickstart/1_error_handling, 2_system_info).
 * aclrtGetErrorVerbose: a simulated device has no fault, so ACL_RT_NO_ERROR, tryRepair and
 * hasDetail 0 (hicann/runtime src/runtime/api/impl/api_impl.cc, ApiImpl::GetErrorVerbose).
 * aclsysGetVersionStr / aclsysGetVersionNum as CANN answers them (hicann/runtime
 * src/acl/aclrt_impl/acl.cpp: the package's $ASCEND_HOME_PATH/share/info/<pkg>/version.info,
 * its "Version=" line, the '-'/'_' alternative spelling, and CalculateVersionNum's arithmetic),
 * as hicann/runtime's sample 0_quickstart/2_system_info calls them after aclInit; the deprecated
 * aclsysGetCANNVersion (acl.cpp: the same files, ConvertVersion and FillinPackageVersion's parts).
 * usage: system_info <scratch dir>. Exit 0 and "system_info: ok". */
#include "common.h"

#include <sys/stat.h>

static const char *g_dir;

/* Installs package `pkg` with a version.info holding `text` under g_dir/share/info. */
static void install(const char *pkg, const char *text) {
    char path[2048];
    snprintf(path, sizeof path, "%s/share", g_dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/share/info", g_dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/share/info/%s", g_dir, pkg);
    mkdir(path, 0755);
    put_file(path, "version.info", text, strlen(text));
}

int main(int argc, char **argv) {
    g_role = "system_info";
    REQUIRE(argc == 2, "usage: system_info <scratch dir>");
    g_dir = argv[1];
    char ver[ACL_PKG_VERSION_MAX_SIZE];
    int32_t num = -1;

    unsetenv("ASCEND_HOME_PATH");
    CHECK(aclInit(NULL));
    /* NULL checks: the output first, then the name. */
    EXPECT_RC(aclsysGetVersionStr((char *)"runtime", NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclsysGetVersionStr(NULL, ver), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclsysGetVersionNum((char *)"runtime", NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclsysGetVersionNum(NULL, &num), ACL_ERROR_INVALID_PARAM);
    /* No ASCEND_HOME_PATH, then one that does not exist, then no such package. */
    EXPECT_RC(aclsysGetVersionStr((char *)"runtime", ver), ACL_ERROR_INVALID_FILE);
    char missing[4096];
    snprintf(missing, sizeof missing, "%s/no-such-dir", g_dir);
    setenv("ASCEND_HOME_PATH", missing, 1);
    EXPECT_RC(aclsysGetVersionNum((char *)"runtime", &num), ACL_ERROR_INVALID_FILE);
    setenv("ASCEND_HOME_PATH", g_dir, 1);
    EXPECT_RC(aclsysGetVersionStr((char *)"runtime", ver), ACL_ERROR_INVALID_FILE);

    install("runtime", "Version=8.5.0\nversion_dir=8.5\n");
    memset(ver, 'x', sizeof ver);
    CHECK(aclsysGetVersionStr((char *)"runtime", ver));
    REQUIRE(strcmp(ver, "8.5.0") == 0, "runtime version \"%.20s\"", ver);
    CHECK(aclsysGetVersionNum((char *)"runtime", &num));
    REQUIRE(num == 80500000, "runtime version number %d", (int)num);

    /* A pre-release, found under the other spelling of the name, trimmed. */
    install("opp_kernel", "package_name=opp_kernel\nVersion=  8.3.0.alpha002 \n");
    CHECK(aclsysGetVersionStr((char *)"opp-kernel", ver));
    REQUIRE(strcmp(ver, "8.3.0.alpha002") == 0, "opp-kernel version \"%.20s\"", ver);
    CHECK(aclsysGetVersionNum((char *)"opp-kernel", &num));
    REQUIRE(num == 80300000 - 300 + 2, "opp-kernel version number %d", (int)num);
    install("rc", "Version=9.0.0-rc1\n");
    CHECK(aclsysGetVersionNum((char *)"rc", &num));
    REQUIRE(num == 90000000 - 100 + 1, "rc version number %d", (int)num);

    /* A file without a version; a version that is no number (the string still reads). */
    install("empty", "Version=\n");
    EXPECT_RC(aclsysGetVersionStr((char *)"empty", ver), ACL_ERROR_INVALID_FILE);
    install("odd", "Version=8.0.RC1\n");
    CHECK(aclsysGetVersionStr((char *)"odd", ver));
    REQUIRE(strcmp(ver, "8.0.RC1") == 0, "odd version \"%.20s\"", ver);
    EXPECT_RC(aclsysGetVersionNum((char *)"odd", &num), ACL_ERROR_INTERNAL_ERROR);
    /* Too long for the caller's ACL_PKG_VERSION_MAX_SIZE bytes. */
    char longv[300] = "Version=1.2.3";
    memset(longv + strlen(longv), '4', 200);
    longv[strlen("Version=1.2.3") + 200] = '\0';
    install("long", longv);
    EXPECT_RC(aclsysGetVersionStr((char *)"long", ver), ACL_ERROR_INTERNAL_ERROR);
    /* The deprecated aclsysGetCANNVersion: the same files, the version split into parts. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    aclCANNPackageVersion pv;
    EXPECT_RC(aclsysGetCANNVersion(ACL_PKG_NAME_CANN, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclsysGetCANNVersion((aclCANNPackageName)99, &pv), ACL_ERROR_INVALID_PARAM);
    memset(&pv, 'x', sizeof pv);
    CHECK(aclsysGetCANNVersion(ACL_PKG_NAME_CANN, &pv));
    REQUIRE(strcmp(pv.version, "8.5.0") == 0 && strcmp(pv.majorVersion, "8") == 0 &&
                strcmp(pv.minorVersion, "5") == 0 && strcmp(pv.releaseVersion, "0") == 0 &&
                strcmp(pv.patchVersion, "0") == 0 && pv.reserved[0] == 0,
            "runtime parts \"%.20s\" \"%.8s\" \"%.8s\" \"%.8s\" \"%.8s\"", pv.version,
            pv.majorVersion, pv.minorVersion, pv.releaseVersion, pv.patchVersion);
    install("hccl", "Version=8.0.RC1-beta.1\n");
    CHECK(aclsysGetCANNVersion(ACL_PKG_NAME_HCCL, &pv));
    REQUIRE(strcmp(pv.version, "8.0.RC1.beta1") == 0 && strcmp(pv.releaseVersion, "RC1") == 0 &&
                strcmp(pv.patchVersion, "beta1") == 0,
            "hccl parts \"%.20s\" \"%.8s\" \"%.8s\"", pv.version, pv.releaseVersion,
            pv.patchVersion);
    install("ops_legacy", "Version=7\n"); /* found under the '_' spelling; one part only */
    EXPECT_RC(aclsysGetCANNVersion(ACL_PKG_NAME_OPP_KERNEL, &pv), ACL_ERROR_INVALID_FILE);
    EXPECT_RC(aclsysGetCANNVersion(ACL_PKG_NAME_TOOLKIT, &pv), ACL_ERROR_INVALID_FILE);
#pragma GCC diagnostic pop

    /* These are the ACL layer's failures: the runtime's last error stays clear. */
    EXPECT_RC(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), ACL_SUCCESS);

    /* aclrtGetErrorVerbose on a healthy device; its NULL and device checks. */
    aclrtErrorInfo info;
    memset(&info, 0xff, sizeof info);
    CHECK(aclrtGetErrorVerbose(0, &info));
    REQUIRE(info.errorType == ACL_RT_NO_ERROR && info.tryRepair == 0 && info.hasDetail == 0 &&
                info.detail.aicoreErrType == 0,
            "error info type %d tryRepair %u hasDetail %u aicore %d", (int)info.errorType,
            (unsigned)info.tryRepair, (unsigned)info.hasDetail, (int)info.detail.aicoreErrType);
    EXPECT_RC(aclrtGetErrorVerbose(0, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtGetErrorVerbose(4096, &info), ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT_RC(aclrtGetErrorVerbose(-1, &info), ACL_ERROR_RT_INVALID_DEVICEID);
    /* A runtime failure is the thread's last error. */
    EXPECT_RC(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT_RC(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), ACL_SUCCESS);

    CHECK(aclFinalize());
    printf("system_info: ok\n");
    return 0;
}
