// Tests of the naive and pooled allocators, storage and tensor views, and
// memory_cfg parsing, on the CPU device.
#include "runtime/memory/allocator.h"

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/memory/naive_allocator.h"
#include "runtime/memory/pooled_allocator.h"

namespace tether::memory {
namespace {

using ::testing::HasSubstr;

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = 1024 * 1024;

TEST(AllocatorTypeTest, ParsesAndNames) {
  ASSERT_TRUE(ParseAllocatorType("naive").ok());
  EXPECT_EQ(*ParseAllocatorType("naive"), AllocatorType::kNaive);
  EXPECT_EQ(*ParseAllocatorType("pooled"), AllocatorType::kPooled);
  EXPECT_EQ(*ParseAllocatorType(" Pooled "), AllocatorType::kPooled);
  EXPECT_EQ(AllocatorTypeName(AllocatorType::kNaive), "naive");
  EXPECT_EQ(AllocatorTypeName(AllocatorType::kPooled), "pooled");
  EXPECT_EQ(static_cast<int>(AllocatorType::kNaive), 1);
  EXPECT_EQ(static_cast<int>(AllocatorType::kPooled), 2);
  absl::StatusOr<AllocatorType> bad = ParseAllocatorType("arena");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("\"arena\""));
}

TEST(AllocatorTest, CreateAllocatorMakesTheRequestedType) {
  Ref<Allocator> naive = CreateAllocator(Device::Cpu(), AllocatorType::kNaive);
  Ref<Allocator> pooled = CreateAllocator(Device::Cpu(), AllocatorType::kPooled);
  EXPECT_EQ(naive->type(), AllocatorType::kNaive);
  EXPECT_EQ(pooled->type(), AllocatorType::kPooled);
  EXPECT_EQ(pooled->device(), Device::Cpu());
}

TEST(AllocatorTest, DefaultAllocatorIsOneNaivePerDevice) {
  Allocator* a = DefaultAllocator(Device::Cpu());
  EXPECT_EQ(a, DefaultAllocator(Device::Cpu()));
  EXPECT_EQ(a->type(), AllocatorType::kNaive);
  EXPECT_NE(a, DefaultAllocator(Device::Cpu(1)));
}

TEST(AllocatorTest, AllocatorForAbsentDeviceFailsCleanly) {
  Ref<Allocator> opencl = CreateAllocator(Device{kDLOpenCL, 0}, AllocatorType::kPooled);
  absl::StatusOr<Buffer> b = opencl->Alloc(64, 64);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kUnimplemented);
}

TEST(NaiveAllocatorTest, AccountsAllocsAndFrees) {
  Ref<Allocator> a = CreateAllocator(Device::Cpu(), AllocatorType::kNaive);
  absl::StatusOr<Buffer> b1 = a->Alloc(1000, 64);
  absl::StatusOr<Buffer> b2 = a->Alloc(24, 64);
  ASSERT_TRUE(b1.ok() && b2.ok());
  EXPECT_EQ(b1->size, 1000u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b1->data) % 64, 0u);
  AllocatorStats s = a->Stats();
  EXPECT_EQ(s.bytes_in_use, 1024);
  EXPECT_EQ(s.num_device_allocs, 2);
  a->Free(*b1);
  a->Free(*b2);
  s = a->Stats();
  EXPECT_EQ(s.bytes_in_use, 0);
  EXPECT_EQ(s.bytes_reserved, 0);
  EXPECT_EQ(s.peak_bytes_in_use, 1024);
  EXPECT_EQ(s.num_frees, 2);
  EXPECT_EQ(s.num_device_frees, 2);
}

TEST(NaiveAllocatorTest, IgnoresForeignAndDoubleFrees) {
  Ref<Allocator> a = CreateAllocator(Device::Cpu(), AllocatorType::kNaive);
  absl::StatusOr<Buffer> b = a->Alloc(64, 64);
  ASSERT_TRUE(b.ok());
  int on_stack = 0;
  a->Free(Buffer{&on_stack, sizeof(on_stack), Device::Cpu()});
  a->Free(*b);
  a->Free(*b);
  EXPECT_EQ(a->Stats().num_frees, 1);
  EXPECT_EQ(a->Stats().bytes_in_use, 0);
}

TEST(PooledAllocatorTest, SizeClasses) {
  EXPECT_EQ(PooledAllocator::SizeClass(0), 4 * kKiB);
  EXPECT_EQ(PooledAllocator::SizeClass(1), 4 * kKiB);
  EXPECT_EQ(PooledAllocator::SizeClass(4 * kKiB), 4 * kKiB);
  EXPECT_EQ(PooledAllocator::SizeClass(4 * kKiB + 1), 8 * kKiB);
  EXPECT_EQ(PooledAllocator::SizeClass(13 * kKiB), 16 * kKiB);  // page-rounded
  EXPECT_EQ(PooledAllocator::SizeClass(17 * kKiB), 20 * kKiB);  // 4 classes per doubling
  EXPECT_EQ(PooledAllocator::SizeClass(1 * kMiB + 1), 1 * kMiB + 256 * kKiB);
  EXPECT_EQ(PooledAllocator::SizeClass(1 * kMiB + 300 * kKiB), 1 * kMiB + 512 * kKiB);
  EXPECT_EQ(PooledAllocator::SizeClass(2 * kMiB), 2 * kMiB);
  EXPECT_EQ(PooledAllocator::SizeClass(64 * kMiB - 1), 64 * kMiB);
  EXPECT_EQ(PooledAllocator::SizeClass(64 * kMiB + 1), 66 * kMiB);  // huge: 2 MiB steps
  EXPECT_EQ(PooledAllocator::SizeClass(100 * kMiB), 100 * kMiB);
  // Waste is bounded by 25% above the page-rounded range.
  for (size_t n = 16 * kKiB + 1; n < 64 * kMiB; n = n * 3 / 2 + 7) {
    size_t c = PooledAllocator::SizeClass(n);
    EXPECT_GE(c, n);
    EXPECT_LE(c - n, n / 4) << n;
    EXPECT_EQ(c % (4 * kKiB), 0u) << n;
  }
  EXPECT_EQ(PooledAllocator::SizeClass(SIZE_MAX), SIZE_MAX);
}

TEST(PooledAllocatorTest, ReusesFreedBuffersOfTheSameClass) {
  Ref<Allocator> a = CreateAllocator(Device::Cpu(), AllocatorType::kPooled);
  absl::StatusOr<Buffer> b1 = a->Alloc(5000, 64);
  ASSERT_TRUE(b1.ok());
  void* first = b1->data;
  a->Free(*b1);
  absl::StatusOr<Buffer> b2 = a->Alloc(6000, 64);  // same 8 KiB class
  ASSERT_TRUE(b2.ok());
  EXPECT_EQ(b2->data, first);
  EXPECT_EQ(b2->size, 6000u);
  AllocatorStats s = a->Stats();
  EXPECT_EQ(s.num_allocs, 2);
  EXPECT_EQ(s.num_device_allocs, 1);
  EXPECT_EQ(s.num_reuses, 1);
  absl::StatusOr<Buffer> b3 = a->Alloc(100 * kKiB, 64);  // another class: a new buffer
  ASSERT_TRUE(b3.ok());
  EXPECT_NE(b3->data, first);
  EXPECT_EQ(a->Stats().num_device_allocs, 2);
  a->Free(*b2);
  a->Free(*b3);
}

TEST(PooledAllocatorTest, AccountsFreesAndClearReturnsMemory) {
  Ref<Allocator> a = CreateAllocator(Device::Cpu(), AllocatorType::kPooled);
  std::vector<Buffer> buffers;
  for (size_t n : {size_t{100}, size_t{5000}, size_t{70 * kKiB}, size_t{65 * kMiB}}) {
    absl::StatusOr<Buffer> b = a->Alloc(n, 64);
    ASSERT_TRUE(b.ok()) << b.status();
    buffers.push_back(*b);
  }
  AllocatorStats s = a->Stats();
  EXPECT_EQ(s.bytes_in_use, int64_t{100 + 5000 + 70 * kKiB + 65 * kMiB});
  EXPECT_EQ(s.bytes_reserved, int64_t{4 * kKiB + 8 * kKiB + 80 * kKiB + 66 * kMiB});
  for (const Buffer& b : buffers) a->Free(b);
  s = a->Stats();
  EXPECT_EQ(s.bytes_in_use, 0);
  EXPECT_EQ(s.num_frees, 4);
  EXPECT_EQ(s.bytes_reserved, int64_t{4 * kKiB + 8 * kKiB + 80 * kKiB + 66 * kMiB});
  EXPECT_EQ(s.num_device_frees, 0);
  a->Clear();
  s = a->Stats();
  EXPECT_EQ(s.bytes_reserved, 0);
  EXPECT_EQ(s.num_device_frees, 4);
  EXPECT_EQ(s.peak_bytes_reserved, int64_t{4 * kKiB + 8 * kKiB + 80 * kKiB + 66 * kMiB});
}

TEST(PooledAllocatorTest, ClearKeepsBuffersInUseValid) {
  Ref<Allocator> a = CreateAllocator(Device::Cpu(), AllocatorType::kPooled);
  absl::StatusOr<Buffer> held = a->Alloc(4096, 64);
  ASSERT_TRUE(held.ok());
  std::memset(held->data, 0x5a, 4096);
  a->Clear();
  EXPECT_EQ(static_cast<uint8_t*>(held->data)[4095], 0x5a);
  EXPECT_EQ(a->Stats().bytes_reserved, 4096);
  a->Free(*held);
  EXPECT_EQ(a->Stats().bytes_reserved, 4096);  // cached, not returned
  a->Clear();
  EXPECT_EQ(a->Stats().bytes_reserved, 0);
}

TEST(PooledAllocatorTest, HonoursAlignment) {
  Ref<Allocator> a = CreateAllocator(Device::Cpu(), AllocatorType::kPooled);
  for (size_t alignment : {size_t{1}, size_t{64}, size_t{256}, size_t{4096}}) {
    absl::StatusOr<Buffer> b = a->Alloc(3000, alignment);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data) % alignment, 0u) << alignment;
    a->Free(*b);
  }
  absl::StatusOr<Buffer> bad = a->Alloc(64, 3);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("alignment 3"));
}

TEST(PooledAllocatorTest, IgnoresForeignAndDoubleFrees) {
  Ref<Allocator> a = CreateAllocator(Device::Cpu(), AllocatorType::kPooled);
  absl::StatusOr<Buffer> b = a->Alloc(64, 64);
  ASSERT_TRUE(b.ok());
  int on_stack = 0;
  a->Free(Buffer{&on_stack, sizeof(on_stack), Device::Cpu()});
  a->Free(*b);
  a->Free(*b);  // double free: must not put the buffer in the cache twice
  absl::StatusOr<Buffer> c1 = a->Alloc(64, 64);
  absl::StatusOr<Buffer> c2 = a->Alloc(64, 64);
  ASSERT_TRUE(c1.ok() && c2.ok());
  EXPECT_NE(c1->data, c2->data);
  EXPECT_EQ(a->Stats().num_frees, 1);
  a->Free(*c1);
  a->Free(*c2);
}

TEST(PooledAllocatorTest, HugeRequestIsResourceExhaustedNamingTheSize) {
  Ref<Allocator> a = CreateAllocator(Device::Cpu(), AllocatorType::kPooled);
  absl::StatusOr<Buffer> small = a->Alloc(4096, 64);
  ASSERT_TRUE(small.ok());
  a->Free(*small);  // something cached: the allocator releases it and retries
  const size_t petabyte = size_t{1} << 50;
  absl::StatusOr<Buffer> b = a->Alloc(petabyte, 64);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(b.status().message(), HasSubstr("1125899906842624 bytes"));
  EXPECT_EQ(a->Stats().bytes_reserved, 0);  // the cache went back to the device
}

TEST(PooledAllocatorTest, ConcurrentAllocAndFree) {
  Ref<Allocator> a = CreateAllocator(Device::Cpu(), AllocatorType::kPooled);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&a, t] {
      std::vector<Buffer> held;
      for (int i = 0; i < 500; ++i) {
        const size_t n = 64 + static_cast<size_t>((i * 7919 + t * 104729) % 40000);
        absl::StatusOr<Buffer> b = a->Alloc(n, 64);
        ASSERT_TRUE(b.ok()) << b.status();
        std::memset(b->data, t, n);  // a buffer handed out twice would be torn
        held.push_back(*b);
        if (held.size() > 8) {
          const Buffer& old = held.front();
          const auto* bytes = static_cast<const uint8_t*>(old.data);
          ASSERT_EQ(bytes[0], t);
          ASSERT_EQ(bytes[old.size - 1], t);
          a->Free(old);
          held.erase(held.begin());
        }
      }
      for (const Buffer& b : held) a->Free(b);
    });
  }
  for (std::thread& th : threads) th.join();
  AllocatorStats s = a->Stats();
  EXPECT_EQ(s.bytes_in_use, 0);
  EXPECT_EQ(s.num_allocs, 2000);
  EXPECT_EQ(s.num_frees, 2000);
  EXPECT_EQ(s.num_allocs, s.num_device_allocs + s.num_reuses);
  a->Clear();
  EXPECT_EQ(a->Stats().bytes_reserved, 0);
}

TEST(StorageTest, ReturnsItsBufferOnDestruction) {
  Ref<Allocator> a = CreateAllocator(Device::Cpu(), AllocatorType::kPooled);
  {
    absl::StatusOr<Ref<StorageObj>> s = StorageObj::Allocate(a.get(), 256, 64);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ((*s)->buffer().size, 256u);
    EXPECT_EQ(a->Stats().bytes_in_use, 256);
  }
  EXPECT_EQ(a->Stats().bytes_in_use, 0);
  EXPECT_EQ(a->Stats().num_frees, 1);
}

TEST(StorageTest, AllocatorOutlivesItsCreatorWhileStorageLives) {
  absl::StatusOr<Ref<StorageObj>> s;
  {
    Ref<Allocator> a = CreateAllocator(Device::Cpu(), AllocatorType::kNaive);
    s = StorageObj::Allocate(a.get(), 128, 64);
    ASSERT_TRUE(s.ok());
  }
  std::memset((*s)->buffer().data, 1, 128);  // still valid; freed with the storage
}

TEST(StorageTest, AllocTensorMakesAViewOwnedByTheStorage) {
  Ref<Allocator> a = CreateAllocator(Device::Cpu(), AllocatorType::kNaive);
  absl::StatusOr<Ref<StorageObj>> s = StorageObj::Allocate(a.get(), 256, 64);
  ASSERT_TRUE(s.ok());
  const int64_t shape[] = {2, 3};
  absl::StatusOr<Tensor> t = (*s)->AllocTensor(64, shape, DataType::Float(32));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->data(), (*s)->buffer().data);
  EXPECT_EQ((*t)->byte_offset(), 64u);
  EXPECT_EQ((*t)->device(), Device::Cpu());
  EXPECT_THAT((*t)->shape(), ::testing::ElementsAre(2, 3));
  EXPECT_EQ((*t)->owner().get(), static_cast<Object*>(s->get()));
  // The tensor keeps the storage (and so the buffer) alive.
  Ref<StorageObj> storage = *s;
  s = absl::StatusOr<Ref<StorageObj>>();
  storage = nullptr;
  EXPECT_EQ(a->Stats().bytes_in_use, 256);
  *t = Tensor();
  EXPECT_EQ(a->Stats().bytes_in_use, 0);
}

TEST(StorageTest, AllocTensorRejectsViewsOutsideTheStorage) {
  Ref<Allocator> a = CreateAllocator(Device::Cpu(), AllocatorType::kNaive);
  absl::StatusOr<Ref<StorageObj>> s = StorageObj::Allocate(a.get(), 64, 64);
  ASSERT_TRUE(s.ok());
  const int64_t shape24[] = {24};  // 96 bytes of float32
  absl::StatusOr<Tensor> t = (*s)->AllocTensor(8, shape24, DataType::Float(32));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(),
              HasSubstr("storage allocation failure: tensor of 96 bytes at offset 8 in a "
                        "64-byte storage"));

  const int64_t shape16[] = {16};  // exactly 64 bytes
  EXPECT_TRUE((*s)->AllocTensor(0, shape16, DataType::Float(32)).ok());
  absl::StatusOr<Tensor> past = (*s)->AllocTensor(4, shape16, DataType::Float(32));
  ASSERT_FALSE(past.ok());
  EXPECT_THAT(past.status().message(), HasSubstr("at offset 4 in a 64-byte storage"));

  absl::StatusOr<Tensor> negative = (*s)->AllocTensor(-8, shape16, DataType::Float(32));
  ASSERT_FALSE(negative.ok());
  EXPECT_THAT(negative.status().message(), HasSubstr("negative offset -8"));

  const int64_t huge_offset = INT64_MAX - 8;
  absl::StatusOr<Tensor> wrap = (*s)->AllocTensor(huge_offset, shape16, DataType::Float(32));
  ASSERT_FALSE(wrap.ok());
  EXPECT_EQ(wrap.status().code(), absl::StatusCode::kInvalidArgument);

  const int64_t overflow_shape[] = {INT64_MAX / 2, 4};
  absl::StatusOr<Tensor> overflow = (*s)->AllocTensor(0, overflow_shape, DataType::Float(32));
  ASSERT_FALSE(overflow.ok());
  EXPECT_THAT(overflow.status().message(), HasSubstr("storage allocation failure"));

  const int64_t negative_dim[] = {-1};
  absl::StatusOr<Tensor> neg = (*s)->AllocTensor(0, negative_dim, DataType::Float(32));
  ASSERT_FALSE(neg.ok());
  EXPECT_EQ(neg.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(MemoryConfigTest, ParsesGoodText) {
  absl::StatusOr<MemoryConfig> empty = MemoryConfig::Parse("");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->default_type, AllocatorType::kPooled);
  EXPECT_TRUE(empty->per_device.empty());

  absl::StatusOr<MemoryConfig> naive = MemoryConfig::Parse("naive");
  ASSERT_TRUE(naive.ok());
  EXPECT_EQ(naive->TypeFor(Device::Cuda(3)), AllocatorType::kNaive);

  absl::StatusOr<MemoryConfig> per = MemoryConfig::Parse("cpu:0=naive, cuda:1=pooled");
  ASSERT_TRUE(per.ok()) << per.status();
  EXPECT_EQ(per->TypeFor(Device::Cpu(0)), AllocatorType::kNaive);
  EXPECT_EQ(per->TypeFor(Device::Cuda(1)), AllocatorType::kPooled);
  EXPECT_EQ(per->TypeFor(Device::Cuda(0)), AllocatorType::kPooled);  // unnamed: default

  absl::StatusOr<MemoryConfig> mixed = MemoryConfig::Parse("naive,cuda:0=pooled");
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  EXPECT_EQ(mixed->TypeFor(Device::Cpu()), AllocatorType::kNaive);
  EXPECT_EQ(mixed->TypeFor(Device::Cuda(0)), AllocatorType::kPooled);
}

TEST(MemoryConfigTest, RejectsBadTextNamingIt) {
  struct Case {
    const char* text;
    const char* fragment;
  };
  for (const Case& c :
       {Case{"arena", "unknown allocator type \"arena\""},
        Case{"cpu:0=arena", "unknown allocator type \"arena\""}, Case{"tpu:0=naive", "tpu:0"},
        Case{"cpu:x=naive", "cpu:x"}, Case{"cpu:0=naive,,cuda:0=pooled", "empty entry"},
        Case{"cpu:0=naive,cpu:0=pooled", "cpu:0 is named twice"},
        Case{"naive,pooled", "more than one default"}}) {
    absl::StatusOr<MemoryConfig> config = MemoryConfig::Parse(c.text);
    ASSERT_FALSE(config.ok()) << c.text;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(config.status().message(), HasSubstr(absl::StrCat("\"", c.text, "\"")));
    EXPECT_THAT(config.status().message(), HasSubstr(c.fragment));
  }
}

TEST(TensorAlignmentTest, IsAtLeast64AndTheElementSize) {
  EXPECT_EQ(TensorAlignment(DataType::Float(32)), 64u);
  EXPECT_EQ(TensorAlignment(DataType::Int(8)), 64u);
  EXPECT_EQ(TensorAlignment(DataType::Float(32, 64)), 256u);
}

}  // namespace
}  // namespace tether::memory
