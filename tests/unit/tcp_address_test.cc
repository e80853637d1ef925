// The address record each TCP rank publishes ("tcp/addr/<rank>") is read from the store, so by
// every peer as hostile input: exact shape, bounded size, strict port, a well-formed key line,
// and a protocol error naming the rank for anything else; never a crash (randomised sweep).
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "transport/tcp/mesh.h"

namespace weft::tcp {
namespace {

PeerAddress sample(bool with_key) {
  PeerAddress a{"host-a", "10.1.2.3", 29500, "machine-1", std::nullopt};
  if (with_key) {
    StaticKeyRecord k;
    for (size_t i = 0; i < k.key.size(); ++i) k.key[i] = static_cast<uint8_t>(i * 13 + 1);
    k.has_aes = true;
    a.static_key = k;
  }
  return a;
}

TEST(TcpAddressRecord, RoundTripsWithAndWithoutAStaticKey) {
  for (bool with_key : {false, true}) {
    const PeerAddress a = sample(with_key);
    auto text = encode_address(a);
    ASSERT_TRUE(text.ok()) << text.status().to_string();
    auto back = parse_address(text.value(), 3);
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(back->host_id, a.host_id);
    EXPECT_EQ(back->ip, a.ip);
    EXPECT_EQ(back->port, a.port);
    EXPECT_EQ(back->machine, a.machine);
    ASSERT_EQ(back->static_key.has_value(), with_key);
    if (with_key) {
      EXPECT_EQ(back->static_key->key, a.static_key->key);
      EXPECT_TRUE(back->static_key->has_aes);
    }
  }
}

TEST(TcpAddressRecord, MalformedRecordsAreProtocolErrorsNamingTheRank) {
  const std::string good = encode_address(sample(true)).value();
  const std::string key_line = good.substr(good.rfind('\n') + 1);
  const std::vector<std::string> bad = {
      "",
      "host\n10.0.0.1\n80",                             // three lines
      "host\n10.0.0.1\n80\nm\n" + key_line + "\nmore",  // six lines
      "host\n10.0.0.1\n0\nm",                           // port 0
      "host\n10.0.0.1\n65536\nm",                       // port out of range
      "host\n10.0.0.1\n80x\nm",                         // trailing garbage (atoi took it)
      "host\n10.0.0.1\n-1\nm",
      "host\n10.0.0.1\n 80\nm",
      "host\n10.0.0.1\n\nm",
      "\n10.0.0.1\n80\nm",                              // empty host id
      "host\n\n80\nm",                                  // empty address
      "host\n10.0.0.1\n80\n",                           // empty machine
      std::string(300, 'h') + "\n10.0.0.1\n80\nm",      // field too long
      "host\n10.0.0.1\n80\nm\nnoise 00 1",              // short key line
      "host\n10.0.0.1\n80\nm\n" + key_line + "\n",      // a sixth, empty line
      std::string(8192, 'x'),                           // far too long
  };
  for (const std::string& text : bad) {
    auto r = parse_address(text, 5);
    ASSERT_FALSE(r.ok()) << "accepted: " << text.substr(0, 80);
    EXPECT_EQ(r.status().code(), ErrorCode::protocol) << r.status().to_string();
    EXPECT_NE(r.status().message().find("rank 5"), std::string::npos) << r.status().message();
  }
}

TEST(TcpAddressRecord, EncodingRefusesFieldsThatWouldChangeTheRecordsShape) {
  PeerAddress a = sample(false);
  a.host_id = "two\nlines";
  EXPECT_FALSE(encode_address(a).ok());
  a = sample(false);
  a.machine = std::string(kMaxAddressField + 1, 'm');
  EXPECT_FALSE(encode_address(a).ok());
  a = sample(false);
  a.ip = "";
  EXPECT_FALSE(encode_address(a).ok());
}

TEST(TcpAddressRecord, RandomMutationsNeverCrashAndWhatIsAcceptedReencodesTheSame) {
  std::mt19937_64 rng(7);
  const std::string good = encode_address(sample(true)).value();
  size_t accepted = 0;
  for (int i = 0; i < 50000; ++i) {
    std::string text = good;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = text.empty() ? 0 : rng() % text.size();
      switch (rng() % 4) {
        case 0:
          if (!text.empty()) text[at] = static_cast<char>(rng());
          break;
        case 1: text.insert(at, 1, static_cast<char>(rng() % 2 ? '\n' : rng())); break;
        case 2:
          if (!text.empty()) text.erase(at, 1 + rng() % 8);
          break;
        case 3: text.resize(rng() % (good.size() + 16), static_cast<char>(rng())); break;
      }
    }
    auto r = parse_address(text, 1);
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), ErrorCode::protocol);
      continue;
    }
    ++accepted;
    EXPECT_GE(r->port, 1);
    auto again = encode_address(r.value());
    ASSERT_TRUE(again.ok()) << again.status().to_string();
    // Parsing is exact: the accepted text is the canonical encoding of what it parsed to.
    EXPECT_EQ(again.value(), text);
  }
  EXPECT_GT(accepted, 0u);
}

}  // namespace
}  // namespace weft::tcp
