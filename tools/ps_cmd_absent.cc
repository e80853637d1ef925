// `weft ps` in a build without the parameter server (WEFT_BUILD_PS=OFF: gRPC was not found).
#include <cstdio>

#include "tools/commands.h"

namespace weft::tools {

void add_ps_command(CLI::App& app, int& exit_code) {
  auto* ps = app.add_subcommand("ps", "The parameter server (not in this build: needs gRPC)");
  ps->allow_extras();
  ps->callback([&exit_code] {
    std::fprintf(stderr, "weft ps: this build has no parameter server (WEFT_BUILD_PS=OFF; "
                         "scripts/setup.sh installs gRPC)\n");
    exit_code = 1;
  });
}

}  // namespace weft::tools
