/* hostile.c — every function the installed headers declare, called by a hostile C caller:
 * NULL pointers, pointers to zeroed memory, sizes and values of 0, 1, a huge positive one and
 * all bits set, handles that are NULL, never created, destroyed, live, and of another device.
 * tests/tests/c_abi.rs writes hostile.inc (one hz_<name> per declared function, its arguments
 * built by their C types from the variant) and builds this file against the library.
 *
 * Each function runs in a child process of its own (forked from this one, which never calls
 * the library), through every variant in turn, each on fresh fixtures: a call returning an
 * aclError other than ACL_SUCCESS must leave a non-empty aclGetRecentErrMsg; none may crash,
 * hang (the child's alarm) or, under valgrind's memcheck, touch memory it must not. The
 * parent goes on after a failing function and lists them all.
 *
 * usage: hostile SOC [SECONDS_PER_FUNCTION [NAME,NAME,...]] (only those functions). Exit 0 and
 * "hostile: ok" when every function passed. */
#include "common.h"

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

static void *hz_handle(const char *type, int which) {
    if (which == HZ_H_NULL) {
        return NULL;
    }
    for (size_t k = 0; k < HZ_NKINDS; k++) {
        if (strcmp(type, hz_kinds[k]) == 0) {
            switch (which) {
            case HZ_H_LIVE: return hz_live[k];
            case HZ_H_DEAD: return hz_dead[k];
            case HZ_H_OTHER: return hz_other[k];
            default: break;
            }
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

/* A session with device 0 current, and the fixtures of every kind made anew. Failures to make
 * a fixture leave it NULL (a kind the chip lacks); a device that cannot be set fails. */
static void hz_fixtures(const char *fn, const char *label) {
    (void)aclInit(NULL);
    (void)aclGetRecentErrMsg();
    for (int pass = 0; pass < 3; pass++) {
        void **into = pass == 0 ? hz_dead : pass == 1 ? hz_other : hz_live;
        aclError rc = aclrtSetDevice(pass == 1 ? 1 : 0);
        REQUIRE(rc == ACL_SUCCESS, "%s, before \"%s\": aclrtSetDevice returned %d: %s", fn,
                label, (int)rc, recent_msg());
        memset(into, 0, sizeof(void *) * HZ_NKINDS);
        (void)aclrtCreateStream((aclrtStream *)&into[0]);
        (void)aclrtCreateEvent((aclrtEvent *)&into[1]);
        (void)aclrtCreateNotify((aclrtNotify *)&into[2], 0);
        (void)aclrtCntNotifyCreate((aclrtCntNotify *)&into[4], 0);
        if (pass == 0) {
            (void)aclrtCreateContext((aclrtContext *)&into[3], 0);
            (void)aclrtDestroyStream(into[0]);
            (void)aclrtDestroyEvent(into[1]);
            (void)aclrtDestroyNotify(into[2]);
            (void)aclrtDestroyContext(into[3]);
            (void)aclrtCntNotifyDestroy(into[4]);
        } else {
            (void)aclrtGetCurrentContext((aclrtContext *)&into[3]);
        }
    }
    (void)aclGetRecentErrMsg();
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

/* The variant a child is at, shared with the parent to name it when the child dies. */
static volatile int *hz_at;

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
        long r = f->call(v);
        const char *m = aclGetRecentErrMsg();
        if (f->returns_code && r != ACL_SUCCESS && !HZ_IN(f->name, hz_values)) {
            REQUIRE(m != NULL && m[0] != '\0', "%s (%s) returned %ld with no message", f->name,
                    v->label, r);
        }
    }
}

int main(int argc, char **argv) {
    g_role = "hostile";
    REQUIRE(argc >= 2 && argc <= 4, "usage: hostile SOC [SECONDS_PER_FUNCTION [NAME,...]]");
    unsigned limit = argc >= 3 ? (unsigned)strtoul(argv[2], NULL, 10) : 30;
    const char *only = argc == 4 ? argv[3] : NULL;
    size_t n = sizeof hz_table / sizeof hz_table[0], ran = 0, failed = 0;
    hz_at = mmap(NULL, sizeof *hz_at, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    REQUIRE(hz_at != MAP_FAILED, "mmap: %s", strerror(errno));
    for (size_t i = 0; i < n; i++) {
        const struct hz_fn *f = &hz_table[i];
        if (only) {
            /* `f->name` as one item of the comma-separated list. */
            size_t len = strlen(f->name);
            const char *at = only;
            while ((at = strstr(at, f->name)) != NULL &&
                   !((at == only || at[-1] == ',') && (at[len] == ',' || at[len] == '\0'))) {
                at += len;
            }
            if (at == NULL) {
                continue;
            }
        }
        fflush(stdout);
        fflush(stderr);
        *hz_at = 0;
        pid_t child = fork();
        REQUIRE(child >= 0, "fork: %s", strerror(errno));
        if (child == 0) {
            alarm(limit);
            hz_run(f);
            fflush(stdout);
            _exit(0);
        }
        int st = 0;
        REQUIRE(waitpid(child, &st, 0) == child, "waitpid: %s", strerror(errno));
        ran++;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
            continue;
        }
        failed++;
        const char *at = hz_variants[*hz_at].label;
        if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM) {
            fprintf(stderr, "[hostile] %s (%s): no answer within %u s (a hang)\n", f->name, at,
                    limit);
        } else if (WIFSIGNALED(st)) {
            fprintf(stderr, "[hostile] %s (%s): killed by signal %d (%s)\n", f->name, at,
                    WTERMSIG(st), strsignal(WTERMSIG(st)));
        } else {
            fprintf(stderr, "[hostile] %s (%s): exit %d\n", f->name, at, WEXITSTATUS(st));
        }
    }
    REQUIRE(ran > 0, "no function named %s", only ? only : "(any)");
    REQUIRE(failed == 0, "%zu of %zu functions failed", failed, ran);
    printf("hostile: ok (%s, %zu functions, %zu variants each)\n", argv[1], ran,
           sizeof hz_variants / sizeof hz_variants[0]);
    return 0;
}
