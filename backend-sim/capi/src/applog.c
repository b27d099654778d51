/* applog.c — aclAppLog, the one variadic function of the headers: C formats the message (stable
 * Rust cannot define a C variadic function), `applog.rs` decides whether the level is written
 * and writes the line. Compiled into the library by build.rs.
 *
 * As hicann/runtime src/acl/aclrt_impl/log.cpp (aclAppLogImpl): NULL fmt, func or file writes
 * nothing; a level below the current one writes nothing; the message is formatted into 1,024
 * bytes, a longer one cut and marked "...[truncated]"; a format vsnprintf refuses writes
 * "aclAppLog format string is invalid" at ACL_ERROR instead. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include "acl/acl_base_rt.h"

/* applog.rs. */
extern int acl_notify_sim_app_log_enabled(int32_t level);
extern void acl_notify_sim_app_log(int32_t level, const char *func, const char *file,
                                   uint32_t line, const char *body, int32_t truncated);

/* CANN's MAX_LOG_STRING (src/acl/common/log_inner.h). */
#define MAX_LOG_STRING 1024

void aclAppLog(aclLogLevel logLevel, const char *func, const char *file, uint32_t line,
               const char *fmt, ...) {
    if (fmt == NULL || func == NULL || file == NULL) return;
    if (!acl_notify_sim_app_log_enabled((int32_t)logLevel)) return;
    char body[MAX_LOG_STRING];
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(body, sizeof body, fmt, args);
    va_end(args);
    if (n < 0) {
        if (acl_notify_sim_app_log_enabled(ACL_ERROR))
            acl_notify_sim_app_log(ACL_ERROR, func, file, line,
                                   "aclAppLog format string is invalid", 0);
        return;
    }
    acl_notify_sim_app_log((int32_t)logLevel, func, file, line, body, n >= MAX_LOG_STRING);
}
