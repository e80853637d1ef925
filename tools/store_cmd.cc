#include "tools/commands.h"

namespace weft::tools {

void add_store_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("store", "not implemented yet");
  cmd->callback([&exit_code] { exit_code = 2; });
}

}  // namespace weft::tools
