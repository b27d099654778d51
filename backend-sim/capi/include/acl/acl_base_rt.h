/* acl/acl_base_rt.h — CANN splits its API over several headers; acl-notify declares everything in
 * acl/acl.h, and this file only includes it so that programs including acl_base_rt.h compile. */
#include "acl.h"
