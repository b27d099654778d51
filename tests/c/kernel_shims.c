/* kernel_shims.c — host-side stand-ins for the AscendC kernels of hicann/runtime's example/
 * (example/kernel_func/write_read_value.cpp: WriteDo and ReadDo), so that its samples link
 * against the simulator unchanged: the simulator runs no device code. Each queues on `stream`
 * what the kernel does (block i writes `value` into devPtr[i] / reads devPtr[i]) as copies
 * through acl/acl.h, waits for them, and prints what the kernel's AscendC::printf prints.
 * Written for this project (no CANN code): build it beside a sample, e.g.
 *   g++ server.cpp ../file_ops.cpp kernel_shims.c ... -lascendcl */
#include <stdint.h>
#include <stdio.h>

#include "acl/acl.h"

static int shim_check(aclError rc, const char *what) {
    if (rc != ACL_SUCCESS) {
        fprintf(stderr, "[kernel shim] %s returned %d: %s\n", what, (int)rc, aclGetRecentErrMsg());
        return -1;
    }
    return 0;
}

/* The samples declare these in C++ (write_do.h): compile this file as C++ with them
 * (`g++ -x c++`), so the names link. */
void WriteDo(uint32_t blockDim, void *stream, int *devPtr, int value) {
    int *host = NULL;
    size_t n = (size_t)blockDim * sizeof(int);
    if (shim_check(aclrtMallocHost((void **)&host, n), "aclrtMallocHost") != 0) return;
    for (uint32_t i = 0; i < blockDim; i++) host[i] = value;
    if (shim_check(aclrtMemcpyAsync(devPtr, n, host, n, ACL_MEMCPY_HOST_TO_DEVICE, stream),
                   "aclrtMemcpyAsync") == 0 &&
        shim_check(aclrtSynchronizeStream(stream), "aclrtSynchronizeStream") == 0) {
        for (uint32_t i = 0; i < blockDim; i++) printf("Source data: %d\n", value);
    }
    aclrtFreeHost(host);
}

void ReadDo(uint32_t blockDim, void *stream, int *devPtr) {
    int *host = NULL;
    size_t n = (size_t)blockDim * sizeof(int);
    if (shim_check(aclrtMallocHost((void **)&host, n), "aclrtMallocHost") != 0) return;
    if (shim_check(aclrtMemcpyAsync(host, n, devPtr, n, ACL_MEMCPY_DEVICE_TO_HOST, stream),
                   "aclrtMemcpyAsync") == 0 &&
        shim_check(aclrtSynchronizeStream(stream), "aclrtSynchronizeStream") == 0) {
        for (uint32_t i = 0; i < blockDim; i++) printf("Destination data: %d\n", host[i]);
    }
    aclrtFreeHost(host);
}
