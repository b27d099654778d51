/* sim_host.h — a C test program's process made a host of its own in a simulated SuperPod (the
 * programs that split their processes over several servers: fanout.c, pipeline.c). Include it
 * after common.h, which must come first: it defines _GNU_SOURCE, which setenv needs (common.h
 * itself cannot hold this, as programs that include a system header before it lose setenv). */
#ifndef ACL_NOTIFY_TESTS_SIM_HOST_H_
#define ACL_NOTIFY_TESTS_SIM_HOST_H_

#include "common.h"

/* Makes this process one of simulated SuperPod server `host`, a host of its own: its server id
 * (ACL_NOTIFY_SIM_SERVER_ID) and namespace ($ACL_NOTIFY_SIM_NAMESPACE-host<host>, `fallback`
 * standing in for an unset namespace), in the cluster that ACL_NOTIFY_SIM_CLUSTER names.
 * Before aclInit. */
static inline void join_sim_host(int host, const char *fallback) {
    const char *base = getenv("ACL_NOTIFY_SIM_NAMESPACE");
    char value[512];
    snprintf(value, sizeof value, "%d", host);
    setenv("ACL_NOTIFY_SIM_SERVER_ID", value, 1);
    snprintf(value, sizeof value, "%s-host%d", base && *base ? base : fallback, host);
    setenv("ACL_NOTIFY_SIM_NAMESPACE", value, 1);
}

#endif
