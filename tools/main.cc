// weft: the command-line tool. Subcommands: run, bench, store.
#include <cstdio>
#include <cstring>

#include "weft/version.h"

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--version") == 0) {
    std::printf("weft %s\n", WEFT_VERSION_STRING);
    return 0;
  }
  std::fprintf(stderr, "usage: weft {run|bench|store} ...\n");
  return 2;
}
