/* stream_v2.c — streams made from a configuration object, as CANN documents the sequence:
 * aclrtCreateStreamConfigHandle, aclrtSetStreamConfigOpt for each attribute,
 * aclrtCreateStreamV2, then aclrtDestroyStreamConfigHandle and aclrtDestroyStream.
 *
 * On IPV350 (the only SoC CANN documents them on): the object starts zeroed and shows what was
 * set; the stream has the priority and flag set and runs tasks; a NULL object gives the
 * defaults; misuse answers 100000 (NULL object or value, unknown attribute, wrong value size,
 * priority 8, an object already destroyed or never made) or 107000 (unknown flag bits). On any
 * other SoC (the argument), the four calls answer 207000 / NULL.
 *
 * usage: stream_v2 SOC. Exit 0 and "stream_v2: ok". */
#include "common.h"

static volatile int g_ran;
static void ran(void *arg) {
    (void)arg;
    g_ran = 1;
}

int main(int argc, char **argv) {
    g_role = "stream_v2";
    REQUIRE(argc == 2, "usage: stream_v2 SOC");
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream s = NULL;
    if (strcmp(argv[1], "IPV350") != 0) {
        REQUIRE(aclrtCreateStreamConfigHandle() == NULL, "a configuration object on %s",
                argv[1]);
        const char *m = recent_msg();
        REQUIRE(strstr(m, "207000") != NULL && strstr(m, "IPV350 only") != NULL,
                "the message does not say why: %s", m);
        EXPECT_RC(aclrtCreateStreamV2(&s, NULL), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        EXPECT_RC(aclrtDestroyStreamConfigHandle(NULL), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        CHECK(aclFinalize());
        printf("stream_v2: ok (%s: 207000)\n", argv[1]);
        return 0;
    }

    aclrtStreamConfigHandle *h = aclrtCreateStreamConfigHandle();
    REQUIRE(h != NULL, "aclrtCreateStreamConfigHandle: %s", recent_msg());
    REQUIRE(h->workptr == NULL && h->workSize == 0 && h->flag == 0 && h->priority == 0,
            "a new configuration is not zeroed");
    uint32_t prio = 5;
    size_t flag = ACL_STREAM_FAST_LAUNCH, work_size = 4096;
    static char work[4096];
    void *work_ptr = work;
    CHECK(aclrtSetStreamConfigOpt(h, ACL_RT_STREAM_PRIORITY, &prio, sizeof prio));
    CHECK(aclrtSetStreamConfigOpt(h, ACL_RT_STREAM_FLAG, &flag, sizeof flag));
    CHECK(aclrtSetStreamConfigOpt(h, ACL_RT_STREAM_WORK_SIZE, &work_size, sizeof work_size));
    CHECK(aclrtSetStreamConfigOpt(h, ACL_RT_STREAM_WORK_ADDR_PTR, &work_ptr, sizeof work_ptr));
    REQUIRE(h->priority == 5 && h->flag == ACL_STREAM_FAST_LAUNCH && h->workSize == 4096 &&
                h->workptr == work,
            "the object does not show what was set");

    /* Misuse. */
    uint32_t eight = 8;
    EXPECT_RC(aclrtSetStreamConfigOpt(h, ACL_RT_STREAM_PRIORITY, &eight, sizeof eight),
              ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtSetStreamConfigOpt(h, ACL_RT_STREAM_PRIORITY, &flag, sizeof flag),
              ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtSetStreamConfigOpt(h, (aclrtStreamConfigAttr)4, &prio, sizeof prio),
              ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtSetStreamConfigOpt(h, ACL_RT_STREAM_PRIORITY, NULL, sizeof prio),
              ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtSetStreamConfigOpt(NULL, ACL_RT_STREAM_PRIORITY, &prio, sizeof prio),
              ACL_ERROR_INVALID_PARAM);
    aclrtStreamConfigHandle forged = {0};
    EXPECT_RC(aclrtSetStreamConfigOpt(&forged, ACL_RT_STREAM_PRIORITY, &prio, sizeof prio),
              ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtCreateStreamV2(&s, &forged), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtDestroyStreamConfigHandle(&forged), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtCreateStreamV2(NULL, h), ACL_ERROR_INVALID_PARAM);
    REQUIRE(h->priority == 5, "a refused priority changed the object");

    /* The stream has what the object says, and runs. */
    CHECK(aclrtCreateStreamV2(&s, h));
    uint32_t p = 99;
    uint32_t f = 0;
    CHECK(aclrtStreamGetPriority(s, &p));
    CHECK(aclrtStreamGetFlags(s, &f));
    REQUIRE(p == 5 && f == ACL_STREAM_FAST_LAUNCH, "the stream has priority %u, flags %#x", p,
            f);
    CHECK(aclrtLaunchHostFunc(s, ran, NULL));
    CHECK(aclrtSynchronizeStreamWithTimeout(s, 20000));
    REQUIRE(g_ran, "the stream did not run its task");
    CHECK(aclrtDestroyStream(s));

    size_t bad_flag = (size_t)1 << 40;
    CHECK(aclrtSetStreamConfigOpt(h, ACL_RT_STREAM_FLAG, &bad_flag, sizeof bad_flag));
    EXPECT_RC(aclrtCreateStreamV2(&s, h), ACL_ERROR_RT_PARAM_INVALID);

    /* NULL: the defaults. */
    CHECK(aclrtCreateStreamV2(&s, NULL));
    CHECK(aclrtStreamGetPriority(s, &p));
    CHECK(aclrtStreamGetFlags(s, &f));
    REQUIRE(p == 0 && f == 0, "a NULL configuration gave priority %u, flags %#x", p, f);
    CHECK(aclrtDestroyStream(s));

    CHECK(aclrtDestroyStreamConfigHandle(h));
    EXPECT_RC(aclrtDestroyStreamConfigHandle(h), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtCreateStreamV2(&s, h), ACL_ERROR_INVALID_PARAM);
    CHECK(aclFinalize());
    printf("stream_v2: ok\n");
    return 0;
}
