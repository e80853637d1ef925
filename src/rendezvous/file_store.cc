// File store: one file per key in a directory shared by the ranks.
//
// File layout: u32le key length, the key, then the value. Writers create a temporary file and
// rename() it over the key's file, so readers see either the old or the new value, never a torn
// one. Writers (set, add, erase) also hold an exclusive flock() on "<dir>/lock" so that add() is
// atomic against every other writer in any process; flock() locks belong to the open file, so
// threads of one process exclude each other too. Readers take no lock. get() and wait() poll with
// a short, growing sleep. No fsync: a rendezvous does not outlive a crash of its machine.
#include "rendezvous/file_store.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include "base/fd.h"
#include "rendezvous/store_common.h"
#include "weft/store.h"

namespace weft {

namespace {

bool plain_byte(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

// Two FNV-1a lanes with different seeds, each finished by the splitmix64 mixer. Collisions are
// detected on read (the file holds its key), so this needs to be well spread, not cryptographic.
uint64_t hash_lane(std::string_view key, uint64_t seed) {
  uint64_t h = seed;
  for (unsigned char c : key) h = (h ^ c) * 0x100000001b3ULL;
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return h;
}

constexpr auto kPollMin = std::chrono::milliseconds(1);
constexpr auto kPollMax = std::chrono::milliseconds(20);

Status write_all(int fd, const uint8_t* data, size_t n, const std::string& path) {
  while (n > 0) {
    ssize_t k = ::write(fd, data, n);
    if (k < 0) {
      if (errno == EINTR) continue;
      return errno_status("write " + path);
    }
    data += k;
    n -= static_cast<size_t>(k);
  }
  return Status::success();
}

class FileStore final : public Store {
 public:
  explicit FileStore(std::string dir) : dir_(std::move(dir)) {}

  Status set(std::string_view key, const Bytes& value) override {
    Result<Fd> lock = lock_dir();
    if (!lock.ok()) return lock.status();
    return write_key(key, value);
  }

  Result<Bytes> get(std::string_view key, std::chrono::milliseconds timeout) override {
    const auto deadline = deadline_after(timeout);
    auto sleep = kPollMin;
    for (;;) {
      Result<std::optional<Bytes>> r = read_key(key);
      if (!r.ok()) return r.status();
      if (r->has_value()) return std::move(**r);
      auto now = Clock::now();
      if (now >= deadline) {
        return Status(ErrorCode::timeout,
                      fmt::format("file store {}: get({}): timed out after {}", dir_,
                                  quote_key(key), format_ms(clamp_timeout(timeout))));
      }
      std::this_thread::sleep_for(std::min<Clock::duration>(sleep, deadline - now));
      sleep = std::min(sleep * 2, kPollMax);
    }
  }

  Result<int64_t> add(std::string_view key, int64_t delta) override {
    Result<Fd> lock = lock_dir();
    if (!lock.ok()) return lock.status();
    Result<std::optional<Bytes>> current = read_key(key);
    if (!current.ok()) return current.status();
    Bytes next;
    Result<int64_t> sum =
        add_to_value(key, current->has_value() ? &**current : nullptr, delta, &next);
    if (!sum.ok()) return sum.status().with_context("file store " + dir_);
    WEFT_RETURN_IF_ERROR(write_key(key, next));
    return sum;
  }

  Status wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    const auto deadline = deadline_after(timeout);
    auto sleep = kPollMin;
    for (;;) {
      Result<bool> present = check(keys);
      if (!present.ok()) return present.status();
      if (present.value()) return Status::success();
      auto now = Clock::now();
      if (now >= deadline) {
        return Status(ErrorCode::timeout,
                      fmt::format("file store {}: wait({}): timed out after {}", dir_,
                                  quote_keys(keys), format_ms(clamp_timeout(timeout))));
      }
      std::this_thread::sleep_for(std::min<Clock::duration>(sleep, deadline - now));
      sleep = std::min(sleep * 2, kPollMax);
    }
  }

  Result<bool> check(const std::vector<std::string>& keys) override {
    for (const auto& key : keys) {
      struct stat st {};
      std::string path = path_for(key);
      if (::stat(path.c_str(), &st) == 0) continue;
      if (errno == ENOENT) return false;
      return errno_status("file store: stat " + path);
    }
    return true;
  }

  Status erase(std::string_view key) override {
    Result<Fd> lock = lock_dir();
    if (!lock.ok()) return lock.status();
    std::string path = path_for(key);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return errno_status("file store: unlink " + path);
    }
    return Status::success();
  }

 private:
  std::string path_for(std::string_view key) const { return dir_ + "/" + file_name_for_key(key); }

  // Exclusive lock on the directory, released when the returned Fd closes.
  Result<Fd> lock_dir() {
    std::string path = dir_ + "/lock";
    Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (!fd.valid()) return errno_status("file store: open " + path);
    while (::flock(fd.get(), LOCK_EX) != 0) {
      if (errno != EINTR) return errno_status("file store: flock " + path);
    }
    return fd;
  }

  // The value of key, or nullopt when the key does not exist.
  Result<std::optional<Bytes>> read_key(std::string_view key) {
    std::string path = path_for(key);
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) {
      if (errno == ENOENT) return std::optional<Bytes>();
      return errno_status("file store: open " + path);
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return errno_status("file store: fstat " + path);
    Bytes content(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < content.size()) {
      ssize_t k = ::read(fd.get(), content.data() + got, content.size() - got);
      if (k < 0 && errno == EINTR) continue;
      if (k < 0) return errno_status("file store: read " + path);
      if (k == 0) break;
      got += static_cast<size_t>(k);
    }
    // Files are replaced by rename(), never rewritten, so a short read means corruption.
    constexpr size_t kLenBytes = 4;
    if (got != content.size() || got < kLenBytes) return corrupt(path, key);
    size_t key_len = 0;
    for (size_t i = 0; i < kLenBytes; ++i) key_len |= size_t{content[i]} << (8 * i);
    if (content.size() - kLenBytes < key_len) return corrupt(path, key);
    std::string_view stored(reinterpret_cast<const char*>(content.data()) + kLenBytes, key_len);
    if (stored != key) {
      return Status(ErrorCode::internal,
                    fmt::format("file store: {} holds key {}, not {} (hash collision)", path,
                                quote_key(stored), quote_key(key)));
    }
    content.erase(content.begin(), content.begin() + static_cast<ptrdiff_t>(kLenBytes + key_len));
    return std::optional<Bytes>(std::move(content));
  }

  static Status corrupt(const std::string& path, std::string_view key) {
    return Status(ErrorCode::io, fmt::format("file store: {} (key {}) is truncated or corrupt",
                                             path, quote_key(key)));
  }

  // Writes key's file atomically. The caller holds the directory lock.
  Status write_key(std::string_view key, const Bytes& value) {
    static std::atomic<uint64_t> counter{0};
    std::string temp;
    Fd fd;
    while (!fd.valid()) {
      temp = fmt::format("{}/t_{}_{}", dir_, ::getpid(), counter.fetch_add(1));
      fd = Fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
      if (!fd.valid() && errno != EEXIST) return errno_status("file store: create " + temp);
    }
    Bytes header;
    header.reserve(4 + key.size());
    for (size_t i = 0; i < 4; ++i) header.push_back(static_cast<uint8_t>(key.size() >> (8 * i)));
    header.insert(header.end(), key.begin(), key.end());
    Status s = write_all(fd.get(), header.data(), header.size(), temp);
    if (s.ok()) s = write_all(fd.get(), value.data(), value.size(), temp);
    if (s.ok() && ::close(fd.release()) != 0) s = errno_status("file store: close " + temp);
    std::string path = path_for(key);
    if (s.ok() && ::rename(temp.c_str(), path.c_str()) != 0) {
      s = errno_status("file store: rename " + temp + " to " + path);
    }
    if (!s.ok()) ::unlink(temp.c_str());
    return s;
  }

  const std::string dir_;
};

}  // namespace

std::string file_name_for_key(std::string_view key) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string name = "k_";
  for (unsigned char c : key) {
    if (plain_byte(c)) {
      name += static_cast<char>(c);
    } else {
      name += '%';
      name += kHex[c >> 4];
      name += kHex[c & 15];
    }
    if (name.size() > kMaxPlainNameBytes) {
      return fmt::format("h_{:016x}{:016x}", hash_lane(key, 0xcbf29ce484222325ULL),
                         hash_lane(key, 0x84222325cbf29ce4ULL));
    }
  }
  return name;
}

Result<std::shared_ptr<Store>> make_file_store(const std::string& directory) {
  if (directory.empty()) {
    return Status(ErrorCode::invalid_argument, "file store: the directory name is empty");
  }
  std::error_code ec;
  std::filesystem::create_directories(directory, ec);
  if (ec) {
    return Status(ErrorCode::io, fmt::format("file store: cannot create directory '{}': {}",
                                             directory, ec.message()));
  }
  if (!std::filesystem::is_directory(directory, ec)) {
    return Status(ErrorCode::invalid_argument,
                  fmt::format("file store: '{}' is not a directory", directory));
  }
  return std::shared_ptr<Store>(std::make_shared<FileStore>(directory));
}

}  // namespace weft
