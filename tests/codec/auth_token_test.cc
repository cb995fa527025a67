// Token files: the operator's token file is read trimmed and refused when
// other users may read it; the per-user default is created private once and
// read back after.
#include "proto/codec/auth_token.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace tether::rpc {
namespace {

using ::testing::HasSubstr;
using ::tether::testing::StatusIs;
namespace fs = std::filesystem;

class AuthTokenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "tether-token-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text, mode_t mode) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    EXPECT_EQ(::chmod(path.c_str(), mode), 0);
    return path;
  }
  std::string dir_;
};

TEST_F(AuthTokenTest, ReadsATokenTrimmed) {
  auto token = ReadTokenFile(Write("t", "  secret-1\n", 0600), true);
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "secret-1");
}

TEST_F(AuthTokenTest, RefusesAPrivateTokenOthersMayReadOrWrite) {
  EXPECT_THAT(ReadTokenFile(Write("world", "s", 0644), true),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("chmod 600")));
  EXPECT_THAT(ReadTokenFile(Write("group-w", "s", 0620), true),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("mode 620")));
  // A group may read it: an operator shares the token with one group.
  EXPECT_TRUE(ReadTokenFile(Write("group-r", "s", 0640), true).ok());
  // A client reading a token handed to it does not insist.
  EXPECT_TRUE(ReadTokenFile(Write("client", "s", 0644), false).ok());
}

TEST_F(AuthTokenTest, RefusesMissingAndBlankFiles) {
  EXPECT_THAT(ReadTokenFile(dir_ + "/missing", true),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cannot read token file")));
  EXPECT_THAT(ReadTokenFile(Write("blank", " \n\t", 0600), true),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is empty")));
  EXPECT_THAT(ReadTokenFile(dir_, true),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a regular file")));
}

TEST_F(AuthTokenTest, CreatesTheDefaultTokenPrivateOnceAndReadsItAfter) {
  const std::string path = dir_ + "/config/tether/token";
  auto first = LoadOrCreateToken(path);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->size(), 64u);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((dir_ + "/config/tether").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  auto second = LoadOrCreateToken(path);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*second, *first);
  EXPECT_NE(RandomToken(), RandomToken());
  // No temporary files are left beside it.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ + "/config/tether"), {}), 1);
}

TEST(IsLocalAddressTest, OnlyUnixSocketsAndLoopbackLiterals) {
  for (const char* local : {"unix:/run/t.sock", "127.0.0.1:9190", "127.1.2.3:0", "localhost:9190",
                            "[::1]:9190", "ipv4:127.0.0.1:1", "ipv6:[::1]:1"}) {
    EXPECT_TRUE(IsLocalAddress(local)) << local;
  }
  for (const char* remote : {"0.0.0.0:9190", "10.0.0.2:9190", "127.example.com:9190", "[::]:9190",
                             "board.local:9190", "128.0.0.1:1"}) {
    EXPECT_FALSE(IsLocalAddress(remote)) << remote;
  }
}

TEST_F(AuthTokenTest, TheDefaultPathFollowsTheEnvironment) {
  const char* saved = std::getenv("TETHER_TOKEN_FILE");
  const std::string restore = saved != nullptr ? saved : "";
  ::setenv("TETHER_TOKEN_FILE", "/run/x/token", 1);
  EXPECT_EQ(DefaultTokenPath(), "/run/x/token");
  ::unsetenv("TETHER_TOKEN_FILE");
  ::setenv("XDG_CONFIG_HOME", "/cfg", 1);
  EXPECT_EQ(DefaultTokenPath(), "/cfg/tether/token");
  ::unsetenv("XDG_CONFIG_HOME");
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(DefaultTokenPath(), "/home/u/.config/tether/token");
  if (saved != nullptr) ::setenv("TETHER_TOKEN_FILE", restore.c_str(), 1);
}

}  // namespace
}  // namespace tether::rpc
