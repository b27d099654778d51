/* state_callbacks.c — aclrtRegStreamStateCallback and aclrtRegDeviceStateCallback, after
 * hicann/runtime (stream_state_callback_manager.cc, device_state_callback_manager.cc; the call
 * sites in runtime.cc, api_impl.cc SetDevice, context.cc).
 *
 * Checked: registration codes (NULL name, a name registered twice: 107000; a NULL callback
 * unregisters); SET_PRE only for a device not yet set, SET_POST after each aclrtSetDevice;
 * CREATE_POST after a stream is made and DESTROY_PRE before it goes (the stream still answers
 * in the callback), each stream callback in name order; RESET_PRE, the DESTROY_PRE of each
 * stream the reset takes away, then RESET_POST, only for the reset that releases the device;
 * DESTROY_PRE for a stream of a destroyed context. Callbacks call back into the runtime
 * without deadlock: a stream callback queries and synchronizes its stream; a RESET_PRE's set of
 * the device being reset is 507033 at once; a RESET_POST sets the device again. A context's
 * default stream is reported as CANN reports it (Stream::Setup, PrimaryContextCallBack,
 * ContextDestroy): CREATE_POST when the context is made, DESTROY_PRE before a releasing reset's
 * RESET_PRE or first in aclrtDestroyContext, with the handle aclrtCtxGetCurrentDefaultStream
 * answers.
 *
 * usage: state_callbacks SOC. Exit 0 and "state_callbacks: ok". */
#include "common.h"

#define MAXLOG 64
static struct {
    char who;   /* 'a', 'b' (stream callbacks), 'd' (device) */
    int state;
    uintptr_t what; /* the stream handle, or the device */
} g_log[MAXLOG];
static int g_n;
static int g_bad; /* callbacks whose call back into the runtime failed */
static aclError g_reset_pre_set = -1;
static int g_set_again; /* RESET_POST of device 0 sets it again (once) */

#define BAD(call)                                                                          \
    do {                                                                                   \
        aclError bad_ = (call);                                                            \
        if (bad_ != ACL_SUCCESS) {                                                         \
            fprintf(stderr, "[%s] in a callback: %s returned %d: %s\n", g_role, #call,     \
                    (int)bad_, recent_msg());                                              \
            g_bad++;                                                                       \
        }                                                                                  \
    } while (0)

static void log_it(char who, int state, uintptr_t what) {
    if (g_n < MAXLOG) {
        g_log[g_n].who = who;
        g_log[g_n].state = state;
        g_log[g_n].what = what;
    }
    g_n++;
}

static void on_stream(aclrtStream stm, aclrtStreamState state, void *args) {
    log_it(*(const char *)args, (int)state, (uintptr_t)stm);
    /* The stream is live in both states: before its destroy, after its create. */
    aclrtStreamStatus st;
    BAD(aclrtStreamQuery(stm, &st));
    BAD(aclrtSynchronizeStream(stm));
}

static void on_device(int32_t dev, aclrtDeviceState state, void *args) {
    (void)args;
    log_it('d', (int)state, (uintptr_t)dev);
    uint32_t n = 0;
    BAD(aclrtGetDeviceCount(&n));
    if (state == ACL_RT_DEVICE_STATE_RESET_PRE && dev == 0) g_reset_pre_set = aclrtSetDevice(0);
    if (state == ACL_RT_DEVICE_STATE_RESET_POST && dev == 0 && g_set_again) {
        g_set_again = 0;
        BAD(aclrtSetDevice(0));
    }
}

/* Requires log entry i to be (who, state, what). */
static void expect_at(int i, char who, int state, uintptr_t what) {
    REQUIRE(i < g_n && g_log[i].who == who && g_log[i].state == state && g_log[i].what == what,
            "log entry %d: got (%c, %d, %#lx) of %d, expected (%c, %d, %#lx)", i,
            i < g_n ? g_log[i].who : '-', i < g_n ? g_log[i].state : -1,
            i < g_n ? (unsigned long)g_log[i].what : 0ul, g_n, who, state, (unsigned long)what);
}

int main(int argc, char **argv) {
    g_role = "state_callbacks";
    REQUIRE(argc == 2, "usage: state_callbacks SOC");
    static const char a = 'a', b = 'b';
    EXPECT_RC(aclrtRegStreamStateCallback(NULL, on_stream, (void *)&a), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RC(aclrtRegDeviceStateCallback(NULL, on_device, NULL), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclrtRegStreamStateCallback("second", on_stream, (void *)&b));
    CHECK(aclrtRegStreamStateCallback("first", on_stream, (void *)&a));
    EXPECT_RC(aclrtRegStreamStateCallback("first", on_stream, (void *)&b),
              ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclrtRegStreamStateCallback("gone", on_stream, (void *)&b));
    CHECK(aclrtRegStreamStateCallback("gone", NULL, NULL));
    CHECK(aclrtRegStreamStateCallback("never", NULL, NULL));
    CHECK(aclrtRegDeviceStateCallback("dev", on_device, NULL));
    EXPECT_RC(aclrtRegDeviceStateCallback("dev", on_device, NULL), ACL_ERROR_RT_PARAM_INVALID);

    CHECK(aclInit(NULL));
    REQUIRE(g_n == 0, "%d callbacks ran in aclInit", g_n);
    /* The first set makes the primary context and its default stream: CREATE_POST with the
     * handle aclrtCtxGetCurrentDefaultStream answers, between SET_PRE and SET_POST. */
    CHECK(aclrtSetDevice(0));
    aclrtStream d0 = NULL;
    CHECK(aclrtCtxGetCurrentDefaultStream(&d0));
    expect_at(0, 'd', ACL_RT_DEVICE_STATE_SET_PRE, 0);
    expect_at(1, 'a', ACL_RT_STREAM_STATE_CREATE_POST, (uintptr_t)d0);
    expect_at(2, 'b', ACL_RT_STREAM_STATE_CREATE_POST, (uintptr_t)d0);
    expect_at(3, 'd', ACL_RT_DEVICE_STATE_SET_POST, 0);
    CHECK(aclrtSetDevice(0)); /* set already: no SET_PRE, no stream made */
    expect_at(4, 'd', ACL_RT_DEVICE_STATE_SET_POST, 0);
    REQUIRE(g_n == 5, "%d callbacks", g_n);

    aclrtStream s1 = NULL, s2 = NULL, s3 = NULL;
    CHECK(aclrtCreateStream(&s1));
    expect_at(5, 'a', ACL_RT_STREAM_STATE_CREATE_POST, (uintptr_t)s1);
    expect_at(6, 'b', ACL_RT_STREAM_STATE_CREATE_POST, (uintptr_t)s1);
    CHECK(aclrtDestroyStream(s1));
    expect_at(7, 'a', ACL_RT_STREAM_STATE_DESTROY_PRE, (uintptr_t)s1);
    expect_at(8, 'b', ACL_RT_STREAM_STATE_DESTROY_PRE, (uintptr_t)s1);
    EXPECT_RC(aclrtDestroyStream(s1), ACL_ERROR_RT_INVALID_HANDLE);
    REQUIRE(g_n == 9, "a refused destroy ran callbacks (%d)", g_n);

    /* A created context's default stream is reported when it is made, and first when the
     * context goes (api_impl.cc ContextDestroy), then the context's other streams. */
    aclrtContext ctx = NULL;
    CHECK(aclrtCreateContext(&ctx, 0));
    aclrtStream dc = NULL;
    CHECK(aclrtCtxGetCurrentDefaultStream(&dc));
    REQUIRE(dc != d0, "the new context's default stream is the primary context's");
    expect_at(9, 'a', ACL_RT_STREAM_STATE_CREATE_POST, (uintptr_t)dc);
    expect_at(10, 'b', ACL_RT_STREAM_STATE_CREATE_POST, (uintptr_t)dc);
    CHECK(aclrtCreateStreamWithConfig(&s2, 0, 0));
    expect_at(11, 'a', ACL_RT_STREAM_STATE_CREATE_POST, (uintptr_t)s2);
    expect_at(12, 'b', ACL_RT_STREAM_STATE_CREATE_POST, (uintptr_t)s2);
    CHECK(aclrtDestroyContext(ctx));
    expect_at(13, 'a', ACL_RT_STREAM_STATE_DESTROY_PRE, (uintptr_t)dc);
    expect_at(14, 'b', ACL_RT_STREAM_STATE_DESTROY_PRE, (uintptr_t)dc);
    expect_at(15, 'a', ACL_RT_STREAM_STATE_DESTROY_PRE, (uintptr_t)s2);
    expect_at(16, 'b', ACL_RT_STREAM_STATE_DESTROY_PRE, (uintptr_t)s2);
    CHECK(aclrtSetDevice(0));
    expect_at(17, 'd', ACL_RT_DEVICE_STATE_SET_POST, 0);

    /* Only the reset that releases the device reports it: the default stream first
     * (runtime.cc PrimaryContextCallBack), then RESET_PRE, its streams, RESET_POST. */
    CHECK(aclrtCreateStream(&s3));
    g_n = 0;
    CHECK(aclrtResetDevice(0));
    CHECK(aclrtResetDevice(0));
    REQUIRE(g_n == 0, "a reset that left the device set ran %d callbacks", g_n);
    g_set_again = 1;
    CHECK(aclrtResetDevice(0));
    expect_at(0, 'a', ACL_RT_STREAM_STATE_DESTROY_PRE, (uintptr_t)d0);
    expect_at(1, 'b', ACL_RT_STREAM_STATE_DESTROY_PRE, (uintptr_t)d0);
    expect_at(2, 'd', ACL_RT_DEVICE_STATE_RESET_PRE, 0);
    expect_at(3, 'a', ACL_RT_STREAM_STATE_DESTROY_PRE, (uintptr_t)s3);
    expect_at(4, 'b', ACL_RT_STREAM_STATE_DESTROY_PRE, (uintptr_t)s3);
    expect_at(5, 'd', ACL_RT_DEVICE_STATE_RESET_POST, 0);
    /* RESET_POST's own set of device 0, reported in it, with a new default stream. */
    expect_at(6, 'd', ACL_RT_DEVICE_STATE_SET_PRE, 0);
    REQUIRE(g_n > 8, "%d callbacks in the releasing reset", g_n);
    uintptr_t again = g_log[7].what;
    expect_at(7, 'a', ACL_RT_STREAM_STATE_CREATE_POST, again);
    expect_at(8, 'b', ACL_RT_STREAM_STATE_CREATE_POST, again);
    expect_at(9, 'd', ACL_RT_DEVICE_STATE_SET_POST, 0);
    REQUIRE(g_n == 10, "%d callbacks in the releasing reset", g_n);
    CHECK(aclrtCtxGetCurrentDefaultStream(&d0));
    REQUIRE((uintptr_t)d0 == again, "the new default stream %p, reported %#lx", d0,
            (unsigned long)again);
    REQUIRE(g_reset_pre_set == ACL_ERROR_RT_DEV_SETUP_ERROR,
            "RESET_PRE's set of the device being reset returned %d, not 507033",
            (int)g_reset_pre_set);
    REQUIRE(g_bad == 0, "%d calls from callbacks failed", g_bad);

    /* Unregistered: nothing more is called. */
    CHECK(aclrtRegStreamStateCallback("first", NULL, NULL));
    CHECK(aclrtRegStreamStateCallback("second", NULL, NULL));
    CHECK(aclrtRegDeviceStateCallback("dev", NULL, NULL));
    g_n = 0;
    CHECK(aclrtCreateStream(&s1));
    CHECK(aclrtDestroyStream(s1));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    REQUIRE(g_n == 0, "%d callbacks ran after unregistering", g_n);
    printf("state_callbacks: ok (%s)\n", argv[1]);
    return 0;
}
