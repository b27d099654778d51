/* allocator.c — registering a program's own allocator with a stream (acl/acl_rt_allocator.h)
 * through the C ABI, with the checks of CANN's ACL layer (hicann/runtime
 * src/acl/aclrt_impl/allocator.cpp): NULL descriptors, functions and streams, a registration
 * missing the object or a required function, and a stream with no registration are
 * ACL_ERROR_INVALID_PARAM; a registration keeps a copy of the descriptor (changing or
 * destroying the descriptor afterwards changes nothing registered), a second registration
 * replaces the first, the advise function is optional, and unregistering forgets it; a
 * destroyed descriptor is refused as a NULL one. The simulator never calls the functions
 * (it launches no operators that would need workspace memory): the counters prove it.
 * Exit 0 and "allocator: ok". */
#include "common.h"
#include "acl/acl_rt_allocator.h"

static int g_calls;
typedef struct {
    int id;
} MyAllocator;

static void *my_alloc(aclrtAllocator a, size_t size) {
    (void)a;
    (void)size;
    g_calls++;
    return NULL;
}
static void my_free(aclrtAllocator a, aclrtAllocatorBlock b) {
    (void)a;
    (void)b;
    g_calls++;
}
static void *my_advise(aclrtAllocator a, size_t size, aclrtAllocatorAddr addr) {
    (void)a;
    (void)size;
    (void)addr;
    g_calls++;
    return NULL;
}
static void *my_addr(aclrtAllocatorBlock b) {
    g_calls++;
    return b;
}
static void *other_alloc(aclrtAllocator a, size_t size) {
    (void)a;
    (void)size;
    g_calls++;
    return NULL;
}

int main(void) {
    g_role = "allocator";
    MyAllocator mine = {1}, theirs = {2};

    /* Descriptors work before aclInit, as CANN's (no runtime involved). */
    aclrtAllocatorDesc d = aclrtAllocatorCreateDesc();
    REQUIRE(d != NULL, "no descriptor: %s", recent_msg());
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream s1, s2;
    CHECK(aclrtCreateStream(&s1));
    CHECK(aclrtCreateStream(&s2));

    /* NULL checks of the setters. */
    EXPECT_RC(aclrtAllocatorSetObjToDesc(NULL, &mine), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtAllocatorSetObjToDesc(d, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtAllocatorSetAllocFuncToDesc(d, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtAllocatorSetFreeFuncToDesc(NULL, my_free), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtAllocatorSetAllocAdviseFuncToDesc(d, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtAllocatorSetGetAddrFromBlockFuncToDesc(d, NULL), ACL_ERROR_INVALID_PARAM);

    /* A registration needs the object and the alloc, free and get-address functions. */
    EXPECT_RC(aclrtAllocatorRegister(NULL, d), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtAllocatorRegister(s1, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtAllocatorRegister(s1, d), ACL_ERROR_INVALID_PARAM);
    expect_msg("allocatorDesc->obj", NULL);
    CHECK(aclrtAllocatorSetObjToDesc(d, &mine));
    CHECK(aclrtAllocatorSetAllocFuncToDesc(d, my_alloc));
    CHECK(aclrtAllocatorSetFreeFuncToDesc(d, my_free));
    EXPECT_RC(aclrtAllocatorRegister(s1, d), ACL_ERROR_INVALID_PARAM);
    expect_msg("getAddrFromBlockFunc", NULL);
    CHECK(aclrtAllocatorSetGetAddrFromBlockFuncToDesc(d, my_addr));
    CHECK(aclrtAllocatorRegister(s1, d)); /* no advise function: allowed */

    /* What the stream registered; the outputs after the descriptor may be NULL. */
    aclrtAllocatorDesc gd = NULL;
    aclrtAllocator ga = NULL;
    aclrtAllocatorAllocFunc gf = NULL;
    aclrtAllocatorFreeFunc gfr = NULL;
    aclrtAllocatorAllocAdviseFunc gadv = my_advise;
    aclrtAllocatorGetAddrFromBlockFunc gaddr = NULL;
    EXPECT_RC(aclrtAllocatorGetByStream(s1, NULL, &ga, &gf, &gfr, &gadv, &gaddr),
              ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtAllocatorGetByStream(NULL, &gd, &ga, &gf, &gfr, &gadv, &gaddr),
              ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtAllocatorGetByStream(s2, &gd, &ga, &gf, &gfr, &gadv, &gaddr),
              ACL_ERROR_INVALID_PARAM);
    expect_msg("not registered", NULL);
    CHECK(aclrtAllocatorGetByStream(s1, &gd, &ga, &gf, &gfr, &gadv, &gaddr));
    REQUIRE(gd == d && ga == (aclrtAllocator)&mine, "desc %p obj %p", gd, ga);
    REQUIRE(gf == my_alloc && gfr == my_free && gaddr == my_addr, "functions");
    REQUIRE(gadv == NULL, "advise %p, set none", (void *)gadv);
    CHECK(aclrtAllocatorGetByStream(s1, &gd, NULL, NULL, NULL, NULL, NULL));

    /* The registration is a copy: changing the descriptor afterwards changes nothing. */
    CHECK(aclrtAllocatorSetAllocFuncToDesc(d, other_alloc));
    CHECK(aclrtAllocatorSetAllocAdviseFuncToDesc(d, my_advise));
    CHECK(aclrtAllocatorGetByStream(s1, &gd, &ga, &gf, &gfr, &gadv, &gaddr));
    REQUIRE(gf == my_alloc && gadv == NULL, "the registration changed with its descriptor");

    /* A second descriptor on s2, and a re-registration of s1 that replaces the first. */
    aclrtAllocatorDesc d2 = aclrtAllocatorCreateDesc();
    REQUIRE(d2 != NULL && d2 != d, "second descriptor %p", d2);
    CHECK(aclrtAllocatorSetObjToDesc(d2, &theirs));
    CHECK(aclrtAllocatorSetAllocFuncToDesc(d2, other_alloc));
    CHECK(aclrtAllocatorSetFreeFuncToDesc(d2, my_free));
    CHECK(aclrtAllocatorSetGetAddrFromBlockFuncToDesc(d2, my_addr));
    CHECK(aclrtAllocatorRegister(s2, d2));
    CHECK(aclrtAllocatorRegister(s1, d));
    CHECK(aclrtAllocatorGetByStream(s1, &gd, &ga, &gf, &gfr, &gadv, &gaddr));
    REQUIRE(gd == d && gf == other_alloc && gadv == my_advise, "re-registration");
    CHECK(aclrtAllocatorGetByStream(s2, &gd, &ga, NULL, NULL, NULL, NULL));
    REQUIRE(gd == d2 && ga == (aclrtAllocator)&theirs, "s2's registration");

    /* Work on the streams runs without calling the allocator. */
    void *dev = NULL;
    int host[16] = {0};
    CHECK(aclrtMalloc(&dev, sizeof host, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemcpyAsync(dev, sizeof host, host, sizeof host, ACL_MEMCPY_HOST_TO_DEVICE, s1));
    CHECK(aclrtMemcpyAsync(host, sizeof host, dev, sizeof host, ACL_MEMCPY_DEVICE_TO_HOST, s2));
    CHECK(aclrtSynchronizeStream(s1));
    CHECK(aclrtSynchronizeStream(s2));
    CHECK(aclrtFree(dev));
    REQUIRE(g_calls == 0, "the simulator called the allocator %d times", g_calls);

    /* Destroyed descriptors are refused as NULL ones; a registration keeps its copy. */
    CHECK(aclrtAllocatorDestroyDesc(d2));
    EXPECT_RC(aclrtAllocatorDestroyDesc(d2), ACL_ERROR_INVALID_PARAM);
    expect_msg("not a live aclrtAllocatorDesc", NULL);
    EXPECT_RC(aclrtAllocatorSetObjToDesc(d2, &mine), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtAllocatorRegister(s1, d2), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtAllocatorDestroyDesc(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK(aclrtAllocatorGetByStream(s2, &gd, &ga, NULL, NULL, NULL, NULL));
    REQUIRE(ga == (aclrtAllocator)&theirs, "s2's copy after its descriptor's destroy");

    /* Unregistering forgets; twice is no error. */
    CHECK(aclrtAllocatorUnregister(s1));
    CHECK(aclrtAllocatorUnregister(s1));
    EXPECT_RC(aclrtAllocatorUnregister(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtAllocatorGetByStream(s1, &gd, NULL, NULL, NULL, NULL, NULL),
              ACL_ERROR_INVALID_PARAM);
    CHECK(aclrtAllocatorUnregister(s2));
    CHECK(aclrtAllocatorDestroyDesc(d));

    CHECK(aclrtDestroyStream(s1));
    CHECK(aclrtDestroyStream(s2));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("allocator: ok\n");
    return 0;
}
