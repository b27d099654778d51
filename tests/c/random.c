/* random.c — aclrtRandomNumAsync through the C ABI, on the SoC named by argv[1]:
 * - Ascend910B: the distributions CANN documents, checked by their moments over 100,000
 *   numbers (uniform fp32 in [2, 6): mean 4, variance 4/3; normal fp32 (1, 3): mean 1,
 *   variance 9; normal fp16 (-2, 0.5); truncated normal fp32 (0, 1): within 2, variance
 *   0.774; a dropout bitmask of ratio 0.25: 3/4 of the bits set; int32 uniform in [-3, 4)),
 *   the same seed and counter giving the same numbers and another counter others, operands
 *   given by address read when the task runs (a mean rewritten by a queued copy after the
 *   call), CANN's argument checks and codes.
 * - Ascend310P: ACL_ERROR_RT_FEATURE_NOT_SUPPORT. (fp16 infinities and NaNs are not expected.)
 * Exit 0 and "random <soc>: ok" when every check holds. */
#include "common.h"

static double fabs_(double x) { return x < 0 ? -x : x; }


static aclrtRandomParaInfo value(const void *v, uint8_t size) {
    aclrtRandomParaInfo p;
    memset(&p, 0, sizeof p);
    memcpy(p.valueOrAddr, v, size);
    p.size = size;
    return p;
}

static aclrtRandomParaInfo addr(void *a) {
    aclrtRandomParaInfo p;
    memset(&p, 0, sizeof p);
    uint64_t v = (uint64_t)(uintptr_t)a;
    memcpy(p.valueOrAddr, &v, 8);
    p.isAddr = 1;
    p.size = 8;
    return p;
}

static aclrtRandomParaInfo f32(float x) { return value(&x, 4); }
static aclrtRandomParaInfo u64v(uint64_t x) { return value(&x, 8); }

static void *g_result, *g_counter;
enum { N = 100000 };

static aclrtRandomNumTaskInfo task(aclDataType t, aclrtRandomNumFuncType f, aclrtRandomParaInfo a,
                                   aclrtRandomParaInfo b, uint64_t seed, uint64_t num) {
    aclrtRandomNumTaskInfo ti;
    memset(&ti, 0, sizeof ti);
    ti.dataType = t;
    ti.randomNumFuncParaInfo.funcType = f;
    if (f == ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK) {
        ti.randomNumFuncParaInfo.paramInfo.dropoutBitmaskInfo.dropoutRation = a;
    } else {
        ti.randomNumFuncParaInfo.paramInfo.uniformDisInfo.min = a;
        ti.randomNumFuncParaInfo.paramInfo.uniformDisInfo.max = b;
    }
    ti.randomResultAddr = g_result;
    ti.randomCounterAddr = g_counter;
    ti.randomSeed = u64v(seed);
    ti.randomNum = u64v(num);
    return ti;
}

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    float f;
    if (exp == 0) {
        f = (float)man / 16777216.0f;
    } else {
        uint32_t bits = ((exp + 112) << 23) | (man << 13);
        memcpy(&f, &bits, 4);
    }
    return sign ? -f : f;
}

/* Runs `ti` on `s`, copies N numbers back as doubles, returns mean and variance. */
static void moments(aclrtStream s, aclrtRandomNumTaskInfo ti, double *xs, double *mean, double *var) {
    CHECK(aclrtRandomNumAsync(&ti, s, NULL));
    CHECK(aclrtSynchronizeStream(s));
    size_t es = ti.dataType == ACL_FLOAT16 ? 2 : 4;
    unsigned char *raw = malloc(N * es);
    REQUIRE(raw, "malloc");
    CHECK(aclrtMemcpy(raw, N * es, g_result, N * es, ACL_MEMCPY_DEVICE_TO_HOST));
    double m = 0, v = 0;
    for (int i = 0; i < N; i++) {
        if (es == 2) {
            uint16_t h;
            memcpy(&h, raw + 2 * i, 2);
            xs[i] = half_to_float(h);
        } else if (ti.dataType == ACL_INT32) {
            int32_t x;
            memcpy(&x, raw + 4 * i, 4);
            xs[i] = x;
        } else {
            float x;
            memcpy(&x, raw + 4 * i, 4);
            xs[i] = x;
        }
        m += xs[i];
    }
    m /= N;
    for (int i = 0; i < N; i++) v += (xs[i] - m) * (xs[i] - m);
    *mean = m;
    *var = v / N;
    free(raw);
}

int main(int argc, char **argv) {
    g_role = "random";
    const char *soc = argc > 1 ? argv[1] : "Ascend910B";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream s = NULL;
    CHECK(aclrtCreateStream(&s));
    CHECK(aclrtMalloc(&g_result, N * 4, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&g_counter, 16, ACL_MEM_MALLOC_HUGE_FIRST));
    uint64_t zero[2] = {0, 0};
    CHECK(aclrtMemcpy(g_counter, 16, zero, 16, ACL_MEMCPY_HOST_TO_DEVICE));
    aclrtRandomNumTaskInfo ti = task(ACL_FLOAT, ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS, f32(2), f32(6), 11, N);
    EXPECT_RC(aclrtRandomNumAsync(NULL, s, NULL), ACL_ERROR_INVALID_PARAM);
    aclrtRandomNumTaskInfo bad = ti;
    bad.dataType = ACL_INT8;
    EXPECT_RC(aclrtRandomNumAsync(&bad, s, NULL), ACL_ERROR_INVALID_PARAM);
    if (strcmp(soc, "Ascend910B") != 0) {
        EXPECT_RC(aclrtRandomNumAsync(&ti, s, NULL), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    } else {
        EXPECT_RC(aclrtRandomNumAsync(&ti, s, &ti), ACL_ERROR_RT_PARAM_INVALID);
        bad = ti;
        bad.dataType = ACL_INT32;
        bad.randomNumFuncParaInfo.funcType = ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS;
        EXPECT_RC(aclrtRandomNumAsync(&bad, s, NULL), ACL_ERROR_RT_PARAM_INVALID);
        bad = ti;
        bad.randomCounterAddr = NULL;
        EXPECT_RC(aclrtRandomNumAsync(&bad, s, NULL), ACL_ERROR_RT_PARAM_INVALID);
        bad = ti;
        bad.randomSeed.isAddr = 2;
        EXPECT_RC(aclrtRandomNumAsync(&bad, s, NULL), ACL_ERROR_RT_PARAM_INVALID);
        bad = ti;
        bad.randomNumFuncParaInfo.paramInfo.uniformDisInfo.min.size = 5;
        EXPECT_RC(aclrtRandomNumAsync(&bad, s, NULL), ACL_ERROR_RT_PARAM_INVALID);
        bad = ti;
        bad.randomNumFuncParaInfo.funcType = (aclrtRandomNumFuncType)4;
        EXPECT_RC(aclrtRandomNumAsync(&bad, s, NULL), ACL_ERROR_RT_PARAM_INVALID);
        /* Results past the allocation fail the task. */
        bad = ti;
        bad.randomNum = u64v(N + 1);
        CHECK(aclrtRandomNumAsync(&bad, s, NULL));
        EXPECT_RC(aclrtSynchronizeStream(s), ACL_ERROR_RT_PARAM_INVALID);

        double *xs = malloc(sizeof(double) * N), *ys = malloc(sizeof(double) * N), m, v;
        REQUIRE(xs && ys, "malloc");
        moments(s, ti, xs, &m, &v);
        REQUIRE(fabs_(m - 4) < 0.03 && fabs_(v - 4.0 / 3) < 0.04, "uniform: mean %f variance %f", m, v);
        for (int i = 0; i < N; i++) REQUIRE(xs[i] >= 2 && xs[i] < 6, "uniform: %f", xs[i]);
        /* The same seed and counter: the same numbers; another counter: others. */
        moments(s, ti, ys, &m, &v);
        REQUIRE(memcmp(xs, ys, sizeof(double) * N) == 0, "same seed and counter, other numbers");
        uint64_t one[2] = {1, 0};
        CHECK(aclrtMemcpy(g_counter, 16, one, 16, ACL_MEMCPY_HOST_TO_DEVICE));
        moments(s, ti, ys, &m, &v);
        REQUIRE(memcmp(xs, ys, sizeof(double) * N) != 0, "another counter, the same numbers");

        moments(s, task(ACL_FLOAT, ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS, f32(1), f32(3), 5, N), xs, &m, &v);
        REQUIRE(fabs_(m - 1) < 0.05 && fabs_(v - 9) < 0.2, "normal: mean %f variance %f", m, v);
        uint16_t hm = 0xC000 /* -2 */, hs = 0x3800 /* 0.5 */;
        moments(s, task(ACL_FLOAT16, ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS, value(&hm, 2), value(&hs, 2), 6, N),
                xs, &m, &v);
        REQUIRE(fabs_(m + 2) < 0.01 && fabs_(v - 0.25) < 0.01, "fp16 normal: mean %f variance %f", m, v);
        moments(s, task(ACL_FLOAT, ACL_RT_RANDOM_NUM_FUNC_TYPE_TRUNCATED_NORMAL_DIS, f32(0), f32(1), 8, N), xs,
                &m, &v);
        REQUIRE(fabs_(m) < 0.02 && fabs_(v - 0.7737) < 0.02, "truncated: mean %f variance %f", m, v);
        for (int i = 0; i < N; i++) REQUIRE(fabs_(xs[i]) <= 2, "truncated: %f", xs[i]);
        int32_t lo = -3, hi = 4;
        moments(s, task(ACL_INT32, ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS, value(&lo, 4), value(&hi, 4), 9, N),
                xs, &m, &v);
        REQUIRE(fabs_(m - 0) < 0.05 && fabs_(v - 4) < 0.1, "int32 uniform: mean %f variance %f", m, v);
        for (int i = 0; i < N; i++) REQUIRE(xs[i] >= -3 && xs[i] < 4, "int32: %f", xs[i]);

        /* Dropout bitmask: N bits, 3/4 set. */
        ti = task(ACL_FLOAT, ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK, f32(0.25f), f32(0), 3, N);
        CHECK(aclrtRandomNumAsync(&ti, s, NULL));
        CHECK(aclrtSynchronizeStream(s));
        unsigned char bits[N / 8];
        CHECK(aclrtMemcpy(bits, N / 8, g_result, N / 8, ACL_MEMCPY_DEVICE_TO_HOST));
        long ones = 0;
        for (int i = 0; i < N / 8; i++) ones += __builtin_popcount(bits[i]);
        REQUIRE(fabs_((double)ones / N - 0.75) < 0.01, "dropout: %ld of %d bits set", ones, N);

        /* An operand by address, read when the task runs: the mean is rewritten after the
         * call, by a copy queued before it ran. */
        void *mean_at = NULL;
        CHECK(aclrtMalloc(&mean_at, 4, ACL_MEM_MALLOC_HUGE_FIRST));
        float before = 100, after = -50;
        CHECK(aclrtMemcpy(mean_at, 4, &before, 4, ACL_MEMCPY_HOST_TO_DEVICE));
        gate_t g = {0};
        CHECK(aclrtLaunchHostFunc(s, gate_hold, &g));
        ti = task(ACL_FLOAT, ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS, addr(mean_at), f32(1), 4, N);
        CHECK(aclrtRandomNumAsync(&ti, s, NULL));
        CHECK(aclrtMemcpy(mean_at, 4, &after, 4, ACL_MEMCPY_HOST_TO_DEVICE));
        gate_open(&g);
        CHECK(aclrtSynchronizeStream(s));
        float got[N];
        CHECK(aclrtMemcpy(got, sizeof got, g_result, sizeof got, ACL_MEMCPY_DEVICE_TO_HOST));
        m = 0;
        for (int i = 0; i < N; i++) m += got[i];
        m /= N;
        REQUIRE(fabs_(m + 50) < 0.05, "mean by address: %f, expected -50", m);
        CHECK(aclrtFree(mean_at));
        free(xs);
        free(ys);
    }
    CHECK(aclrtFree(g_result));
    CHECK(aclrtFree(g_counter));
    CHECK(aclrtDestroyStream(s));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("random %s: ok\n", soc);
    return 0;
}
