/*
 * acl/acl.h — the subset of Huawei Ascend CANN's AscendCL C API that acl-notify's
 * libascendcl.so implements: initialisation, devices, streams, and Notify management.
 *
 * Names, signatures, types and numeric values follow CANN's public headers (acl_base.h,
 * acl_base_rt.h, acl_rt.h, error_codes/rt_error_codes.h), so programs written for CANN compile
 * unchanged. Written by hand for acl-notify; the behaviour is specified in SPEC.md §3.
 *
 * Link: cc prog.c -I<prefix>/include -L<prefix>/lib -lascendcl -Wl,-rpath,<prefix>/lib
 *
 * The library runs on acl-notify's simulator, configured at aclInit() by the environment:
 *   ACL_NOTIFY_SIM_SOC        SoC family returned by aclrtGetSocName (default Ascend910B)
 *   ACL_NOTIFY_SIM_DEVICES    number of devices (default 8)
 *   ACL_NOTIFY_SIM_NAMESPACE  which simulated machine to join (processes sharing a notify
 *                             must use the same value)
 *   ACL_NOTIFY_SIM_SERVER_ID  this process's SuperPod server id (default 0)
 *   ACL_NOTIFY_SIM_STREAM_CPUS  where stream workers run: off (default), spread, or a CPU list
 *   ACL_NOTIFY_SIM_ENQUEUE_TIMEOUT  seconds a task waits for room in a full stream before
 *                             507002 (default 60; 0 = for ever)
 * The first process to open a namespace fixes its SoC and device count (the README has more).
 *
 * Conventions of this implementation (where CANN is silent):
 *   - Every call except aclInit, aclGetRecentErrMsg, aclrtDeviceGetBareTgid and aclFinalize
 *     returns ACL_ERROR_UNINITIALIZE before aclInit (and after aclFinalize). The argument
 *     checks that SPEC §3 lists before any device state is consulted (NULL pointers, flag
 *     words, counts) come first.
 *   - Handles (aclrtNotify, aclrtStream) are opaque values, not addresses; every call
 *     validates them, and a stale, destroyed, foreign or garbage handle is
 *     ACL_ERROR_RT_INVALID_HANDLE, never a crash.
 *   - aclGetRecentErrMsg() returns (and clears) the messages of this thread's failed calls
 *     since the previous aclGetRecentErrMsg(), newest first, or NULL if there were none. The
 *     pointer stays valid until the next aclGetRecentErrMsg() on the same thread.
 */
#ifndef ACL_NOTIFY_ACL_ACL_H_
#define ACL_NOTIFY_ACL_ACL_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error_codes/rt_error_codes.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define ACL_FUNC_VISIBILITY __attribute__((visibility("default")))
#else
#define ACL_FUNC_VISIBILITY
#endif

/* ---- Types ------------------------------------------------------------------------------ */

typedef int aclError;
typedef void *aclrtStream;
typedef void *aclrtNotify;
/* A count notify (Ascend 950 family): a 32-bit counter instead of a binary flag. */
typedef void *aclrtCntNotify;

/* One inter-server whitelist entry (aclrtNotifySetImportPidInterServer): `num` PIDs at `pid`
 * on SuperPod server `sdid`. LP64 layout: sdid at 0, pid at 8, num at 16; size 24. */
typedef struct {
    uint32_t sdid;
    int32_t *pid;
    size_t num;
} aclrtServerPid;

typedef enum aclrtStreamStatus {
    ACL_STREAM_STATUS_COMPLETE = 0,
    ACL_STREAM_STATUS_NOT_READY = 1,
    ACL_STREAM_STATUS_RESERVED = 0xFFFF
} aclrtStreamStatus;

/* aclrtCntNotifyRecord: what a record does to the count. */
typedef enum {
    ACL_RT_CNT_NOTIFY_RECORD_SET_VALUE_MODE = 0, /* count = value */
    ACL_RT_CNT_NOTIFY_RECORD_ADD_MODE = 1,       /* count += value (wraps at 2^32) */
    ACL_RT_CNT_NOTIFY_RECORD_BIT_OR_MODE = 2,    /* count |= value */
    ACL_RT_CNT_NOTIFY_RECORD_BIT_AND_MODE = 4,   /* count &= value */
} aclrtCntNotifyRecordMode;

/* 8 bytes: mode at 0, value at 4. */
typedef struct {
    aclrtCntNotifyRecordMode mode;
    uint32_t value;
} aclrtCntNotifyRecordInfo;

/* aclrtCntNotifyWaitWithTimeout: when a wait is released. */
typedef enum {
    ACL_RT_CNT_NOTIFY_WAIT_LESS_MODE = 0,               /* count < value */
    ACL_RT_CNT_NOTIFY_WAIT_EQUAL_MODE = 1,              /* count == value */
    ACL_RT_CNT_NOTIFY_WAIT_BIGGER_MODE = 2,             /* count > value */
    ACL_RT_CNT_NOTIFY_WAIT_BIGGER_OR_EQUAL_MODE = 3,    /* count >= value */
    ACL_RT_CNT_NOTIFY_WAIT_EQUAL_WITH_BITMASK_MODE = 4, /* (count & value) == value */
} aclrtCntNotifyWaitMode;

/* 16 bytes: mode at 0, value at 4, timeout at 8, isClear at 12, rsv at 13. timeout in seconds
 * (0 = forever, UINT32_MAX = the aclrtSetOpWaitTimeout default); isClear non-zero: set the
 * count to 0 when the wait is released. Field types and names as in CANN's public acl_rt.h
 * (its internal rts_event.h declares a `bool isClear` and `rev[3]`; programs compile against
 * the public one). */
typedef struct {
    aclrtCntNotifyWaitMode mode;
    uint32_t value;
    uint32_t timeout;
    uint8_t isClear;
    uint8_t rsv[3];
} aclrtCntNotifyWaitInfo;

/* A host function run by a stream (aclrtLaunchHostFunc). */
typedef void (*aclrtHostFunc)(void *args);
typedef void (*aclrtCallback)(void *userData);

/* ---- Error codes (aclError) ---------------------------------------------------------------
 * The names and values of CANN's acl_base_rt.h (there `static const int`, here macros of the
 * same value); the runtime's ACL_ERROR_RT_* codes are in acl/error_codes/rt_error_codes.h. The
 * library returns only the codes SPEC §5 lists. */

/* success */
#define ACL_ERROR_NONE                            0
#define ACL_SUCCESS                               0

/* 1xxxxx: invalid arguments or calls */
#define ACL_ERROR_INVALID_PARAM                   100000
#define ACL_ERROR_UNINITIALIZE                    100001
#define ACL_ERROR_REPEAT_INITIALIZE               100002
#define ACL_ERROR_INVALID_FILE                    100003
#define ACL_ERROR_WRITE_FILE                      100004
#define ACL_ERROR_INVALID_FILE_SIZE               100005
#define ACL_ERROR_PARSE_FILE                      100006
#define ACL_ERROR_FILE_MISSING_ATTR               100007
#define ACL_ERROR_FILE_ATTR_INVALID               100008
#define ACL_ERROR_INVALID_DUMP_CONFIG             100009
#define ACL_ERROR_INVALID_PROFILING_CONFIG        100010
#define ACL_ERROR_INVALID_MODEL_ID                100011
#define ACL_ERROR_DESERIALIZE_MODEL               100012
#define ACL_ERROR_PARSE_MODEL                     100013
#define ACL_ERROR_READ_MODEL_FAILURE              100014
#define ACL_ERROR_MODEL_SIZE_INVALID              100015
#define ACL_ERROR_MODEL_MISSING_ATTR              100016
#define ACL_ERROR_MODEL_INPUT_NOT_MATCH           100017
#define ACL_ERROR_MODEL_OUTPUT_NOT_MATCH          100018
#define ACL_ERROR_MODEL_NOT_DYNAMIC               100019
#define ACL_ERROR_OP_TYPE_NOT_MATCH               100020
#define ACL_ERROR_OP_INPUT_NOT_MATCH              100021
#define ACL_ERROR_OP_OUTPUT_NOT_MATCH             100022
#define ACL_ERROR_OP_ATTR_NOT_MATCH               100023
#define ACL_ERROR_OP_NOT_FOUND                    100024
#define ACL_ERROR_OP_LOAD_FAILED                  100025
#define ACL_ERROR_UNSUPPORTED_DATA_TYPE           100026
#define ACL_ERROR_FORMAT_NOT_MATCH                100027
#define ACL_ERROR_BIN_SELECTOR_NOT_REGISTERED     100028
#define ACL_ERROR_KERNEL_NOT_FOUND                100029
#define ACL_ERROR_BIN_SELECTOR_ALREADY_REGISTERED 100030
#define ACL_ERROR_KERNEL_ALREADY_REGISTERED       100031
#define ACL_ERROR_INVALID_QUEUE_ID                100032
#define ACL_ERROR_REPEAT_SUBSCRIBE                100033
#define ACL_ERROR_STREAM_NOT_SUBSCRIBE            100034
#define ACL_ERROR_THREAD_NOT_SUBSCRIBE            100035
#define ACL_ERROR_WAIT_CALLBACK_TIMEOUT           100036
#define ACL_ERROR_REPEAT_FINALIZE                 100037
#define ACL_ERROR_NOT_STATIC_AIPP                 100038
#define ACL_ERROR_COMPILING_STUB_MODE             100039
#define ACL_ERROR_GROUP_NOT_SET                   100040
#define ACL_ERROR_GROUP_NOT_CREATE                100041
#define ACL_ERROR_PROF_ALREADY_RUN                100042
#define ACL_ERROR_PROF_NOT_RUN                    100043
#define ACL_ERROR_DUMP_ALREADY_RUN                100044
#define ACL_ERROR_DUMP_NOT_RUN                    100045
#define ACL_ERROR_PROF_REPEAT_SUBSCRIBE           148046
#define ACL_ERROR_PROF_API_CONFLICT               148047
#define ACL_ERROR_INVALID_MAX_OPQUEUE_NUM_CONFIG  148048
#define ACL_ERROR_INVALID_OPP_PATH                148049
#define ACL_ERROR_OP_UNSUPPORTED_DYNAMIC          148050
#define ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED   148051
#define ACL_ERROR_UNSUPPORTED_JPEG                148052
#define ACL_ERROR_INVALID_BUNDLE_MODEL_ID         148053

/* 2xxxxx: resources and features */
#define ACL_ERROR_BAD_ALLOC                       200000
#define ACL_ERROR_API_NOT_SUPPORT                 200001
#define ACL_ERROR_INVALID_DEVICE                  200002
#define ACL_ERROR_MEMORY_ADDRESS_UNALIGNED        200003
#define ACL_ERROR_RESOURCE_NOT_MATCH              200004
#define ACL_ERROR_INVALID_RESOURCE_HANDLE         200005
#define ACL_ERROR_FEATURE_UNSUPPORTED             200006
#define ACL_ERROR_PROF_MODULES_UNSUPPORTED        200007

/* 3xxxxx: storage */
#define ACL_ERROR_STORAGE_OVER_LIMIT              300000

/* 5xxxxx: internal errors */
#define ACL_ERROR_INTERNAL_ERROR                  500000
#define ACL_ERROR_FAILURE                         500001
#define ACL_ERROR_GE_FAILURE                      500002
#define ACL_ERROR_RT_FAILURE                      500003
#define ACL_ERROR_DRV_FAILURE                     500004
#define ACL_ERROR_PROFILING_FAILURE               500005

/* ---- Flags -------------------------------------------------------------------------------- */

/* aclrtCreateNotify */
#define ACL_NOTIFY_DEFAULT 0x00000000U
#define ACL_NOTIFY_DEVICE_USE_ONLY 0x00000001U

/* aclrtNotifyGetExportKey */
#define ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT 0x0UL
#define ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION 0x02UL

/* aclrtNotifyImportByKey */
#define ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT 0x0UL
#define ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS 0x02UL

/* ---- Initialisation and errors ------------------------------------------------------------ */

/* Opens the simulated machine described by ACL_NOTIFY_SIM_*. configPath may be NULL; its
 * contents are not read. A second call → ACL_ERROR_REPEAT_INITIALIZE; a bad environment →
 * the simulator's code, explained by aclGetRecentErrMsg(). */
ACL_FUNC_VISIBILITY aclError aclInit(const char *configPath);
/* Releases every stream and notify of the process. A second call → ACL_ERROR_REPEAT_FINALIZE.
 * The first aclInit or aclFinalize of a process registers the library's fork handler:
 * ACL_ERROR_RT_MEMORY_ALLOCATION if pthread_atfork fails (out of memory). */
ACL_FUNC_VISIBILITY aclError aclFinalize(void);
ACL_FUNC_VISIBILITY const char *aclGetRecentErrMsg(void);

/* ---- Devices ------------------------------------------------------------------------------ */

/* The current device is per thread. */
ACL_FUNC_VISIBILITY aclError aclrtSetDevice(int32_t deviceId);
ACL_FUNC_VISIBILITY aclError aclrtGetDevice(int32_t *deviceId);
ACL_FUNC_VISIBILITY aclError aclrtResetDevice(int32_t deviceId);
ACL_FUNC_VISIBILITY aclError aclrtResetDeviceForce(int32_t deviceId);
ACL_FUNC_VISIBILITY aclError aclrtGetDeviceCount(uint32_t *count);
/* NULL before aclInit. */
ACL_FUNC_VISIBILITY const char *aclrtGetSocName(void);
ACL_FUNC_VISIBILITY aclError aclrtDeviceCanAccessPeer(int32_t *canAccessPeer, int32_t deviceId,
                                                      int32_t peerDeviceId);
/* Between the current device and peerDeviceId; flags must be 0. */
ACL_FUNC_VISIBILITY aclError aclrtDeviceEnablePeerAccess(int32_t peerDeviceId, uint32_t flags);
ACL_FUNC_VISIBILITY aclError aclrtDeviceGetBareTgid(int32_t *pid);

/* Device attributes, as CANN numbers them. */
typedef enum {
    ACL_DEV_ATTR_AICPU_CORE_NUM = 1,
    ACL_DEV_ATTR_AICORE_CORE_NUM = 101,
    ACL_DEV_ATTR_CUBE_CORE_NUM = 102,
    ACL_DEV_ATTR_VECTOR_CORE_NUM = 201,
    ACL_DEV_ATTR_WARP_SIZE = 202,
    ACL_DEV_ATTR_MAX_THREAD_PER_VECTOR_CORE = 203,
    ACL_DEV_ATTR_LOCAL_MEM_PER_VECTOR_CORE = 204,
    ACL_DEV_ATTR_UBUF_PER_VECTOR_CORE = 204,
    ACL_DEV_ATTR_MAX_GRID_DIM_X = 205,
    ACL_DEV_ATTR_MAX_GRID_DIM_Y = 206,
    ACL_DEV_ATTR_MAX_GRID_DIM_Z = 207,
    ACL_DEV_ATTR_MAX_BLOCK_PER_GRID = 208,
    ACL_DEV_ATTR_MAX_THREADS_PER_BLOCK = 209,
    ACL_DEV_ATTR_MAX_BLOCK_DIM_X = 210,
    ACL_DEV_ATTR_MAX_BLOCK_DIM_Y = 211,
    ACL_DEV_ATTR_MAX_BLOCK_DIM_Z = 212,
    ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE = 301,
    ACL_DEV_ATTR_L2_CACHE_SIZE = 302,
    ACL_DEV_ATTR_SMP_ID = 401U,
    ACL_DEV_ATTR_PHY_CHIP_ID = 402U,
    ACL_DEV_ATTR_SUPER_POD_DEVIDE_ID = 403U,
    ACL_DEV_ATTR_SUPER_POD_DEVICE_ID = 403U,
    ACL_DEV_ATTR_SUPER_POD_SERVER_ID = 404U,
    ACL_DEV_ATTR_SUPER_POD_ID = 405U,
    ACL_DEV_ATTR_CUST_OP_PRIVILEGE = 406U,
    ACL_DEV_ATTR_MAINBOARD_ID = 407U,
    ACL_DEV_ATTR_HD_CONNECT_TYPE = 408U,
    ACL_DEV_ATTR_DEVICE_FORM_FACTOR = 409U,
    ACL_DEV_ATTR_IS_VIRTUAL = 501U,
    ACL_DEV_ATTR_NPU_ARCH = 601U,
} aclrtDevAttr;

/* The simulator answers the attributes a notify program needs and no others:
 *   ACL_DEV_ATTR_SUPER_POD_DEVICE_ID and ACL_DEV_ATTR_SUPER_POD_SERVER_ID: this process's
 *     server (ACL_NOTIFY_SIM_SERVER_ID) — the sdid to put in an aclrtServerPid for it;
 *   ACL_DEV_ATTR_PHY_CHIP_ID: the device id; ACL_DEV_ATTR_SUPER_POD_ID: 0.
 * Any other attribute → ACL_ERROR_RT_FEATURE_NOT_SUPPORT. value NULL → ACL_ERROR_INVALID_PARAM;
 * no such device → ACL_ERROR_RT_INVALID_DEVICEID. */
ACL_FUNC_VISIBILITY aclError aclrtGetDeviceInfo(uint32_t deviceId, aclrtDevAttr attr,
                                                int64_t *value);

/* ---- Streams (a NULL stream is the current device's default stream) -----------------------
 * A stream queues up to 1024 tasks. Queuing one more (a record, a wait, a host function) waits
 * for room, as on CANN — but only for ACL_NOTIFY_SIM_ENQUEUE_TIMEOUT seconds (default 60; 0
 * waits for ever); then the call fails with ACL_ERROR_RT_STREAM_TASK_FULL, the task is not
 * queued, and aclGetRecentErrMsg() says why. A queue that stays full that long is almost always
 * a deadlock: its head waits, with no timeout, for a record this thread would queue next. */

ACL_FUNC_VISIBILITY aclError aclrtCreateStream(aclrtStream *stream);
ACL_FUNC_VISIBILITY aclError aclrtDestroyStream(aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtDestroyStreamForce(aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeStream(aclrtStream stream);
/* timeout in ms: -1 forever, 0 poll; expiry → ACL_ERROR_RT_STREAM_SYNC_TIMEOUT. */
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout);
ACL_FUNC_VISIBILITY aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus *status);
ACL_FUNC_VISIBILITY aclError aclrtLaunchHostFunc(aclrtStream stream, aclrtHostFunc fn, void *args);
/* Process default for aclrtWaitAndResetNotify(..., UINT32_MAX), in seconds; 0 = forever. */
ACL_FUNC_VISIBILITY aclError aclrtSetOpWaitTimeout(uint32_t timeout);

/* ---- Notify ------------------------------------------------------------------------------- */

ACL_FUNC_VISIBILITY aclError aclrtCreateNotify(aclrtNotify *notify, uint64_t flag);
ACL_FUNC_VISIBILITY aclError aclrtDestroyNotify(aclrtNotify notify);
ACL_FUNC_VISIBILITY aclError aclrtRecordNotify(aclrtNotify notify, aclrtStream stream);
/* timeout in seconds: 0 forever, UINT32_MAX the aclrtSetOpWaitTimeout default. A timeout is
 * reported by the next aclrtSynchronizeStream (ACL_ERROR_RT_TASK_TIMEOUT). */
ACL_FUNC_VISIBILITY aclError aclrtWaitAndResetNotify(aclrtNotify notify, aclrtStream stream,
                                                     uint32_t timeout);
ACL_FUNC_VISIBILITY aclError aclrtGetNotifyId(aclrtNotify notify, uint32_t *notifyId);
ACL_FUNC_VISIBILITY aclError aclrtNotifyBatchReset(aclrtNotify *notifies, size_t num);
/* len must be at least 65: the key is at most 64 characters plus NUL. */
ACL_FUNC_VISIBILITY aclError aclrtNotifyGetExportKey(aclrtNotify notify, char *key, size_t len,
                                                     uint64_t flags);
ACL_FUNC_VISIBILITY aclError aclrtNotifyImportByKey(aclrtNotify *notify, const char *key,
                                                    uint64_t flags);
ACL_FUNC_VISIBILITY aclError aclrtNotifySetImportPid(aclrtNotify notify, int32_t *pid, size_t num);
ACL_FUNC_VISIBILITY aclError aclrtNotifySetImportPidInterServer(aclrtNotify notify,
                                                                aclrtServerPid *serverPids,
                                                                size_t num);

/* ---- Count notify (Ascend950PR / Ascend950DT; every call is ACL_ERROR_RT_FEATURE_NOT_SUPPORT
 * on other SoCs) ------------------------------------------------------------------------------
 * Check order: a NULL info → ACL_ERROR_INVALID_PARAM; a NULL cntNotify or notifyId, a flag
 * other than 0, or an unknown mode → ACL_ERROR_RT_PARAM_INVALID; then
 * ACL_ERROR_UNINITIALIZE; ACL_ERROR_RT_FEATURE_NOT_SUPPORT; ACL_ERROR_RT_INVALID_HANDLE; the
 * stream checks (ACL_ERROR_RT_INVALID_HANDLE, _CONTEXT_NULL, _STREAM_CONTEXT). Count-notify ids
 * come from a pool of their own (separate from notify ids). Record, wait and reset are
 * asynchronous; a wait timeout is reported by the next aclrtSynchronizeStream
 * (ACL_ERROR_RT_TASK_TIMEOUT). A wait must be enqueued on a stream of the count notify's device
 * (else ACL_ERROR_RT_PARAM_INVALID); one record releases every wait whose condition then holds. */

ACL_FUNC_VISIBILITY aclError aclrtCntNotifyCreate(aclrtCntNotify *cntNotify, uint64_t flag);
ACL_FUNC_VISIBILITY aclError aclrtCntNotifyDestroy(aclrtCntNotify cntNotify);
ACL_FUNC_VISIBILITY aclError aclrtCntNotifyRecord(aclrtCntNotify cntNotify, aclrtStream stream,
                                                  aclrtCntNotifyRecordInfo *info);
ACL_FUNC_VISIBILITY aclError aclrtCntNotifyWaitWithTimeout(aclrtCntNotify cntNotify,
                                                           aclrtStream stream,
                                                           aclrtCntNotifyWaitInfo *info);
/* Sets the count to 0 when the stream reaches it (a record of SET_VALUE 0). */
ACL_FUNC_VISIBILITY aclError aclrtCntNotifyReset(aclrtCntNotify cntNotify, aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtCntNotifyGetId(aclrtCntNotify cntNotify, uint32_t *notifyId);

#ifdef __cplusplus
}
#endif

#endif /* ACL_NOTIFY_ACL_ACL_H_ */
