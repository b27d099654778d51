/*
 * acl/aclnsim.h — extensions of acl-notify's simulator library beyond CANN's API: host-side
 * waits on a notify, merged-record counts and resource budgets. Not part of CANN; a program that uses them runs only
 * on this library (acl-notify's driver backend looks them up optionally).
 */
#ifndef ACL_NOTIFY_ACL_ACLNSIM_H_
#define ACL_NOTIFY_ACL_ACLNSIM_H_

#include "acl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Blocks the calling thread until the notify is recorded, then resets it (consumes the record
 * exactly as a stream wait would). The current device must be the owner's (else
 * ACL_ERROR_RT_PARAM_INVALID). timeoutUs in microseconds, UINT64_MAX = forever; expiry →
 * ACL_ERROR_RT_WAIT_TIMEOUT. */
ACL_FUNC_VISIBILITY aclError aclnsimNotifyHostWait(aclrtNotify notify, uint64_t timeoutUs);

/* If the flag is set, resets it and writes 1 to *consumed, else writes 0. Never blocks. Same
 * device rule as aclnsimNotifyHostWait. */
ACL_FUNC_VISIBILITY aclError aclnsimNotifyTryConsume(aclrtNotify notify, int32_t *consumed);

/* How many records of the notify landed on an already-set flag and merged into the pending
 * record (two records before a wait collapse into one): *sinceLastWait since the last wait took
 * a record (n means n + 1 records became one), *total in the notify's life, across every process
 * that records it. A protocol that may record twice before the wait needs an acknowledgement
 * notify. Any holder may ask, with any device current. */
ACL_FUNC_VISIBILITY aclError aclnsimNotifyGetMergedRecords(aclrtNotify notify,
                                                          uint32_t *sinceLastWait,
                                                          uint32_t *total);

/* Notify ids still free on deviceId, across every process of the simulated machine. Ids that
 * only dead processes held count as free (they are reclaimed first). */
ACL_FUNC_VISIBILITY aclError aclnsimGetNotifyFreeCount(int32_t deviceId, uint32_t *count);

/* Count-notify ids still free on deviceId, across every process of the simulated machine
 * (ACL_ERROR_RT_FEATURE_NOT_SUPPORT on SoCs without count notifies). Ids whose owner died
 * count as free (they are reclaimed first). */
ACL_FUNC_VISIBILITY aclError aclnsimGetCntNotifyFreeCount(int32_t deviceId, uint32_t *count);

/* The SuperPod server this process runs on (ACL_NOTIFY_SIM_SERVER_ID, default 0). */
ACL_FUNC_VISIBILITY aclError aclnsimGetServerId(uint32_t *serverId);

#ifdef __cplusplus
}
#endif

#endif /* ACL_NOTIFY_ACL_ACLNSIM_H_ */
