// ModuleStore: temp-file uploads hashed incrementally, verified, renamed into
// place; an LRU byte quota over unpinned modules; the index rebuilt from the
// directory at startup.
#include "server/module_store.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "proto/codec/sha256.h"
#include "proto/codec/value_codec.h"
#include "runtime/core/error.h"
#include "server/event_log.h"

namespace tether::server {
namespace {

constexpr char kTempPrefix[] = ".upload-";

absl::Status CheckHash(absl::string_view sha256) {
  if (!rpc::IsSha256Hex(sha256)) {
    return absl::InvalidArgumentError(
        absl::StrCat("module hash \"", absl::CEscape(sha256.substr(0, 80)),
                     sha256.size() > 80 ? "..." : "", "\" is not 64 lower-case hex digits"));
  }
  return absl::OkStatus();
}

std::string Errno(absl::string_view what, const std::string& path) {
  return absl::StrCat(what, " ", path, ": ", std::strerror(errno));
}

}  // namespace

struct ModuleStore::Upload::Hasher {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  Hasher() { EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr); }
  ~Hasher() { EVP_MD_CTX_free(ctx); }
  std::string HexDigest() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx, digest, &len);
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < len; ++i) {
      out.push_back(kHex[digest[i] >> 4]);
      out.push_back(kHex[digest[i] & 15]);
    }
    return out;
  }
};

ModuleStore::Upload::Upload(ModuleStore* store, std::string sha256, uint64_t size,
                            std::string temp_path, int fd)
    : store_(store),
      sha256_(std::move(sha256)),
      size_(size),
      temp_path_(std::move(temp_path)),
      fd_(fd),
      hasher_(std::make_unique<Hasher>()) {}

ModuleStore::Upload::~Upload() {
  if (!done_) Abort();
  store_->EndUpload(size_);
}

void ModuleStore::Upload::Abort() {
  done_ = true;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(temp_path_.c_str());
}

absl::Status ModuleStore::Upload::Append(absl::string_view data) {
  if (done_) return absl::FailedPreconditionError("upload already finished");
  if (data.size() > size_ - received_) {
    absl::Status status = absl::InvalidArgumentError(
        absl::StrCat("module ", sha256_.substr(0, 12), " upload sends more than the declared ",
                     size_, " bytes"));
    Abort();
    return status;
  }
  EVP_DigestUpdate(hasher_->ctx, data.data(), data.size());
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      absl::Status status = absl::InternalError(Errno("cannot write", temp_path_));
      Abort();
      return status;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  received_ += data.size();
  return absl::OkStatus();
}

absl::Status ModuleStore::Upload::Finish() {
  if (done_) return absl::FailedPreconditionError("upload already finished");
  if (received_ != size_) {
    absl::Status status = absl::InvalidArgumentError(absl::StrCat("module ", sha256_.substr(0, 12),
                                                                  " upload ended after ", received_,
                                                                  " of ", size_, " bytes"));
    Abort();
    return status;
  }
  std::string actual = hasher_->HexDigest();
  if (actual != sha256_) {
    absl::Status status = absl::InvalidArgumentError(absl::StrCat(
        "module hash mismatch: declared ", sha256_, ", received bytes hash to ", actual));
    Abort();
    return status;
  }
  if (::fsync(fd_) != 0 || ::close(fd_) != 0) {
    fd_ = -1;
    absl::Status status = absl::InternalError(Errno("cannot flush", temp_path_));
    Abort();
    return status;
  }
  fd_ = -1;
  absl::Status status = store_->Publish(*this);
  if (!status.ok()) Abort();
  done_ = true;
  return status;
}

namespace {

absl::Status CheckPrivateDir(const std::string& dir) {
  // Missing components are created 0700; the store directory itself must be
  // ours and closed to others, as ssh insists of ~/.ssh: anyone who can
  // write it can plant a module that this daemon then runs.
  std::filesystem::path partial;
  for (const auto& part : std::filesystem::path(dir)) {
    partial /= part;
    if (::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST) {
      return absl::InternalError(Errno("cannot create store dir", partial.string()));
    }
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0)
    return absl::InternalError(Errno("cannot stat store dir", dir));
  if (!S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("store dir ", dir, " is not a directory"));
  }
  if (st.st_uid != ::geteuid()) {
    return absl::PermissionDeniedError(
        absl::StrCat("store dir ", dir, " is owned by uid ", st.st_uid, ", not by this user (uid ",
                     ::geteuid(), "); give the daemon a directory of its own"));
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("store dir ", dir, " has mode ", absl::StrFormat("%o", st.st_mode & 07777),
                     ": other users may write it and plant modules; chmod 700 it"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModuleStore>> ModuleStore::Open(std::string dir,
                                                               uint64_t quota_bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  TETHER_RETURN_IF_ERROR(CheckPrivateDir(dir));
  auto store = std::unique_ptr<ModuleStore>(new ModuleStore(dir, quota_bytes));
  struct Found {
    std::string sha;
    uint64_t size;
    fs::file_time_type mtime;
  };
  std::vector<Found> found;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind(kTempPrefix, 0) == 0) {
      fs::remove(e.path(), ec);  // a cut upload of an earlier run
      continue;
    }
    // A link is never an entry (it could point anywhere); files are checked
    // against their names when first loaded.
    if (!rpc::IsSha256Hex(name) || e.symlink_status().type() != fs::file_type::regular) continue;
    found.push_back({name, static_cast<uint64_t>(e.file_size()), e.last_write_time()});
  }
  if (ec)
    return absl::InternalError(absl::StrCat("cannot list store dir ", dir, ": ", ec.message()));
  // Most recently written first, the order the LRU list keeps.
  std::sort(found.begin(), found.end(),
            [](const Found& a, const Found& b) { return a.mtime > b.mtime; });
  absl::MutexLock lock(&store->mu_);
  for (const Found& f : found) {
    Entry& entry = store->entries_[f.sha];
    entry.size = f.size;
    entry.lru = store->lru_.insert(store->lru_.end(), f.sha);
    store->used_ += f.size;
  }
  return store;
}

std::string ModuleStore::PathOf(absl::string_view sha256) const {
  return absl::StrCat(dir_, "/", sha256);
}

void ModuleStore::TouchLocked(Entry& entry, const std::string& sha256) {
  lru_.erase(entry.lru);
  entry.lru = lru_.insert(lru_.begin(), sha256);
}

absl::StatusOr<std::optional<uint64_t>> ModuleStore::Find(absl::string_view sha256) {
  TETHER_RETURN_IF_ERROR(CheckHash(sha256));
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(sha256);
  if (it == entries_.end()) return std::optional<uint64_t>();
  TouchLocked(it->second, it->first);
  return std::optional<uint64_t>(it->second.size);
}

absl::StatusOr<std::unique_ptr<ModuleStore::Upload>> ModuleStore::BeginUpload(
    absl::string_view sha256, uint64_t size_bytes) {
  TETHER_RETURN_IF_ERROR(CheckHash(sha256));
  if (size_bytes > quota_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "module of ", size_bytes, " bytes exceeds the store quota of ", quota_, " bytes"));
  }
  {
    absl::MutexLock lock(&mu_);
    if (uploads_ >= kMaxUploads) {
      return absl::ResourceExhaustedError(absl::StrCat(
          uploads_, " module uploads are in progress, the most the store takes at once"));
    }
    if (reserved_ + size_bytes > quota_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "module of ", size_bytes, " bytes does not fit: uploads in progress reserve ", reserved_,
          " of the store quota of ", quota_, " bytes"));
    }
    ++uploads_;
    reserved_ += size_bytes;
  }
  std::string path = absl::StrCat(dir_, "/", kTempPrefix, "XXXXXX");
  int fd = ::mkostemp(path.data(), O_CLOEXEC);  // not inherited by session workers
  if (fd < 0) {
    absl::Status status = absl::InternalError(Errno("cannot create temp file in", dir_));
    EndUpload(size_bytes);
    return status;
  }
  return std::unique_ptr<Upload>(new Upload(this, std::string(sha256), size_bytes, path, fd));
}

void ModuleStore::EndUpload(uint64_t size_bytes) {
  absl::MutexLock lock(&mu_);
  --uploads_;
  reserved_ -= size_bytes;
}

absl::Status ModuleStore::Publish(Upload& upload) {
  absl::MutexLock lock(&mu_);
  if (auto it = entries_.find(upload.sha256_); it != entries_.end()) {
    ::unlink(upload.temp_path_.c_str());  // a concurrent upload won
    TouchLocked(it->second, it->first);
    return absl::OkStatus();
  }
  // Evict least recently used, unpinned modules until the new one fits.
  for (auto it = lru_.end(); used_ + upload.size_ > quota_ && it != lru_.begin();) {
    --it;
    Entry& victim = entries_[*it];
    if (victim.pins > 0) continue;
    ::unlink(PathOf(*it).c_str());
    used_ -= victim.size;
    std::string sha = *it;
    it = lru_.erase(it);
    entries_.erase(sha);
    EventLine().Add("module", absl::string_view(sha).substr(0, 12)).Add("event", "evict").Write();
  }
  if (used_ + upload.size_ > quota_) {
    return absl::ResourceExhaustedError(absl::StrCat("module store quota of ", quota_,
                                                     " bytes is full (", used_, " bytes in use)"));
  }
  if (::rename(upload.temp_path_.c_str(), PathOf(upload.sha256_).c_str()) != 0) {
    return absl::InternalError(Errno("cannot rename into", PathOf(upload.sha256_)));
  }
  Entry& entry = entries_[upload.sha256_];
  entry.size = upload.size_;
  entry.lru = lru_.insert(lru_.begin(), upload.sha256_);
  used_ += upload.size_;
  return absl::OkStatus();
}

absl::Status ModuleStore::Import(absl::string_view sha256) {
  const std::string source = absl::StrCat(import_dir_, "/", sha256);
  // An open file stays readable even if its store evicts it meanwhile.
  std::ifstream in(source, std::ios::binary | std::ios::ate);
  if (!in) return absl::NotFoundError(absl::StrCat("module ", sha256, " is not in the store"));
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<Upload> upload, BeginUpload(sha256, size));
  std::string chunk;
  for (uint64_t done = 0; done < size; done += chunk.size()) {
    chunk.resize(static_cast<size_t>(std::min<uint64_t>(size - done, uint64_t{1} << 20)));
    if (!in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()))) {
      return absl::InternalError(absl::StrCat("cannot read module ", sha256, " from ", source));
    }
    TETHER_RETURN_IF_ERROR(upload->Append(chunk));
  }
  return upload->Finish();
}

namespace {

absl::StatusOr<Ref<vm::Executable>> ParseExecutable(absl::string_view sha256,
                                                    const std::string& bytes) {
  absl::StatusOr<Ref<vm::Executable>> exec = vm::Executable::LoadFromBytes(bytes);
  if (!exec.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "module ", sha256.substr(0, 12), " is not a valid executable: ", exec.status().message()));
  }
  return exec;
}

absl::StatusOr<std::shared_ptr<const ParamList>> ParseParams(absl::string_view sha256,
                                                             const std::string& bytes) {
  absl::StatusOr<ParamList> params = LoadParamDict(bytes);
  if (!params.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("param file ", sha256.substr(0, 12),
                     " is not a valid param dict: ", params.status().message()));
  }
  return std::make_shared<const ParamList>(std::move(*params));
}

}  // namespace

template <typename T>
absl::StatusOr<T> ModuleStore::AcquireParsed(absl::string_view sha256, T Entry::*cache,
                                             absl::StatusOr<T> (*parse)(absl::string_view,
                                                                        const std::string&)) {
  TETHER_RETURN_IF_ERROR(CheckHash(sha256));
  bool present = false;
  {
    absl::MutexLock lock(&mu_);
    present = entries_.contains(sha256);
  }
  if (!present && !import_dir_.empty()) TETHER_RETURN_IF_ERROR(Import(sha256));
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(sha256);
    if (it == entries_.end()) {
      return absl::NotFoundError(absl::StrCat("module ", sha256, " is not in the store"));
    }
    TouchLocked(it->second, it->first);
    ++it->second.pins;  // pinned while parsing, so it cannot be evicted meanwhile
    if (it->second.*cache) return it->second.*cache;
  }
  // Parsed from the very bytes whose hash is checked: a file swapped or
  // planted in the directory is refused, not run.
  absl::StatusOr<std::string> bytes = ReadVerified(sha256);
  absl::StatusOr<T> parsed = bytes.ok() ? parse(sha256, *bytes) : bytes.status();
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(sha256);
  if (!parsed.ok()) {
    --it->second.pins;
    return parsed.status();
  }
  if (!(it->second.*cache)) it->second.*cache = *parsed;
  return it->second.*cache;
}

absl::StatusOr<Ref<vm::Executable>> ModuleStore::Acquire(absl::string_view sha256) {
  return AcquireParsed(sha256, &Entry::exec, &ParseExecutable);
}

absl::StatusOr<std::shared_ptr<const ParamList>> ModuleStore::AcquireParams(
    absl::string_view sha256) {
  return AcquireParsed(sha256, &Entry::params, &ParseParams);
}

absl::StatusOr<std::string> ModuleStore::ReadVerified(absl::string_view sha256) const {
  const std::string path = PathOf(sha256);
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(
        absl::StrCat("module ", sha256.substr(0, 12), " cannot be opened: ", std::strerror(errno)));
  }
  std::string bytes;
  struct stat st;
  bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  if (ok) {
    bytes.resize(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (ok && done < bytes.size()) {
      ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      ok = n > 0;
      if (ok) done += static_cast<size_t>(n);
    }
  }
  ::close(fd);
  if (!ok) {
    return absl::InternalError(
        absl::StrCat("cannot read module ", sha256.substr(0, 12), " from ", path));
  }
  if (std::string actual = rpc::Sha256Hex(bytes); actual != sha256) {
    return absl::DataLossError(absl::StrCat("module file ", path, " has SHA-256 ",
                                            actual.substr(0, 12),
                                            ", not its name: the store was altered; upload it "
                                            "again"));
  }
  return bytes;
}

void ModuleStore::Release(absl::string_view sha256) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(sha256);
  if (it != entries_.end() && it->second.pins > 0) --it->second.pins;
}

uint64_t ModuleStore::used_bytes() const {
  absl::MutexLock lock(&mu_);
  return used_;
}

}  // namespace tether::server
