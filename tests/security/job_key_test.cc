// Job key files: the exact format `openssl rand -hex 32` writes, the permission rule, writing
// a new key file, descriptors, and WEFT_AUTH_KEY_FILE's value.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "base/fd.h"
#include "security/job_key.h"
#include "security/test_util.h"

namespace weft::security {
namespace {

const std::string kHex = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/weft-key-test-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void write_file(const std::string& path, const std::string& text, mode_t mode) {
  std::ofstream(path) << text;
  ASSERT_EQ(::chmod(path.c_str(), mode), 0);
}

TEST(JobKey, ParsesExactlyTheOpensslRandFormat) {
  auto k = JobKey::parse(kHex + "\n", "test");
  ASSERT_TRUE(k.ok()) << k.status().to_string();
  EXPECT_EQ(testing::hex(k->bytes()), kHex);
  EXPECT_TRUE(JobKey::parse(kHex, "test").ok());
  std::string upper = kHex;
  for (char& c : upper) c = static_cast<char>(std::toupper(c));
  EXPECT_TRUE(JobKey::parse(upper, "test").ok());
  EXPECT_EQ(k->to_file_text(), kHex + "\n");
}

TEST(JobKey, RefusesEverythingElseNamingTheSource) {
  for (const std::string& bad :
       {std::string(), kHex.substr(1), kHex + "0", kHex + "\n\n", kHex + "\r\n", " " + kHex,
        kHex + " ", "\n" + kHex, kHex.substr(0, 63) + "g", kHex.substr(0, 62) + "\n\n"}) {
    auto k = JobKey::parse(bad, "/etc/key");
    ASSERT_FALSE(k.ok()) << "'" << bad << "'";
    EXPECT_EQ(k.status().code(), ErrorCode::invalid_argument);
    EXPECT_NE(k.status().message().find("/etc/key"), std::string::npos);
    EXPECT_NE(k.status().message().find("openssl rand -hex 32"), std::string::npos);
  }
}

TEST(JobKey, GeneratedKeysDiffer) {
  auto a = JobKey::generate();
  auto b = JobKey::generate();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(testing::hex(a->bytes()), testing::hex(b->bytes()));
}

TEST(JobKeyFile, WriteThenReadWithMode0600) {
  TempDir dir;
  auto key = JobKey::generate();
  ASSERT_TRUE(key.ok());
  const std::string path = dir.file("job.key");
  ASSERT_TRUE(write_job_key_file(path, *key).ok());
  struct stat st{};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto back = read_job_key_file(path);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(testing::hex(back->bytes()), testing::hex(key->bytes()));
  // An existing file is never overwritten.
  EXPECT_FALSE(write_job_key_file(path, *key).ok());
}

// The memfd `weft run` hands its ranks, read back through /proc/self/fd; and the descriptor not
// inherited (closed by a process in between) is an error that says so.
TEST(JobKeyFile, ReadsAnInheritedMemfdAndExplainsAMissingOne) {
  auto key = JobKey::generate();
  ASSERT_TRUE(key.ok());
  Fd fd(::memfd_create("job-key-test", MFD_CLOEXEC));
  ASSERT_TRUE(fd.valid());
  ASSERT_TRUE(write_job_key_fd(fd.get(), *key, "memfd").ok());
  auto back = read_job_key_file("/proc/self/fd/" + std::to_string(fd.get()));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(testing::hex(back->bytes()), testing::hex(key->bytes()));
  const int closed = fd.get();
  fd.reset();
  auto gone = read_job_key_file("/proc/self/fd/" + std::to_string(closed));
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.status().message().find("was not inherited by this process"), std::string::npos)
      << gone.status().message();
}

TEST(JobKeyFile, RefusesGroupOrOtherAccess) {
  TempDir dir;
  for (mode_t mode : {0640, 0604, 0660, 0620, 0602, 0610}) {
    const std::string path = dir.file("k" + std::to_string(mode));
    write_file(path, kHex + "\n", mode);
    auto k = read_job_key_file(path);
    ASSERT_FALSE(k.ok()) << std::oct << mode;
    EXPECT_NE(k.status().message().find("chmod 600"), std::string::npos);
    EXPECT_NE(k.status().message().find(path), std::string::npos);
  }
  const std::string ok_path = dir.file("ok");
  write_file(ok_path, kHex + "\n", 0400);
  EXPECT_TRUE(read_job_key_file(ok_path).ok());
}

TEST(JobKeyFile, RefusesMissingDirectoriesAndLongFiles) {
  TempDir dir;
  EXPECT_FALSE(read_job_key_file(dir.file("missing")).ok());
  EXPECT_FALSE(read_job_key_file("/tmp").ok());
  const std::string path = dir.file("long");
  write_file(path, kHex + "\n" + std::string(4096, 'a'), 0600);
  auto k = read_job_key_file(path);
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find(path), std::string::npos);
}

TEST(JobKeyFile, ReadsFromAnInheritedPipe) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const std::string text = kHex + "\n";
  ASSERT_EQ(::write(fds[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fds[1]);
  auto k = read_job_key_fd(fds[0], "descriptor 3");
  ::close(fds[0]);
  ASSERT_TRUE(k.ok()) << k.status().to_string();
  EXPECT_EQ(testing::hex(k->bytes()), kHex);
}

TEST(JobKeyFile, FromTheVariablesValue) {
  auto none = job_key_from_variable(nullptr);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto empty = job_key_from_variable("");
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->has_value());
  TempDir dir;
  const std::string path = dir.file("k");
  write_file(path, kHex, 0600);
  auto some = job_key_from_variable(path.c_str());
  ASSERT_TRUE(some.ok());
  ASSERT_TRUE(some->has_value());
  EXPECT_EQ(testing::hex((*some)->bytes()), kHex);
  auto bad = job_key_from_variable(dir.file("nope").c_str());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("WEFT_AUTH_KEY_FILE"), std::string::npos);
}

}  // namespace
}  // namespace weft::security
