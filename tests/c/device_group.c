/* device_group.c — device groups, after hicann/runtime src/acl/aclrt_impl/group.cpp,
 * src/runtime/api/impl/api_impl_standard_soc.cc and src/runtime/core/src/device/device.cc:
 *
 * - unsupported (a chip without RT_FEATURE_DEVICE_GROUP, e.g. Ascend910B): every call 207000,
 *   aclrtCreateGroupInfo NULL with a message; NULL arguments still 100000 first;
 * - none (Ascend310P without ACL_NOTIFY_SIM_GROUPS): the count is 0, aclrtCreateGroupInfo is
 *   NULL and says why, aclrtGetAllGroupInfo and aclrtSetGroup of an existing id 107014, an id
 *   outside [0, 3] 107000, any group index 100000;
 * - groups (Ascend310P with ACL_NOTIFY_SIM_GROUPS="2:3:2:1:1:16,0*:4:4:2:2:8"): the count is
 *   2; a new group info reads zeros; filled, index 0 and 1 are groups 0 and 2 in id order with
 *   each attribute's value and a size of 4; a short valueLen, a bad index or attribute and
 *   NULLs 100000 with a message; aclrtSetGroup of 0 and 2 succeeds, 1 is 107014, 4 107000; a
 *   destroyed or forged group info 100000.
 *
 * usage: device_group unsupported|none|groups. Exit 0 and "device_group: ok". */
#include "common.h"

static uint32_t detail(aclrtGroupInfo *info, int32_t index, aclrtGroupAttr attr) {
    uint32_t v = 0xdeadbeef;
    size_t size = 99;
    CHECK(aclrtGetGroupInfoDetail(info, index, attr, &v, sizeof v, &size));
    REQUIRE(size == 4, "attribute %d: size %zu", (int)attr, size);
    return v;
}

static void unsupported(void) {
    uint32_t count = 77;
    EXPECT_RC(aclrtGetGroupCount(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtGetGroupCount(&count), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    expect_msg("aclrtGetGroupCount", "device groups", NULL);
    REQUIRE(count == 77, "a refused count wrote %u", count);
    REQUIRE(aclrtCreateGroupInfo() == NULL, "a group info without groups");
    expect_msg("aclrtCreateGroupInfo", "207000", NULL);
    EXPECT_RC(aclrtGetAllGroupInfo((aclrtGroupInfo *)0x1000), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    EXPECT_RC(aclrtSetGroup(0), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    uint32_t v = 0;
    size_t size = 0;
    EXPECT_RC(aclrtGetGroupInfoDetail((aclrtGroupInfo *)0x1000, 0, ACL_GROUP_AICORE_INT, &v,
                                      sizeof v, &size),
              ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
}

static void none(void) {
    uint32_t count = 77;
    CHECK(aclrtGetGroupCount(&count));
    REQUIRE(count == 0, "no group configured, count %u", count);
    REQUIRE(aclrtCreateGroupInfo() == NULL, "a group info without groups");
    expect_msg("no group", "ACL_NOTIFY_SIM_GROUPS", NULL);
    EXPECT_RC(aclrtGetAllGroupInfo((aclrtGroupInfo *)0x1000), ACL_ERROR_RT_GROUP_NOT_CREATE);
    expect_msg("aclrtGetAllGroupInfo", "no group", NULL);
    EXPECT_RC(aclrtSetGroup(0), ACL_ERROR_RT_GROUP_NOT_CREATE);
    expect_msg("no group 0", NULL);
    EXPECT_RC(aclrtSetGroup(4), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("[0, 3]", NULL);
    uint32_t v = 0;
    size_t size = 0;
    EXPECT_RC(aclrtGetGroupInfoDetail((aclrtGroupInfo *)0x1000, 0, ACL_GROUP_AICORE_INT, &v,
                                      sizeof v, &size),
              ACL_ERROR_INVALID_PARAM);
    expect_msg("groupIndex 0", "[0, 0)", NULL);
}

static void groups(void) {
    uint32_t count = 0;
    CHECK(aclrtGetGroupCount(&count));
    REQUIRE(count == 2, "count %u", count);
    aclrtGroupInfo *info = aclrtCreateGroupInfo();
    REQUIRE(info != NULL, "aclrtCreateGroupInfo: %s", recent_msg());
    REQUIRE(detail(info, 0, ACL_GROUP_AICORE_INT) == 0, "an unfilled group info is not zeros");
    CHECK(aclrtGetAllGroupInfo(info));
    /* id order: group 0 (the default), then group 2 */
    const uint32_t want[2][6] = {{4, 4, 2, 2, 8, 0}, {3, 2, 1, 1, 16, 2}};
    for (int32_t i = 0; i < 2; i++) {
        for (int a = ACL_GROUP_AICORE_INT; a <= ACL_GROUP_GROUPID_INT; a++) {
            uint32_t got = detail(info, i, (aclrtGroupAttr)a);
            REQUIRE(got == want[i][a], "group index %d attribute %d: %u, expected %u", i, a, got,
                    want[i][a]);
        }
    }
    uint32_t v = 0xdeadbeef;
    size_t size = 99;
    EXPECT_RC(aclrtGetGroupInfoDetail(info, 0, ACL_GROUP_AICORE_INT, &v, 3, &size),
              ACL_ERROR_INVALID_PARAM);
    expect_msg("valueLen 3", "required size is 4", NULL);
    REQUIRE(v == 0xdeadbeef && size == 99, "a refused detail wrote %#x / %zu", v, size);
    EXPECT_RC(aclrtGetGroupInfoDetail(info, 2, ACL_GROUP_AICORE_INT, &v, 4, &size),
              ACL_ERROR_INVALID_PARAM);
    expect_msg("groupIndex 2", "[0, 2)", NULL);
    EXPECT_RC(aclrtGetGroupInfoDetail(info, -1, ACL_GROUP_AICORE_INT, &v, 4, &size),
              ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtGetGroupInfoDetail(info, 0, (aclrtGroupAttr)6, &v, 4, &size),
              ACL_ERROR_INVALID_PARAM);
    expect_msg("attr 6", NULL);
    EXPECT_RC(aclrtGetGroupInfoDetail(NULL, 0, ACL_GROUP_AICORE_INT, &v, 4, &size),
              ACL_ERROR_INVALID_PARAM);
    expect_msg("groupInfo", NULL);
    EXPECT_RC(aclrtGetGroupInfoDetail(info, 0, ACL_GROUP_AICORE_INT, NULL, 4, &size),
              ACL_ERROR_INVALID_PARAM);
    expect_msg("attrValue", NULL);
    EXPECT_RC(aclrtGetGroupInfoDetail(info, 0, ACL_GROUP_AICORE_INT, &v, 4, NULL),
              ACL_ERROR_INVALID_PARAM);
    expect_msg("paramRetSize", NULL);
    EXPECT_RC(aclrtGetAllGroupInfo(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtGetAllGroupInfo((aclrtGroupInfo *)0x1000), ACL_ERROR_INVALID_PARAM);
    expect_msg("not a live aclrtGroupInfo", NULL);

    CHECK(aclrtSetGroup(0));
    CHECK(aclrtSetGroup(2));
    EXPECT_RC(aclrtSetGroup(1), ACL_ERROR_RT_GROUP_NOT_CREATE);
    expect_msg("no group 1", NULL);
    EXPECT_RC(aclrtSetGroup(4), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtSetGroup(-1), ACL_ERROR_RT_PARAM_INVALID);

    CHECK(aclrtDestroyGroupInfo(info));
    EXPECT_RC(aclrtDestroyGroupInfo(info), ACL_ERROR_INVALID_PARAM);
    expect_msg("not a live aclrtGroupInfo", NULL);
    EXPECT_RC(aclrtGetGroupInfoDetail(info, 0, ACL_GROUP_AICORE_INT, &v, 4, &size),
              ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtDestroyGroupInfo(NULL), ACL_ERROR_INVALID_PARAM);
}

int main(int argc, char **argv) {
    g_role = "device_group";
    REQUIRE(argc == 2, "usage: device_group unsupported|none|groups");
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    if (strcmp(argv[1], "unsupported") == 0) {
        unsupported();
    } else if (strcmp(argv[1], "none") == 0) {
        none();
    } else {
        groups();
    }
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("device_group: ok\n");
    return 0;
}
