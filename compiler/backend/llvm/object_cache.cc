// KernelObjectCache (object_cache.h): one file per entry, in a folder per
// first two hex digits of its key so no folder grows past a few thousand.
#include "compiler/backend/llvm/object_cache.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/SHA256.h"

namespace tether::compiler {
namespace {

namespace fs = std::filesystem;

// An entry: kMagic, the SHA-256 of the object, the object's size (8 bytes,
// little-endian), the object.
constexpr char kMagic[8] = {'T', 'E', 'T', 'H', 'K', 'O', '1', '\n'};
constexpr size_t kHeaderBytes = sizeof(kMagic) + 32 + 8;
constexpr auto kStaleTemporary = std::chrono::hours(1);

std::array<uint8_t, 32> Sha256(absl::string_view bytes) {
  llvm::SHA256 h;
  h.update(llvm::StringRef(bytes.data(), bytes.size()));
  return h.final();
}

}  // namespace

KernelObjectCache::KernelObjectCache(std::string dir, int64_t max_bytes)
    : dir_(std::move(dir)), max_bytes_(max_bytes) {}

std::string KernelObjectCache::Key(absl::string_view compiler_build, absl::string_view triple,
                                   absl::string_view cpu, absl::string_view features, int opt_level,
                                   absl::string_view ir) {
  llvm::SHA256 h;
  const std::string level = absl::StrCat(opt_level);
  // Each field with its length, so no two field lists hash the same text.
  for (absl::string_view field : {absl::string_view("tether kernel object 1"), compiler_build,
                                  absl::string_view(LLVM_VERSION_STRING), triple, cpu, features,
                                  absl::string_view(level), ir}) {
    h.update(absl::StrCat(field.size(), ":"));
    h.update(llvm::StringRef(field.data(), field.size()));
  }
  return llvm::toHex(h.final(), /*LowerCase=*/true);
}

std::string KernelObjectCache::PathOf(const std::string& key) const {
  return absl::StrCat(dir_, "/", key.substr(0, 2), "/", key, ".o");
}

std::optional<std::string> KernelObjectCache::Get(const std::string& key) {
  const std::string path = PathOf(key);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ++misses_;
    return std::nullopt;
  }
  std::string entry((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  // A short read shows as a size or checksum that does not match.
  uint64_t size = 0;
  if (entry.size() >= kHeaderBytes && std::memcmp(entry.data(), kMagic, 8) == 0) {
    for (int i = 0; i < 8; ++i) {
      size |= static_cast<uint64_t>(static_cast<uint8_t>(entry[8 + 32 + i])) << (8 * i);
    }
  }
  absl::string_view object;
  if (size > 0 && size == entry.size() - kHeaderBytes) {
    object = absl::string_view(entry).substr(kHeaderBytes);
    const std::array<uint8_t, 32> sum = Sha256(object);
    if (std::memcmp(sum.data(), entry.data() + 8, 32) != 0) object = {};
  }
  std::error_code ec;
  if (object.empty()) {
    fs::remove(path, ec);  // damaged: compiled again and stored anew
    ++misses_;
    return std::nullopt;
  }
  fs::last_write_time(path, fs::file_time_type::clock::now(), ec);  // recently used
  ++hits_;
  return std::string(object);
}

void KernelObjectCache::Put(const std::string& key, absl::string_view object) {
  const fs::path path = PathOf(key);
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) return;
  std::string header(kMagic, sizeof(kMagic));
  const std::array<uint8_t, 32> sum = Sha256(object);
  header.append(reinterpret_cast<const char*>(sum.data()), sum.size());
  for (int i = 0; i < 8; ++i) header.push_back(static_cast<char>(object.size() >> (8 * i)));
  // Unique per process and thread: two writers of one key never share it.
  fs::path tmp = path;
  tmp += absl::StrCat(".tmp.", ::getpid(), ".", ::gettid());
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(object.data(), static_cast<std::streamsize>(object.size()));
    out.close();
    if (!out) {
      fs::remove(tmp, ec);
      return;
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) fs::remove(tmp, ec);
}

void KernelObjectCache::Trim() {
  std::error_code ec;
  std::vector<std::tuple<fs::file_time_type, uintmax_t, fs::path>> entries;
  uintmax_t total = 0;
  const fs::file_time_type now = fs::file_time_type::clock::now();
  for (fs::recursive_directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const fs::path& p = it->path();
    const fs::file_time_type when = it->last_write_time(ec);
    if (ec) continue;
    if (absl::StrContains(p.filename().string(), ".tmp.")) {
      if (now - when > kStaleTemporary) fs::remove(p, ec);
      continue;
    }
    if (p.extension() != ".o") continue;
    const uintmax_t size = it->file_size(ec);
    if (ec) continue;
    entries.emplace_back(when, size, p);
    total += size;
  }
  if (total <= static_cast<uintmax_t>(max_bytes_)) return;
  std::sort(entries.begin(), entries.end());  // least recently used first
  const uintmax_t goal = static_cast<uintmax_t>(max_bytes_ / 4 * 3);
  for (const auto& [when, size, p] : entries) {
    if (total <= goal) break;
    if (fs::remove(p, ec)) total -= size;
  }
}

}  // namespace tether::compiler
