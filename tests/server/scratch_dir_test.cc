// ScratchDir and the sweep: a live owner's directory survives, a dead
// owner's goes, and nothing else is touched.
#include "server/scratch_dir.h"

#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace tether::server {
namespace {

namespace fs = std::filesystem;

class ScratchDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "scratch-dir-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    parent_ = tmpl;
  }
  void TearDown() override { fs::remove_all(parent_); }
  // A directory as a process killed at `stage` would leave it.
  std::string Leftover(const std::string& name, bool with_lock, bool old) {
    const std::string path = parent_ + "/" + name;
    fs::create_directory(path);
    if (with_lock) std::ofstream(path + "/owner.lock") << "";
    if (old) {
      timeval past[2] = {{::time(nullptr) - 600, 0}, {::time(nullptr) - 600, 0}};
      ::utimes(path.c_str(), past);
    }
    return path;
  }
  std::string parent_;
};

TEST_F(ScratchDirTest, IsPrivateMarkedAndRemovedWithItsOwner) {
  std::string path;
  {
    auto dir = ScratchDir::Create(parent_, "tetherd-x-");
    ASSERT_TRUE(dir.ok()) << dir.status();
    path = dir->path();
    struct stat st;
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    EXPECT_TRUE(fs::exists(path + "/owner.lock"));
    // Its owner lives: the sweep leaves it.
    EXPECT_EQ(SweepAbandonedScratchDirs(parent_, "tetherd-x-"), 0);
    EXPECT_TRUE(fs::exists(path));
    ScratchDir moved = std::move(*dir);
    EXPECT_EQ(moved.path(), path);
  }
  EXPECT_FALSE(fs::exists(path));
}

TEST_F(ScratchDirTest, TheSweepRemovesOnlyWhatDeadOwnersLeft) {
  const std::string dead = Leftover("tetherd-x-dead", /*with_lock=*/true, /*old=*/false);
  const std::string killed_in_create = Leftover("tetherd-x-empty", false, /*old=*/true);
  const std::string creating_now = Leftover("tetherd-x-fresh", false, /*old=*/false);
  const std::string older_format = Leftover("tetherd-x-old", false, /*old=*/true);
  std::ofstream(older_format + "/socket") << "";
  const std::string other_prefix = Leftover("other-dead", true, true);
  fs::create_directory_symlink(other_prefix, parent_ + "/tetherd-x-link");

  EXPECT_EQ(SweepAbandonedScratchDirs(parent_, "tetherd-x-"), 2);
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_FALSE(fs::exists(killed_in_create));
  EXPECT_TRUE(fs::exists(creating_now));
  EXPECT_TRUE(fs::exists(older_format + "/socket"));
  EXPECT_TRUE(fs::exists(other_prefix + "/owner.lock"));
  EXPECT_TRUE(fs::is_symlink(parent_ + "/tetherd-x-link"));
}

}  // namespace
}  // namespace tether::server
