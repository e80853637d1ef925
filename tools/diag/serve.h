// `weft diag --serve HOST:PORT`: a live page of a running job (docs/observability.md).
//
// Serves GET / (page.h: HTML and JavaScript, no build step), GET /state.json (the latest state)
// and a WebSocket at /ws. Once a second it asks the job's ranks for their flight records through
// the store (job_store.h; no port on the ranks) and pushes the state to every socket:
//   {"type": "state", "time": <unix s>, "answered": N, "communicators": [{"token", "size",
//    "report": [lines], "ranks": [flight records, each with "metrics": its counters in brief]}]}
// Sockets send commands as JSON text: {"cmd": "dump"} (every rank writes its flight record to
// its diag_dir) and {"cmd": "log_level", "rank": R, "level": "debug"}; the reply is
// {"type": "reply", "cmd", "results": {"<comm>/rank<r>": {...}}} or {"type": "error", "error"}.
// The socket is input from anyone who can reach it: messages over 64 KiB, binary or fragmented
// messages, bad JSON and unknown commands get an error (the first three also close the socket),
// at most 16 sockets are open at once (another gets an error and is closed), and the job itself only ever sees the validated commands
// through its store. Runs until SIGINT or SIGTERM.
#pragma once

#include <string>

namespace weft::tools {

// Returns the process exit code (0 after a signal; 1 when it cannot start).
int run_diag_serve(const std::string& listen, const std::string& store_addr);

}  // namespace weft::tools
