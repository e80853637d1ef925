#include "security/job_key.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/fd.h"

namespace weft::security {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Status bad_key(std::string_view source, const std::string& why) {
  return Status(ErrorCode::invalid_argument,
                "job key " + std::string(source) + ": " + why +
                    " (expected 64 hexadecimal characters and at most one newline, as "
                    "`openssl rand -hex 32` writes)");
}

Status check_mode(const struct stat& st, std::string_view source) {
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%03o", static_cast<unsigned>(st.st_mode & 0777));
    return Status(ErrorCode::invalid_argument,
                  "job key " + std::string(source) + " is accessible by group or others (mode " +
                      mode + "); refusing it: run `chmod 600` on it");
  }
  return Status::success();
}

}  // namespace

Result<JobKey> JobKey::generate() {
  JobKey key;
  if (RAND_bytes(key.key_.data(), static_cast<int>(kJobKeyBytes)) != 1) {
    return Status(ErrorCode::internal, "RAND_bytes failed to generate the job key");
  }
  return key;
}

Result<JobKey> JobKey::parse(std::string_view text, std::string_view source) {
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  if (text.size() != kJobKeyHexChars) {
    return bad_key(source, "holds " + std::to_string(text.size()) + " characters");
  }
  JobKey key;
  for (size_t i = 0; i < kJobKeyBytes; ++i) {
    const int hi = hex_value(text[2 * i]);
    const int lo = hex_value(text[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      return bad_key(source, "character " + std::to_string(hi < 0 ? 2 * i + 1 : 2 * i + 2) +
                                 " is not hexadecimal");
    }
    key.key_.data()[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return key;
}

JobKey JobKey::from_bytes(std::span<const uint8_t, kJobKeyBytes> bytes) {
  JobKey key;
  key.key_.assign(bytes);
  return key;
}

std::string JobKey::to_file_text() const {
  static const char kDigits[] = "0123456789abcdef";
  std::string text(kJobKeyHexChars + 1, '\n');
  for (size_t i = 0; i < kJobKeyBytes; ++i) {
    text[2 * i] = kDigits[key_.data()[i] >> 4];
    text[2 * i + 1] = kDigits[key_.data()[i] & 15];
  }
  return text;
}

Result<JobKey> read_job_key_fd(int fd, std::string_view name) {
  struct stat st{};
  if (fstat(fd, &st) != 0) return errno_status("job key " + std::string(name) + ": fstat");
  if (S_ISDIR(st.st_mode)) {
    return Status(ErrorCode::invalid_argument,
                  "job key " + std::string(name) + " is a directory, not a key file");
  }
  if (S_ISREG(st.st_mode)) WEFT_RETURN_IF_ERROR(check_mode(st, name));
  // One byte more than a valid key file, so a longer file is seen and refused.
  char buf[kJobKeyHexChars + 2];
  size_t got = 0;
  while (got < sizeof(buf)) {
    const ssize_t n = ::read(fd, buf + got, sizeof(buf) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      wipe(buf, sizeof(buf));
      return errno_status("job key " + std::string(name) + ": read", err);
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  auto key = JobKey::parse(std::string_view(buf, got), name);
  wipe(buf, sizeof(buf));
  return key;
}

Result<JobKey> read_job_key_file(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd.valid()) {
    const int err = errno;
    Status st = errno_status("job key file " + path + ": open", err);
    if (err == ENOENT && path.rfind("/proc/self/fd/", 0) == 0) {
      // `weft run` hands its ranks the key as an inherited descriptor; a process between the
      // rank and this one closed it (Python's subprocess does unless told pass_fds).
      return Status(st.code(), st.message() + " (the descriptor `weft run` passes the job key in "
                                              "was not inherited by this process: pass it on, "
                                              "e.g. subprocess pass_fds, or give the job a key "
                                              "file in WEFT_AUTH_KEY_FILE)");
    }
    return st;
  }
  struct stat st{};
  if (fstat(fd.get(), &st) != 0) return errno_status("job key file " + path + ": fstat");
  if (!S_ISREG(st.st_mode)) {
    return Status(ErrorCode::invalid_argument, "job key file " + path + " is not a regular file");
  }
  return read_job_key_fd(fd.get(), "file " + path);
}

Status write_job_key_fd(int fd, const JobKey& key, std::string_view name) {
  // The umask can only narrow 0600; fchmod makes the mode exact regardless.
  if (fchmod(fd, 0600) != 0) return errno_status("job key " + std::string(name) + ": fchmod");
  std::string text = key.to_file_text();
  size_t done = 0;
  Status status;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      status = errno_status("job key " + std::string(name) + ": write");
      break;
    }
    done += static_cast<size_t>(n);
  }
  wipe(text.data(), text.size());
  return status;
}

Status write_job_key_file(const std::string& path, const JobKey& key) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid()) return errno_status("job key file " + path + ": create");
  Status status = write_job_key_fd(fd.get(), key, "file " + path);
  if (status.ok() && ::fsync(fd.get()) != 0) status = errno_status("job key file " + path + ": fsync");
  if (!status.ok()) ::unlink(path.c_str());
  return status;
}

Result<std::optional<JobKey>> job_key_from_variable(const char* value) {
  if (value == nullptr || *value == '\0') return std::optional<JobKey>();
  auto key = read_job_key_file(value);
  if (!key.ok()) return key.status().with_context(kAuthKeyFileVariable);
  return std::optional<JobKey>(std::move(key).value());
}

}  // namespace weft::security
