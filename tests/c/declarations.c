/* declarations.c — every function the installed headers declare, used from C and (compiled
 * with -x c++) from C++. tests/tests/c_abi.rs writes declarations.inc, one ACL_DECL(name) per
 * function it read from the headers, and builds this file against the library. Linking
 * proves each function is exported under its C name; at run time each address must be the one
 * dlsym finds, the count must be the one the test expects (argv[1]), and a few functions the
 * simulator does not implement are called with real arguments — a plain one, one returning a
 * pointer and, in C++, an acl_rt_api.h overload — each answering 207000 (or NULL) with a
 * message naming it — and the variadic aclAppLog (implemented in C) is called with arguments of
 * each kind. Exit 0 when every check holds. */
#include "common.h"

#include <dlfcn.h>

#include "acl/acl_rt_memory_soma.h"
#include "acl/aclnsim.h"

typedef void (*any_fn)(void);

struct decl {
    const char *name;
    any_fn addr;
};

#ifdef __cplusplus
#define AS_ANY(f) reinterpret_cast<any_fn>(&f)
#else
#define AS_ANY(f) ((any_fn)(f))
#endif

/* The table names the deprecated functions too; that CANN's deprecations are marked is checked
 * by c_abi.rs on its own, so the warning is silenced here only. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#define ACL_DECL(f) {#f, AS_ANY(f)},
static const struct decl g_decls[] = {
#include "declarations.inc"
};
#pragma GCC diagnostic pop

/* After the table: in C++ its overloads would make `&aclrtCreateStream` ambiguous there. */
#include "acl/acl_rt_api.h"

static void require_named(const char *fn) {
    const char *m = recent_msg();
    REQUIRE(strstr(m, fn) != NULL && strstr(m, "207000") != NULL,
            "the message does not name %s and 207000: %s", fn, m);
}

int main(int argc, char **argv) {
    g_role = "declarations";
    size_t n = sizeof g_decls / sizeof g_decls[0];
    REQUIRE(argc == 2, "usage: declarations <number of declared functions>");
    REQUIRE(n == (size_t)strtoul(argv[1], NULL, 10), "%zu functions in the table, %s expected",
            n, argv[1]);
    for (size_t i = 0; i < n; i++) {
        void *found = dlsym(RTLD_DEFAULT, g_decls[i].name);
        REQUIRE(found != NULL, "dlsym cannot find %s", g_decls[i].name);
        REQUIRE((any_fn)found == g_decls[i].addr, "%s: dlsym and the linker disagree",
                g_decls[i].name);
    }

    aclError ret = aclrtSetGroup(0);
    REQUIRE(ret == ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "aclrtSetGroup returned %d", (int)ret);
    require_named("aclrtSetGroup");
    REQUIRE(aclrtCreateGroupInfo() == NULL, "aclrtCreateGroupInfo returned a pointer");
    require_named("aclrtCreateGroupInfo");
    aclAppLog(ACL_INFO, __func__, __FILE__, __LINE__, "%s %d %f", "variadic", 7, 1.5);
#ifdef __cplusplus
    /* The header's typed overload goes through aclrtMallocWithCfg: without a current device
     * it answers 107002, with one it allocates. */
    float *typed = NULL;
    ret = aclrtMalloc(&typed, 16);
    REQUIRE(ret == ACL_ERROR_RT_CONTEXT_NULL, "aclrtMalloc<float> without a device returned %d",
            (int)ret);
    REQUIRE(aclrtSetDevice(0) == ACL_SUCCESS, "aclrtSetDevice(0) failed");
    ret = aclrtMalloc(&typed, 16);
    REQUIRE(ret == ACL_SUCCESS && typed != NULL, "aclrtMalloc<float> returned %d", (int)ret);
    REQUIRE(aclrtMemset(typed, 16, 0x5a, 16) == ACL_SUCCESS, "aclrtMemset on it failed");
    REQUIRE(aclrtFree(typed) == ACL_SUCCESS, "aclrtFree of it failed");
    REQUIRE(aclrtResetDevice(0) == ACL_SUCCESS, "aclrtResetDevice(0) failed");
#endif
    printf("[declarations] %zu functions exported and found by dlsym\n", n);
    return 0;
}
