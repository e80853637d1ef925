// The Noise interop test: weft's handshake and record layer against github.com/flynn/noise
// (noise_peer.go), in both roles, both suites and both record modes, with fixed ephemeral keys.
// For each run the driver starts the Go peer on two pipes and checks that
//   - the handshake completes both ways and each side receives the other's payload (the Go
//     side checks what it received too, and the initiator's static key);
//   - the Go side's handshake messages are byte for byte the ones weft writes for the same
//     keys (so the pattern is the standard one, not a look-alike);
//   - records of 0 B .. 300 KB go both ways across two rekeys and come back equal;
//   - both sides hold the same handshake hash.
// Usage: noise_interop_driver PATH_TO_NOISE_PEER. Exit 0 when every run passed.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "security/noise.h"
#include "security/record.h"

namespace weft::security {
namespace {

std::string hex(std::span<const uint8_t> bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s;
  for (uint8_t b : bytes) {
    s.push_back(kDigits[b >> 4]);
    s.push_back(kDigits[b & 15]);
  }
  return s;
}

Key fixed_key(uint8_t seed) {
  Key k;
  for (size_t i = 0; i < kKeyBytes; ++i) k.data()[i] = static_cast<uint8_t>(seed * 3 + i * 5);
  return k;
}

constexpr size_t kSizes[] = {0, 1, 24, 1000, 65536, 300000, 17, 4096};  // as noise_peer.go
constexpr int kRecords = 8;
constexpr uint64_t kRekeyInterval = 3;

std::vector<uint8_t> pattern(int i) {
  std::vector<uint8_t> b(kSizes[i % 8]);
  for (size_t j = 0; j < b.size(); ++j) b[j] = static_cast<uint8_t>(i * 7 + j * 31 + (j >> 8));
  return b;
}

struct Failure {
  std::string what;
};

class Peer {
 public:
  Peer(const std::string& program, const std::vector<std::string>& args) {
    int to_child[2], from_child[2];
    if (::pipe(to_child) != 0 || ::pipe(from_child) != 0) throw Failure{"pipe"};
    pid_ = ::fork();
    if (pid_ < 0) throw Failure{"fork"};
    if (pid_ == 0) {
      ::dup2(to_child[0], 0);
      ::dup2(from_child[1], 1);
      ::close(to_child[1]);
      ::close(from_child[0]);
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>(program.c_str()));
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(program.c_str(), argv.data());
      std::perror("execv noise_peer");
      ::_exit(127);
    }
    ::close(to_child[0]);
    ::close(from_child[1]);
    out_ = to_child[1];
    in_ = from_child[0];
  }
  ~Peer() {
    if (out_ >= 0) ::close(out_);
    if (in_ >= 0) ::close(in_);
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
  }

  void write_all(std::span<const uint8_t> b) {
    size_t done = 0;
    while (done < b.size()) {
      const ssize_t n = ::write(out_, b.data() + done, b.size() - done);
      if (n <= 0) throw Failure{"write to noise_peer failed"};
      done += static_cast<size_t>(n);
    }
  }
  void read_all(uint8_t* p, size_t n) {
    size_t done = 0;
    while (done < n) {
      const ssize_t r = ::read(in_, p + done, n - done);
      if (r <= 0) throw Failure{"noise_peer closed the pipe (see its message above)"};
      done += static_cast<size_t>(r);
    }
  }
  void send_message(std::span<const uint8_t> m) {
    uint8_t n[4];
    for (int i = 0; i < 4; ++i) n[i] = static_cast<uint8_t>(m.size() >> (8 * i));
    write_all(n);
    write_all(m);
  }
  std::vector<uint8_t> receive_message() {
    uint8_t n[4];
    read_all(n, 4);
    const uint32_t len = n[0] | n[1] << 8 | n[2] << 16 | uint32_t{n[3]} << 24;
    if (len > 65535) throw Failure{"oversize handshake message"};
    std::vector<uint8_t> m(len);
    read_all(m.data(), len);
    return m;
  }
  // Exit status of the peer (closes our ends first so it sees EOF if it still reads).
  int finish() {
    ::close(out_);
    out_ = -1;
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  int in_ = -1;
};

void check(bool ok, const std::string& what) {
  if (!ok) throw Failure{what};
}

template <typename T>
T must(Result<T> r, const std::string& what) {
  if (!r.ok()) throw Failure{what + ": " + r.status().to_string()};
  return std::move(r).value();
}

void must(const Status& s, const std::string& what) {
  if (!s.ok()) throw Failure{what + ": " + s.to_string()};
}

void run(const std::string& peer_program, CipherSuite suite, SecurityMode mode, Role weft_role) {
  const auto weft_static = must(X25519Keypair::from_private(fixed_key(1).span()), "key");
  const auto go_static = must(X25519Keypair::from_private(fixed_key(2).span()), "key");
  const Key weft_e = fixed_key(3), go_e = fixed_key(4), psk = fixed_key(5);
  const std::string binding = "interop-job";
  const auto prologue = must(
      build_prologue({suite, mode},
                     std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(binding.data()),
                                              binding.size())),
      "prologue");
  const std::vector<uint8_t> weft_payload = {'w', 'e', 'f', 't', 0, 1, 2, 3};
  const std::vector<uint8_t> go_payload = {'g', 'o', 0xff};
  const bool weft_init = weft_role == Role::initiator;

  HandshakeConfig mine;
  mine.role = weft_role;
  mine.suite = suite;
  mine.prologue = prologue;
  mine.psk = psk.span();
  mine.local_static = &weft_static;
  mine.remote_static = go_static.public_key;
  mine.fixed_ephemeral = weft_e;
  // What the Go side should write, computed by weft with the Go side's keys.
  HandshakeConfig theirs = mine;
  theirs.role = weft_init ? Role::responder : Role::initiator;
  theirs.local_static = &go_static;
  theirs.remote_static = weft_static.public_key;
  theirs.fixed_ephemeral = go_e;

  std::vector<std::string> args = {
      "-role", weft_init ? "resp" : "init",
      "-suite", suite == CipherSuite::aesgcm ? "aesgcm" : "chachapoly",
      "-mode", to_string(mode),
      "-rekey", std::to_string(kRekeyInterval),
      "-records", std::to_string(kRecords),
      "-static", hex(go_static.private_key.span()),
      "-ephemeral", hex(go_e.span()),
      "-psk", hex(psk.span()),
      "-prologue", hex(prologue),
      "-payload", hex(go_payload),
      "-expect", hex(weft_payload)};
  if (weft_init) {
    args.insert(args.end(), {"-expect-remote", hex(weft_static.public_key)});
  } else {
    args.insert(args.end(), {"-remote", hex(weft_static.public_key)});
  }
  Peer peer(peer_program, args);

  auto hs = must(NoiseHandshake::create(mine), "handshake");
  auto twin = must(NoiseHandshake::create(theirs), "twin handshake");
  if (weft_init) {
    const auto m1 = must(hs.write_message1(weft_payload), "write message 1");
    peer.send_message(m1);
    must(twin.read_message1(m1), "twin reads message 1");
    const auto expect_m2 = must(twin.write_message2(go_payload), "twin writes message 2");
    const auto m2 = peer.receive_message();
    check(m2 == expect_m2, "the Go responder's message 2 differs from weft's: " + hex(m2) +
                               " vs " + hex(expect_m2));
    check(must(hs.read_message2(m2), "read message 2") == go_payload, "message 2 payload");
  } else {
    const auto expect_m1 = must(twin.write_message1(go_payload), "twin writes message 1");
    const auto m1 = peer.receive_message();
    check(m1 == expect_m1, "the Go initiator's message 1 differs from weft's");
    check(must(hs.read_message1(m1), "read message 1") == go_payload, "message 1 payload");
    check(hs.remote_static() == go_static.public_key, "the initiator's static key");
    const auto m2 = must(hs.write_message2(weft_payload), "write message 2");
    peer.send_message(m2);
  }
  const auto keys = must(hs.split(), "split");
  RecordLimits limits;
  limits.rekey_interval = kRekeyInterval;
  auto sealer = must(RecordSealer::create(suite, mode, keys.send, limits, "noise_peer"), "sealer");
  auto opener = must(RecordOpener::create(suite, mode, keys.receive, limits, "noise_peer"), "opener");

  auto send_record = [&](const std::vector<uint8_t>& payload) {
    std::vector<uint8_t> record(sealed_size(payload.size()));
    must(sealer.seal(payload, record), "seal");
    peer.write_all(record);
  };
  auto receive_record = [&]() {
    uint8_t header[kRecordHeaderBytes];
    peer.read_all(header, sizeof(header));
    const size_t n = must(opener.body_size(header), "record header");
    std::vector<uint8_t> body(n);  // the "posted buffer": the body lands and opens in place
    uint8_t tag[kTagBytes];
    peer.read_all(body.data(), n);
    peer.read_all(tag, sizeof(tag));
    must(opener.open(header, body, tag), "open");
    return body;
  };
  for (int i = 0; i < kRecords; ++i) {
    if (weft_init) {
      send_record(pattern(i));
      check(receive_record() == pattern(i), "echo of record " + std::to_string(i));
    } else {
      auto got = receive_record();
      check(got == pattern(i), "record " + std::to_string(i) + " differs from the pattern");
      send_record(got);
    }
  }
  const std::vector<uint8_t> my_hash(keys.handshake_hash.begin(), keys.handshake_hash.end());
  send_record(my_hash);
  check(receive_record() == my_hash, "the handshake hashes differ");
  check(peer.finish() == 0, "noise_peer failed (its message is above)");
}

}  // namespace
}  // namespace weft::security

int main(int argc, char** argv) {
  using namespace weft::security;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s PATH_TO_NOISE_PEER\n", argv[0]);
    return 2;
  }
  int passed = 0, failed = 0;
  for (auto suite : {CipherSuite::chachapoly, CipherSuite::aesgcm}) {
    for (auto mode : {SecurityMode::encrypt, SecurityMode::auth}) {
      for (auto role : {Role::initiator, Role::responder}) {
        const std::string name = std::string(noise_protocol_name(suite)) + ", records " +
                                 to_string(mode) + ", weft as " +
                                 (role == Role::initiator ? "initiator" : "responder");
        try {
          run(argv[1], suite, mode, role);
          std::printf("ok: %s\n", name.c_str());
          ++passed;
        } catch (const Failure& f) {
          std::printf("FAILED: %s: %s\n", name.c_str(), f.what.c_str());
          ++failed;
        }
      }
    }
  }
  std::printf("noise interop with flynn/noise: %d passed, %d failed\n", passed, failed);
  return failed == 0 && passed == 8 ? 0 : 1;
}
