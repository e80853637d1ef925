// Prefix store: a view of another store in which every key is "<prefix>/<key>". Stateless apart
// from the prefix, so it is as thread-safe as the store it wraps.
#include "weft/store.h"

namespace weft {
namespace {

class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> inner)
      : prefix_(std::move(prefix) + "/"), inner_(std::move(inner)) {}

  Status set(std::string_view key, const Bytes& value) override {
    return inner_->set(full(key), value);
  }
  Result<Bytes> get(std::string_view key, std::chrono::milliseconds timeout) override {
    return inner_->get(full(key), timeout);
  }
  Result<int64_t> add(std::string_view key, int64_t delta) override {
    return inner_->add(full(key), delta);
  }
  Status wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    return inner_->wait(full(keys), timeout);
  }
  Result<bool> check(const std::vector<std::string>& keys) override {
    return inner_->check(full(keys));
  }
  Status erase(std::string_view key) override { return inner_->erase(full(key)); }
  Result<std::vector<Bytes>> multi_get(const std::vector<std::string>& keys,
                                       std::chrono::milliseconds timeout) override {
    return inner_->multi_get(full(keys), timeout);
  }

 private:
  std::string full(std::string_view key) const {
    std::string k;
    k.reserve(prefix_.size() + key.size());
    k.append(prefix_).append(key);
    return k;
  }
  std::vector<std::string> full(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    out.reserve(keys.size());
    for (const auto& k : keys) out.push_back(full(k));
    return out;
  }

  const std::string prefix_;  // ends in '/'
  const std::shared_ptr<Store> inner_;
};

}  // namespace

std::shared_ptr<Store> make_prefix_store(std::string prefix, std::shared_ptr<Store> inner) {
  return std::make_shared<PrefixStore>(std::move(prefix), std::move(inner));
}

}  // namespace weft
