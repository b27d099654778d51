/* base_types.c — acl_base_rt.h's base types as CANN's ACL layer answers them (hicann/runtime
 * src/acl/aclrt_impl/data_buffer.cpp, types/fp16_impl.cpp; docs/zh/api_ref/24_other_APIs.md):
 * - aclDataBuffer: create / get / update / destroy, before aclInit and after aclFinalize too;
 *   a NULL address is a valid buffer; NULL, destroyed and forged buffers are 100000 (destroy,
 *   update) or NULL / 0 (getters), with a message, never a crash;
 * - aclDataTypeSize: each aclDataType's size, 8 for a value outside the enum (CANN's default);
 * - aclFloat16ToFloat / aclFloatToFloat16: every one of the 65,536 halves converted to float
 *   and checked against its value computed here from its bits, then converted back (identity
 *   for the finite ones; CANN's saturation to +-65504 for the all-ones exponent, which CANN
 *   reads as 2^16), ties to even, subnormals, and CANN's saturation of Inf / NaN / overflow;
 * - aclGetCannAttributeList / aclGetCannAttribute / aclGetDeviceCapability (src/acl/aclrt_impl/
 *   acl.cpp, src/acl/utils/cann_info_utils.cpp, src/platform/platform_config/<chip>.ini): on
 *   argv[1]'s chip family (Ascend910B: its first chip Ascend910B1; Ascend310P: Ascend310P3),
 *   INF_NAN and BF16 only where the chip's configuration has them, JIT_COMPILE everywhere; the
 *   chip's AI Cores, Vector Cores and L2 size; 100000 for bad devices, enums and NULL;
 * - aclrtCreateBinary / aclrtDestroyBinary (src/acl/aclrt_impl/kernel.cpp): a description of
 *   the caller's bytes, kept as given (any length, 0 too); NULL data is NULL, a NULL,
 *   destroyed or forged binary to destroy 100000, with a message.
 * Exit 0 and "base_types: ok". */
#include "common.h"

/* 2^e as a double, without libm. */
static double pow2(int e) {
    double v = 1.0;
    for (; e > 0; e--) v *= 2.0;
    for (; e < 0; e++) v /= 2.0;
    return v;
}

static uint32_t bits_of(float f) {
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

static void data_buffers(const char *when) {
    char bytes[256];
    aclDataBuffer *b = aclCreateDataBuffer(bytes, sizeof bytes);
    REQUIRE(b != NULL, "%s: aclCreateDataBuffer: %s", when, recent_msg());
    REQUIRE(aclGetDataBufferAddr(b) == bytes, "%s: address", when);
    REQUIRE(aclGetDataBufferSizeV2(b) == sizeof bytes, "%s: size", when);
    CHECK(aclUpdateDataBuffer(b, bytes + 16, 32));
    REQUIRE(aclGetDataBufferAddr(b) == bytes + 16, "%s: updated address", when);
    REQUIRE(aclGetDataBufferSizeV2(b) == 32, "%s: updated size", when);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    REQUIRE(aclGetDataBufferSize(b) == 32, "%s: 32-bit size", when);
#pragma GCC diagnostic pop
    /* An output buffer to be filled later: no address yet. */
    aclDataBuffer *out = aclCreateDataBuffer(NULL, 0);
    REQUIRE(out != NULL, "%s: an empty buffer", when);
    REQUIRE(aclGetDataBufferAddr(out) == NULL && aclGetDataBufferSizeV2(out) == 0, "%s", when);
    CHECK(aclDestroyDataBuffer(out));
    CHECK(aclDestroyDataBuffer(b));

    /* Destroyed, NULL and forged buffers. */
    aclDataBuffer *forged = (aclDataBuffer *)(uintptr_t)0x1000;
    EXPECT_RC(aclDestroyDataBuffer(b), ACL_ERROR_INVALID_PARAM);
    expect_msg("aclDestroyDataBuffer", "not a live aclDataBuffer", NULL);
    EXPECT_RC(aclDestroyDataBuffer(NULL), ACL_ERROR_INVALID_PARAM);
    expect_msg("`dataBuffer` is NULL", NULL);
    EXPECT_RC(aclUpdateDataBuffer(forged, bytes, 1), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclUpdateDataBuffer(NULL, bytes, 1), ACL_ERROR_INVALID_PARAM);
    REQUIRE(aclGetDataBufferAddr(b) == NULL, "%s: a destroyed buffer's address", when);
    REQUIRE(aclGetDataBufferAddr(forged) == NULL, "%s", when);
    REQUIRE(aclGetDataBufferSizeV2(NULL) == 0, "%s", when);
    REQUIRE(aclGetDataBufferSizeV2(forged) == 0, "%s", when);
    expect_msg("aclGetDataBufferSizeV2", "aclGetDataBufferAddr", NULL);

    /* Many at once: each keeps its own. */
    enum { N = 1000 };
    static aclDataBuffer *many[N];
    for (int i = 0; i < N; i++) {
        many[i] = aclCreateDataBuffer(bytes + (i % 256), (size_t)i);
        REQUIRE(many[i] != NULL, "%s: buffer %d", when, i);
    }
    for (int i = 0; i < N; i++) {
        REQUIRE(aclGetDataBufferAddr(many[i]) == bytes + (i % 256), "%s: buffer %d", when, i);
        REQUIRE(aclGetDataBufferSizeV2(many[i]) == (size_t)i, "%s: buffer %d", when, i);
        CHECK(aclDestroyDataBuffer(many[i]));
    }
}

static void binaries(void) {
    static const unsigned char bytes[16] = {0x7f, 'E', 'L', 'F'};
    aclrtBinary b = aclrtCreateBinary(bytes, sizeof bytes);
    REQUIRE(b != NULL, "aclrtCreateBinary returned NULL: %s", recent_msg());
    aclrtBinary empty = aclrtCreateBinary(bytes, 0);
    REQUIRE(empty != NULL && empty != b, "aclrtCreateBinary of 0 bytes: %p", empty);
    REQUIRE(aclrtCreateBinary(NULL, sizeof bytes) == NULL, "a binary of NULL data");
    expect_msg("aclrtCreateBinary", "`data` is NULL", NULL);
    CHECK(aclrtDestroyBinary(empty));
    CHECK(aclrtDestroyBinary(b));
    EXPECT_RC(aclrtDestroyBinary(b), ACL_ERROR_INVALID_PARAM);
    expect_msg("aclrtDestroyBinary", "not a live aclrtBinary", NULL);
    EXPECT_RC(aclrtDestroyBinary(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtDestroyBinary((aclrtBinary)bytes), ACL_ERROR_INVALID_PARAM);
}

static void data_type_sizes(void) {
    static const struct {
        aclDataType t;
        size_t size;
    } want[] = {
        {ACL_DT_UNDEFINED, 0}, {ACL_FLOAT, 4},      {ACL_FLOAT16, 2},   {ACL_INT8, 1},
        {ACL_INT32, 4},        {ACL_UINT8, 1},      {ACL_INT16, 2},     {ACL_UINT16, 2},
        {ACL_UINT32, 4},       {ACL_INT64, 8},      {ACL_UINT64, 8},    {ACL_DOUBLE, 8},
        {ACL_BOOL, 1},         {ACL_STRING, 0},     {ACL_COMPLEX64, 8}, {ACL_COMPLEX128, 16},
        {ACL_BF16, 2},         {ACL_INT4, 1},       {ACL_UINT1, 1},     {ACL_COMPLEX32, 4},
        {ACL_HIFLOAT8, 1},     {ACL_FLOAT8_E5M2, 1}, {ACL_FLOAT8_E4M3FN, 1},
        {ACL_FLOAT8_E8M0, 1},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        size_t got = aclDataTypeSize(want[i].t);
        REQUIRE(got == want[i].size, "aclDataTypeSize(%d) = %zu, expected %zu", (int)want[i].t,
                got, want[i].size);
    }
    (void)aclGetRecentErrMsg();
    REQUIRE(aclDataTypeSize((aclDataType)5) == 8, "a value outside the enum");
    expect_msg("aclDataTypeSize", "dataType 5 is not an aclDataType", NULL);
}

static void float16(void) {
    /* Every half: its value from its bits, then back. */
    for (uint32_t h = 0; h <= 0xFFFF; h++) {
        int neg = (h & 0x8000) != 0;
        int e = (int)((h >> 10) & 0x1F);
        double m = (double)(h & 0x3FF);
        double v = e == 0 ? m * pow2(-24) : (1024.0 + m) * pow2(e - 25);
        if (neg) v = -v;
        float f = aclFloat16ToFloat((aclFloat16)h);
        REQUIRE((double)f == v, "aclFloat16ToFloat(0x%04x) = %a, expected %a", h, (double)f, v);
        REQUIRE(((bits_of(f) >> 31) != 0) == neg, "aclFloat16ToFloat(0x%04x): sign", h);
        aclFloat16 back = aclFloatToFloat16(f);
        /* The all-ones exponent (Inf, NaN) reads as >= 65536, which saturates. */
        aclFloat16 want = e == 31 ? (aclFloat16)((h & 0x8000) | 0x7BFF) : (aclFloat16)h;
        REQUIRE(back == want, "0x%04x -> %a -> 0x%04x, expected 0x%04x", h, (double)f, back, want);
    }
    static const struct {
        float f;
        aclFloat16 h;
    } known[] = {
        {1.0f, 0x3C00},           {-2.0f, 0xC000},          {0.1f, 0x2E66},
        {1.0f / 3.0f, 0x3555},    {65504.0f, 0x7BFF},       {65520.0f, 0x7BFF},
        {1e30f, 0x7BFF},          {-1e30f, 0xFBFF},         {0x1p-14f, 0x0400},
        {0x1p-24f, 0x0001},       {0x1p-25f, 0x0000},       {0x1.000002p-25f, 0x0001},
        {0x1.8p-24f, 0x0002},     {0x1.002p0f, 0x3C00},     {0x1.006p0f, 0x3C02},
        {2049.0f, 0x6800},        {2051.0f, 0x6802},        {-0.0f, 0x8000},
        {1e-30f, 0x0000},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        aclFloat16 h = aclFloatToFloat16(known[i].f);
        REQUIRE(h == known[i].h, "aclFloatToFloat16(%a) = 0x%04x, expected 0x%04x",
                (double)known[i].f, h, known[i].h);
    }
    /* Inf and NaN saturate (CANN documents this), keeping the sign. */
    float inf = 1e30f * 1e30f, nan = inf - inf;
    REQUIRE(aclFloatToFloat16(inf) == 0x7BFF, "+Inf");
    REQUIRE(aclFloatToFloat16(-inf) == 0xFBFF, "-Inf");
    REQUIRE((aclFloatToFloat16(nan) & 0x7FFF) == 0x7BFF, "NaN");
    REQUIRE(aclFloat16ToFloat(0x7C00) == 65536.0f, "+Inf half");
    REQUIRE(aclFloat16ToFloat(0x7E00) == 98304.0f, "NaN half");
}

static void cann_attributes(const char *chip) {
    int b910 = strcmp(chip, "Ascend910B") == 0;
    const aclCannAttr *list = NULL;
    size_t n = 99;
    CHECK(aclGetCannAttributeList(&list, &n));
    if (b910) {
        REQUIRE(n == 3 && list[0] == ACL_CANN_ATTR_INF_NAN && list[1] == ACL_CANN_ATTR_BF16 &&
                    list[2] == ACL_CANN_ATTR_JIT_COMPILE,
                "%s: %zu attributes", chip, n);
    } else {
        REQUIRE(n == 1 && list[0] == ACL_CANN_ATTR_JIT_COMPILE, "%s: %zu attributes", chip, n);
    }
    int32_t v = -1;
    CHECK(aclGetCannAttribute(ACL_CANN_ATTR_BF16, &v));
    REQUIRE(v == b910, "%s: BF16 %d", chip, v);
    CHECK(aclGetCannAttribute(ACL_CANN_ATTR_INF_NAN, &v));
    REQUIRE(v == b910, "%s: INF_NAN %d", chip, v);
    CHECK(aclGetCannAttribute(ACL_CANN_ATTR_JIT_COMPILE, &v));
    REQUIRE(v == 1, "%s: JIT_COMPILE %d", chip, v);
    EXPECT_RC(aclGetCannAttribute(ACL_CANN_ATTR_UNDEFINED, &v), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclGetCannAttribute(ACL_CANN_ATTR_BF16, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclGetCannAttributeList(NULL, &n), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclGetCannAttributeList(&list, NULL), ACL_ERROR_INVALID_PARAM);

    /* Ascend910B1: 24 AI Cores, 48 Vector Cores, 192 MiB of L2; Ascend310P3: 8, 7, 16 MiB. */
    int64_t ai = -1, vec = -1, l2 = -1;
    CHECK(aclGetDeviceCapability(3, ACL_DEVICE_INFO_AI_CORE_NUM, &ai));
    CHECK(aclGetDeviceCapability(3, ACL_DEVICE_INFO_VECTOR_CORE_NUM, &vec));
    CHECK(aclGetDeviceCapability(0, ACL_DEVICE_INFO_L2_SIZE, &l2));
    if (b910) {
        REQUIRE(ai == 24 && vec == 48 && l2 == 192LL << 20, "%s: %lld %lld %lld", chip,
                (long long)ai, (long long)vec, (long long)l2);
    } else {
        REQUIRE(ai == 8 && vec == 7 && l2 == 16LL << 20, "%s: %lld %lld %lld", chip,
                (long long)ai, (long long)vec, (long long)l2);
    }
    EXPECT_RC(aclGetDeviceCapability(4, ACL_DEVICE_INFO_AI_CORE_NUM, &ai), ACL_ERROR_INVALID_PARAM);
    expect_msg("aclGetDeviceCapability", "deviceId 4", NULL);
    EXPECT_RC(aclGetDeviceCapability(0, ACL_DEVICE_INFO_UNDEFINED, &ai), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclGetDeviceCapability(0, ACL_DEVICE_INFO_L2_SIZE, NULL), ACL_ERROR_INVALID_PARAM);
}

int main(int argc, char **argv) {
    g_role = "base_types";
    const char *chip = argc > 1 ? argv[1] : "Ascend910B";
    data_buffers("before aclInit");
    data_type_sizes();
    float16();
    cann_attributes(chip); /* before aclInit: the attributes need no session */
    CHECK(aclInit(NULL));
    data_buffers("in a session");
    binaries();
    cann_attributes(chip);
    CHECK(aclFinalize());
    data_buffers("after aclFinalize");
    printf("base_types: ok\n");
    return 0;
}
