// weft: the command-line tool. `weft run`, `weft bench`, `weft store`, `weft diag`; `weft --help` lists them.
#include <CLI/CLI.hpp>

#include "tools/commands.h"
#include "weft/version.h"

int main(int argc, char** argv) {
  CLI::App app{"weft: collective communication for distributed training"};
  app.set_version_flag("--version", std::string("weft ") + WEFT_VERSION_STRING);
  app.require_subcommand(1);
  int exit_code = 0;
  weft::tools::add_run_command(app, exit_code);
  weft::tools::add_bench_command(app, exit_code);
  weft::tools::add_store_command(app, exit_code);
  weft::tools::add_diag_command(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Help and --version end with 0; every usage error with 2, as documented (CLI11's own codes
    // are 101-115, which a shell script cannot tell from a job's exit code).
    const int code = app.exit(e);  // prints the message (and the usage hint)
    return code == 0 ? 0 : 2;
  }
  return exit_code;
}
