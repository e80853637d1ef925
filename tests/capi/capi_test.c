/* The C API from C11: every collective's results, the async path, errors and the unique-id
 * path. Run under `weft run -n N` (any N >= 2) with no argument; with the argument `threads` it
 * runs alone: three threads make one communicator from a unique id made by the first. */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft/weft_c.h"

static int me = -1;

#define CHECK(cond)                                                                   \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      fprintf(stderr, "capi_test: rank %d: %s:%d: CHECK(%s) failed (last error: %s)\n", \
              me, __FILE__, __LINE__, #cond, weftGetLastError(NULL));                 \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)
#define OK(call) CHECK((call) == weftSuccess)

static void check_collectives(weftComm_t comm, int rank, int n) {
  /* allreduce: int32 sum, float max, bool or/and */
  int32_t si[5], ri[5];
  for (int i = 0; i < 5; ++i) si[i] = rank * 10 + i;
  OK(weftAllReduce(si, ri, 5, weftInt32, weftSum, comm));
  for (int i = 0; i < 5; ++i) CHECK(ri[i] == 10 * n * (n - 1) / 2 + n * i);
  float sf[3] = {(float)rank, -1.0f * rank, 0.5f}, rf[3];
  OK(weftAllReduce(sf, rf, 3, weftFloat, weftMax, comm));
  CHECK(rf[0] == (float)(n - 1) && rf[1] == 0.0f && rf[2] == 0.5f);
  bool sb[2] = {rank == 1, true}, rb[2];
  OK(weftAllReduce(sb, rb, 2, weftBool, weftSum, comm));
  CHECK(rb[0] == true && rb[1] == true);
  OK(weftAllReduce(sb, rb, 2, weftBool, weftProd, comm));
  CHECK(rb[0] == false && rb[1] == true);

  /* broadcast from rank 1 out of a separate send buffer */
  int64_t sl[4], rl[4];
  for (int i = 0; i < 4; ++i) sl[i] = rank == 1 ? 100 + i : -1, rl[i] = -7;
  OK(weftBroadcast(sl, rl, 4, weftInt64, 1, comm));
  for (int i = 0; i < 4; ++i) CHECK(rl[i] == 100 + i);

  /* reduce to the last rank */
  double sd[2] = {rank, 2.0}, rd[2] = {0, 0};
  OK(weftReduce(sd, rd, 2, weftDouble, weftSum, n - 1, comm));
  if (rank == n - 1) CHECK(rd[0] == n * (n - 1) / 2.0 && rd[1] == 2.0 * n);

  /* allgather, 2 per rank */
  int32_t sg[2] = {rank * 2, rank * 2 + 1}, rg[64];
  OK(weftAllGather(sg, rg, 2, weftInt32, comm));
  for (int k = 0; k < 2 * n; ++k) CHECK(rg[k] == k);

  /* allgatherv: rank r gives r+1 copies of r */
  size_t counts[16], displs[16], total = 0;
  for (int k = 0; k < n; ++k) counts[k] = (size_t)k + 1, displs[k] = total, total += counts[k];
  uint8_t sv[16], rv[256];
  for (int i = 0; i <= rank; ++i) sv[i] = (uint8_t)rank;
  OK(weftAllGatherV(sv, (size_t)rank + 1, rv, counts, displs, weftUint8, comm));
  for (int k = 0; k < n; ++k)
    for (size_t i = 0; i < counts[k]; ++i) CHECK(rv[displs[k] + i] == k);

  /* reduce_scatter, 2 per rank */
  int32_t ss[64], rs[2];
  for (int k = 0; k < 2 * n; ++k) ss[k] = rank + k;
  OK(weftReduceScatter(ss, rs, 2, weftInt32, weftSum, comm));
  for (int j = 0; j < 2; ++j) CHECK(rs[j] == n * (n - 1) / 2 + n * (rank * 2 + j));

  /* gather to 0, scatter from 0 */
  int32_t one = rank, all[32];
  OK(weftGather(&one, all, 1, weftInt32, 0, comm));
  if (rank == 0)
    for (int k = 0; k < n; ++k) CHECK(all[k] == k);
  for (int k = 0; k < n; ++k) all[k] = 7 * k;
  int32_t mine = -1;
  OK(weftScatter(all, &mine, 1, weftInt32, 0, comm));
  CHECK(mine == 7 * rank);

  /* alltoall */
  int32_t sa[32], ra[32];
  for (int k = 0; k < n; ++k) sa[k] = rank * 100 + k;
  OK(weftAllToAll(sa, ra, 1, weftInt32, comm));
  for (int k = 0; k < n; ++k) CHECK(ra[k] == k * 100 + rank);

  /* alltoallv: k+1 elements to rank k, each rank*10+k */
  size_t sc[16], sdp[16], rc[16], rdp[16];
  int32_t sx[256], rx[256];
  size_t at = 0;
  for (int k = 0; k < n; ++k) {
    sc[k] = (size_t)k + 1, sdp[k] = at;
    for (size_t i = 0; i < sc[k]; ++i) sx[at + i] = rank * 10 + k;
    at += sc[k];
    rc[k] = (size_t)rank + 1, rdp[k] = (size_t)k * (rank + 1);
  }
  OK(weftAllToAllV(sx, sc, sdp, rx, rc, rdp, weftInt32, comm));
  for (int k = 0; k < n; ++k)
    for (size_t i = 0; i < rc[k]; ++i) CHECK(rx[rdp[k] + i] == k * 10 + rank);

  OK(weftBarrier(comm));

  /* send to the next rank, receive from the previous one */
  int32_t out[3] = {rank, rank + 1, rank + 2}, in[3] = {0, 0, 0};
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  weftWork_t sent = NULL;
  OK(weftSendAsync(out, 3, weftInt32, next, comm, &sent));
  OK(weftRecv(in, 3, weftInt32, prev, comm));
  OK(weftWorkWait(sent, -1));
  OK(weftWorkFree(sent));
  for (int i = 0; i < 3; ++i) CHECK(in[i] == prev + i);
  if (rank % 2 == 0 && rank + 1 < n) OK(weftSend(out, 3, weftInt32, rank + 1, comm));
  if (rank % 2 == 1) {
    OK(weftRecv(in, 3, weftInt32, rank - 1, comm));
    CHECK(in[0] == rank - 1);
  }
}

static void check_async(weftComm_t comm, int rank, int n) {
  float big[4096], sum[4096];
  for (int i = 0; i < 4096; ++i) big[i] = (float)(rank + i % 7);
  weftWork_t w[4];
  OK(weftAllReduceAsync(big, sum, 4096, weftFloat32, weftSum, comm, &w[0]));
  int32_t x = rank, y[32], z = 0;
  OK(weftAllGatherAsync(&x, y, 1, weftInt32, comm, &w[1]));
  OK(weftBarrierAsync(comm, &w[2]));
  OK(weftBroadcastAsync(&x, &z, 1, weftInt32, 0, comm, &w[3]));
  int done = 0;
  while (!done) OK(weftWorkTest(w[0], &done));
  OK(weftWorkWait(w[1], 60000));
  OK(weftWorkWait(w[2], -1));
  OK(weftWorkWait(w[3], -1));
  for (int i = 0; i < 4; ++i) OK(weftWorkFree(w[i]));
  for (int i = 0; i < 4096; ++i) CHECK(sum[i] == (float)(n * (n - 1) / 2 + n * (i % 7)));
  for (int k = 0; k < n; ++k) CHECK(y[k] == k);
  CHECK(z == 0);

  /* every other async form once */
  int32_t a[64], b[64];
  size_t counts[16], displs[16];
  for (int k = 0; k < n; ++k) counts[k] = 1, displs[k] = (size_t)k, a[k] = rank;
  weftWork_t v[7];
  OK(weftReduceAsync(a, b, 1, weftInt32, weftMax, 0, comm, &v[0]));
  OK(weftReduceScatterAsync(a, b + 1, 1, weftInt32, weftMin, comm, &v[1]));
  OK(weftGatherAsync(a, b + 2, 1, weftInt32, 0, comm, &v[2]));
  OK(weftScatterAsync(a, b + 20, 1, weftInt32, 0, comm, &v[3]));
  OK(weftAllToAllAsync(a, b + 30, 1, weftInt32, comm, &v[4]));
  OK(weftAllGatherVAsync(a, 1, b + 40, counts, displs, weftInt32, comm, &v[5]));
  OK(weftAllToAllVAsync(a, counts, displs, b + 50, counts, displs, weftInt32, comm, &v[6]));
  for (int i = 0; i < 7; ++i) {
    OK(weftWorkWait(v[i], -1));
    OK(weftWorkFree(v[i]));
  }
  if (rank == 0) CHECK(b[0] == n - 1);
  CHECK(b[1] == 0);
  CHECK(b[20] == 0);
  for (int k = 0; k < n; ++k) CHECK(b[30 + k] == k && b[40 + k] == k && b[50 + k] == k);
  if (rank == 0)
    for (int k = 0; k < n; ++k) CHECK(b[2 + k] == k);

  weftWork_t r = NULL;
  int32_t got = -1;
  if (rank == 0) OK(weftRecvAsync(&got, 1, weftInt32, n - 1, comm, &r));
  if (rank == n - 1) OK(weftSend(&x, 1, weftInt32, 0, comm));
  if (rank == 0) {
    OK(weftWorkWait(r, -1));
    OK(weftWorkFree(r));
    CHECK(got == n - 1);
  }
}

static bool says(const char* what) { return strstr(weftGetLastError(NULL), what) != NULL; }

static void check_keyed_id_needs_the_key(int rank);

static void check_errors(weftComm_t comm, int rank, int n) {
  int32_t a = 0, b = 0;
  CHECK(weftAllReduce(&a, &b, 1, (weftDataType_t)42, weftSum, comm) == weftInvalidArgument);
  CHECK(says("allreduce") && says("rank") && says("42"));
  CHECK(weftReduce(&a, &b, 1, weftInt32, (weftRedOp_t)99, 0, comm) == weftInvalidArgument);
  CHECK(says("reduce") && says("99"));
  CHECK(weftAllReduce(&a, &b, 1, weftBool, weftAvg, comm) == weftInvalidArgument);
  CHECK(says("allreduce") && says("avg"));
  CHECK(weftAllReduceAsync(&a, &b, 1, weftInt32, weftSum, comm, NULL) == weftInvalidArgument);
  CHECK(says("work is NULL"));
  /* a root outside the group: refused before anything is sent, on every rank */
  CHECK(weftBroadcast(&a, &b, 1, weftInt32, n + 5, comm) == weftInvalidArgument);
  CHECK(says("broadcast"));
  weftWork_t w = NULL;
  CHECK(weftGatherAsync(&a, &b, 1, weftInt32, -3, comm, &w) == weftInvalidArgument);
  CHECK(w == NULL && says("gather"));
  CHECK(weftSend(&a, 1, weftInt32, n, comm) == weftInvalidArgument);
  CHECK(says("send"));
  CHECK(weftAllReduce(&a, &b, 1, weftInt32, weftSum, NULL) == weftInvalidArgument);
  weftComm_t none = NULL;
  weftUniqueId id;
  memset(&id, 0, sizeof id);
  CHECK(weftCommInitRank(&none, 2, id, 5) == weftInvalidArgument);
  CHECK(says("weftCommInitRank") && none == NULL);
  CHECK(weftCommInitRank(&none, 2, id, 1) == weftInvalidArgument);
  CHECK(says("weftCommInitRank"));
  /* the communicator still works after refused calls */
  int32_t r = rank, s = 0;
  OK(weftAllReduce(&r, &s, 1, weftInt32, weftSum, comm));
  CHECK(s == n * (n - 1) / 2);
  CHECK(strcmp(weftGetErrorString(weftTimeout), "timeout") == 0);
  CHECK(strcmp(weftGetErrorString(weftPeerLost), "peer lost") == 0);
  CHECK(weftGetErrorString((weftResult_t)1000) != NULL);
  check_keyed_id_needs_the_key(rank);
}

static void check_split(weftComm_t comm, int rank, int n) {
  weftComm_t half = NULL;
  OK(weftCommSplit(comm, rank % 2, -rank, &half, NULL));
  int count = 0, sub = -1;
  OK(weftCommCount(half, &count));
  OK(weftCommUserRank(half, &sub));
  CHECK(count == (n + 1 - rank % 2) / 2);
  int32_t v = 1, t = 0;
  OK(weftAllReduce(&v, &t, 1, weftInt32, weftSum, half));
  CHECK(t == count);
  OK(weftCommDestroy(half));
  weftComm_t nothing = (weftComm_t)&v;
  OK(weftCommSplit(comm, rank == 0 ? WEFT_SPLIT_NOCOLOR : 1, 0, &nothing, NULL));
  if (rank == 0) CHECK(nothing == NULL);
  else OK(weftCommDestroy(nothing));
}

/* The NCCL pattern: rank 0 makes the id, the job hands it round (here by broadcast), every rank
 * makes a communicator from it. */
static void check_unique_id_across_processes(weftComm_t comm, int rank, int n) {
  weftUniqueId id;
  memset(&id, 0, sizeof id);
  if (rank == 0) OK(weftGetUniqueId(&id));
  OK(weftBroadcast(&id, &id, sizeof id, weftUint8, 0, comm));
  weftComm_t fresh = NULL;
  /* The id's maker is rank 0 (docs/c-api.md: its process serves the store); the others'
   * ranks are reversed. */
  const int want = rank == 0 ? 0 : n - rank;
  OK(weftCommInitRank(&fresh, n, id, want));
  int fr = -1;
  OK(weftCommUserRank(fresh, &fr));
  CHECK(fr == want);
  int32_t v = fr, s = 0;
  OK(weftAllReduce(&v, &s, 1, weftInt32, weftSum, fresh));
  CHECK(s == n * (n - 1) / 2);
  OK(weftCommDestroy(fresh));
}

/* Under weft run the id is keyed: a process without the key cannot use it. */
static void check_keyed_id_needs_the_key(int rank) {
  const char* key = getenv("WEFT_AUTH_KEY_FILE");
  if (rank != 0 || key == NULL || *key == 0) return;
  char saved[4096];
  CHECK(strlen(key) < sizeof saved);
  strcpy(saved, key);
  weftUniqueId id;
  OK(weftGetUniqueId(&id));
  CHECK(unsetenv("WEFT_AUTH_KEY_FILE") == 0);
  weftComm_t none = NULL;
  CHECK(weftCommInitRank(&none, 1, id, 0) == weftInvalidArgument);
  CHECK(none == NULL && says("weftCommInitRank") && says("WEFT_AUTH_KEY_FILE"));
  CHECK(setenv("WEFT_AUTH_KEY_FILE", saved, 1) == 0);
}

static int run_under_launcher(void) {
  int version = 0;
  OK(weftGetVersion(&version));
  CHECK(version >= 100);
  weftComm_t comm = NULL;
  OK(weftCommInitFromEnv(&comm));
  int rank = -1, n = 0;
  OK(weftCommUserRank(comm, &rank));
  OK(weftCommCount(comm, &n));
  me = rank;
  CHECK(n >= 2 && n <= 16);
  check_collectives(comm, rank, n);
  check_async(comm, rank, n);
  check_split(comm, rank, n);
  check_unique_id_across_processes(comm, rank, n);
  check_errors(comm, rank, n);
  OK(weftCommDestroy(comm));
  printf("capi_test: rank %d of %d ok\n", rank, n);
  return 0;
}

enum { kThreads = 3 };
static weftUniqueId shared_id;

static atomic_int rank0_waited;

static void* thread_rank(void* arg) {
  const int rank = (int)(intptr_t)arg;
  weftComm_t comm = NULL;
  OK(weftCommInitRank(&comm, kThreads, shared_id, rank));
  int32_t v = rank + 1, s = 0;
  OK(weftAllReduce(&v, &s, 1, weftInt32, weftSum, comm));
  CHECK(s == kThreads * (kThreads + 1) / 2);
  check_async(comm, rank, kThreads);
  /* A wait that runs out before the operation: weftTimeout naming it, and the work goes on. */
  if (rank == 0) {
    weftWork_t w = NULL;
    OK(weftAllReduceAsync(&v, &s, 1, weftInt32, weftMax, comm, &w));
    CHECK(weftWorkWait(w, 20) == weftTimeout);
    CHECK(strstr(weftGetLastError(comm), "weftWorkWait") != NULL);
    CHECK(strstr(weftGetLastError(comm), "allreduce") != NULL);
    atomic_store(&rank0_waited, 1);
    OK(weftWorkWait(w, -1));
    OK(weftWorkFree(w));
  } else {
    while (!atomic_load(&rank0_waited)) sched_yield();
    OK(weftAllReduce(&v, &s, 1, weftInt32, weftMax, comm));
  }
  CHECK(s == kThreads);
  OK(weftCommDestroy(comm));
  return NULL;
}

static int run_threads(void) {
  OK(weftGetUniqueId(&shared_id));
  pthread_t threads[kThreads];
  for (int r = 0; r < kThreads; ++r)
    CHECK(pthread_create(&threads[r], NULL, thread_rank, (void*)(intptr_t)r) == 0);
  for (int r = 0; r < kThreads; ++r) CHECK(pthread_join(threads[r], NULL) == 0);
  /* A job of one rank, ended by weftCommAbort. */
  weftUniqueId solo_id;
  weftComm_t solo = NULL;
  OK(weftGetUniqueId(&solo_id));
  OK(weftCommInitRank(&solo, 1, solo_id, 0));
  int32_t v = 5, s = 0;
  OK(weftAllReduce(&v, &s, 1, weftInt32, weftSum, solo));
  CHECK(s == 5);
  OK(weftCommAbort(solo));
  printf("capi_test: %d threads from one unique id ok\n", kThreads);
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "threads") == 0) return run_threads();
  return run_under_launcher();
}
