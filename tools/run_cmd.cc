#include "tools/commands.h"

namespace weft::tools {

void add_run_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("run", "not implemented yet");
  cmd->callback([&exit_code] { exit_code = 2; });
}

}  // namespace weft::tools
