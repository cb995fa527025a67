// Allocator types and factories, storage (a buffer that returns itself to its
// allocator), tensor views carved from storage, and memory_cfg parsing.
#include "runtime/memory/allocator.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "runtime/core/error.h"
#include "runtime/memory/naive_allocator.h"
#include "runtime/memory/pooled_allocator.h"

namespace tether::memory {

absl::StatusOr<AllocatorType> ParseAllocatorType(absl::string_view text) {
  std::string lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  if (lower == "naive") return AllocatorType::kNaive;
  if (lower == "pooled") return AllocatorType::kPooled;
  return ValueError("unknown allocator type \"", text, "\"; expected naive or pooled");
}

absl::string_view AllocatorTypeName(AllocatorType type) {
  switch (type) {
    case AllocatorType::kNaive:
      return "naive";
    case AllocatorType::kPooled:
      return "pooled";
  }
  return "unknown";
}

Ref<Allocator> CreateAllocator(Device device, AllocatorType type) {
  if (type == AllocatorType::kNaive) return MakeRef<NaiveAllocator>(device);
  return MakeRef<PooledAllocator>(device);
}

Allocator* DefaultAllocator(Device device) {
  // Never destroyed: tensors made outside any VM may outlive static destruction.
  static absl::Mutex* const mu = new absl::Mutex();
  static auto* const allocators = new absl::flat_hash_map<Device, Allocator*>();
  absl::MutexLock lock(mu);
  Allocator*& slot = (*allocators)[device];
  if (slot == nullptr) slot = CreateAllocator(device, AllocatorType::kNaive).release();
  return slot;
}

StorageObj::StorageObj(Buffer buffer, Ref<Allocator> allocator)
    : Object(TypeIndex::kStorage), buffer_(buffer), allocator_(std::move(allocator)) {}

StorageObj::~StorageObj() {
  if (allocator_ && buffer_.data != nullptr) allocator_->Free(buffer_);
}

absl::StatusOr<Ref<StorageObj>> StorageObj::Allocate(Allocator* allocator, size_t nbytes,
                                                     size_t alignment) {
  if (allocator == nullptr) return ValueError("storage allocation with no allocator");
  TETHER_ASSIGN_OR_RETURN(Buffer buffer, allocator->Alloc(nbytes, alignment));
  return MakeRef<StorageObj>(buffer, Ref<Allocator>(allocator));
}

absl::StatusOr<Tensor> StorageObj::AllocTensor(int64_t offset, std::span<const int64_t> shape,
                                               DataType dtype) {
  if (!dtype.IsValidStorageType()) {
    return ValueError("storage allocation failure: unsupported data type ", dtype.ToString());
  }
  if (offset < 0) {
    return ValueError("storage allocation failure: negative offset ", offset, " in a ",
                      buffer_.size, "-byte storage");
  }
  absl::StatusOr<int64_t> nbytes = CheckedNumBytes(shape, dtype);
  if (!nbytes.ok()) {
    return ValueError("storage allocation failure: ", nbytes.status().message());
  }
  const auto size = static_cast<uint64_t>(buffer_.size);
  const auto want = static_cast<uint64_t>(*nbytes);
  const auto at = static_cast<uint64_t>(offset);
  if (want > size || at > size - want) {
    return ValueError("storage allocation failure: tensor of ", want, " bytes at offset ", at,
                      " in a ", size, "-byte storage");
  }
  TensorObj::Dims dims(shape.begin(), shape.end());
  return Tensor(MakeRef<TensorObj>(buffer_.data, buffer_.device, dtype, std::move(dims),
                                   TensorObj::Dims{}, at, Ref<Object>(static_cast<Object*>(this))));
}

absl::StatusOr<MemoryConfig> MemoryConfig::Parse(absl::string_view text) {
  MemoryConfig config;
  absl::string_view trimmed = absl::StripAsciiWhitespace(text);
  if (trimmed.empty()) return config;
  auto fail = [&](const auto&... why) {
    return ValueError("invalid memory_cfg \"", text, "\": ", why...);
  };
  bool default_seen = false;
  for (absl::string_view entry : absl::StrSplit(trimmed, ',')) {
    entry = absl::StripAsciiWhitespace(entry);
    if (entry.empty()) return fail("empty entry");
    size_t eq = entry.find('=');
    if (eq == absl::string_view::npos) {
      absl::StatusOr<AllocatorType> type = ParseAllocatorType(entry);
      if (!type.ok()) return fail(type.status().message());
      if (default_seen) return fail("more than one default allocator type");
      default_seen = true;
      config.default_type = *type;
      continue;
    }
    absl::StatusOr<Device> device = Device::Parse(absl::StripAsciiWhitespace(entry.substr(0, eq)));
    if (!device.ok()) return fail(device.status().message());
    absl::StatusOr<AllocatorType> type = ParseAllocatorType(entry.substr(eq + 1));
    if (!type.ok()) return fail(type.status().message());
    if (!config.per_device.emplace(*device, *type).second) {
      return fail("device ", device->ToString(), " is named twice");
    }
  }
  return config;
}

AllocatorType MemoryConfig::TypeFor(Device device) const {
  auto it = per_device.find(device);
  return it != per_device.end() ? it->second : default_type;
}

size_t TensorAlignment(DataType dtype) {
  return static_cast<size_t>(std::max<int64_t>(64, dtype.bytes()));
}

}  // namespace tether::memory
