/* weft_c.h: the C API of weft, for C programs and for bindings (Rust, Go, Julia, ...).
 *
 * Its shape is NCCL's, so code written for NCCL ports by renaming (nccl -> weft, and drop the
 * stream argument): opaque handles (weftComm_t, weftWork_t), every call returns a weftResult_t,
 * one call per collective with NCCL's argument order (sendbuff, recvbuff, count, datatype, op,
 * root, comm), and a communicator made from a weftUniqueId (rank 0 makes it and hands it to
 * the others) or from the launcher environment (weft run, torchrun, Open MPI, Slurm).
 *
 * ABI: C only, fixed-width types, enums with explicit and stable values (new values are only
 * ever appended), handles are pointers to incomplete types. WEFT_C_API_VERSION changes when a
 * declaration here changes incompatibly; weftGetVersion tells the library's version.
 *
 * Errors: weftGetErrorString names a code; weftGetLastError returns the full message of the
 * last failed call made by the calling thread (thread-local, whatever the communicator), e.g.
 * "rank 2: allreduce #17 (f32 x 1024, sum): timeout waiting for rank 1". A failed operation
 * (timeout, lost peer, mismatch, abort) leaves the communicator broken: later calls fail at
 * once with the same error; weftInvalidArgument failures (nothing was sent) do not.
 *
 * Buffers: host memory; count is in elements of datatype. The blocking calls return once the
 * operation is done; the ...Async forms return a weftWork_t at once and the buffers must stay
 * valid and untouched until weftWorkTest says done or weftWorkWait returns. Operations of one
 * communicator run in call order. A communicator may be called from several threads, but the
 * order of calls is the order of the collectives.
 */
#ifndef WEFT_WEFT_C_H_
#define WEFT_WEFT_C_H_

#include <stddef.h>
#include <stdint.h>

#define WEFT_C_API_VERSION 1

#if defined(__GNUC__)
#define WEFT_C_EXPORT __attribute__((visibility("default")))
#else
#define WEFT_C_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* One to one with weft::ErrorCode (weft/status.h), same numbers. */
typedef enum {
  weftSuccess = 0,
  weftInvalidArgument = 1, /* the caller passed something unusable; nothing was sent */
  weftTimeout = 2,         /* the operation did not finish within its timeout */
  weftPeerLost = 3,        /* a peer closed its connection or died */
  weftMismatch = 4,        /* ranks called different operations or with different arguments */
  weftAborted = 5,         /* weftCommAbort here or abort on a peer */
  weftIoError = 6,         /* a system call failed */
  weftProtocolError = 7,   /* a peer sent bytes that are not valid weft frames */
  weftNotFound = 8,        /* a key or name does not exist */
  weftInternalError = 9,   /* a bug in weft */
  weftRevoked = 10,        /* a rank revoked the communicator */
  weftNumResults = 11
} weftResult_t;

/* weft::DataType's values, plus weftBool (one byte, 0 or 1). NCCL's aliases are provided. */
typedef enum {
  weftInt8 = 0,
  weftChar = 0,
  weftUint8 = 1,
  weftInt32 = 2,
  weftInt = 2,
  weftInt64 = 3,
  weftFloat16 = 4,
  weftHalf = 4,
  weftBfloat16 = 5,
  weftFloat32 = 6,
  weftFloat = 6,
  weftFloat64 = 7,
  weftDouble = 7,
  weftBool = 8, /* sum, max and bor are logical or; prod, min and band logical and */
  weftNumTypes = 9
} weftDataType_t;

/* weft::ReduceOp's values. band, bor and bxor are for the integer types (and weftBool). */
typedef enum {
  weftSum = 0,
  weftProd = 1,
  weftMin = 2,
  weftMax = 3,
  weftAvg = 4,
  weftBand = 5,
  weftBor = 6,
  weftBxor = 7,
  weftNumOps = 8
} weftRedOp_t;

typedef struct weftComm* weftComm_t;
typedef struct weftWork* weftWork_t;

/* An opaque 128-byte id naming the rendezvous of one job (as ncclUniqueId). Copy it by value;
 * it is plain bytes, so it can be sent over MPI, a file or a socket. It carries the address of
 * the store served by the process that made it, a random job namespace, and whether the job
 * uses a job key. With a key (WEFT_AUTH_KEY_FILE set where the id is made, as under weft run)
 * the store authenticates and the links are encrypted, and every rank must have the same key in
 * its own WEFT_AUTH_KEY_FILE; the id does not hold the key. Without one, nothing authenticates:
 * whoever holds the id can join the job, so the id is then a secret. */
#define WEFT_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[WEFT_UNIQUE_ID_BYTES];
} weftUniqueId;

/* The rank's color for weftCommSplit when it joins no new communicator. */
#define WEFT_SPLIT_NOCOLOR (-1)

/* The library's version as MAJOR*10000 + MINOR*100 + PATCH (as NCCL_VERSION_CODE). */
WEFT_C_EXPORT weftResult_t weftGetVersion(int* version);
/* The name of a code ("timeout"); never NULL. */
WEFT_C_EXPORT const char* weftGetErrorString(weftResult_t result);
/* The message of the calling thread's last failed call ("" when none); comm may be NULL and is
 * not consulted (the record is thread-local). Valid until this thread's next weft call. */
WEFT_C_EXPORT const char* weftGetLastError(weftComm_t comm);

/* --- creating and ending communicators */

/* Starts a store server in this process (on every address, a port the kernel picks; with the
 * job key WEFT_AUTH_KEY_FILE names, when set) and writes an id naming it. Call it on the rank
 * that becomes rank 0 and hand the id to every rank. The server lives until the last
 * communicator of this process made from the id is destroyed (or until the process exits, if
 * none is ever made), so this process should destroy its communicators last (docs/c-api.md).
 * Its address in the id is this host's first non-loopback IPv4 address (127.0.0.1 when there is
 * none). */
WEFT_C_EXPORT weftResult_t weftGetUniqueId(weftUniqueId* uniqueId);
/* Joins the job named by uniqueId as `rank` of `nranks`; blocks until every rank has joined
 * (or Options::connect_timeout, WEFT_CONNECT_TIMEOUT, passes). Settings come from the WEFT_*
 * variables and WEFT_CONFIG as for Options::from_env; the job key of a keyed id from this
 * process's WEFT_AUTH_KEY_FILE. Collective over the nranks ranks. */
WEFT_C_EXPORT weftResult_t weftCommInitRank(weftComm_t* comm, int nranks, weftUniqueId uniqueId,
                                            int rank);
/* Rank, size and store from the launcher's environment (as weft::Communicator::from_env):
 * weft run, torchrun, Open MPI, Slurm, WEFT_* variables. */
WEFT_C_EXPORT weftResult_t weftCommInitFromEnv(weftComm_t* comm);
/* Ranks of comm passing the same color form one new communicator, ordered by (key, rank); a
 * rank passing WEFT_SPLIT_NOCOLOR gets *newcomm = NULL. config is reserved and must be NULL.
 * Collective over comm. */
WEFT_C_EXPORT weftResult_t weftCommSplit(weftComm_t comm, int color, int key, weftComm_t* newcomm,
                                         const void* config);
/* Waits for pending operations, closes the connections and frees comm (NULL: nothing). */
WEFT_C_EXPORT weftResult_t weftCommDestroy(weftComm_t comm);
/* Ends every pending operation here and on the peers with weftAborted, then frees comm.
 * Returns in bounded time whatever the peers do. */
WEFT_C_EXPORT weftResult_t weftCommAbort(weftComm_t comm);
WEFT_C_EXPORT weftResult_t weftCommCount(const weftComm_t comm, int* count);
WEFT_C_EXPORT weftResult_t weftCommUserRank(const weftComm_t comm, int* rank);

/* --- collectives. count is per rank for allgather, gather, scatter, reduce_scatter and alltoall:
 * the receive buffer holds nranks*count elements for allgather and gather (at the root), the send
 * buffer nranks*count for scatter (at the root), reduce_scatter and alltoall. The same pointer
 * as sendbuff and recvbuff runs in place. */
WEFT_C_EXPORT weftResult_t weftAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                         weftDataType_t datatype, weftRedOp_t op, weftComm_t comm);
/* The root's sendbuff lands in every rank's recvbuff (sendbuff is read at the root only). */
WEFT_C_EXPORT weftResult_t weftBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                         weftDataType_t datatype, int root, weftComm_t comm);
WEFT_C_EXPORT weftResult_t weftReduce(const void* sendbuff, void* recvbuff, size_t count,
                                      weftDataType_t datatype, weftRedOp_t op, int root,
                                      weftComm_t comm);
WEFT_C_EXPORT weftResult_t weftAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                         weftDataType_t datatype, weftComm_t comm);
/* recvcounts[r] elements from rank r land at recvbuff + displs[r] elements (nranks entries). */
WEFT_C_EXPORT weftResult_t weftAllGatherV(const void* sendbuff, size_t sendcount, void* recvbuff,
                                          const size_t* recvcounts, const size_t* displs,
                                          weftDataType_t datatype, weftComm_t comm);
WEFT_C_EXPORT weftResult_t weftReduceScatter(const void* sendbuff, void* recvbuff,
                                             size_t recvcount, weftDataType_t datatype,
                                             weftRedOp_t op, weftComm_t comm);
WEFT_C_EXPORT weftResult_t weftGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                      weftDataType_t datatype, int root, weftComm_t comm);
WEFT_C_EXPORT weftResult_t weftScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                       weftDataType_t datatype, int root, weftComm_t comm);
WEFT_C_EXPORT weftResult_t weftAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                                        weftDataType_t datatype, weftComm_t comm);
/* sendcounts[r] elements from sendbuff + sdispls[r] go to rank r; recvcounts[r] elements from
 * rank r land at recvbuff + rdispls[r]. Counts must agree pairwise. */
WEFT_C_EXPORT weftResult_t weftAllToAllV(const void* sendbuff, const size_t* sendcounts,
                                         const size_t* sdispls, void* recvbuff,
                                         const size_t* recvcounts, const size_t* rdispls,
                                         weftDataType_t datatype, weftComm_t comm);
WEFT_C_EXPORT weftResult_t weftBarrier(weftComm_t comm);
/* Point to point: the receive names the sender and the same count and datatype; messages from
 * one sender arrive in send order. */
WEFT_C_EXPORT weftResult_t weftSend(const void* sendbuff, size_t count, weftDataType_t datatype,
                                    int peer, weftComm_t comm);
WEFT_C_EXPORT weftResult_t weftRecv(void* recvbuff, size_t count, weftDataType_t datatype,
                                    int peer, weftComm_t comm);

/* --- async forms: the same arguments and a weftWork_t* last. On weftSuccess *work is a handle
 * to free with weftWorkFree (freeing does not cancel the operation); on failure *work is NULL.
 * A failure found before the operation starts may be reported by the call or by the work. */
WEFT_C_EXPORT weftResult_t weftAllReduceAsync(const void* sendbuff, void* recvbuff, size_t count,
                                              weftDataType_t datatype, weftRedOp_t op,
                                              weftComm_t comm, weftWork_t* work);
WEFT_C_EXPORT weftResult_t weftBroadcastAsync(const void* sendbuff, void* recvbuff, size_t count,
                                              weftDataType_t datatype, int root, weftComm_t comm,
                                              weftWork_t* work);
WEFT_C_EXPORT weftResult_t weftReduceAsync(const void* sendbuff, void* recvbuff, size_t count,
                                           weftDataType_t datatype, weftRedOp_t op, int root,
                                           weftComm_t comm, weftWork_t* work);
WEFT_C_EXPORT weftResult_t weftAllGatherAsync(const void* sendbuff, void* recvbuff,
                                              size_t sendcount, weftDataType_t datatype,
                                              weftComm_t comm, weftWork_t* work);
/* The count and displacement arrays are copied; the buffers are not. */
WEFT_C_EXPORT weftResult_t weftAllGatherVAsync(const void* sendbuff, size_t sendcount,
                                               void* recvbuff, const size_t* recvcounts,
                                               const size_t* displs, weftDataType_t datatype,
                                               weftComm_t comm, weftWork_t* work);
WEFT_C_EXPORT weftResult_t weftReduceScatterAsync(const void* sendbuff, void* recvbuff,
                                                  size_t recvcount, weftDataType_t datatype,
                                                  weftRedOp_t op, weftComm_t comm,
                                                  weftWork_t* work);
WEFT_C_EXPORT weftResult_t weftGatherAsync(const void* sendbuff, void* recvbuff, size_t sendcount,
                                           weftDataType_t datatype, int root, weftComm_t comm,
                                           weftWork_t* work);
WEFT_C_EXPORT weftResult_t weftScatterAsync(const void* sendbuff, void* recvbuff,
                                            size_t recvcount, weftDataType_t datatype, int root,
                                            weftComm_t comm, weftWork_t* work);
WEFT_C_EXPORT weftResult_t weftAllToAllAsync(const void* sendbuff, void* recvbuff, size_t count,
                                             weftDataType_t datatype, weftComm_t comm,
                                             weftWork_t* work);
WEFT_C_EXPORT weftResult_t weftAllToAllVAsync(const void* sendbuff, const size_t* sendcounts,
                                              const size_t* sdispls, void* recvbuff,
                                              const size_t* recvcounts, const size_t* rdispls,
                                              weftDataType_t datatype, weftComm_t comm,
                                              weftWork_t* work);
WEFT_C_EXPORT weftResult_t weftBarrierAsync(weftComm_t comm, weftWork_t* work);
WEFT_C_EXPORT weftResult_t weftSendAsync(const void* sendbuff, size_t count,
                                         weftDataType_t datatype, int peer, weftComm_t comm,
                                         weftWork_t* work);
WEFT_C_EXPORT weftResult_t weftRecvAsync(void* recvbuff, size_t count, weftDataType_t datatype,
                                         int peer, weftComm_t comm, weftWork_t* work);

/* --- work handles. Any thread may test or wait on a work. */

/* *done = 1 once the operation has finished; returns its result then (weftSuccess while it
 * runs). Never blocks. */
WEFT_C_EXPORT weftResult_t weftWorkTest(weftWork_t work, int* done);
/* Waits until the operation finishes and returns its result; timeout_ms < 0 waits without limit.
 * When timeout_ms passes first it returns weftTimeout and the operation goes on (its own
 * timeout still bounds it). */
WEFT_C_EXPORT weftResult_t weftWorkWait(weftWork_t work, int64_t timeout_ms);
/* Frees the handle (NULL: nothing); does not cancel the operation. */
WEFT_C_EXPORT weftResult_t weftWorkFree(weftWork_t work);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* WEFT_WEFT_C_H_ */
