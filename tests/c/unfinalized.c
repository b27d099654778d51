/* unfinalized.c — a program that ends without aclFinalize, its device memory still mapped, as
 * one whose check failed does (common.h's fail_exit): it allocates device memory (plain and
 * managed) on device 0, copies into it, forks a child that ends the same way, then returns
 * from main. Under valgrind's memcheck, the leak check at the end of each process must not
 * read the device file's unused arena, whose every read page would be given memory in
 * /dev/shm (c_abi checks the file's backed size after the run).
 * Exit 0 and "unfinalized: ok". */
#include "common.h"
#include <sys/wait.h>

int main(void) {
    g_role = "unfinalized";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    void *d = NULL, *m = NULL;
    CHECK(aclrtMalloc(&d, 1u << 20, ACL_MEM_MALLOC_HUGE_FIRST));
    char buf[4096];
    memset(buf, 0x5A, sizeof buf);
    CHECK(aclrtMemcpy(d, sizeof buf, buf, sizeof buf, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtMemAllocManaged(&m, 2u << 20, ACL_RT_MEM_ATTACH_GLOBAL));
    memset(m, 0x33, 4096);
    fflush(stdout);
    pid_t child = fork();
    REQUIRE(child >= 0, "fork: %s", strerror(errno));
    if (child == 0) {
        /* The child ends as a failed check does, its inherited mappings in place. */
        _exit(0);
    }
    int st = 0;
    REQUIRE(waitpid(child, &st, 0) == child, "waitpid: %s", strerror(errno));
    REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
    printf("unfinalized: ok\n");
    return 0;
}
