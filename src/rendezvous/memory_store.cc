// In-memory Store: one map under one mutex; waiters sleep on a condition variable that every
// set() wakes. For ranks that are threads of one process (tests, the multirank suites).
#include <fmt/format.h>

#include <condition_variable>
#include <map>

#include "base/mutex.h"
#include "rendezvous/store_common.h"
#include "weft/store.h"

namespace weft {
namespace {

class MemoryStore final : public Store {
 public:
  Status set(std::string_view key, const Bytes& value) override {
    {
      MutexLock lock(mu_);
      data_.insert_or_assign(std::string(key), value);
    }
    // notify_all: waiters on different keys share the variable; each re-checks its own keys.
    cv_.notify_all();
    return Status::success();
  }

  Result<Bytes> get(std::string_view key, std::chrono::milliseconds timeout) override {
    const auto deadline = deadline_after(timeout);
    MutexUniqueLock lock(mu_);
    for (;;) {
      auto it = data_.find(key);
      if (it != data_.end()) return it->second;
      if (cv_.wait_until(lock.native(), deadline) == std::cv_status::timeout &&
          data_.find(key) == data_.end()) {
        return Status(ErrorCode::timeout,
                      fmt::format("memory store: get({}): timed out after {}", quote_key(key),
                                  format_ms(clamp_timeout(timeout))));
      }
    }
  }

  Result<int64_t> add(std::string_view key, int64_t delta) override {
    int64_t sum = 0;
    {
      MutexLock lock(mu_);
      auto it = data_.find(key);
      Bytes next;
      Result<int64_t> r =
          add_to_value(key, it == data_.end() ? nullptr : &it->second, delta, &next);
      if (!r.ok()) return r.status().with_context("memory store");
      sum = r.value();
      if (it == data_.end()) {
        data_.emplace(std::string(key), std::move(next));
      } else {
        it->second = std::move(next);
      }
    }
    cv_.notify_all();
    return sum;
  }

  Status wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    const auto deadline = deadline_after(timeout);
    MutexUniqueLock lock(mu_);
    if (cv_.wait_until(lock.native(), deadline,
                       [&]() REQUIRES(mu_) { return all_present(keys); })) {
      return Status::success();
    }
    return Status(ErrorCode::timeout,
                  fmt::format("memory store: wait({}): timed out after {}", quote_keys(keys),
                              format_ms(clamp_timeout(timeout))));
  }

  Result<bool> check(const std::vector<std::string>& keys) override {
    MutexLock lock(mu_);
    return all_present(keys);
  }

  Status erase(std::string_view key) override {
    MutexLock lock(mu_);
    auto it = data_.find(key);
    if (it != data_.end()) data_.erase(it);
    return Status::success();
  }

 private:
  bool all_present(const std::vector<std::string>& keys) const REQUIRES(mu_) {
    for (const auto& k : keys) {
      if (data_.find(k) == data_.end()) return false;
    }
    return true;
  }

  Mutex mu_;
  std::condition_variable cv_;  // signalled after every change of data_
  std::map<std::string, Bytes, std::less<>> data_ GUARDED_BY(mu_);
};

}  // namespace

std::shared_ptr<Store> make_memory_store() { return std::make_shared<MemoryStore>(); }

}  // namespace weft
