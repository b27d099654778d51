/*
 * acl/acl.h — the header a program includes to use AscendCL's runtime: as in CANN 9.1.0 it
 * includes acl/acl_rt.h (the runtime API, which brings acl/acl_base.h, the error codes and
 * acl/acl_rt_allocator.h) and the empty acl/acl_op.h and acl/acl_mdl.h. Every file of this
 * directory has the name and the declarations of CANN's file of the same path, so programs
 * written for CANN compile unchanged; acl/acl_rt_api.h adds CANN's C++ overloads, and
 * acl/aclnsim.h holds acl-notify's own extensions (not part of CANN).
 *
 * Link: cc prog.c -I<prefix>/include -L<prefix>/lib -lascendcl -Wl,-rpath,<prefix>/lib
 *
 * acl-notify's library runs on its simulator, configured when the process's session starts
 * (at aclInit, or at the first runtime call before it) by the environment:
 *   ACL_NOTIFY_SIM_SOC        the chip: a family of SPEC §4 (which stands for its first chip
 *                             name) or an exact chip name such as Ascend910B3, which
 *                             aclrtGetSocName returns (default Ascend910B = Ascend910B1)
 *   ACL_NOTIFY_SIM_DEVICES    number of devices (default 8)
 *   ACL_NOTIFY_SIM_NAMESPACE  which simulated machine to join (processes sharing a notify
 *                             must use the same value)
 *   ACL_NOTIFY_SIM_SERVER_ID  this process's SuperPod server id (default 0)
 *   ACL_NOTIFY_SIM_STREAM_CPUS  where stream workers run: off (default), spread, or a CPU list
 *   ACL_NOTIFY_SIM_ENQUEUE_TIMEOUT  seconds a task waits for room in a full stream before
 *                             507002 (default 60; 0 = for ever)
 * The first process to open a namespace fixes its SoC and device count (the README has more).
 *
 * Conventions of this implementation:
 *   - As with CANN, whose runtime entry points make no initialisation check, a runtime call
 *     made before aclInit (or after aclFinalize, or in a child forked from a process with a
 *     session) works: it starts the process's session, and aclInit afterwards succeeds as
 *     usual. The argument checks that SPEC §3 lists before any device state is consulted
 *     (NULL pointers, flag words, counts) come first, and start nothing. aclrtGetSocName and
 *     aclrtDeviceGetBareTgid answer without starting a session.
 *   - Handles (aclrtNotify, aclrtStream, ...) are opaque values, not addresses; every call
 *     validates them, and a stale, destroyed, foreign or garbage handle is
 *     ACL_ERROR_RT_INVALID_HANDLE, never a crash.
 *   - Functions the simulator does not implement return ACL_ERROR_RT_FEATURE_NOT_SUPPORT (or
 *     NULL/0) and leave a message naming themselves; README.md lists them.
 */
#ifndef INC_EXTERNAL_ACL_ACL_H_
#define INC_EXTERNAL_ACL_ACL_H_

#include "acl_rt.h"
#include "acl_op.h"
#include "acl_mdl.h"

#endif /* INC_EXTERNAL_ACL_ACL_H_ */
