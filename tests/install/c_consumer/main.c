/* A C11 program using the installed C API, run under `weft run -n N`:
 * it allreduces its rank and checks the sum. */
#include <stdio.h>
#include <weft/weft_c.h>

int main(void) {
  int version = 0;
  weftComm_t comm = NULL;
  if (weftGetVersion(&version) != weftSuccess || weftCommInitFromEnv(&comm) != weftSuccess) {
    fprintf(stderr, "c consumer: %s\n", weftGetLastError(NULL));
    return 1;
  }
  int rank = -1, n = 0;
  weftCommUserRank(comm, &rank);
  weftCommCount(comm, &n);
  int sum = 0;
  weftResult_t r = weftAllReduce(&rank, &sum, 1, weftInt32, weftSum, comm);
  if (r != weftSuccess || sum != n * (n - 1) / 2) {
    fprintf(stderr, "c consumer: %s: %s\n", weftGetErrorString(r), weftGetLastError(comm));
    return 1;
  }
  printf("c consumer: weft %d, rank %d of %d ok\n", version, rank, n);
  return weftCommDestroy(comm) == weftSuccess ? 0 : 1;
}
