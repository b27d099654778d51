/*
 * acl/acl_rt_api.h — the C++ convenience overloads of CANN 9.1.0's header of the same path:
 * shorter names and typed pointers for calls whose C names carry a suffix (…WithTimeout,
 * …WithConfig, …WithCfg, …V2). Each overload only forwards to the C function declared in
 * acl/acl_rt.h, so on acl-notify's library it does what that function does (the functions the
 * simulator does not implement return ACL_ERROR_RT_FEATURE_NOT_SUPPORT). In C this header
 * declares nothing. Prototypes, default arguments and the forwarding targets are CANN's; the
 * layout and the comments are acl-notify's.
 */
#ifndef INC_EXTERNAL_ACL_ACL_RT_API_H_
#define INC_EXTERNAL_ACL_ACL_RT_API_H_

#include "acl_rt.h"

#ifdef __cplusplus

/* ---- synchronisation and creation with an explicit timeout, config or flag ------------------ */

static inline aclError aclrtSynchronizeDevice(int32_t timeout)
{ return ::aclrtSynchronizeDeviceWithTimeout(timeout); }

static inline aclError aclrtSynchronizeStream(aclrtStream stream, int32_t timeout)
{ return ::aclrtSynchronizeStreamWithTimeout(stream, timeout); }

static inline aclError aclrtSynchronizeEvent(aclrtEvent event, int32_t timeout)
{ return ::aclrtSynchronizeEventWithTimeout(event, timeout); }

static inline aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event, int32_t timeout)
{ return ::aclrtStreamWaitEventWithTimeout(stream, event, timeout); }

static inline aclError aclrtCreateStream(aclrtStream *stream, uint32_t priority, uint32_t flag)
{ return ::aclrtCreateStreamWithConfig(stream, priority, flag); }

static inline aclError aclrtSetOpExecuteTimeOut(uint64_t timeout, uint64_t *actualTimeout)
{ return ::aclrtSetOpExecuteTimeOutV2(timeout, actualTimeout); }

static inline aclError aclrtCreateEvent(aclrtEvent *event, uint32_t flag)
{ return ::aclrtCreateEventExWithFlag(event, flag); }

/* ---- allocation into typed pointers ------------------------------------------------------- */

template <typename T>
static inline aclError aclrtMalloc(T **devPtr, size_t size, aclrtMallocConfig *cfg = nullptr)
{
    void **out = reinterpret_cast<void **>(devPtr);
    return ::aclrtMallocWithCfg(out, size, ACL_MEM_MALLOC_HUGE_FIRST, cfg);
}

template <typename T>
static inline aclError aclrtMalloc(T **devPtr, size_t size, aclrtMemMallocPolicy policy,
                                   aclrtMallocConfig *cfg = nullptr)
{ return ::aclrtMallocWithCfg(reinterpret_cast<void **>(devPtr), size, policy, cfg); }

template <typename T>
static inline aclError aclrtMallocHost(T **hostPtr, size_t size, aclrtMallocConfig *cfg = nullptr)
{
    void **out = reinterpret_cast<void **>(hostPtr);
    return ::aclrtMallocHostWithCfg(out, static_cast<uint64_t>(size), cfg);
}

template <typename T>
static inline aclError aclrtMemAllocManaged(T **devPtr, size_t size,
                                            uint32_t flags = ACL_RT_MEM_ATTACH_GLOBAL)
{
    void **out = reinterpret_cast<void **>(devPtr);
    return ::aclrtMemAllocManaged(out, static_cast<uint64_t>(size), flags);
}

/* ---- copies between typed pointers ----------------------------------------------------------- */

template <typename T, typename U>
static inline aclError aclrtMemcpy(T *dst, size_t destMax, const U *src, size_t count,
                                   aclrtMemcpyKind kind)
{
    void *d = static_cast<void *>(dst);
    const void *s = static_cast<const void *>(src);
    return ::aclrtMemcpy(d, destMax, s, count, kind);
}

template <typename T, typename U>
static inline aclError aclrtMemcpyAsync(T *dst, size_t destMax, const U *src, size_t count,
                                        aclrtMemcpyKind kind, aclrtStream stream)
{
    void *d = static_cast<void *>(dst);
    const void *s = static_cast<const void *>(src);
    return ::aclrtMemcpyAsync(d, destMax, s, count, kind, stream);
}

template <typename T, typename U>
static inline aclError aclrtMemcpy2d(T *dst, size_t dpitch, const U *src, size_t spitch,
                                     size_t width, size_t height, aclrtMemcpyKind kind)
{
    void *d = static_cast<void *>(dst);
    const void *s = static_cast<const void *>(src);
    return ::aclrtMemcpy2d(d, dpitch, s, spitch, width, height, kind);
}

template <typename T, typename U>
static inline aclError aclrtMemcpy2dAsync(T *dst, size_t dpitch, const U *src, size_t spitch,
                                          size_t width, size_t height, aclrtMemcpyKind kind,
                                          aclrtStream stream)
{
    void *d = static_cast<void *>(dst);
    const void *s = static_cast<const void *>(src);
    return ::aclrtMemcpy2dAsync(d, dpitch, s, spitch, width, height, kind, stream);
}

/* Batch copies: one attribute for every copy, or attrs[] applied from attrsIndexes[]. The
 * failIndex argument of the synchronous forms is accepted and not written. */

template <typename T, typename U>
static inline aclError aclrtMemcpyBatch(T **dsts, size_t *destMaxs, U **srcs, size_t *sizes,
                                        size_t numBatches, aclrtMemcpyBatchAttr *attrs,
                                        size_t *attrsIndexes, size_t numAttrs,
                                        size_t *failIndex = nullptr)
{
    (void)failIndex;
    return ::aclrtMemcpyBatchV2(reinterpret_cast<void **>(dsts), destMaxs,
                                reinterpret_cast<void **>(srcs), sizes, numBatches, attrs,
                                attrsIndexes, numAttrs);
}

template <typename T, typename U>
static inline aclError aclrtMemcpyBatch(T **dsts, size_t *destMaxs, U **srcs, size_t *sizes,
                                        size_t numBatches, aclrtMemcpyBatchAttr attr,
                                        size_t *failIndex = nullptr)
{
    size_t first = 0;
    return aclrtMemcpyBatch(dsts, destMaxs, srcs, sizes, numBatches, &attr, &first, 1, failIndex);
}

template <typename T, typename U>
static inline aclError aclrtMemcpyBatchAsync(T **dsts, size_t *destMaxs, U **srcs,
                                             size_t *sizes, size_t numBatches,
                                             aclrtMemcpyBatchAttr *attrs, size_t *attrsIndexes,
                                             size_t numAttrs, aclrtStream stream)
{
    return ::aclrtMemcpyBatchAsyncV2(reinterpret_cast<void **>(dsts), destMaxs,
                                     reinterpret_cast<void **>(srcs), sizes, numBatches, attrs,
                                     attrsIndexes, numAttrs, stream);
}

template <typename T, typename U>
static inline aclError aclrtMemcpyBatchAsync(T **dsts, size_t *destMaxs, U **srcs,
                                             size_t *sizes, size_t numBatches,
                                             aclrtMemcpyBatchAttr attr, aclrtStream stream)
{
    size_t first = 0;
    return aclrtMemcpyBatchAsync(dsts, destMaxs, srcs, sizes, numBatches, &attr, &first, 1,
                                 stream);
}

template <typename T, typename U>
static inline aclError aclrtMemcpyBatchAsync(T **dsts, size_t *destMaxs, U **srcs,
                                             size_t *sizes, size_t numBatches,
                                             aclrtMemcpyBatchAttr *attrs, size_t *attrsIndexes,
                                             size_t numAttrs, size_t *failIndex,
                                             aclrtStream stream)
{
    return ::aclrtMemcpyBatchAsync(reinterpret_cast<void **>(dsts), destMaxs,
                                   reinterpret_cast<void **>(srcs), sizes, numBatches, attrs,
                                   attrsIndexes, numAttrs, failIndex, stream);
}

template <typename T, typename U>
static inline aclError aclrtMemcpyBatchAsync(T **dsts, size_t *destMaxs, U **srcs,
                                             size_t *sizes, size_t numBatches,
                                             aclrtMemcpyBatchAttr attr, size_t *failIndex,
                                             aclrtStream stream)
{
    size_t first = 0;
    return aclrtMemcpyBatchAsync(dsts, destMaxs, srcs, sizes, numBatches, &attr, &first, 1,
                                 failIndex, stream);
}

/* ---- pointers, host registration, managed memory ------------------------------------------- */

template <typename T>
static inline aclError aclrtPointerGetAttributes(const T *ptr, aclrtPtrAttributes *attributes)
{ return ::aclrtPointerGetAttributes(static_cast<const void *>(ptr), attributes); }

template <typename T>
static inline aclError aclrtHostRegister(T *ptr, uint64_t size, aclrtHostRegisterType type,
                                         T **devPtr)
{
    void **out = reinterpret_cast<void **>(devPtr);
    return ::aclrtHostRegister(static_cast<void *>(ptr), size, type, out);
}

template <typename T>
static inline aclError aclrtHostRegister(T *ptr, uint64_t size, uint32_t flag)
{ return ::aclrtHostRegisterV2(static_cast<void *>(ptr), size, flag); }

template <typename T>
static inline aclError aclrtHostGetDevicePointer(T *pHost, T **pDevice, uint32_t flag)
{
    void **out = reinterpret_cast<void **>(pDevice);
    return ::aclrtHostGetDevicePointer(static_cast<void *>(pHost), out, flag);
}

template <typename T>
static inline aclError aclrtHostUnregister(T *ptr)
{ return ::aclrtHostUnregister(static_cast<void *>(ptr)); }

template <typename T>
static inline aclError aclrtMemManagedPrefetchAsync(const T *ptr, size_t size,
                                                    aclrtMemManagedLocation location,
                                                    uint32_t flags, aclrtStream stream)
{
    const void *p = static_cast<const void *>(ptr);
    return ::aclrtMemManagedPrefetchAsync(p, size, location, flags, stream);
}

template <typename T>
static inline aclError aclrtMemManagedPrefetchBatchAsync(const T **ptrs, size_t *sizes,
                                                         size_t count,
                                                         aclrtMemManagedLocation *prefetchLocs,
                                                         size_t *prefetchLocIdxs,
                                                         size_t numPrefetchLocs, uint64_t flags,
                                                         aclrtStream stream)
{
    const void **p = reinterpret_cast<const void **>(ptrs);
    return ::aclrtMemManagedPrefetchBatchAsync(p, sizes, count, prefetchLocs, prefetchLocIdxs,
                                               numPrefetchLocs, flags, stream);
}

template <typename T>
static inline aclError aclrtMemManagedPrefetchBatchAsync(const T **ptrs, size_t *sizes,
                                                         size_t count,
                                                         aclrtMemManagedLocation prefetchLoc,
                                                         uint64_t flags, aclrtStream stream)
{
    size_t first = 0;
    return aclrtMemManagedPrefetchBatchAsync(ptrs, sizes, count, &prefetchLoc, &first, 1, flags,
                                             stream);
}

/* ---- device symbols, named by reference ------------------------------------------------------ */

template <typename T>
static inline aclError aclrtGetSymbolAddress(const T &symbol, void **devPtr)
{ return ::aclrtGetSymbolAddress(static_cast<const void *>(&symbol), devPtr); }

template <typename T>
static inline aclError aclrtGetSymbolSize(const T &symbol, size_t *size)
{ return ::aclrtGetSymbolSize(static_cast<const void *>(&symbol), size); }

template <typename T>
static inline aclError aclrtMemcpyFromSymbol(void *dst, size_t dstMax, const T &symbol,
                                             size_t count, size_t offset, aclrtMemcpyKind kind)
{
    const void *sym = static_cast<const void *>(&symbol);
    return ::aclrtMemcpyFromSymbol(dst, dstMax, sym, count, offset, kind);
}

template <typename T>
static inline aclError aclrtMemcpyFromSymbolAsync(void *dst, size_t dstMax, const T &symbol,
                                                  size_t count, size_t offset,
                                                  aclrtMemcpyKind kind, aclrtStream stream)
{
    const void *sym = static_cast<const void *>(&symbol);
    return ::aclrtMemcpyFromSymbolAsync(dst, dstMax, sym, count, offset, kind, stream);
}

template <typename T>
static inline aclError aclrtMemcpyToSymbol(const T &symbol, const void *src, size_t count,
                                           size_t offset, aclrtMemcpyKind kind)
{
    const void *sym = static_cast<const void *>(&symbol);
    return ::aclrtMemcpyToSymbol(sym, src, count, offset, kind);
}

template <typename T>
static inline aclError aclrtMemcpyToSymbolAsync(const T &symbol, const void *src, size_t count,
                                                size_t offset, aclrtMemcpyKind kind,
                                                aclrtStream stream)
{
    const void *sym = static_cast<const void *>(&symbol);
    return ::aclrtMemcpyToSymbolAsync(sym, src, count, offset, kind, stream);
}

#endif /* __cplusplus */

#endif /* INC_EXTERNAL_ACL_ACL_RT_API_H_ */
