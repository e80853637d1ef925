/* Open MPI baseline for bench/compare.sh: MPI_Allreduce (f32 sum) over a size sweep, printing the
 * columns of `weft bench` (size, count, type, redop, root, then time / algbw / busbw / #wrong out
 * of place and in place (MPI_IN_PLACE)). Time is the max over ranks of the per-iteration mean.
 *
 *   mpirun -np 4 mpi_allreduce -b 8 -e 64M -f 4 -n 20 -w 5
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t parse_size(const char* s) {
  char* end = NULL;
  size_t v = strtoull(s, &end, 10);
  switch (*end) {
    case 'k':
    case 'K':
      return v << 10;
    case 'm':
    case 'M':
      return v << 20;
    case 'g':
    case 'G':
      return v << 30;
    default:
      return v;
  }
}

static void fill(float* buf, size_t count, int rank) {
  for (size_t i = 0; i < count; ++i) buf[i] = (float)((rank * 5 + i) % 9 + 1);
}

/* Elements that differ from the sum over every rank of fill(). */
static long count_wrong(const float* buf, size_t count, int size) {
  long wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    float expected = 0;
    for (int r = 0; r < size; ++r) expected += (float)((r * 5 + i) % 9 + 1);
    if (buf[i] != expected) ++wrong;
  }
  return wrong;
}

/* One column group: warm up, time `iters` calls, then one checked call. */
static void measure(float* send, float* recv, size_t count, int in_place, int iters, int warmup,
                    int rank, int size, double* time_us, long* wrong) {
  const void* src = in_place ? MPI_IN_PLACE : send;
  float* data = in_place ? recv : send;
  fill(data, count, rank);
  for (int i = 0; i < warmup; ++i)
    MPI_Allreduce(src, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  double start = MPI_Wtime();
  for (int i = 0; i < iters; ++i)
    MPI_Allreduce(src, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  double local = (MPI_Wtime() - start) / iters * 1e6;
  MPI_Allreduce(&local, time_us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  fill(data, count, rank);
  MPI_Allreduce(src, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  long local_wrong = count_wrong(recv, count, size);
  MPI_Allreduce(&local_wrong, wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  size_t min_bytes = 8, max_bytes = 64 << 20, factor = 4;
  int iters = 20, warmup = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-b"))
      min_bytes = parse_size(argv[i + 1]);
    else if (!strcmp(argv[i], "-e"))
      max_bytes = parse_size(argv[i + 1]);
    else if (!strcmp(argv[i], "-f"))
      factor = parse_size(argv[i + 1]);
    else if (!strcmp(argv[i], "-n"))
      iters = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "-w"))
      warmup = atoi(argv[i + 1]);
    else {
      if (rank == 0) fprintf(stderr, "mpi_allreduce: unknown option %s\n", argv[i]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  if (min_bytes < 4 || factor < 2 || iters < 1) {
    if (rank == 0) fprintf(stderr, "mpi_allreduce: need -b >= 4, -f >= 2, -n >= 1\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  size_t max_count = max_bytes / sizeof(float);
  float* send = aligned_alloc(4096, (max_count * sizeof(float) + 4095) / 4096 * 4096);
  float* recv = aligned_alloc(4096, (max_count * sizeof(float) + 4095) / 4096 * 4096);
  if (!send || !recv) MPI_Abort(MPI_COMM_WORLD, 1);
  memset(send, 0, max_count * sizeof(float)); /* touch every page before timing */
  memset(recv, 0, max_count * sizeof(float));

  if (rank == 0) {
    printf("# mpi_allreduce: world size %d, %d iterations after %d warm-up\n", size, iters, warmup);
    printf("# %13s %12s %6s %6s %5s %10s %8s %8s %6s %10s %8s %8s %6s\n", "size", "count", "type",
           "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  }
  double bus_factor = 2.0 * (size - 1) / size;
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= factor) {
    size_t count = bytes / sizeof(float);
    double t[2];
    long wrong[2];
    for (int in_place = 0; in_place < 2; ++in_place) {
      measure(send, recv, count, in_place, iters, warmup, rank, size, &t[in_place],
              &wrong[in_place]);
    }
    if (rank == 0) {
      size_t b = count * sizeof(float);
      printf("  %13zu %12zu %6s %6s %5d", b, count, "f32", "sum", -1);
      for (int k = 0; k < 2; ++k) {
        double algbw = b / (t[k] * 1e3);
        printf(" %10.2f %8.3f %8.3f %6ld", t[k], algbw, algbw * bus_factor, wrong[k]);
      }
      printf("\n");
      fflush(stdout);
    }
    if (bytes > max_bytes / factor) break;
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return 0;
}
