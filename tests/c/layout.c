/* layout.c — the ABI facts of acl/acl.h a CANN program relies on: the header paths, struct
 * layout (LP64), type sizes, enum and macro values. Checked at compile time where C11 allows
 * it, and again at run time so that a failure names the value. Compiled as C11 and as C++
 * (the header must work in both). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"
/* Every header path under which CANN declares this API (its acl_base.h itself includes
 * acl/acl_base_rt.h and error_codes/rt_error_codes.h). */
#include "acl/acl_base.h"
#include "acl/acl_base_rt.h"
#include "acl/acl_rt.h"
#include "acl/error_codes/rt_error_codes.h"

#ifdef __cplusplus
#define STATIC_ASSERT(c, m) static_assert(c, m)
#define ALIGNOF(t) alignof(t)
#else
#define STATIC_ASSERT(c, m) _Static_assert(c, m)
#define ALIGNOF(t) _Alignof(t)
#endif

STATIC_ASSERT(sizeof(aclrtServerPid) == 24, "aclrtServerPid size");
STATIC_ASSERT(offsetof(aclrtServerPid, sdid) == 0, "sdid offset");
STATIC_ASSERT(offsetof(aclrtServerPid, pid) == 8, "pid offset");
STATIC_ASSERT(offsetof(aclrtServerPid, num) == 16, "num offset");
STATIC_ASSERT(sizeof(aclError) == 4, "aclError is int");
STATIC_ASSERT(sizeof(aclrtNotify) == sizeof(void *), "aclrtNotify is void*");
STATIC_ASSERT(sizeof(aclrtStream) == sizeof(void *), "aclrtStream is void*");
STATIC_ASSERT(sizeof(aclrtStreamStatus) == 4, "aclrtStreamStatus is int-sized");
STATIC_ASSERT(sizeof(aclrtCntNotifyRecordInfo) == 8, "aclrtCntNotifyRecordInfo size");
STATIC_ASSERT(sizeof(aclrtCntNotifyWaitInfo) == 16, "aclrtCntNotifyWaitInfo size");
STATIC_ASSERT(offsetof(aclrtCntNotifyWaitInfo, isClear) == 12, "isClear offset");
STATIC_ASSERT(offsetof(aclrtCntNotifyWaitInfo, rsv) == 13, "rsv offset");

/* CANN's acl_rt.h declares the wait info's flag as `uint8_t isClear` and its padding as
 * `uint8_t rsv[3]`; programs take the flag's address as a uint8_t * and zero the padding by
 * name. */
static uint8_t *wait_info_clear_flag(aclrtCntNotifyWaitInfo *w) {
    w->rsv[0] = w->rsv[1] = w->rsv[2] = 0;
    return &w->isClear;
}

static int failures = 0;

static void expect(const char *what, long long got, long long want) {
    if (got != want) {
        fprintf(stderr, "layout: %s is %lld, expected %lld\n", what, got, want);
        failures++;
    }
}

#define EXPECT(expr, want) expect(#expr, (long long)(expr), (long long)(want))

int main(void) {
    EXPECT(sizeof(aclrtServerPid), 24);
    EXPECT(offsetof(aclrtServerPid, sdid), 0);
    EXPECT(offsetof(aclrtServerPid, pid), 8);
    EXPECT(offsetof(aclrtServerPid, num), 16);
    EXPECT(ALIGNOF(aclrtServerPid), 8);

    EXPECT(ACL_STREAM_STATUS_COMPLETE, 0);
    EXPECT(ACL_STREAM_STATUS_NOT_READY, 1);

    EXPECT(ACL_NOTIFY_DEFAULT, 0x0);
    EXPECT(ACL_NOTIFY_DEVICE_USE_ONLY, 0x1);
    EXPECT(ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT, 0x0);
    EXPECT(ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION, 0x2);
    EXPECT(ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT, 0x0);
    EXPECT(ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS, 0x2);

    EXPECT(ACL_SUCCESS, 0);
    EXPECT(ACL_ERROR_INVALID_PARAM, 100000);
    EXPECT(ACL_ERROR_UNINITIALIZE, 100001);
    EXPECT(ACL_ERROR_REPEAT_INITIALIZE, 100002);
    EXPECT(ACL_ERROR_REPEAT_FINALIZE, 100037);
    EXPECT(ACL_ERROR_RT_PARAM_INVALID, 107000);
    EXPECT(ACL_ERROR_RT_INVALID_DEVICEID, 107001);
    EXPECT(ACL_ERROR_RT_CONTEXT_NULL, 107002);
    EXPECT(ACL_ERROR_RT_STREAM_CONTEXT, 107003);
    EXPECT(ACL_ERROR_RT_INVALID_HANDLE, 107017);
    EXPECT(ACL_ERROR_RT_WAIT_TIMEOUT, 107019);
    EXPECT(ACL_ERROR_RT_TASK_TIMEOUT, 107020);
    EXPECT(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, 207000);
    EXPECT(ACL_ERROR_RT_MEMORY_ALLOCATION, 207001);
    EXPECT(ACL_ERROR_RT_NO_DEVICE, 207004);
    EXPECT(ACL_ERROR_RT_RESOURCE_ALLOC_FAIL, 207005);
    EXPECT(ACL_ERROR_RT_NO_PERMISSION, 207006);
    EXPECT(ACL_ERROR_RT_NO_NOTIFY_RESOURCE, 207009);
    EXPECT(ACL_ERROR_RT_OVER_LIMIT, 207012);
    EXPECT(ACL_ERROR_RT_INTERNAL_ERROR, 507000);
    EXPECT(ACL_ERROR_RT_STREAM_TASK_FULL, 507002);
    EXPECT(ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT, 507009);
    EXPECT(ACL_ERROR_RT_IPC_ERROR, 507022);
    EXPECT(ACL_ERROR_RT_STREAM_SYNC_TIMEOUT, 507046);
    EXPECT(ACL_ERROR_RT_DRV_INTERNAL_ERROR, 507899);

    /* The function types CANN programs assign to. */
    aclError (*create)(aclrtNotify *, uint64_t) = aclrtCreateNotify;
    aclError (*wait)(aclrtNotify, aclrtStream, uint32_t) = aclrtWaitAndResetNotify;
    aclError (*inter)(aclrtNotify, aclrtServerPid *, size_t) = aclrtNotifySetImportPidInterServer;
    aclError (*launch)(aclrtStream, aclrtHostFunc, void *) = aclrtLaunchHostFunc;
    aclError (*query)(aclrtStream, aclrtStreamStatus *) = aclrtStreamQuery;
    const char *(*soc)(void) = aclrtGetSocName;
    if (!create || !wait || !inter || !launch || !query || !soc) {
        failures++;
    }

    aclrtCntNotifyWaitInfo w;
    memset(&w, 0xff, sizeof w);
    *wait_info_clear_flag(&w) = 1;
    EXPECT(w.isClear, 1);
    EXPECT(w.rsv[0] | w.rsv[1] | w.rsv[2], 0);

    if (failures) {
        fprintf(stderr, "layout: %d failure(s)\n", failures);
        return 1;
    }
    printf("layout: ok\n");
    return 0;
}
