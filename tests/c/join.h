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

#endif /* ACL_NOTIFY_TESTS_JOIN_H_ */
