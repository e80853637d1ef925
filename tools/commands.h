// Subcommands of the `weft` tool. Each registers itself on the top-level CLI11 app; its callback
// stores the process exit code in `exit_code`. One source file per subcommand.
#pragma once

#include <CLI/CLI.hpp>

namespace weft::tools {

void add_run_command(CLI::App& app, int& exit_code);    // run_cmd.cc: the local launcher
void add_bench_command(CLI::App& app, int& exit_code);  // bench_cmd.cc: nccl-tests style benchmark
void add_store_command(CLI::App& app, int& exit_code);  // store_cmd.cc: standalone TCP store
void add_diag_command(CLI::App& app, int& exit_code);   // diag_cmd.cc: who is stuck where
// ps_cmd.cc: the parameter server (ps_cmd_absent.cc in a build without gRPC)
void add_ps_command(CLI::App& app, int& exit_code);

}  // namespace weft::tools
