/* peer_copy_order.c — two devices in one process, as CANN's device/2_device_P2P sample and a
 * pipeline across devices use them: aclrtDeviceCanAccessPeer, aclrtDeviceEnablePeerAccess from
 * device 0 to device 1, then rounds of new data: a stream of device 0 copies it in and on to
 * device 1's memory (device to device) and records a notify and an event; a second stream of
 * device 0 waits on the notify and reads device 1's memory back, a stream of device 1 waits on
 * the event and reads it too. Every byte of every round is checked on both paths. Then CANN's
 * refusals: a device with itself (100000), a reserved flag (200006), the copy back from device
 * 1 without access from device 1 (207006, queued or not), a wait on device 0's notify (local
 * or exported) from device 1's stream (107000), and a copy after aclrtDeviceDisablePeerAccess
 * (207006).
 * Exit 0 and "peer_copy_order: ok". */
#include "common.h"

enum { N = 4096, ROUNDS = 20 };

int main(void) {
    g_role = "peer_copy_order";
    CHECK(aclInit(NULL));
    int32_t can = -1;
    CHECK(aclrtDeviceCanAccessPeer(&can, 0, 1));
    REQUIRE(can == 1, "device 0 cannot access device 1: %d", can);
    EXPECT_RC(aclrtDeviceCanAccessPeer(&can, 0, 0), ACL_ERROR_INVALID_PARAM);

    CHECK(aclrtSetDevice(0));
    EXPECT_RC(aclrtDeviceEnablePeerAccess(0, 0), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtDeviceEnablePeerAccess(1, 1), ACL_ERROR_FEATURE_UNSUPPORTED);
    CHECK(aclrtDeviceEnablePeerAccess(1, 0));
    aclrtContext ctx0, ctx1;
    CHECK(aclrtGetCurrentContext(&ctx0));
    aclrtStream s0, s0b;
    CHECK(aclrtCreateStream(&s0));
    CHECK(aclrtCreateStream(&s0b));
    aclrtNotify n;
    CHECK(aclrtCreateNotify(&n, 0));
    aclrtEvent ev;
    CHECK(aclrtCreateEvent(&ev));
    void *src0;
    CHECK(aclrtMalloc(&src0, N, ACL_MEM_MALLOC_HUGE_FIRST));
    unsigned char *in, *out0, *out1;
    CHECK(aclrtMallocHost((void **)&in, N));
    CHECK(aclrtMallocHost((void **)&out0, N));
    CHECK(aclrtMallocHost((void **)&out1, N));

    CHECK(aclrtSetDevice(1));
    CHECK(aclrtGetCurrentContext(&ctx1));
    aclrtStream s1;
    CHECK(aclrtCreateStream(&s1));
    void *dst1;
    CHECK(aclrtMalloc(&dst1, N, ACL_MEM_MALLOC_HUGE_FIRST));

    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < N; i++) in[i] = (unsigned char)(r * 31 + i);
        memset(out0, 0, N);
        memset(out1, 0, N);
        CHECK(aclrtSetCurrentContext(ctx0));
        CHECK(aclrtMemcpyAsync(src0, N, in, N, ACL_MEMCPY_HOST_TO_DEVICE, s0));
        CHECK(aclrtMemcpyAsync(dst1, N, src0, N, ACL_MEMCPY_DEVICE_TO_DEVICE, s0));
        CHECK(aclrtRecordNotify(n, s0));
        CHECK(aclrtRecordEvent(ev, s0));
        CHECK(aclrtWaitAndResetNotify(n, s0b, 0));
        CHECK(aclrtMemcpyAsync(out0, N, dst1, N, ACL_MEMCPY_DEVICE_TO_HOST, s0b));
        CHECK(aclrtSetCurrentContext(ctx1));
        CHECK(aclrtStreamWaitEvent(s1, ev));
        CHECK(aclrtMemcpyAsync(out1, N, dst1, N, ACL_MEMCPY_DEVICE_TO_HOST, s1));
        CHECK(aclrtSynchronizeStream(s1));
        CHECK(aclrtSetCurrentContext(ctx0));
        CHECK(aclrtSynchronizeStream(s0b));
        for (int i = 0; i < N; i++) {
            unsigned char want = (unsigned char)(r * 31 + i);
            REQUIRE(out0[i] == want, "round %d byte %d: %d after the notify, %d expected", r, i,
                    out0[i], want);
            REQUIRE(out1[i] == want, "round %d byte %d: %d after the event, %d expected", r, i,
                    out1[i], want);
        }
    }

    /* Access is one way: device 1 enabled none towards device 0. */
    CHECK(aclrtSetCurrentContext(ctx1));
    EXPECT_RC(aclrtMemcpy(src0, N, dst1, N, ACL_MEMCPY_DEVICE_TO_DEVICE), ACL_ERROR_RT_NO_PERMISSION);
    EXPECT_RC(aclrtMemcpyAsync(src0, N, dst1, N, ACL_MEMCPY_DEVICE_TO_DEVICE, s1),
              ACL_ERROR_RT_NO_PERMISSION);
    /* A notify is waited on from its own device only. An exported (IPC) notify of device 0,
     * waited on from device 1, CANN refuses with 107000 (hicann/runtime notify.cc
     * Notify::CheckIpcNotifyDevId, called by api_impl.cc ApiImpl::NotifyWait); the simulator
     * refuses a local notify so too, where CANN's runtime checks nothing and the device would
     * wait on another notify of the same id. A record from device 1 reaches it (peer access). */
    aclrtNotify nx;
    char nkey[128];
    CHECK(aclrtSetCurrentContext(ctx0));
    CHECK(aclrtCreateNotify(&nx, 0));
    CHECK(aclrtNotifyGetExportKey(nx, nkey, sizeof nkey, ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT));
    CHECK(aclrtSetCurrentContext(ctx1));
    EXPECT_RC(aclrtWaitAndResetNotify(nx, s1, 1), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("lives on device 0", "only be waited on from that device", "not from device 1",
               NULL);
    EXPECT_RC(aclrtWaitAndResetNotify(n, s1, 1), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("lives on device 0", "not from device 1", NULL);
    /* From device 0's context, device 1's stream is not its own (CANN: 107003). */
    CHECK(aclrtSetCurrentContext(ctx0));
    EXPECT_RC(aclrtWaitAndResetNotify(n, s1, 1), ACL_ERROR_RT_STREAM_CONTEXT);
    CHECK(aclrtDestroyNotify(nx));

    CHECK(aclrtDeviceDisablePeerAccess(1));
    EXPECT_RC(aclrtMemcpy(dst1, N, src0, N, ACL_MEMCPY_DEVICE_TO_DEVICE), ACL_ERROR_RT_NO_PERMISSION);

    CHECK(aclrtDestroyStream(s0));
    CHECK(aclrtDestroyStream(s0b));
    CHECK(aclrtDestroyNotify(n));
    CHECK(aclrtDestroyEvent(ev));
    CHECK(aclrtFree(src0));
    CHECK(aclrtFreeHost(in));
    CHECK(aclrtFreeHost(out0));
    CHECK(aclrtFreeHost(out1));
    CHECK(aclrtSetCurrentContext(ctx1));
    CHECK(aclrtDestroyStream(s1));
    CHECK(aclrtFree(dst1));
    CHECK(aclrtResetDevice(1));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("peer_copy_order: ok\n");
    return 0;
}
