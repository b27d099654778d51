/* device_topology.c — how devices are linked and what crosses the links, after hicann/runtime
 * src/acl/aclrt_impl/device.cpp, src/runtime/api/api_c_device.cc, api_error.cc, api_impl.cc
 * and the per-chip tables of src/runtime/config/<chip>/dev_info_reg.cc and
 * src/platform/platform_config/<chip>.ini:
 *
 * - aclrtGetDevicesTopo: a device with itself HCCS everywhere; two devices of one server as
 *   the simulator models each family's server (A2 HCCS mesh; A3 SIO between the two dies of
 *   a chip, HCCS_SW otherwise, the same on server 1 of a SuperPod; 950 UB, 1 << 7; 310P PHB);
 *   NULL value 100000, a missing device 107001;
 * - the atomics: the host over UB only (the 950 family's table), two devices over HCCS / SIO /
 *   HCCS_SW / UB only (A2/A3: the DMA operations; 950: its table); every entry written;
 *   NULL arrays, count 0 and a host operation outside [0, 44] 107000 and nothing written;
 *   the same device twice or a missing one 107001;
 * - aclrtCheckArchCompatibility: this chip 1, a chip of the same NpuArch 1, another 0, the
 *   old family's "Ascend910B" 0 on Atlas A2; NULLs, "" and an unknown name 107000;
 * - aclrtGetDeviceInfo: ACL_DEV_ATTR_DEVICE_FORM_FACTOR and HD_CONNECT_TYPE answered on the
 *   950 family only (A+K or A+X, UB), 207000 elsewhere; NPU_ARCH the chip's.
 * On IPV350 each of these is 207000.
 *
 * usage: device_topology SOC (with ACL_NOTIFY_SIM_SOC the same). Exit 0 and
 * "device_topology: ok". */
#include "common.h"

#define TOPO_UB 0x80ULL

static uint64_t topo(uint32_t a, uint32_t b) {
    uint64_t v = 0xdeadULL;
    CHECK(aclrtGetDevicesTopo(a, b, &v));
    return v;
}

static const aclrtAtomicOperation ALL_OPS[] = {
    ACL_RT_ATOMIC_OPERATION_INTEGER_ADD,  ACL_RT_ATOMIC_OPERATION_INTEGER_INCREMENT,
    ACL_RT_ATOMIC_OPERATION_FLOAT_ADD,    ACL_RT_ATOMIC_OPERATION_DMA_ADD,
    ACL_RT_ATOMIC_OPERATION_DMA_MAX,      ACL_RT_ATOMIC_OPERATION_SIMD_SCALAR_EXCH,
    (aclrtAtomicOperation)13, /* inside [0, 44], named by no table */
};
#define NOPS (sizeof ALL_OPS / sizeof ALL_OPS[0])

/* The 950 family's table (RT_ATOMIC_CAPS_TYPE1..4) for ALL_OPS. */
static const uint32_t DAVID[NOPS] = {
    ACL_RT_ATOMIC_CAPABILITY_SIGNED | ACL_RT_ATOMIC_CAPABILITY_UNSIGNED |
        ACL_RT_ATOMIC_CAPABILITY_SCALAR32 | ACL_RT_ATOMIC_CAPABILITY_SCALAR64,
    ACL_RT_ATOMIC_CAPABILITY_UNSIGNED | ACL_RT_ATOMIC_CAPABILITY_SCALAR32 |
        ACL_RT_ATOMIC_CAPABILITY_SCALAR64,
    ACL_RT_ATOMIC_CAPABILITY_SCALAR16 | ACL_RT_ATOMIC_CAPABILITY_SCALAR32,
    ACL_RT_ATOMIC_CAPABILITY_SIGNED | ACL_RT_ATOMIC_CAPABILITY_SCALAR8 |
        ACL_RT_ATOMIC_CAPABILITY_SCALAR16 | ACL_RT_ATOMIC_CAPABILITY_SCALAR32,
    ACL_RT_ATOMIC_CAPABILITY_SIGNED | ACL_RT_ATOMIC_CAPABILITY_SCALAR8 |
        ACL_RT_ATOMIC_CAPABILITY_SCALAR16 | ACL_RT_ATOMIC_CAPABILITY_SCALAR32,
    ACL_RT_ATOMIC_CAPABILITY_UNSIGNED | ACL_RT_ATOMIC_CAPABILITY_SCALAR32 |
        ACL_RT_ATOMIC_CAPABILITY_SCALAR64,
    0,
};
/* Atlas A2/A3's P2P table: the DMA operations only. */
static const uint32_t STARS_DMA = ACL_RT_ATOMIC_CAPABILITY_SIGNED |
                                  ACL_RT_ATOMIC_CAPABILITY_SCALAR8 |
                                  ACL_RT_ATOMIC_CAPABILITY_SCALAR16 |
                                  ACL_RT_ATOMIC_CAPABILITY_SCALAR32;

static void expect_caps(const char *what, const uint32_t *got, const uint32_t *want) {
    for (size_t i = 0; i < NOPS; i++) {
        REQUIRE(got[i] == want[i], "%s: operation %d has capabilities %#x, expected %#x", what,
                (int)ALL_OPS[i], got[i], want[i]);
    }
}

static void fill(uint32_t *caps, uint32_t v) {
    for (size_t i = 0; i < NOPS; i++) caps[i] = v;
}

static void unsupported_everywhere(void) {
    uint64_t v = 0;
    EXPECT_RC(aclrtGetDevicesTopo(0, 1, &v), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    uint32_t caps[NOPS];
    EXPECT_RC(aclrtDeviceGetHostAtomicCapabilities(caps, ALL_OPS, NOPS, 0),
              ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    EXPECT_RC(aclrtDeviceGetP2PAtomicCapabilities(caps, ALL_OPS, NOPS, 0, 1),
              ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    int32_t c = 0;
    EXPECT_RC(aclrtCheckArchCompatibility("Ascend910B3", &c), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    int64_t a = 0;
    EXPECT_RC(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_NPU_ARCH, &a), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    EXPECT_RC(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_DEVICE_FORM_FACTOR, &a),
              ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
}

int main(int argc, char **argv) {
    g_role = "device_topology";
    REQUIRE(argc == 2, "usage: device_topology SOC");
    const char *soc = argv[1];
    CHECK(aclInit(NULL));
    if (strcmp(soc, "IPV350") == 0) {
        unsupported_everywhere();
        CHECK(aclFinalize());
        printf("device_topology: ok\n");
        return 0;
    }
    int is_a2 = strcmp(soc, "Ascend910B") == 0;
    int is_a3 = strcmp(soc, "Ascend910_93") == 0;
    int is_950 = strncmp(soc, "Ascend950", 9) == 0;
    uint32_t count = 0;
    CHECK(aclrtGetDeviceCount(&count));
    REQUIRE(count >= 4, "%u devices: the test needs 4", count);

    /* ---- topology ---- */
    for (uint32_t d = 0; d < count; d++) {
        REQUIRE(topo(d, d) == ACL_RT_DEVS_TOPOLOGY_HCCS, "device %u with itself: %#llx", d,
                (unsigned long long)topo(d, d));
    }
    uint64_t near = topo(0, 1), far = topo(1, 2);
    REQUIRE(topo(1, 0) == near && topo(2, 1) == far, "the topology is not symmetric");
    if (is_a2) {
        REQUIRE(near == ACL_RT_DEVS_TOPOLOGY_HCCS && far == ACL_RT_DEVS_TOPOLOGY_HCCS,
                "A2: %#llx %#llx", (unsigned long long)near, (unsigned long long)far);
    } else if (is_a3) {
        REQUIRE(near == ACL_RT_DEVS_TOPOLOGY_SIO, "A3 dies of one chip: %#llx",
                (unsigned long long)near);
        REQUIRE(far == ACL_RT_DEVS_TOPOLOGY_HCCS_SW, "A3 two chips: %#llx",
                (unsigned long long)far);
    } else if (is_950) {
        REQUIRE(near == TOPO_UB && far == TOPO_UB, "950: %#llx %#llx",
                (unsigned long long)near, (unsigned long long)far);
    } else if (strcmp(soc, "Ascend310P") == 0) {
        REQUIRE(near == ACL_RT_DEVS_TOPOLOGY_PHB && far == ACL_RT_DEVS_TOPOLOGY_PHB,
                "310P: %#llx %#llx", (unsigned long long)near, (unsigned long long)far);
    }
    EXPECT_RC(aclrtGetDevicesTopo(0, 1, NULL), ACL_ERROR_INVALID_PARAM);
    expect_msg("aclrtGetDevicesTopo", "value", NULL);
    uint64_t v = 7;
    EXPECT_RC(aclrtGetDevicesTopo(0, count, &v), ACL_ERROR_RT_INVALID_DEVICEID);
    expect_msg("device", NULL);
    EXPECT_RC(aclrtGetDevicesTopo(count, 0, &v), ACL_ERROR_RT_INVALID_DEVICEID);
    REQUIRE(v == 7, "a refused query wrote %#llx", (unsigned long long)v);

    /* ---- host atomics ---- */
    uint32_t caps[NOPS], zero[NOPS] = {0};
    fill(caps, 0xffff);
    CHECK(aclrtDeviceGetHostAtomicCapabilities(caps, ALL_OPS, NOPS, 0));
    expect_caps("host", caps, is_950 ? DAVID : zero);
    fill(caps, 0xffff);
    EXPECT_RC(aclrtDeviceGetHostAtomicCapabilities(NULL, ALL_OPS, NOPS, 0),
              ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("capabilities", NULL);
    EXPECT_RC(aclrtDeviceGetHostAtomicCapabilities(caps, NULL, NOPS, 0),
              ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("operations", NULL);
    EXPECT_RC(aclrtDeviceGetHostAtomicCapabilities(caps, ALL_OPS, 0, 0),
              ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("count", NULL);
    EXPECT_RC(aclrtDeviceGetHostAtomicCapabilities(caps, ALL_OPS, NOPS, (int32_t)count),
              ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT_RC(aclrtDeviceGetHostAtomicCapabilities(caps, ALL_OPS, NOPS, -1),
              ACL_ERROR_RT_INVALID_DEVICEID);
    const aclrtAtomicOperation bad[] = {ACL_RT_ATOMIC_OPERATION_INTEGER_ADD,
                                        (aclrtAtomicOperation)45};
    EXPECT_RC(aclrtDeviceGetHostAtomicCapabilities(caps, bad, 2, 0), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("operations[1]", "45", NULL);
    for (size_t i = 0; i < NOPS; i++) {
        REQUIRE(caps[i] == 0xffff, "a refused query wrote caps[%zu] = %#x", i, caps[i]);
    }

    /* ---- P2P atomics ---- */
    uint32_t stars[NOPS] = {0, 0, 0, STARS_DMA, STARS_DMA, 0, 0};
    const uint32_t *want = is_950 ? DAVID : (is_a2 || is_a3) ? stars : zero;
    for (int32_t peer = 1; peer <= 2; peer++) {
        fill(caps, 0xffff);
        CHECK(aclrtDeviceGetP2PAtomicCapabilities(caps, ALL_OPS, NOPS, 0, peer));
        expect_caps("p2p", caps, want);
    }
    EXPECT_RC(aclrtDeviceGetP2PAtomicCapabilities(caps, ALL_OPS, NOPS, 1, 1),
              ACL_ERROR_RT_INVALID_DEVICEID);
    expect_msg("srcDeviceId", "dstDeviceId", NULL);
    EXPECT_RC(aclrtDeviceGetP2PAtomicCapabilities(caps, ALL_OPS, NOPS, 0, (int32_t)count),
              ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT_RC(aclrtDeviceGetP2PAtomicCapabilities(caps, NULL, NOPS, 0, 1),
              ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtDeviceGetP2PAtomicCapabilities(caps, ALL_OPS, 0, 0, 1),
              ACL_ERROR_RT_PARAM_INVALID);

    /* ---- architecture compatibility ---- */
    const char *me = aclrtGetSocName();
    REQUIRE(me != NULL, "no SoC name: %s", recent_msg());
    int32_t c = 77;
    CHECK(aclrtCheckArchCompatibility(me, &c));
    REQUIRE(c == 1, "%s with itself: %d", me, c);
    const char *other = strcmp(soc, "Ascend310P") == 0 ? "Ascend910B3" : "Ascend310P3";
    c = 77;
    CHECK(aclrtCheckArchCompatibility(other, &c));
    REQUIRE(c == 0, "%s on %s: %d", other, me, c);
    if (is_a2 || is_a3) {
        c = 77;
        CHECK(aclrtCheckArchCompatibility(is_a2 ? "Ascend910_9391" : "Ascend910B1", &c));
        REQUIRE(c == 1, "A2 and A3 share NpuArch 2201: %d", c);
        c = 77;
        CHECK(aclrtCheckArchCompatibility("Ascend910B", &c));
        REQUIRE(c == 0, "the old family's Ascend910B (1001): %d", c);
    }
    c = 77;
    EXPECT_RC(aclrtCheckArchCompatibility("Ascend999", &c), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("Ascend999", NULL);
    EXPECT_RC(aclrtCheckArchCompatibility("", &c), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtCheckArchCompatibility(NULL, &c), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("socVersion", NULL);
    EXPECT_RC(aclrtCheckArchCompatibility(me, NULL), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("canCompatible", NULL);
    REQUIRE(c == 77, "a refused check wrote %d", c);

    /* ---- platform attributes ---- */
    int64_t a = -1;
    CHECK(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_NPU_ARCH, &a));
    int64_t arch = is_950 ? 3510 : (is_a2 || is_a3) ? 2201 : strcmp(soc, "Ascend310P") == 0 ? 2002 : a;
    REQUIRE(a == arch, "NPU arch %lld", (long long)a);
    if (is_950) {
        CHECK(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_DEVICE_FORM_FACTOR, &a));
        REQUIRE(a == ACL_DEVICE_FORM_FACTOR_A_K || a == ACL_DEVICE_FORM_FACTOR_A_X,
                "form factor %lld", (long long)a);
        CHECK(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_HD_CONNECT_TYPE, &a));
        REQUIRE(a == ACL_HOST_DEVICE_CONNECT_TYPE_UB, "host link %lld", (long long)a);
    } else {
        EXPECT_RC(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_DEVICE_FORM_FACTOR, &a),
                  ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        expect_msg("409", NULL);
        EXPECT_RC(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_HD_CONNECT_TYPE, &a),
                  ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    }
    CHECK(aclFinalize());
    printf("device_topology: ok\n");
    return 0;
}
