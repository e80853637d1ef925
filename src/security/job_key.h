// JobKey: the per-job pre-shared key (32 random bytes) that every rank of a job mixes into its
// Noise handshakes (psk2), so a process that read the store but not the key cannot join.
//
// On disk and on an inherited descriptor the key is 64 hexadecimal characters, optionally
// followed by one newline, and nothing else: exactly what `openssl rand -hex 32` writes. A
// key file must not be readable or writable by group or others (mode 0600 or stricter, as ssh
// demands of a private key): a wider mode is refused, naming the file and the fix. The key
// material is wiped when the JobKey dies. Values: any thread, one owner at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "security/secret.h"
#include "weft/status.h"

namespace weft::security {

// The environment variable launchers other than `weft run` use to hand ranks the key file. Only
// the edge that parses configuration reads it (job_key_from_variable is given its value).
inline constexpr const char* kAuthKeyFileVariable = "WEFT_AUTH_KEY_FILE";
inline constexpr size_t kJobKeyBytes = 32;
inline constexpr size_t kJobKeyHexChars = 2 * kJobKeyBytes;

class JobKey {
 public:
  // 32 bytes from RAND_bytes.
  static Result<JobKey> generate();
  // The 64 hex characters (either case) plus one optional '\n'; anything else is refused.
  // `source` names where the text came from, for the error message.
  static Result<JobKey> parse(std::string_view text, std::string_view source);
  static JobKey from_bytes(std::span<const uint8_t, kJobKeyBytes> bytes);

  std::span<const uint8_t, kJobKeyBytes> bytes() const { return key_.span(); }
  // Lower-case hex with a trailing newline: the file format. The caller wipes the string.
  std::string to_file_text() const;

 private:
  JobKey() = default;  // all zeros: only the factories above make keys

  SecretBytes<kJobKeyBytes> key_;
};

// Reads and parses a key file: refuses a file that is not a regular file, is group- or
// other-accessible (mode & 077), or holds anything but the key.
Result<JobKey> read_job_key_file(const std::string& path);
// The same from an inherited descriptor (`weft run` may pass the key on a pipe); a regular
// file behind the descriptor gets the mode check too. Reads at most 66 bytes; does not close fd.
Result<JobKey> read_job_key_fd(int fd, std::string_view name);
// Creates `path` with mode 0600 (O_EXCL: an existing file is an error, never overwritten) and
// writes the key in the file format.
Status write_job_key_file(const std::string& path, const JobKey& key);
// Sets fd's mode to 0600 and writes the key in the file format at its offset (`name` is for
// errors). For a memfd the key's owner hands to its children.
Status write_job_key_fd(int fd, const JobKey& key, std::string_view name);
// The value of WEFT_AUTH_KEY_FILE (null or empty: no key, nullopt) -> the key it names.
Result<std::optional<JobKey>> job_key_from_variable(const char* value);

}  // namespace weft::security
