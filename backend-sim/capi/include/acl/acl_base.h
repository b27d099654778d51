/*
 * acl/acl_base.h — as in CANN 9.1.0, this header declares nothing itself: it gathers
 * the base types and error codes (acl_base_rt.h, acl_base_mdl.h and the two error_codes
 * headers). The runtime functions are in acl/acl_rt.h.
 */
#ifndef INC_EXTERNAL_ACL_ACL_BASE_H_
#define INC_EXTERNAL_ACL_ACL_BASE_H_

#include "acl_base_rt.h"
#include "acl_base_mdl.h"
#include "error_codes/rt_error_codes.h"
#include "error_codes/ge_error_codes.h"

#endif
