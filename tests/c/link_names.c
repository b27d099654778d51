/* link_names.c — CANN programs link the runtime as libascendcl.so (its long-standing name) or
 * as libacl_rt.so (the name its API reference gives the acl_rt.h functions; its newer samples
 * link that one), and a framework may dlopen the other name inside the same process. The
 * simulator installs libacl_rt.so as a link to libascendcl.so. Built by tests/tests/c_abi.rs
 * linked with -lacl_rt only. Checks that the program runs a notify round trip, and that a
 * dlopen of libascendcl.so gives the library already loaded: one copy, one session (a second
 * copy would have aclInit state and tables of its own). Exit 0 when every check holds. */
#include "common.h"

#include <dlfcn.h>
#include <link.h>

/* Loaded objects whose file name ends in one of the runtime's two names. */
static int count_runtime_objects(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    const char *slash = strrchr(name, '/');
    const char *base = slash ? slash + 1 : name;
    if (strcmp(base, "libascendcl.so") == 0 || strcmp(base, "libacl_rt.so") == 0) {
        ++*(int *)data;
    }
    return 0;
}

static int runtime_objects(void) {
    int n = 0;
    dl_iterate_phdr(count_runtime_objects, &n);
    return n;
}

int main(void) {
    g_role = "link_names";

    REQUIRE(runtime_objects() == 1, "%d runtime libraries loaded at start", runtime_objects());
    Dl_info info;
    REQUIRE(dladdr((void *)&aclInit, &info) != 0 && info.dli_fname != NULL,
            "dladdr(aclInit) failed");
    REQUIRE(strstr(info.dli_fname, "libacl_rt.so") != NULL,
            "aclInit comes from %s, not libacl_rt.so", info.dli_fname);

    /* A framework that opens the other name at run time gets the same library. */
    void *cl = dlopen("libascendcl.so", RTLD_NOW);
    REQUIRE(cl != NULL, "dlopen(libascendcl.so): %s", dlerror());
    void *init_cl = dlsym(cl, "aclInit");
    REQUIRE(init_cl == (void *)&aclInit,
            "libascendcl.so's aclInit (%p) is not the linked one (%p): two copies loaded",
            init_cl, (void *)&aclInit);
    REQUIRE(runtime_objects() == 1, "%d runtime libraries loaded after dlopen",
            runtime_objects());

    /* One session: aclInit through one name is seen through the other. */
    CHECK(aclInit(NULL));
    aclError (*init_again)(const char *) = (aclError(*)(const char *))init_cl;
    aclError e = init_again(NULL);
    REQUIRE(e == ACL_ERROR_REPEAT_INITIALIZE, "aclInit through libascendcl.so returned %d",
            (int)e);
    CHECK(aclrtSetDevice(0));
    aclrtStream s = NULL;
    CHECK(aclrtCreateStream(&s));
    aclrtNotify n = NULL;
    CHECK(aclrtCreateNotify(&n, 0));
    CHECK(aclrtRecordNotify(n, s));
    CHECK(aclrtWaitAndResetNotify(n, s, 5));
    CHECK(aclrtSynchronizeStreamWithTimeout(s, 5000));
    CHECK(aclrtDestroyNotify(n));
    CHECK(aclrtDestroyStream(s));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    dlclose(cl);
    printf("link_names: ok (linked as libacl_rt.so; libascendcl.so is the same library)\n");
    return 0;
}
