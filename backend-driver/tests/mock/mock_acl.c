/* A strict stand-in for libascendcl.so, used only by backend-driver's tests.
 *
 * It exports the functions the driver binds with CANN's prototypes and checks everything the
 * driver promises about marshalling: every notify/stream pointer it receives must be one it
 * handed out and has not destroyed (anything else counts a violation), every call that depends
 * on the current device must find the right one set on the calling thread, key buffers must be
 * at least 65 bytes, aclrtServerPid entries must have num == 1 and a readable pid. Tests read
 * the counters through mock_* functions. Build with -DMOCK_EXT to also export the optional
 * aclnsim* extensions.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int aclError;
typedef struct {
    uint32_t sdid;
    int32_t *pid;
    size_t num;
} aclrtServerPid;
typedef void (*aclrtHostFunc)(void *);

#define MAX_OBJ 256
enum { KIND_FREE = 0, KIND_NOTIFY = 1, KIND_STREAM = 2 };

struct obj {
    int kind;
    int device;
    int owner_device;
    int imported;
    int exported;
    int flag; /* notify: set/reset */
    uint32_t id;
    int npids;
    int32_t pids[64];
    uint32_t sdids[64];
};

static struct obj objs[MAX_OBJ];
static pthread_mutex_t lock_ = PTHREAD_MUTEX_INITIALIZER;
static atomic_int violations;
static atomic_int set_device_calls;
static __thread int set_device_calls_here;
static const char *soc_name = "Ascend910B3";
static int foreign_keys;
/* What aclrtGetDeviceInfo answers for ACL_DEV_ATTR_SUPER_POD_DEVICE_ID (403, the SDID); -1:
 * it fails (not a SuperPod). ACL_DEV_ATTR_SUPER_POD_SERVER_ID (404) answers another number,
 * as on a real SuperPod. */
static int64_t sdid = -1;
static atomic_int init_calls, finalize_calls, finalize_ref_calls;
static int initialized;
static uint32_t next_id = 1;
static __thread int cur_dev = -1;
static __thread char errbuf[512];
static __thread int errset;

static aclError fail(aclError code, const char *what) {
    snprintf(errbuf, sizeof errbuf, "mock: %s", what);
    errset = 1;
    return code;
}

static struct obj *find(void *p, int kind) {
    uintptr_t a = (uintptr_t)p, lo = (uintptr_t)&objs[0], hi = (uintptr_t)&objs[MAX_OBJ];
    if (a < lo || a >= hi || (a - lo) % sizeof(struct obj) != 0) return NULL;
    struct obj *o = (struct obj *)p;
    return o->kind == kind ? o : NULL;
}

/* A pointer the driver should never have passed: count it. */
static aclError bad(const char *what) {
    atomic_fetch_add(&violations, 1);
    return fail(107017, what);
}

static struct obj *alloc_obj(int kind) {
    for (int i = 0; i < MAX_OBJ; i++) {
        if (objs[i].kind == KIND_FREE) {
            memset(&objs[i], 0, sizeof objs[i]);
            objs[i].kind = kind;
            return &objs[i];
        }
    }
    return NULL;
}

/* ---- test hooks ---- */
int mock_violations(void) { return atomic_load(&violations); }
int mock_set_device_calls(void) { return atomic_load(&set_device_calls); }
int mock_set_device_calls_here(void) { return set_device_calls_here; }
void mock_set_soc(const char *name) { soc_name = name; }
void mock_set_foreign_keys(int on) { foreign_keys = on; }
void mock_set_sdid(int64_t id) { sdid = id; }
int mock_init_calls(void) { return atomic_load(&init_calls); }
int mock_finalize_calls(void) { return atomic_load(&finalize_calls) + atomic_load(&finalize_ref_calls); }
static int live_count(int kind) {
    int n = 0;
    for (int i = 0; i < MAX_OBJ; i++) n += objs[i].kind == kind;
    return n;
}
int mock_live(int kind) { return live_count(kind); }
/* Copies the whitelist of the notify with id `id` (sdid, pid pairs); returns the count. */
int mock_whitelist(uint32_t id, uint32_t *sdids, int32_t *pids, int max) {
    for (int i = 0; i < MAX_OBJ; i++) {
        if (objs[i].kind == KIND_NOTIFY && !objs[i].imported && objs[i].id == id) {
            int n = objs[i].npids < max ? objs[i].npids : max;
            for (int k = 0; k < n; k++) { sdids[k] = objs[i].sdids[k]; pids[k] = objs[i].pids[k]; }
            return n;
        }
    }
    return -1;
}
int mock_flag(uint32_t id) {
    for (int i = 0; i < MAX_OBJ; i++)
        if (objs[i].kind == KIND_NOTIFY && !objs[i].imported && objs[i].id == id) return objs[i].flag;
    return -1;
}

/* ---- init ---- */
aclError aclInit(const char *cfg) {
    (void)cfg;
    atomic_fetch_add(&init_calls, 1);
    if (initialized) return fail(100002, "already initialised");
    initialized = 1;
    return 0;
}
aclError aclFinalize(void) {
    atomic_fetch_add(&finalize_calls, 1);
    if (!initialized) return fail(100037, "not initialised");
    initialized = 0;
    return 0;
}
const char *aclGetRecentErrMsg(void) {
    if (!errset) return NULL;
    errset = 0;
    return errbuf;
}
const char *aclrtGetSocName(void) {
    return soc_name;
}
aclError aclrtGetDeviceCount(uint32_t *n) {
    if (!n) return fail(100000, "count NULL");
    *n = 4;
    return 0;
}
aclError aclrtSetDevice(int32_t d) {
    atomic_fetch_add(&set_device_calls, 1);
    set_device_calls_here++;
    if (!initialized) return fail(100001, "not initialised");
    if (d < 0 || d >= 4) return fail(107001, "no such device");
    cur_dev = d;
    return 0;
}
aclError aclrtGetDeviceInfo(uint32_t d, int attr, int64_t *value) {
    if (!value) return fail(100000, "value NULL");
    if (d >= 4) return fail(107001, "no such device");
    if ((attr != 403 && attr != 404) || sdid < 0) return fail(107000, "not a SuperPod");
    *value = attr == 403 ? sdid : 1000 + sdid / 16;
    return 0;
}
aclError aclrtDeviceGetBareTgid(int32_t *pid) {
    if (!pid) return fail(100000, "pid NULL");
    *pid = (int32_t)getpid();
    return 0;
}
aclError aclrtDeviceCanAccessPeer(int32_t *can, int32_t d, int32_t p) {
    if (!can) return fail(100000, "can NULL");
    if (d < 0 || d >= 4 || p < 0 || p >= 4) return fail(107001, "no such device");
    *can = d != p;
    return 0;
}
aclError aclrtDeviceEnablePeerAccess(int32_t peer, uint32_t flags) {
    if (cur_dev < 0) return fail(107002, "no current device");
    if (flags != 0 || peer == cur_dev) return fail(107000, "bad peer or flags");
    return 0;
}

/* ---- streams ---- */
static aclError stream_of(void *s, struct obj **out) {
    if (s == NULL) { *out = NULL; return cur_dev < 0 ? fail(107002, "no current device") : 0; }
    *out = find(s, KIND_STREAM);
    if (!*out) return bad("stream pointer the mock never handed out (or destroyed)");
    if ((*out)->device != cur_dev) return fail(107003, "stream of another device");
    return 0;
}
aclError aclrtCreateStream(void **s) {
    if (!s) return fail(100000, "stream NULL");
    if (cur_dev < 0) return fail(107002, "no current device");
    pthread_mutex_lock(&lock_);
    struct obj *o = alloc_obj(KIND_STREAM);
    if (o) o->device = cur_dev;
    pthread_mutex_unlock(&lock_);
    if (!o) return fail(207005, "out of streams");
    *s = o;
    return 0;
}
static aclError destroy_stream(void *s) {
    struct obj *o;
    if (!s) return fail(100000, "stream NULL");
    aclError e = stream_of(s, &o);
    if (e) return e;
    pthread_mutex_lock(&lock_);
    o->kind = KIND_FREE;
    pthread_mutex_unlock(&lock_);
    return 0;
}
aclError aclrtDestroyStream(void *s) { return destroy_stream(s); }
aclError aclrtDestroyStreamForce(void *s) { return destroy_stream(s); }
aclError aclrtSynchronizeStream(void *s) { struct obj *o; return stream_of(s, &o); }
aclError aclrtSynchronizeStreamWithTimeout(void *s, int32_t ms) {
    struct obj *o;
    if (ms < -1) return fail(107000, "bad timeout");
    return stream_of(s, &o);
}
aclError aclrtStreamQuery(void *s, int *status) {
    struct obj *o;
    if (!status) return fail(100000, "status NULL");
    aclError e = stream_of(s, &o);
    if (e) return e;
    *status = 0;
    return 0;
}
aclError aclrtLaunchHostFunc(void *s, aclrtHostFunc fn, void *arg) {
    struct obj *o;
    if (!fn) return fail(100000, "fn NULL");
    aclError e = stream_of(s, &o);
    if (e) return e;
    fn(arg); /* the mock's streams are always idle: run it now */
    return 0;
}
aclError aclrtSetOpWaitTimeout(uint32_t t) { (void)t; return 0; }

/* ---- notifies ---- */
static aclError notify_of(void *n, struct obj **out) {
    if (!n) return fail(100000, "notify NULL");
    *out = find(n, KIND_NOTIFY);
    if (!*out) return bad("notify pointer the mock never handed out (or destroyed)");
    if ((*out)->device != cur_dev) {
        atomic_fetch_add(&violations, 1);
        return fail(107003, "current device is not the notify's device");
    }
    return 0;
}
aclError aclrtCreateNotify(void **n, uint64_t flag) {
    if (!n) return fail(100000, "notify NULL");
    if (flag > 1) return fail(107000, "bad flag");
    if (cur_dev < 0) return fail(107002, "no current device");
    pthread_mutex_lock(&lock_);
    struct obj *o = alloc_obj(KIND_NOTIFY);
    if (o) { o->device = o->owner_device = cur_dev; o->id = next_id++; }
    pthread_mutex_unlock(&lock_);
    if (!o) return fail(207009, "out of notifies");
    *n = o;
    return 0;
}
aclError aclrtDestroyNotify(void *n) {
    struct obj *o;
    aclError e = notify_of(n, &o);
    if (e) return e;
    pthread_mutex_lock(&lock_);
    o->kind = KIND_FREE;
    pthread_mutex_unlock(&lock_);
    return 0;
}
static struct obj *owner_of(struct obj *o) {
    if (!o->imported) return o;
    for (int i = 0; i < MAX_OBJ; i++)
        if (objs[i].kind == KIND_NOTIFY && !objs[i].imported && objs[i].id == o->id) return &objs[i];
    return NULL;
}
aclError aclrtRecordNotify(void *n, void *s) {
    struct obj *no, *so;
    if (!n) return fail(100000, "notify NULL");
    no = find(n, KIND_NOTIFY);
    if (!no) return bad("notify pointer the mock never handed out (or destroyed)");
    aclError e = stream_of(s, &so);
    if (e) return e;
    struct obj *ow = owner_of(no);
    if (ow) ow->flag = 1;
    return 0;
}
aclError aclrtWaitAndResetNotify(void *n, void *s, uint32_t timeout) {
    struct obj *no, *so;
    (void)timeout;
    if (!n) return fail(100000, "notify NULL");
    no = find(n, KIND_NOTIFY);
    if (!no) return bad("notify pointer the mock never handed out (or destroyed)");
    aclError e = stream_of(s, &so);
    if (e) return e;
    if (no->imported && no->owner_device != cur_dev) return fail(107000, "wait not on the owner's device");
    struct obj *ow = owner_of(no);
    if (ow) ow->flag = 0;
    return 0;
}
aclError aclrtGetNotifyId(void *n, uint32_t *id) {
    struct obj *o;
    if (!id) return fail(100000, "id NULL");
    aclError e = notify_of(n, &o);
    if (e) return e;
    *id = o->id;
    return 0;
}
aclError aclrtNotifyBatchReset(void **ns, size_t num) {
    if (!ns) return fail(100000, "array NULL");
    if (num == 0) return fail(107000, "num == 0");
    for (size_t i = 0; i < num; i++) {
        if (!ns[i]) return fail(107000, "NULL element");
        struct obj *o = find(ns[i], KIND_NOTIFY);
        if (!o) return bad("batch element the mock never handed out (or destroyed)");
        if (o->imported) return fail(507009, "imported notify in a batch reset");
        o->flag = 0;
    }
    return 0;
}

static const char HEX[] = "0123456789abcdef";
static void put_hex(char *out, int width, uint64_t v) {
    for (int i = width - 1; i >= 0; i--) { out[i] = HEX[v & 0xf]; v >>= 4; }
}
aclError aclrtNotifyGetExportKey(void *n, char *key, size_t len, uint64_t flags) {
    struct obj *o;
    if (!key) return fail(100000, "key NULL");
    aclError e = notify_of(n, &o);
    if (e) return e;
    if (len < 65) { atomic_fetch_add(&violations, 1); return fail(107000, "key buffer shorter than 65"); }
    if (flags != 0 && flags != 2) return fail(107000, "bad export flags");
    if (o->exported || o->imported) return fail(507000, "already exported, or imported");
    o->exported = flags == 2 ? 2 : 1;
    if (foreign_keys) {
        /* A runtime with its own key format. */
        snprintf(key, len, "foreign-key-%u", o->id);
        return 0;
    }
    char t[65];
    memset(t, '-', 64);
    memcpy(t, "an2-", 4);
    put_hex(t + 4, 4, 0);
    put_hex(t + 8, 2, (uint64_t)o->device);
    put_hex(t + 10, 4, o->id);
    put_hex(t + 14, 8, 1);
    for (int i = 0; i < 16; i++) put_hex(t + 23 + 2 * i, 2, (uint64_t)(0x10 + i));
    /* The core's key checksum (core/src/key.rs): 55 characters as seven little-endian words. */
    uint64_t h = 0x6a09e667f3bcc908ull;
    for (int i = 0; i < 55; i += 8) {
        uint64_t w = 0;
        for (int j = 0; j < 8 && i + j < 55; j++) w |= (uint64_t)(uint8_t)t[i + j] << (8 * j);
        h = (h ^ w) * 0x9e3779b97f4a7c15ull;
        h ^= h >> 29;
    }
    put_hex(t + 56, 8, (h * 0x9e3779b97f4a7c15ull) >> 32);
    t[64] = 0;
    memcpy(key, t, 65);
    return 0;
}
static aclError add_pid(struct obj *o, uint32_t sdid, int32_t pid) {
    if (o->npids >= 64) return fail(207012, "more than 64 pids");
    o->sdids[o->npids] = sdid;
    o->pids[o->npids] = pid;
    o->npids++;
    return 0;
}
aclError aclrtNotifySetImportPid(void *n, int32_t *pid, size_t num) {
    struct obj *o;
    if (!pid) return fail(100000, "pid NULL");
    aclError e = notify_of(n, &o);
    if (e) return e;
    if (num == 0) return fail(107000, "num == 0");
    if (!o->exported) return fail(107000, "not exported");
    if (o->exported == 2 || o->imported) return fail(207006, "open export or importer");
    for (size_t i = 0; i < num; i++) {
        e = add_pid(o, 0, pid[i]);
        if (e) return e;
    }
    return 0;
}
aclError aclrtNotifySetImportPidInterServer(void *n, aclrtServerPid *sp, size_t num) {
    struct obj *o;
    if (!n || !sp || num == 0) return fail(107000, "NULL or empty");
    aclError e = notify_of(n, &o);
    if (e) return e;
    for (size_t i = 0; i < num; i++) {
        if (!sp[i].pid || sp[i].num != 1) {
            atomic_fetch_add(&violations, 1);
            return fail(107000, "entry with NULL pid or num != 1");
        }
        if (!o->exported) return fail(107000, "not exported");
        if (o->exported == 2 || o->imported) return fail(207006, "open export or importer");
        e = add_pid(o, sp[i].sdid, sp[i].pid[0]);
        if (e) return e;
    }
    return 0;
}
static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}
aclError aclrtNotifyImportByKey(void **n, const char *key, uint64_t flags) {
    if (!n || !key) return fail(100000, "notify or key NULL");
    if ((flags & 0xffffffffu) > 3) return fail(107000, "bad import flags");
    if (cur_dev < 0) return fail(107002, "no current device");
    size_t len = strnlen(key, 128);
    uint32_t id = 0;
    int owner_dev = -1;
    if (len == 64 && memcmp(key, "an2-", 4) == 0) {
        for (int i = 10; i < 14; i++) { int v = hexval(key[i]); if (v < 0) return fail(107000, "malformed key"); id = id * 16 + (uint32_t)v; }
        owner_dev = hexval(key[8]) * 16 + hexval(key[9]);
    } else if (strncmp(key, "foreign-key-", 12) == 0) {
        id = (uint32_t)strtoul(key + 12, NULL, 10);
    } else {
        return fail(107000, "malformed key");
    }
    pthread_mutex_lock(&lock_);
    struct obj *owner = NULL;
    for (int i = 0; i < MAX_OBJ; i++)
        if (objs[i].kind == KIND_NOTIFY && !objs[i].imported && objs[i].id == id) owner = &objs[i];
    struct obj *o = owner ? alloc_obj(KIND_NOTIFY) : NULL;
    if (o) {
        o->imported = 1;
        o->id = id;
        o->device = cur_dev;
        o->owner_device = owner_dev >= 0 ? owner_dev : owner->device;
    }
    pthread_mutex_unlock(&lock_);
    if (!owner) return fail(107017, "no such notify");
    if (!o) return fail(207009, "out of notifies");
    *n = o;
    return 0;
}

#ifdef MOCK_EXT
aclError aclFinalizeReference(uint64_t *ref) {
    atomic_fetch_add(&finalize_ref_calls, 1);
    if (ref) *ref = 0;
    initialized = 0;
    return 0;
}
aclError aclnsimNotifyHostWait(void *n, uint64_t timeout_us) {
    struct obj *o;
    aclError e = notify_of(n, &o);
    if (e) return e;
    struct obj *ow = owner_of(o);
    if (o->imported) return fail(107000, "not the owner's device");
    for (uint64_t waited = 0;; waited += 1000) {
        if (ow && ow->flag) { ow->flag = 0; return 0; }
        if (waited >= timeout_us) return fail(107019, "host wait timed out");
        usleep(1000);
    }
}
aclError aclnsimNotifyTryConsume(void *n, int32_t *consumed) {
    struct obj *o;
    if (!consumed) return fail(100000, "consumed NULL");
    aclError e = notify_of(n, &o);
    if (e) return e;
    if (o->imported) return fail(107000, "not the owner's device");
    *consumed = o->flag;
    o->flag = 0;
    return 0;
}
aclError aclnsimGetNotifyFreeCount(int32_t d, uint32_t *count) {
    if (!count) return fail(100000, "count NULL");
    if (d < 0 || d >= 4) return fail(107001, "no such device");
    *count = (uint32_t)(MAX_OBJ - live_count(KIND_NOTIFY) - live_count(KIND_STREAM));
    return 0;
}
aclError aclnsimGetServerId(uint32_t *id) {
    if (!id) return fail(100000, "id NULL");
    *id = 7;
    return 0;
}
#endif
