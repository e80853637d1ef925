// TcpStoreTable: the data and the parked waiters of a TCP store server, without any sockets.
//
// The server thread feeds it decoded requests; it answers at once or parks the request (a get or
// wait whose keys are missing) until a set/add supplies the keys or the request's deadline passes.
// Answers to parked requests are collected as Completions for the server to send. Each connection
// has at most one request in flight (the server reads no further until it is answered), so a
// connection id names its parked request. Single-threaded: only the server thread touches it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "rendezvous/tcp_store_protocol.h"
#include "weft/status.h"

namespace weft::tcp_store {

class TcpStoreTable {
 public:
  using Clock = weft::Clock;
  using ConnId = uint64_t;

  // max_data_bytes bounds the keys and values held (a set or add beyond it is refused).
  explicit TcpStoreTable(size_t max_data_bytes = SIZE_MAX) : max_data_bytes_(max_data_bytes) {}

  struct Completion {
    ConnId conn;
    Command command;
    Reply reply;
  };

  // The reply to send now, or nullopt when the request was parked.
  std::optional<Reply> handle(ConnId conn, Request request, Clock::time_point now);
  // Replies to parked requests that finished since the last call.
  std::vector<Completion> take_completions() { return std::exchange(completions_, {}); }
  // Ends, with a timeout reply, every parked request whose deadline is not after `now`.
  void expire(Clock::time_point now);
  // The earliest deadline of a parked request.
  std::optional<Clock::time_point> next_deadline() const;
  // Forgets the parked request of a closed connection.
  void drop(ConnId conn);

  size_t parked_count() const { return waiters_.size(); }
  size_t key_count() const { return data_.size(); }
  size_t data_bytes() const { return data_bytes_; }

 private:
  struct Waiter {
    Command command;                // get, wait or multi_get
    std::vector<std::string> keys;  // get: one key
    size_t watching = 0;            // index into keys of the missing key it is registered on
    Clock::time_point deadline;
  };

  // Registers w on its first missing key, or returns false when every key is present.
  bool watch_next_missing(ConnId conn, Waiter& w);
  void key_changed(const std::string& key);
  void complete(ConnId conn, Reply reply);
  Reply answer_now(const Waiter& w) const;
  // Accounts for key getting a value of value_bytes, or refuses when that passes the limit.
  Status make_room(const std::string& key, size_t value_bytes);

  size_t max_data_bytes_;
  size_t data_bytes_ = 0;  // sum of key and value sizes in data_

  std::unordered_map<std::string, Bytes> data_;
  std::unordered_map<ConnId, Waiter> waiters_;
  std::unordered_map<std::string, std::unordered_set<ConnId>> watchers_;  // key -> waiting conns
  std::set<std::pair<Clock::time_point, ConnId>> deadlines_;
  std::vector<Completion> completions_;
};

}  // namespace weft::tcp_store
