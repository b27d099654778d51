/* join.h — a thread join that never waits forever, for the C test programs that run calls on
 * other threads. Include it after common.h (which must come first: it defines _GNU_SOURCE,
 * which pthread_timedjoin_np needs). */
#ifndef ACL_NOTIFY_TESTS_JOIN_H_
#define ACL_NOTIFY_TESTS_JOIN_H_

#include <pthread.h>

#include "common.h"

/* Joins `t` within `ms` milliseconds, or fails naming `what`. */
static inline void join_within(pthread_t t, long ms, const char *what) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    int r = pthread_timedjoin_np(t, NULL, &ts);
    REQUIRE(r == 0, "%s still blocked after %ld ms", what, ms);
}

/* Starts `n` threads running `fn`, thread i given (void *)(intptr_t)i: its index. */
static inline void start_threads(pthread_t *t, int n, void *(*fn)(void *)) {
    for (int i = 0; i < n; i++) {
        REQUIRE(pthread_create(&t[i], NULL, fn, (void *)(intptr_t)i) == 0, "pthread_create");
    }
}

/* Joins the `n` threads of `t`, each within `ms` milliseconds, or fails naming `what`. */
static inline void join_all_within(const pthread_t *t, int n, long ms, const char *what) {
    for (int i = 0; i < n; i++) join_within(t[i], ms, what);
}

#endif /* ACL_NOTIFY_TESTS_JOIN_H_ */
