#include "rendezvous/tcp_store_table.h"

#include <fmt/format.h>

#include "rendezvous/store_common.h"

namespace weft::tcp_store {

std::optional<Reply> TcpStoreTable::handle(ConnId conn, Request req, Clock::time_point now) {
  switch (req.command) {
    case Command::ping: {
      if (req.version != kVersion) {
        return Reply::failure(ErrorCode::protocol,
                              fmt::format("client speaks store protocol version {}, this server "
                                          "speaks {}",
                                          req.version, kVersion));
      }
      Reply r;
      r.integer = kVersion;
      return r;
    }
    case Command::set: {
      if (Status room = make_room(req.key, req.value.size()); !room.ok()) {
        return Reply::failure(room.code(), room.message());
      }
      data_.insert_or_assign(req.key, std::move(req.value));
      key_changed(req.key);
      return Reply::ok();
    }
    case Command::add: {
      auto it = data_.find(req.key);
      Bytes next;
      Result<int64_t> sum =
          add_to_value(req.key, it == data_.end() ? nullptr : &it->second, req.delta, &next);
      if (!sum.ok()) return Reply::failure(sum.status().code(), sum.status().message());
      if (Status room = make_room(req.key, next.size()); !room.ok()) {
        return Reply::failure(room.code(), room.message());
      }
      data_.insert_or_assign(req.key, std::move(next));
      key_changed(req.key);
      Reply r;
      r.integer = sum.value();
      return r;
    }
    case Command::check: {
      Reply r;
      r.flag = true;
      for (const auto& k : req.keys) r.flag = r.flag && data_.count(k) != 0;
      return r;
    }
    case Command::erase:
      if (auto it = data_.find(req.key); it != data_.end()) {
        data_bytes_ -= it->first.size() + it->second.size();
      }
      data_.erase(req.key);
      return Reply::ok();
    case Command::get:
    case Command::wait:
    case Command::multi_get: {
      Waiter w;
      w.command = req.command;
      if (req.command == Command::get) {
        w.keys.push_back(std::move(req.key));
      } else {
        w.keys = std::move(req.keys);
      }
      bool all_present = true;
      for (const auto& k : w.keys) all_present = all_present && data_.count(k) != 0;
      if (all_present) return answer_now(w);
      if (req.timeout_ms == 0) return Reply::timed_out();
      drop(conn);  // a connection has one request in flight; never leave a stale waiter behind
      watch_next_missing(conn, w);
      w.deadline = now + std::chrono::milliseconds(std::min(req.timeout_ms, kMaxTimeoutMs));
      deadlines_.emplace(w.deadline, conn);
      waiters_.insert_or_assign(conn, std::move(w));
      return std::nullopt;
    }
  }
  return Reply::failure(ErrorCode::internal, "unhandled command");
}

bool TcpStoreTable::watch_next_missing(ConnId conn, Waiter& w) {
  for (; w.watching < w.keys.size(); ++w.watching) {
    const std::string& k = w.keys[w.watching];
    if (data_.count(k) == 0) {
      watchers_[k].insert(conn);
      return true;
    }
  }
  return false;
}

Status TcpStoreTable::make_room(const std::string& key, size_t value_bytes) {
  size_t old = 0;
  if (auto it = data_.find(key); it != data_.end()) old = key.size() + it->second.size();
  const size_t next = data_bytes_ - old + key.size() + value_bytes;
  if (next > max_data_bytes_) {
    return Status(ErrorCode::invalid_argument,
                  fmt::format("the store is full: {} bytes of keys and values would exceed its "
                              "limit of {} (weft store --max-data-bytes)",
                              next, max_data_bytes_));
  }
  data_bytes_ = next;
  return Status::success();
}

Reply TcpStoreTable::answer_now(const Waiter& w) const {
  Reply r;
  if (w.command == Command::get) r.value = data_.at(w.keys.front());
  if (w.command == Command::multi_get) {
    // The reply must fit one frame: code, count, then each value with its length.
    size_t bytes = 1 + 4;
    for (const auto& k : w.keys) bytes += 4 + data_.at(k).size();
    if (bytes > kMaxPayloadBytes) {
      return Reply::failure(ErrorCode::invalid_argument,
                            fmt::format("the values of {} keys take {} bytes; one reply may take "
                                        "at most {}",
                                        w.keys.size(), bytes, kMaxPayloadBytes));
    }
    r.values.reserve(w.keys.size());
    for (const auto& k : w.keys) r.values.push_back(data_.at(k));
  }
  return r;
}

void TcpStoreTable::key_changed(const std::string& key) {
  auto it = watchers_.find(key);
  if (it == watchers_.end()) return;
  std::unordered_set<ConnId> conns = std::move(it->second);
  watchers_.erase(it);
  for (ConnId conn : conns) {
    auto w = waiters_.find(conn);
    if (w == waiters_.end()) continue;
    // A wait moves on to its next missing key; it completes when none is left. A key seen
    // earlier may have been erased since: then it looks again from the first.
    if (watch_next_missing(conn, w->second)) continue;
    w->second.watching = 0;
    if (watch_next_missing(conn, w->second)) continue;
    complete(conn, answer_now(w->second));
  }
}

void TcpStoreTable::complete(ConnId conn, Reply reply) {
  auto it = waiters_.find(conn);
  if (it == waiters_.end()) return;
  completions_.push_back(Completion{conn, it->second.command, std::move(reply)});
  drop(conn);
}

void TcpStoreTable::expire(Clock::time_point now) {
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    complete(deadlines_.begin()->second, Reply::timed_out());
  }
}

std::optional<TcpStoreTable::Clock::time_point> TcpStoreTable::next_deadline() const {
  if (deadlines_.empty()) return std::nullopt;
  return deadlines_.begin()->first;
}

void TcpStoreTable::drop(ConnId conn) {
  auto it = waiters_.find(conn);
  if (it == waiters_.end()) return;
  Waiter& w = it->second;
  if (w.watching < w.keys.size()) {
    auto watched = watchers_.find(w.keys[w.watching]);
    if (watched != watchers_.end()) {
      watched->second.erase(conn);
      if (watched->second.empty()) watchers_.erase(watched);
    }
  }
  deadlines_.erase({w.deadline, conn});
  waiters_.erase(it);
}

}  // namespace weft::tcp_store
