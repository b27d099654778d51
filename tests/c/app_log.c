/* app_log.c — aclAppLog (ACL_APP_LOG), after hicann/runtime src/acl/aclrt_impl/log.cpp: the
 * message is formatted as printf does (integers, doubles, strings), written as one line to
 * stderr when its level is at least ASCEND_GLOBAL_LOG_LEVEL's (tests/tests/c_abi.rs reads the
 * lines); NULL format, function or file writes nothing; a message longer than 1,023 bytes is
 * cut and marked "...[truncated]". Works before aclInit and in a session.
 *
 * usage: app_log. Exit 0 and "app_log: ok". */
#include "common.h"

int main(void) {
    g_role = "app_log";
    aclAppLog(ACL_ERROR, "early", "app_log.c", 1, "before aclInit %d", 1);
    CHECK(aclInit(NULL));
    ACL_APP_LOG(ACL_DEBUG, "debug %s", "line");
    ACL_APP_LOG(ACL_INFO, "info %d %.2f %s", 42, 2.5, "x");
    ACL_APP_LOG(ACL_WARNING, "warning %lu", (unsigned long)7);
    aclAppLog(ACL_ERROR, "func", "file.c", 99, "error %d%%", 100);
    aclAppLog(ACL_ERROR, NULL, "file.c", 1, "no function");
    aclAppLog(ACL_ERROR, "func", NULL, 1, "no file");
    aclAppLog(ACL_ERROR, "func", "file.c", 1, NULL);
    aclAppLog((aclLogLevel)7, "func", "file.c", 1, "unknown level");
    static char big[3000];
    memset(big, 'y', sizeof big - 1);
    aclAppLog(ACL_ERROR, "func", "file.c", 2, "%s", big);
    CHECK(aclFinalize());
    printf("app_log: ok\n");
    return 0;
}
