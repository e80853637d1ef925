// weft: the command-line tool. `weft run`, `weft bench`, `weft store`, `weft diag`, `weft ps`;
// `weft --help` lists them, `weft --version` says what the build has in it.
#include <CLI/CLI.hpp>

#include "tools/commands.h"
#include "tools/version/version.h"

int main(int argc, char** argv) {
  // Named "weft" whatever path started it, so usage lines (and the man pages) say `weft`.
  CLI::App app{"weft: collective communication for distributed training", "weft"};
  app.set_version_flag("--version", weft::tools::version_text(),
                       "Print the version, the git revision and what this build has in it");
  app.require_subcommand(1);
  int exit_code = 0;
  weft::tools::add_run_command(app, exit_code);
  weft::tools::add_bench_command(app, exit_code);
  weft::tools::add_store_command(app, exit_code);
  weft::tools::add_diag_command(app, exit_code);
  weft::tools::add_ps_command(app, exit_code);
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
