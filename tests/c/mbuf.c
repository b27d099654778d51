/* mbuf.c — the shared-buffer calls (aclrtAllocBuf ... aclrtGetBufFromChain) through the C ABI:
 * - CANN's argument checks (aclrt*BufImpl, src/acl/aclrt_impl/memory.cpp): NULL pointers and
 *   size 0 → ACL_ERROR_INVALID_PARAM; for the user-data calls offset + size above 96 first,
 *   before the NULL checks; a size above 4 GiB → ACL_ERROR_RT_PARAM_INVALID.
 * - the data region is device memory: bytes copied in with aclrtMemcpy come back out, it
 *   counts in aclrtGetMemInfo, and the host cannot dereference it (not tested: it faults);
 * - a copied reference names the same bytes and keeps them alive after the original is freed;
 *   the memory is given back only with the last reference;
 * - the valid-data length (0 at first, at most the region's size) and the 96 bytes of private
 *   data, copied to the reference;
 * - chains: the head counts, index 0 is the head, past the end is refused, a member is in no
 *   second chain and is freed with its head only;
 * - a freed, forged or other-kind handle → ACL_ERROR_RT_INVALID_HANDLE, never a crash;
 * - aclrtFree / aclrtFreeWithDevSync of a data region → ACL_ERROR_RT_PARAM_INVALID, as of any
 *   address aclrtMalloc did not give (the driver's buffers are not devmm allocations).
 * Exit 0 and "mbuf: ok" when every check holds. */
#include "common.h"

static size_t free_mem(void) {
    size_t f = 0, t = 0;
    CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &f, &t));
    return f;
}

int main(void) {
    g_role = "mbuf";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));

    /* CANN's checks, in its order. */
    aclrtMbuf b = NULL;
    EXPECT_RC(aclrtAllocBuf(NULL, 64), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtAllocBuf(&b, 0), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtAllocBuf(&b, ((size_t)4 << 30) + 1), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("4 GiB", NULL);
    EXPECT_RC(aclrtFreeBuf(NULL), ACL_ERROR_INVALID_PARAM);
    unsigned char user[96];
    EXPECT_RC(aclrtSetBufUserData(NULL, NULL, 90, 7), ACL_ERROR_INVALID_PARAM);
    expect_msg("greater than 96", NULL);
    EXPECT_RC(aclrtGetBufUserData(NULL, user, 8, 0), ACL_ERROR_INVALID_PARAM);
    expect_msg("`buf` is NULL", NULL);

    /* A buffer's data region is device memory, in aclrtGetMemInfo. */
    const size_t before = free_mem();
    const size_t size = 1 << 20;
    CHECK(aclrtAllocBuf(&b, size));
    REQUIRE(b != NULL, "no buffer");
    const size_t during = free_mem();
    REQUIRE(before - during >= size, "free memory %zu -> %zu for a %zu-byte buffer", before,
            during, size);
    void *data = NULL;
    size_t got = 0;
    EXPECT_RC(aclrtGetBufData(b, NULL, &got), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtGetBufData(b, &data, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK(aclrtGetBufData(b, &data, &got));
    REQUIRE(data != NULL && got == size, "data %p size %zu", data, got);
    aclrtPtrAttributes a;
    CHECK(aclrtPointerGetAttributes(data, &a));
    REQUIRE(a.location.type == ACL_MEM_LOCATION_TYPE_DEVICE, "location %d", (int)a.location.type);
    unsigned char *host = malloc(size), *back = malloc(size);
    REQUIRE(host && back, "malloc");
    for (size_t i = 0; i < size; i++) host[i] = (unsigned char)(i * 7 + 3);
    CHECK(aclrtMemcpy(data, size, host, size, ACL_MEMCPY_HOST_TO_DEVICE));

    /* Valid-data length: 0 until set, at most the size. */
    size_t len = 99;
    CHECK(aclrtGetBufDataLen(b, &len));
    REQUIRE(len == 0, "initial length %zu", len);
    EXPECT_RC(aclrtSetBufDataLen(b, size + 1), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclrtSetBufDataLen(b, 4000));
    CHECK(aclrtGetBufDataLen(b, &len));
    REQUIRE(len == 4000, "length %zu", len);

    /* Private data: 96 bytes, written and read at offsets. */
    for (int i = 0; i < 96; i++) user[i] = (unsigned char)(200 - i);
    CHECK(aclrtSetBufUserData(b, user, 96, 0));
    CHECK(aclrtSetBufUserData(b, "abcd", 4, 92));
    EXPECT_RC(aclrtSetBufUserData(b, user, 5, 92), ACL_ERROR_INVALID_PARAM);
    unsigned char out[96];
    memset(out, 0, sizeof out);
    CHECK(aclrtGetBufUserData(b, out, 10, 3));
    REQUIRE(memcmp(out, user + 3, 10) == 0, "user data at 3");
    CHECK(aclrtGetBufUserData(b, out, 4, 92));
    REQUIRE(memcmp(out, "abcd", 4) == 0, "user data at 92");

    /* The data region is the buffer's: aclrtFree (and aclrtFreeWithDevSync) of it is refused
     * as of any address aclrtMalloc did not give, and the bytes stay. */
    EXPECT_RC(aclrtFree(data), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("data region", "aclrtFreeBuf", NULL);
    EXPECT_RC(aclrtFreeWithDevSync(data), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("data region", "aclrtFreeBuf", NULL);
    REQUIRE(free_mem() == during, "aclrtFree of the data region gave memory back");
    memset(back, 0, size);
    CHECK(aclrtMemcpy(back, size, data, size, ACL_MEMCPY_DEVICE_TO_HOST));
    REQUIRE(memcmp(back, host, size) == 0, "the data region's bytes after a refused aclrtFree");

    /* A reference: the same bytes, alive after the original is freed. */
    aclrtMbuf r = NULL;
    EXPECT_RC(aclrtCopyBufRef(b, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK(aclrtCopyBufRef(b, &r));
    REQUIRE(r != NULL && r != b, "reference %p of %p", r, b);
    void *rdata = NULL;
    CHECK(aclrtGetBufData(r, &rdata, &got));
    REQUIRE(rdata == data && got == size, "reference data %p (%zu), original %p", rdata, got, data);
    CHECK(aclrtGetBufDataLen(r, &len));
    REQUIRE(len == 4000, "reference length %zu", len);
    CHECK(aclrtGetBufUserData(r, out, 4, 92));
    REQUIRE(memcmp(out, "abcd", 4) == 0, "reference user data");
    REQUIRE(free_mem() == during, "a reference allocated memory");
    CHECK(aclrtFreeBuf(b));
    REQUIRE(free_mem() == during, "the data went with the first reference");
    EXPECT_RC(aclrtGetBufDataLen(b, &len), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT_RC(aclrtFreeBuf(b), ACL_ERROR_RT_INVALID_HANDLE);
    expect_msg("not a live mbuf", NULL);
    memset(back, 0, size);
    CHECK(aclrtMemcpy(back, size, rdata, size, ACL_MEMCPY_DEVICE_TO_HOST));
    REQUIRE(memcmp(back, host, size) == 0, "the reference's bytes differ");
    CHECK(aclrtFreeBuf(r));
    REQUIRE(free_mem() == before, "free memory %zu after the last reference, %zu before",
            free_mem(), before);
    EXPECT_RC(aclrtMemcpy(back, 16, rdata, 16, ACL_MEMCPY_DEVICE_TO_HOST),
              ACL_ERROR_RT_PARAM_INVALID);

    /* Chains. */
    aclrtMbuf h = NULL, m[3] = {NULL, NULL, NULL}, other = NULL, got_buf = NULL;
    CHECK(aclrtAllocBuf(&h, 256));
    for (int i = 0; i < 3; i++) CHECK(aclrtAllocBuf(&m[i], 128 * (size_t)(i + 1)));
    CHECK(aclrtAllocBuf(&other, 64));
    uint32_t num = 0;
    EXPECT_RC(aclrtGetBufChainNum(h, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK(aclrtGetBufChainNum(h, &num));
    REQUIRE(num == 1, "a buffer alone is a chain of %u", num);
    EXPECT_RC(aclrtAppendBufChain(h, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtAppendBufChain(h, h), ACL_ERROR_RT_PARAM_INVALID);
    for (int i = 0; i < 3; i++) CHECK(aclrtAppendBufChain(h, m[i]));
    CHECK(aclrtGetBufChainNum(h, &num));
    REQUIRE(num == 4, "chain of %u", num);
    CHECK(aclrtGetBufFromChain(h, 0, &got_buf));
    REQUIRE(got_buf == h, "index 0 is not the head");
    CHECK(aclrtGetBufFromChain(h, 2, &got_buf));
    REQUIRE(got_buf == m[1], "index 2 is not the second member");
    CHECK(aclrtGetBufData(got_buf, &data, &got));
    REQUIRE(got == 256, "member 2's size %zu", got);
    EXPECT_RC(aclrtGetBufFromChain(h, 4, &got_buf), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("past the end", NULL);
    EXPECT_RC(aclrtAppendBufChain(other, m[0]), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtAppendBufChain(other, h), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtFreeBuf(m[2]), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("frees it", NULL);
    /* Freeing the head frees the chain. */
    CHECK(aclrtFreeBuf(h));
    for (int i = 0; i < 3; i++) EXPECT_RC(aclrtGetBufDataLen(m[i], &len), ACL_ERROR_RT_INVALID_HANDLE);
    CHECK(aclrtFreeBuf(other));
    REQUIRE(free_mem() == before, "a chain's memory was not given back");

    /* Forged and other-kind handles. */
    aclrtStream s = NULL;
    CHECK(aclrtCreateStream(&s));
    EXPECT_RC(aclrtSetBufDataLen((aclrtMbuf)s, 1), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT_RC(aclrtGetBufChainNum((aclrtMbuf)(uintptr_t)0x1234, &num), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT_RC(aclrtCopyBufRef((aclrtMbuf)host, &r), ACL_ERROR_RT_INVALID_HANDLE);
    CHECK(aclrtDestroyStream(s));

    /* Buffers left at aclFinalize go with the session (memcheck counts leaks). */
    CHECK(aclrtAllocBuf(&b, 1000));
    CHECK(aclrtCopyBufRef(b, &r));
    free(host);
    free(back);
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("mbuf: ok\n");
    return 0;
}
