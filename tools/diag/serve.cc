#include "tools/diag/serve.h"

#include <civetweb.h>
#include <fmt/format.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "tools/diag/job_store.h"
#include "tools/diag/page.h"

namespace weft::tools {
namespace {

constexpr size_t kMaxMessageBytes = 64 * 1024;
constexpr size_t kMaxClients = 16;
constexpr size_t kMaxQueuedCommands = 16;

std::atomic<bool> g_stop{false};

struct Server {
  std::mutex mu;  // guards everything below; held while writing to a socket
  std::set<mg_connection*> clients;
  std::deque<std::pair<mg_connection*, nlohmann::json>> commands;
  std::string state = R"({"type":"state","time":0,"answered":0,"communicators":[]})";

  // Under mu.
  void send(mg_connection* c, const std::string& text) {
    mg_websocket_write(c, MG_WEBSOCKET_OPCODE_TEXT, text.data(), text.size());
  }
  void send_error(mg_connection* c, const std::string& error) {
    send(c, nlohmann::json{{"type", "error"}, {"error", error}}.dump());
  }
  void broadcast(const std::string& text) {
    std::lock_guard<std::mutex> lock(mu);
    state = text;
    for (mg_connection* c : clients) send(c, text);
  }
};

int page_handler(mg_connection* conn, void*) {
  const size_t n = std::strlen(kDiagPage);
  mg_printf(conn,
            "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: %zu\r\n"
            "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
            n);
  mg_write(conn, kDiagPage, n);
  return 200;
}

int state_handler(mg_connection* conn, void* data) {
  auto* server = static_cast<Server*>(data);
  std::string body;
  {
    std::lock_guard<std::mutex> lock(server->mu);
    body = server->state;
  }
  mg_printf(conn,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
            "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
            body.size());
  mg_write(conn, body.data(), body.size());
  return 200;
}

int ws_connect(const mg_connection*, void*) { return 0; }

void ws_ready(mg_connection* conn, void* data) {
  auto* server = static_cast<Server*>(data);
  std::lock_guard<std::mutex> lock(server->mu);
  if (server->clients.size() >= kMaxClients) {
    // Told why, then closed; its messages are refused meanwhile (not in `clients`).
    server->send_error(conn, fmt::format("too many sockets: {} are open already", kMaxClients));
    mg_websocket_write(conn, MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE, "", 0);
    return;
  }
  server->clients.insert(conn);
  server->send(conn, server->state);
}

// The reason `message` is not a command we carry out, or "" when it is one.
std::string check_command(const nlohmann::json& m) {
  if (!m.is_object() || !m.contains("cmd") || !m["cmd"].is_string()) {
    return "expected a JSON object with a \"cmd\" string";
  }
  const std::string cmd = m["cmd"].get<std::string>();
  if (cmd == "dump") return "";
  if (cmd == "log_level") {
    if (!m.contains("rank") || !m["rank"].is_number_integer() || m["rank"].get<int64_t>() < 0) {
      return "log_level needs \"rank\": a rank number";
    }
    static const std::set<std::string> levels = {"trace", "debug", "info", "warn", "error", "off"};
    if (!m.contains("level") || !m["level"].is_string() || levels.count(m["level"]) == 0) {
      return "log_level needs \"level\": one of trace, debug, info, warn, error, off";
    }
    if (m.contains("comm") && (!m["comm"].is_string() || m["comm"].get<std::string>().size() > 64)) {
      return "\"comm\" must be a communicator id";
    }
    return "";
  }
  if (cmd == "trace_start" || cmd == "trace_stop") {
    return "tracing is not available yet (docs/observability.md)";
  }
  return fmt::format("unknown command \"{}\" (known: dump, log_level)", cmd.substr(0, 64));
}

int ws_data(mg_connection* conn, int bits, char* data, size_t len, void* cbdata) {
  auto* server = static_cast<Server*>(cbdata);
  const int opcode = bits & 0xf;
  if (opcode == MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE) return 0;
  if (opcode == MG_WEBSOCKET_OPCODE_PING || opcode == MG_WEBSOCKET_OPCODE_PONG) return 1;
  std::lock_guard<std::mutex> lock(server->mu);
  if (server->clients.count(conn) == 0) return 0;  // refused in ws_ready
  if (len > kMaxMessageBytes) {
    server->send_error(conn, fmt::format("message of {} bytes: at most {}", len, kMaxMessageBytes));
    return 0;
  }
  if ((bits & 0x80) == 0 || opcode == MG_WEBSOCKET_OPCODE_CONTINUATION) {
    server->send_error(conn, "fragmented messages are not accepted");
    return 0;
  }
  if (opcode != MG_WEBSOCKET_OPCODE_TEXT) {
    server->send_error(conn, "send commands as JSON text messages");
    return 0;
  }
  auto m = nlohmann::json::parse(std::string_view(data, len), nullptr, false);
  if (m.is_discarded()) {
    server->send_error(conn, "not JSON");
    return 1;
  }
  if (std::string why = check_command(m); !why.empty()) {
    server->send_error(conn, why);
    return 1;
  }
  if (server->commands.size() >= kMaxQueuedCommands) {
    server->send_error(conn, "busy: too many commands waiting");
    return 1;
  }
  server->commands.emplace_back(conn, std::move(m));
  return 1;
}

void ws_close(const mg_connection* conn, void* data) {
  auto* server = static_cast<Server*>(data);
  std::lock_guard<std::mutex> lock(server->mu);
  server->clients.erase(const_cast<mg_connection*>(conn));
  std::erase_if(server->commands, [conn](const auto& c) { return c.first == conn; });
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

int run_diag_serve(const std::string& listen, const std::string& store_addr) {
  auto store = connect_job_store(store_addr);
  if (!store.ok()) {
    std::fprintf(stderr, "weft diag: %s\n", store.status().to_string().c_str());
    return 1;
  }
  mg_init_library(0);
  Server server;
  // civetweb gives every WebSocket a thread of its own while it is open: the sockets served,
  // plus threads for pages and for telling sockets over the limit why they are closed.
  const std::string threads = std::to_string(kMaxClients + 8);
  const char* options[] = {"listening_ports", listen.c_str(), "num_threads", threads.c_str(),
                           nullptr};
  mg_callbacks callbacks{};
  mg_context* ctx = mg_start(&callbacks, nullptr, options);
  if (ctx == nullptr) {
    std::fprintf(stderr, "weft diag: cannot serve on %s\n", listen.c_str());
    return 1;
  }
  mg_set_request_handler(ctx, "/$", page_handler, &server);
  mg_set_request_handler(ctx, "/state.json$", state_handler, &server);
  mg_set_websocket_handler(ctx, "/ws", ws_connect, ws_ready, ws_data, ws_close, &server);
  mg_server_port port{};
  if (mg_get_server_ports(ctx, 1, &port) < 1) {
    std::fprintf(stderr, "weft diag: cannot serve on %s\n", listen.c_str());
    mg_stop(ctx);
    return 1;
  }
  const std::string host = listen.substr(0, listen.rfind(':'));
  std::printf("weft diag: serving http://%s:%d/ (state every second; Ctrl-C stops)\n",
              host.c_str(), port.port);
  std::fflush(stdout);

  struct sigaction sa{};
  sa.sa_handler = [](int) { g_stop = true; };
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  DiagPoller poller(*store.value());
  while (!g_stop) {
    const auto start = std::chrono::steady_clock::now();
    auto doc = poller.poll();
    nlohmann::json state = {{"type", "state"}, {"time", unix_now()}};
    if (doc.ok()) {
      state["answered"] = (*doc)["answered"];
      state["communicators"] = std::move((*doc)["communicators"]);
    } else {
      state["answered"] = 0;
      state["communicators"] = nlohmann::json::array();
      state["error"] = doc.status().to_string();
    }
    server.broadcast(state.dump());
    // Commands queued meanwhile, one after the other.
    while (!g_stop) {
      std::pair<mg_connection*, nlohmann::json> next;
      {
        std::lock_guard<std::mutex> lock(server.mu);
        if (server.commands.empty()) break;
        next = std::move(server.commands.front());
        server.commands.pop_front();
      }
      auto result = send_diag_command(*store.value(), next.second, std::chrono::milliseconds(2500));
      nlohmann::json reply =
          result.ok() ? nlohmann::json{{"type", "reply"}, {"cmd", next.second["cmd"]},
                                       {"results", (*result)["results"]}}
                      : nlohmann::json{{"type", "error"}, {"error", result.status().to_string()}};
      std::lock_guard<std::mutex> lock(server.mu);
      if (server.clients.count(next.first) != 0) server.send(next.first, reply.dump());
    }
    while (!g_stop && std::chrono::steady_clock::now() - start < std::chrono::seconds(1)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  mg_stop(ctx);
  return 0;
}

}  // namespace weft::tools
