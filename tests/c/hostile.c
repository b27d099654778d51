/* hostile.c — every function the installed headers declare, called by a hostile C caller:
 * NULL pointers, pointers to zeroed memory, sizes and values of 0, 1, a huge positive one and
 * all bits set, handles that are NULL, never created, destroyed, live, and of another device.
 * tests/tests/c_abi.rs writes hostile.inc (one hz_<name> per declared function, its arguments
 * built by their C types from the variant) and builds this file against the library.
 *
 * Each function runs in a child process of its own (forked from this one, which never calls
 * the library), through every variant in turn, each on fresh fixtures: a call returning an
 * aclError other than ACL_SUCCESS must leave a non-empty aclGetRecentErrMsg; none may crash,
 * hang (the parent's watch: common.h wait_child) or, under valgrind's memcheck, touch memory
 * it must not. The parent goes on after a failing function and lists them all.
 *
 * A fixture the chip cannot make (a kind it lacks: count notifies off Ascend950) is not passed
 * as NULL in its place: the argument sets that need it are skipped, each named on stdout with
 * the create's code and message, and counted in the last line.
 *
 * Then the tight buffers: the functions writing a caller's buffer whose length an argument or
 * the API gives (an array, a string, a struct written field by field, a value whose type
 * another argument chooses), each given a buffer that ends at an inaccessible page, exactly
 * as long as promised, with lengths too short, 0, exact, and attribute ids out of range: a
 * write past the length is a crash (or a memcheck error), never silent.
 *
 * usage: hostile SOC [SECONDS_PER_FUNCTION [NAME,NAME,...]] (only those functions, and their
 * tight buffers). Exit 0 and "hostile: ok" when every function passed. */
#include "common.h"

#include <limits.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "acl/aclnsim.h"

enum { HZ_NULLP, HZ_SCRATCH };                                    /* data pointers */
enum { HZ_ZERO, HZ_ONE, HZ_BIG, HZ_ALL };                         /* sizes, values, structs */
enum { HZ_H_NULL, HZ_H_FORGED, HZ_H_LIVE, HZ_H_DEAD, HZ_H_OTHER }; /* handles */

struct hz_variant {
    const char *label;
    int init; /* 0: before aclInit, no fixtures */
    int data;
    int ints;
    int handles;
};

struct hz_fn {
    const char *name;
    long (*call)(const struct hz_variant *v);
    int returns_code;
};

static const struct hz_variant hz_variants[] = {
    {"before aclInit, NULL and 0", 0, HZ_NULLP, HZ_ZERO, HZ_H_NULL},
    {"NULL and 0", 1, HZ_NULLP, HZ_ZERO, HZ_H_NULL},
    {"NULL, all bits set, never-created handles", 1, HZ_NULLP, HZ_ALL, HZ_H_FORGED},
    {"zeroed memory, 0, live handles", 1, HZ_SCRATCH, HZ_ZERO, HZ_H_LIVE},
    {"NULL, 1, live handles", 1, HZ_NULLP, HZ_ONE, HZ_H_LIVE},
    {"zeroed memory, huge, live handles", 1, HZ_SCRATCH, HZ_BIG, HZ_H_LIVE},
    {"zeroed memory, 1, destroyed handles", 1, HZ_SCRATCH, HZ_ONE, HZ_H_DEAD},
    {"zeroed memory, 1, handles of another device", 1, HZ_SCRATCH, HZ_ONE, HZ_H_OTHER},
    {"zeroed memory, all bits set, never-created handles", 1, HZ_SCRATCH, HZ_ALL, HZ_H_FORGED},
};

/* What a data pointer points to: zeroed before each call, larger than any struct of the API. */
#define HZ_SCRATCH_BYTES (256 * 1024)
static _Alignas(4096) unsigned char hz_scratch[HZ_SCRATCH_BYTES];

/* The handle types with fixtures; any other handle is NULL, or a never-created value. */
static const char *const hz_kinds[] = {"aclrtStream", "aclrtEvent", "aclrtNotify",
                                       "aclrtContext", "aclrtCntNotify"};
#define HZ_NKINDS (sizeof hz_kinds / sizeof hz_kinds[0])
static void *hz_live[HZ_NKINDS], *hz_dead[HZ_NKINDS], *hz_other[HZ_NKINDS];
/* Why a fixture could not be made (its create's code and message; "" when it was made), per
 * pass of hz_fixtures (0 destroyed, 1 another device's, 2 live). */
static char hz_unmade_why[3][HZ_NKINDS][256];
/* The fixture an argument set asked for and could not have (NULL: none); the call is skipped. */
static const char *hz_unmade;
/* What hz_<name> returns for a skipped argument set: no aclError or bits a call returns. */
#define HZ_SKIPPED LONG_MIN
#define HZ_SKIP_IF_UNMADE()                                                                \
    do {                                                                                   \
        if (hz_unmade != NULL) {                                                           \
            return HZ_SKIPPED;                                                             \
        }                                                                                  \
    } while (0)

static void *hz_handle(const char *type, int which) {
    if (which == HZ_H_NULL) {
        return NULL;
    }
    for (size_t k = 0; k < HZ_NKINDS; k++) {
        if (strcmp(type, hz_kinds[k]) == 0 && which != HZ_H_FORGED) {
            int pass = which == HZ_H_DEAD ? 0 : which == HZ_H_OTHER ? 1 : 2;
            if (hz_unmade_why[pass][k][0] != '\0' && hz_unmade == NULL) {
                hz_unmade = hz_unmade_why[pass][k];
            }
            return pass == 0 ? hz_dead[k] : pass == 1 ? hz_other[k] : hz_live[k];
        }
    }
    /* Never handed out by the library: not NULL, and no memory of this process. */
    return (void *)(uintptr_t)0x5eed0000u;
}

/* Role of an argument: a data pointer, a function pointer (always NULL), else the name of its
 * type (a handle when the type is a pointer). */
#define HZ_DATA "*"
#define HZ_FN "()"
#define HZ_NAMED(t) t

/* gcc's and clang's classes of a type (__builtin_classify_type). */
#define HZ_CLASS_REAL 8
#define HZ_CLASS_POINTER 5

static void hz_arg(void *p, size_t n, int cls, const char *role, const struct hz_variant *v) {
    memset(p, 0, n);
    if (cls == HZ_CLASS_POINTER) {
        void *val = NULL;
        if (strcmp(role, HZ_DATA) == 0) {
            val = v->data == HZ_SCRATCH ? (void *)hz_scratch : NULL;
        } else if (strcmp(role, HZ_FN) != 0) {
            val = hz_handle(role, v->handles);
        }
        memcpy(p, &val, sizeof val < n ? sizeof val : n);
        return;
    }
    if (cls == HZ_CLASS_REAL) {
        double d = v->ints == HZ_ZERO ? 0.0 : v->ints == HZ_ONE ? 1.0 : 3.0e38;
        if (n == sizeof(float)) {
            float f = (float)d;
            memcpy(p, &f, sizeof f);
        } else {
            memcpy(p, &d, sizeof d < n ? sizeof d : n);
        }
        return;
    }
    /* Integers, enums, structs by value: their bytes (little-endian). */
    unsigned char *b = p;
    switch (v->ints) {
    case HZ_ONE: b[0] = 1; break;
    case HZ_BIG: b[n - 1] = 0x40; break;
    case HZ_ALL: memset(p, 0xff, n); break;
    default: break;
    }
}

#define HZ_ARG(x, role, v) hz_arg(&(x), sizeof(x), __builtin_classify_type(x), (role), (v))
/* A return value other than aclError, as bits (only a crash or a hang fails it). */
#define HZ_RETURN(call)                                                                    \
    do {                                                                                   \
        __typeof__(call) r_ = (call);                                                      \
        long out_ = 0;                                                                     \
        memcpy(&out_, &r_, sizeof r_ < sizeof out_ ? sizeof r_ : sizeof out_);            \
        return out_;                                                                       \
    } while (0)

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include "hostile.inc"
#pragma GCC diagnostic pop

/* Notes why fixture `k` of `pass` was not made (`what` returned `rc`), or that it was. */
static void hz_made(int pass, size_t k, const char *what, aclError rc, void *h) {
    char *why = hz_unmade_why[pass][k];
    why[0] = '\0';
    if (rc != ACL_SUCCESS || h == NULL) {
        snprintf(why, sizeof hz_unmade_why[pass][k], "no %s %s: %s returned %d: %s",
                 pass == 0 ? "destroyed" : pass == 1 ? "other device's" : "live", hz_kinds[k],
                 what, (int)rc, recent_msg());
    }
}

/* A session with device 0 current, and the fixtures of every kind made anew. A fixture that
 * cannot be made (a kind the chip lacks) is noted with why (hz_made), and the argument sets
 * needing it are skipped; a device that cannot be set fails. */
static void hz_fixtures(const char *fn, const char *label) {
    (void)aclInit(NULL);
    (void)aclGetRecentErrMsg();
    for (int pass = 0; pass < 3; pass++) {
        void **into = pass == 0 ? hz_dead : pass == 1 ? hz_other : hz_live;
        aclError rc = aclrtSetDevice(pass == 1 ? 1 : 0);
        REQUIRE(rc == ACL_SUCCESS, "%s, before \"%s\": aclrtSetDevice returned %d: %s", fn,
                label, (int)rc, recent_msg());
        memset(into, 0, sizeof(void *) * HZ_NKINDS);
        (void)aclGetRecentErrMsg();
        /* The create runs before its handle is read (not two arguments of one call). */
#define HZ_MAKE(k, what, call)                                                             \
    do {                                                                                   \
        aclError made_ = (call);                                                           \
        hz_made(pass, (k), (what), made_, into[(k)]);                                      \
    } while (0)
        HZ_MAKE(0, "aclrtCreateStream", aclrtCreateStream((aclrtStream *)&into[0]));
        HZ_MAKE(1, "aclrtCreateEvent", aclrtCreateEvent((aclrtEvent *)&into[1]));
        HZ_MAKE(2, "aclrtCreateNotify", aclrtCreateNotify((aclrtNotify *)&into[2], 0));
        HZ_MAKE(4, "aclrtCntNotifyCreate", aclrtCntNotifyCreate((aclrtCntNotify *)&into[4], 0));
        if (pass == 0) {
            HZ_MAKE(3, "aclrtCreateContext", aclrtCreateContext((aclrtContext *)&into[3], 0));
            (void)aclrtDestroyStream(into[0]);
            (void)aclrtDestroyEvent(into[1]);
            (void)aclrtDestroyNotify(into[2]);
            (void)aclrtDestroyContext(into[3]);
            (void)aclrtCntNotifyDestroy(into[4]);
        } else {
            HZ_MAKE(3, "aclrtGetCurrentContext", aclrtGetCurrentContext((aclrtContext *)&into[3]));
        }
    }
    (void)aclGetRecentErrMsg();
#undef HZ_MAKE
}

/* Whose aclError is the answer, not a failure of the call: the thread's last error. */
static const char *const hz_values[] = {"aclrtGetLastError", "aclrtPeekAtLastError"};
/* Which wait as long as they are told: a huge or -1 (for ever) timeout is not given them. */
static const char *const hz_waits[] = {"aclrtProcessReport", "aclnsimNotifyHostWait"};

static int hz_in(const char *name, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (strcmp(name, list[i]) == 0) {
            return 1;
        }
    }
    return 0;
}
#define HZ_IN(name, list) hz_in((name), (list), sizeof(list) / sizeof((list)[0]))

/* Shared with the parent: the variant a child is at (to name it when the child dies), and
 * how many argument sets were skipped for want of a fixture. */
static volatile int *hz_at;
static volatile int *hz_skips;

static void hz_run(const struct hz_fn *f) {
    for (size_t i = 0; i < sizeof hz_variants / sizeof hz_variants[0]; i++) {
        const struct hz_variant *v = &hz_variants[i];
        *hz_at = (int)i;
        if ((v->ints == HZ_BIG || v->ints == HZ_ALL) && HZ_IN(f->name, hz_waits)) {
            continue;
        }
        if (v->init) {
            hz_fixtures(f->name, v->label);
        }
        memset(hz_scratch, 0, sizeof hz_scratch);
        (void)aclGetRecentErrMsg();
        hz_unmade = NULL;
        long r = f->call(v);
        if (r == HZ_SKIPPED && hz_unmade != NULL) {
            printf("[hostile] %s (%s): skipped: %s\n", f->name, v->label, hz_unmade);
            (*hz_skips)++;
            continue;
        }
        const char *m = aclGetRecentErrMsg();
        if (f->returns_code && r != ACL_SUCCESS && !HZ_IN(f->name, hz_values)) {
            REQUIRE(m != NULL && m[0] != '\0', "%s (%s) returned %ld with no message", f->name,
                    v->label, r);
        }
    }
}


/* ---- tight buffers ---------------------------------------------------------------------- */

/* Two pages, the second inaccessible: hz_tight(n) is the last n bytes before it. */
static unsigned char *hz_guard;
static void *hz_tight(size_t n) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    REQUIRE(n <= page, "a tight buffer of %zu bytes: at most a page", n);
    memset(hz_guard, 0, page);
    return hz_guard + page - n;
}

/* A fixture of a tight case that could not be made: why (the case is skipped, named). */
static char hz_tight_why[256];
#define HZ_TIGHT_MAKE(call)                                                                \
    do {                                                                                   \
        aclError mk_ = (call);                                                             \
        if (mk_ != ACL_SUCCESS) {                                                          \
            snprintf(hz_tight_why, sizeof hz_tight_why, "%s returned %d: %s", #call,      \
                     (int)mk_, recent_msg());                                              \
            return HZ_SKIPPED;                                                             \
        }                                                                                  \
    } while (0)

static aclrtMbuf hz_mbuf(void) {
    aclrtMbuf b = NULL;
    return aclrtAllocBuf(&b, 64) == ACL_SUCCESS ? b : NULL;
}

static long t_pci_short(void) { return aclrtDeviceGetPCIBusId(0, hz_tight(5), 5); }
static long t_pci_zero(void) { return aclrtDeviceGetPCIBusId(0, hz_tight(0), 0); }
static long t_pci_exact(void) { return aclrtDeviceGetPCIBusId(0, hz_tight(13), 13); }
static long t_usage_one(void) {
    size_t n = 0;
    return aclrtGetMemUsageInfo(0, hz_tight(sizeof(aclrtMemUsageInfo)), 1, &n);
}
static long t_usage_zero(void) {
    size_t n = 0;
    return aclrtGetMemUsageInfo(0, hz_tight(0), 0, &n);
}
static long t_stream_attr_wide(void) {
    return aclrtGetStreamAttribute(NULL, ACL_STREAM_ATTR_FAILURE_MODE,
                                   hz_tight(sizeof(aclrtStreamAttrValue)));
}
static long t_stream_attr_range(void) {
    return aclrtGetStreamAttribute(NULL, (aclrtStreamAttr)99,
                                   hz_tight(sizeof(aclrtStreamAttrValue)));
}
static long t_atomics_one(void) {
    aclrtAtomicOperation op[1] = {(aclrtAtomicOperation)0};
    return aclrtDeviceGetHostAtomicCapabilities(hz_tight(sizeof(uint32_t)), op, 1, 0);
}
static long t_atomics_zero(void) {
    aclrtAtomicOperation op[1] = {(aclrtAtomicOperation)0};
    return aclrtDeviceGetHostAtomicCapabilities(hz_tight(0), op, 0, 0);
}
static long t_p2p_atomics_one(void) {
    aclrtAtomicOperation op[1] = {(aclrtAtomicOperation)0};
    return aclrtDeviceGetP2PAtomicCapabilities(hz_tight(sizeof(uint32_t)), op, 1, 0, 1);
}
static long t_ipc_key(size_t len) {
    void *p = NULL;
    HZ_TIGHT_MAKE(aclrtMalloc(&p, 1 << 20, ACL_MEM_MALLOC_HUGE_FIRST));
    return aclrtIpcMemGetExportKey(p, 1 << 20, hz_tight(len), len, 0);
}
static long t_ipc_key_exact(void) { return t_ipc_key(65); }
static long t_ipc_key_short(void) { return t_ipc_key(64); }
static long t_notify_key(size_t len) {
    aclrtNotify n = NULL;
    HZ_TIGHT_MAKE(aclrtCreateNotify(&n, 0));
    return aclrtNotifyGetExportKey(n, hz_tight(len), len, 0);
}
static long t_notify_key_exact(void) { return t_notify_key(65); }
static long t_notify_key_short(void) { return t_notify_key(64); }
static long t_version_str(void) {
    char pkg[] = "runtime";
    return aclsysGetVersionStr(pkg, hz_tight(128));
}
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static long t_cann_version(void) {
    return aclsysGetCANNVersion((aclCANNPackageName)0, hz_tight(sizeof(aclCANNPackageVersion)));
}
#pragma GCC diagnostic pop
static long t_ptr_attrs(void) {
    void *p = NULL;
    HZ_TIGHT_MAKE(aclrtMalloc(&p, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    return aclrtPointerGetAttributes(p, hz_tight(sizeof(aclrtPtrAttributes)));
}
static long t_error_verbose(void) {
    return aclrtGetErrorVerbose(0, hz_tight(sizeof(aclrtErrorInfo)));
}
static long t_utilization(void) {
    return aclrtGetDeviceUtilizationRate(0, hz_tight(sizeof(aclrtUtilizationInfo)));
}
static long t_pool_attr(aclrtMemPoolAttr a, size_t len) {
    aclrtMemPool pool = NULL;
    aclrtMemPoolProps pp = pool_props(0, 16u << 20);
    HZ_TIGHT_MAKE(aclrtMemPoolCreate(&pool, &pp));
    return aclrtMemPoolGetAttr(pool, a, hz_tight(len));
}
static long t_pool_flag(void) {
    return t_pool_attr(ACL_RT_MEM_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES, sizeof(uint32_t));
}
static long t_pool_wide(void) {
    return t_pool_attr(ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD, sizeof(uint64_t));
}
static long t_pool_range(void) { return t_pool_attr((aclrtMemPoolAttr)99, sizeof(uint64_t)); }
static long t_managed_attr(size_t len) {
    void *p = NULL;
    HZ_TIGHT_MAKE(aclrtMemAllocManaged(&p, 1 << 20, 1));
    return aclrtMemManagedGetAttr(ACL_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, p, 1 << 20,
                                  hz_tight(len), len);
}
static long t_managed_exact(void) { return t_managed_attr(4); }
static long t_managed_short(void) { return t_managed_attr(2); }
static long t_managed_zero(void) { return t_managed_attr(0); }
static long t_buf_user_data(void) {
    aclrtMbuf b = hz_mbuf();
    HZ_TIGHT_MAKE(b == NULL ? aclrtAllocBuf(&b, 64) : ACL_SUCCESS);
    return aclrtGetBufUserData(b, hz_tight(8), 8, 88);
}
static long t_model(aclrtStream *s, aclmdlRI *m) {
    HZ_TIGHT_MAKE(aclrtCreateStream(s));
    HZ_TIGHT_MAKE(aclmdlRICaptureBegin(*s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    HZ_TIGHT_MAKE(aclmdlRICaptureEnd(*s, m));
    return 0;
}
static long t_model_name(uint32_t len) {
    aclrtStream s = NULL;
    aclmdlRI m = NULL;
    long r = t_model(&s, &m);
    return r != 0 ? r : aclmdlRIGetName(m, len, hz_tight(len));
}
static long t_model_name_short(void) { return t_model_name(1); }
static long t_model_name_zero(void) { return t_model_name(0); }
static long t_model_streams(void) {
    aclrtStream s = NULL;
    aclmdlRI m = NULL;
    long r = t_model(&s, &m);
    uint32_t n = 1;
    return r != 0 ? r : aclmdlRIGetStreams(m, hz_tight(sizeof(aclrtStream)), &n);
}

struct hz_tight_case {
    const char *name; /* the function, as the NAME,... filter gives it */
    const char *label;
    long (*call)(void);
    long want; /* the code the call must return; -1: any, with a message if not 0 */
};

static const struct hz_tight_case hz_tight_cases[] = {
    {"aclrtDeviceGetPCIBusId", "len 5 (< 13)", t_pci_short, ACL_ERROR_RT_PARAM_INVALID},
    {"aclrtDeviceGetPCIBusId", "len 0", t_pci_zero, ACL_ERROR_RT_PARAM_INVALID},
    {"aclrtDeviceGetPCIBusId", "len 13, exact", t_pci_exact, ACL_SUCCESS},
    {"aclrtGetMemUsageInfo", "1 entry", t_usage_one, -1},
    {"aclrtGetMemUsageInfo", "inputNum 0", t_usage_zero, ACL_ERROR_RT_PARAM_INVALID},
    {"aclrtGetStreamAttribute", "failure mode (8 bytes)", t_stream_attr_wide, -1},
    {"aclrtGetStreamAttribute", "attribute 99", t_stream_attr_range, ACL_ERROR_RT_PARAM_INVALID},
    {"aclrtDeviceGetHostAtomicCapabilities", "count 1", t_atomics_one, -1},
    {"aclrtDeviceGetHostAtomicCapabilities", "count 0", t_atomics_zero, -1},
    {"aclrtDeviceGetP2PAtomicCapabilities", "count 1", t_p2p_atomics_one, -1},
    {"aclrtIpcMemGetExportKey", "len 65, exact", t_ipc_key_exact, -1},
    {"aclrtIpcMemGetExportKey", "len 64 (< 65)", t_ipc_key_short, -1},
    {"aclrtNotifyGetExportKey", "len 65, exact", t_notify_key_exact, -1},
    {"aclrtNotifyGetExportKey", "len 64 (< 65)", t_notify_key_short, -1},
    {"aclsysGetVersionStr", "128 bytes", t_version_str, -1},
    {"aclsysGetCANNVersion", "one aclCANNPackageVersion", t_cann_version, -1},
    {"aclrtPointerGetAttributes", "one aclrtPtrAttributes", t_ptr_attrs, -1},
    {"aclrtGetErrorVerbose", "one aclrtErrorInfo", t_error_verbose, ACL_SUCCESS},
    {"aclrtGetDeviceUtilizationRate", "one aclrtUtilizationInfo", t_utilization, -1},
    {"aclrtMemPoolGetAttr", "a flag (4 bytes)", t_pool_flag, -1},
    {"aclrtMemPoolGetAttr", "the release threshold (8 bytes)", t_pool_wide, -1},
    {"aclrtMemPoolGetAttr", "attribute 99", t_pool_range, -1},
    {"aclrtMemManagedGetAttr", "dataSize 4, exact", t_managed_exact, -1},
    {"aclrtMemManagedGetAttr", "dataSize 2 (< 4)", t_managed_short, -1},
    {"aclrtMemManagedGetAttr", "dataSize 0", t_managed_zero, -1},
    {"aclrtGetBufUserData", "8 bytes at 88", t_buf_user_data, -1},
    {"aclmdlRIGetName", "maxLen 1 (an unnamed model: its NUL)", t_model_name_short, ACL_SUCCESS},
    {"aclmdlRIGetName", "maxLen 0", t_model_name_zero, ACL_ERROR_RT_PARAM_INVALID},
    {"aclmdlRIGetStreams", "room for 1", t_model_streams, -1},
};
#define HZ_NTIGHT (sizeof hz_tight_cases / sizeof hz_tight_cases[0])

static void hz_run_tight(const struct hz_tight_case *c) {
    hz_fixtures(c->name, c->label);
    (void)aclGetRecentErrMsg();
    long r = c->call();
    if (r == HZ_SKIPPED) {
        printf("[hostile] %s (tight: %s): skipped: %s\n", c->name, c->label, hz_tight_why);
        (*hz_skips)++;
        return;
    }
    const char *m = aclGetRecentErrMsg();
    REQUIRE(c->want < 0 || r == c->want, "%s (tight: %s) returned %ld, expected %ld: %s",
            c->name, c->label, r, c->want, m ? m : "(no message)");
    REQUIRE(r == ACL_SUCCESS || (m != NULL && m[0] != '\0'),
            "%s (tight: %s) returned %ld with no message", c->name, c->label, r);
}

/* Whether `name` is one item of the comma-separated list `only` (NULL: every name is). */
static int hz_chosen(const char *name, const char *only) {
    if (only == NULL) {
        return 1;
    }
    size_t len = strlen(name);
    const char *at = only;
    while ((at = strstr(at, name)) != NULL &&
           !((at == only || at[-1] == ',') && (at[len] == ',' || at[len] == '\0'))) {
        at += len;
    }
    return at != NULL;
}

/* Runs `run(arg)` in a child that may run for `limit` s (time it could run: common.h
 * wait_child, not wall time); 0 if it passed, else says how it failed (`name`, and
 * `label(arg)`: where it was). */
static int hz_child(const char *name, void (*run)(const void *), const void *arg, unsigned limit,
                    const char *(*label)(const void *)) {
    fflush(stdout);
    fflush(stderr);
    *hz_at = 0;
    pid_t child = fork();
    REQUIRE(child >= 0, "fork: %s", strerror(errno));
    if (child == 0) {
        run(arg);
        fflush(stdout);
        _exit(0);
    }
    int st = 0;
    const int hung = wait_child(child, &st, limit, name);
    if (!hung && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        return 0;
    }
    const char *at = label(arg);
    if (hung) {
        fprintf(stderr, "[hostile] %s (%s): no answer within %u s of its being able to run (a "
                "hang)\n", name, at, limit);
    } else if (WIFSIGNALED(st)) {
        fprintf(stderr, "[hostile] %s (%s): killed by signal %d (%s)\n", name, at, WTERMSIG(st),
                strsignal(WTERMSIG(st)));
    } else {
        fprintf(stderr, "[hostile] %s (%s): exit %d\n", name, at, WEXITSTATUS(st));
    }
    return 1;
}

static void hz_run_fn(const void *f) { hz_run(f); }
static const char *hz_fn_label(const void *f) {
    (void)f;
    return hz_variants[*hz_at].label;
}
static void hz_run_case(const void *c) { hz_run_tight(c); }
static const char *hz_case_label(const void *c) {
    return ((const struct hz_tight_case *)c)->label;
}

int main(int argc, char **argv) {
    g_role = "hostile";
    REQUIRE(argc >= 2 && argc <= 4, "usage: hostile SOC [SECONDS_PER_FUNCTION [NAME,...]]");
    unsigned limit = argc >= 3 ? (unsigned)strtoul(argv[2], NULL, 10) : 30;
    const char *only = argc == 4 ? argv[3] : NULL;
    size_t n = sizeof hz_table / sizeof hz_table[0], ran = 0, failed = 0, tight = 0;
    int *shared = mmap(NULL, 2 * sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                       -1, 0);
    REQUIRE(shared != MAP_FAILED, "mmap: %s", strerror(errno));
    hz_at = &shared[0];
    hz_skips = &shared[1];
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    hz_guard = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(hz_guard != MAP_FAILED, "mmap: %s", strerror(errno));
    REQUIRE(mprotect(hz_guard + page, page, PROT_NONE) == 0, "mprotect: %s", strerror(errno));
    for (size_t i = 0; i < n; i++) {
        const struct hz_fn *f = &hz_table[i];
        if (hz_chosen(f->name, only)) {
            ran++;
            failed += (size_t)hz_child(f->name, hz_run_fn, f, limit, hz_fn_label);
        }
    }
    for (size_t i = 0; i < HZ_NTIGHT; i++) {
        const struct hz_tight_case *c = &hz_tight_cases[i];
        if (hz_chosen(c->name, only)) {
            tight++;
            failed += (size_t)hz_child(c->name, hz_run_case, c, limit, hz_case_label);
        }
    }
    REQUIRE(ran + tight > 0, "no function named %s", only ? only : "(any)");
    REQUIRE(failed == 0, "%zu of %zu functions and tight buffers failed", failed, ran + tight);
    printf("hostile: ok (%s, %zu functions, %zu variants each; %zu tight buffers; %d argument "
           "sets skipped, a fixture the chip cannot make)\n",
           argv[1], ran, sizeof hz_variants / sizeof hz_variants[0], tight, *hz_skips);
    return 0;
}
