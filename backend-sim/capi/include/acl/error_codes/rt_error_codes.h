/* acl/error_codes/rt_error_codes.h — CANN declares the runtime's error codes here (and its
 * acl_base.h includes this file); acl-notify declares everything in acl/acl.h, and this file
 * only includes it so that programs including error_codes/rt_error_codes.h compile. */
#include "../acl.h"
