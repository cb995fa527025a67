// CUDA kernel library formats (cuda_kernel_library.h): the TPTX blob and the
// CUDA manifest (writers for the compiler, defensive readers for the
// runtime) and the launch count evaluator. Plain host code, always built:
// the compiler writes blobs on machines without CUDA. The loader that runs
// them is cuda_kernel_library.cc.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/core/byte_io.h"
#include "runtime/core/error.h"
#include "runtime/cuda/cuda_kernel_format_internal.h"
#include "runtime/cuda/cuda_kernel_library.h"

namespace tether {
namespace cuda_internal {

// ---- Tokens shared by the manifest and the count programs --------------------

// A strict decimal: digits only (a leading '-' when `allow_negative`), no
// '+', no spaces, in range.
bool ParseDecimal(absl::string_view s, bool allow_negative, int64_t* out) {
  absl::string_view digits = s;
  if (allow_negative && !digits.empty() && digits[0] == '-') digits.remove_prefix(1);
  if (digits.empty() || digits.size() > 19) return false;
  for (char c : digits) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return absl::SimpleAtoi(s, out);
}

bool ParseSmallIndex(absl::string_view s, int* out) {
  int64_t v = 0;
  if (s.size() > 6 || !ParseDecimal(s, /*allow_negative=*/false, &v)) return false;
  *out = static_cast<int>(v);
  return true;
}

bool ParseRef(absl::string_view tok, CudaRef* out) {
  if (tok.size() < 2) return false;
  if (tok[0] == 's') {
    out->is_dim = false;
    out->dim = 0;
    return ParseSmallIndex(tok.substr(1), &out->param);
  }
  if (tok[0] != 'd') return false;
  size_t dot = tok.find('.');
  if (dot == absl::string_view::npos) return false;
  out->is_dim = true;
  return ParseSmallIndex(tok.substr(1, dot - 1), &out->param) &&
         ParseSmallIndex(tok.substr(dot + 1), &out->dim);
}

std::string RefName(const CudaRef& r) {
  return r.is_dim ? absl::StrCat("d", r.param, ".", r.dim) : absl::StrCat("s", r.param);
}

// What a ref names, in messages: "argument 0 dim 1", "argument 2".
std::string RefDescription(const CudaRef& r) {
  return r.is_dim ? absl::StrCat("argument ", r.param, " dim ", r.dim)
                  : absl::StrCat("argument ", r.param);
}

namespace {
bool IsPtxFollowChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$';
}
}  // namespace

bool IsPtxIdentifier(absl::string_view s) {
  if (s.empty()) return false;
  char first = s[0];
  if (absl::ascii_isalpha(static_cast<unsigned char>(first))) {
    // ok
  } else if (first == '_' || first == '$' || first == '%') {
    if (s.size() < 2) return false;
  } else {
    return false;
  }
  for (char c : s.substr(1)) {
    if (!IsPtxFollowChar(c)) return false;
  }
  return true;
}

// The names declared with `.entry` in PTX text. A name in a comment may be
// counted too; that only makes the check below more lenient.
absl::flat_hash_set<std::string> PtxEntryNames(absl::string_view ptx) {
  absl::flat_hash_set<std::string> names;
  constexpr absl::string_view kEntry = ".entry";
  size_t pos = 0;
  while ((pos = ptx.find(kEntry, pos)) != absl::string_view::npos) {
    pos += kEntry.size();
    if (pos >= ptx.size() || !absl::ascii_isspace(static_cast<unsigned char>(ptx[pos]))) continue;
    while (pos < ptx.size() && absl::ascii_isspace(static_cast<unsigned char>(ptx[pos]))) ++pos;
    size_t start = pos;
    if (pos < ptx.size() && (ptx[pos] == '%' || ptx[pos] == '$' || ptx[pos] == '_' ||
                             absl::ascii_isalpha(static_cast<unsigned char>(ptx[pos])))) {
      ++pos;
      while (pos < ptx.size() && IsPtxFollowChar(ptx[pos])) ++pos;
    }
    if (pos > start) names.emplace(ptx.substr(start, pos - start));
  }
  return names;
}

}  // namespace cuda_internal
namespace {

using cuda_internal::CudaRef;
using cuda_internal::IsPtxIdentifier;
using cuda_internal::ParseDecimal;
using cuda_internal::ParseRef;
using cuda_internal::ParseSmallIndex;
using cuda_internal::RefDescription;
using cuda_internal::RefName;

enum class CountOp { kNone, kAdd, kSub, kMul, kDiv, kMod, kMin, kMax };

CountOp ParseOp(absl::string_view tok) {
  if (tok == "+") return CountOp::kAdd;
  if (tok == "-") return CountOp::kSub;
  if (tok == "*") return CountOp::kMul;
  if (tok == "/") return CountOp::kDiv;
  if (tok == "%") return CountOp::kMod;
  if (tok == "min") return CountOp::kMin;
  if (tok == "max") return CountOp::kMax;
  return CountOp::kNone;
}

constexpr absl::string_view kManifestMagic = "tether-cuda-manifest 1";
constexpr absl::string_view kBlobMagic = "TPTX";
constexpr uint32_t kBlobVersion = 1;
constexpr uint32_t kMaxImages = 16;
constexpr uint32_t kMinSm = 10;
constexpr uint32_t kMaxSm = 9999;
constexpr int kMaxNdim = 64;
constexpr int kMaxParams = 1 << 16;
constexpr int kMaxLaunches = 1 << 12;
constexpr int kMaxCountTokens = 1 << 12;
// Every entry the compiler writes declares .maxntid 256 (kDeviceBlockThreads):
// a larger block would fail only at launch.
constexpr int kMaxBlock = 256;
constexpr int kMaxScratch = 16;

// ---- The manifest ------------------------------------------------------------

absl::Status LineError(int line, absl::string_view what) {
  return ValueError("cuda kernel manifest line ", line, ": ", what);
}

// A `shared` line where no launch line comes right before it.
absl::Status CheckNotShared(const std::vector<absl::string_view>& words, int line) {
  if (words.empty() || words[0] != "shared") return absl::OkStatus();
  return LineError(line, "a shared line must come right after a launch line");
}

std::vector<absl::string_view> Words(absl::string_view line) {
  return absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
}

// Checks dim spec `spec` of dim `dim` of parameter `param`, given the
// parameters before it (and the dims of this one before `dim`).
absl::Status CheckDimSpec(absl::string_view spec, int param, int dim,
                          const std::vector<CudaParamInfo>& earlier, int line) {
  if (spec == "*" || spec == "?") return absl::OkStatus();
  int64_t value = 0;
  if (ParseDecimal(spec, /*allow_negative=*/false, &value)) return absl::OkStatus();
  CudaRef ref;
  if (spec.size() < 2 || spec[0] != '=' || !ParseRef(spec.substr(1), &ref)) {
    return LineError(line, absl::StrCat("bad dim spec \"", spec, "\" for dim ", dim,
                                        " (expected *, ?, a size or =d<p>.<i> / =s<p>)"));
  }
  bool ok = false;
  if (ref.is_dim) {
    if (ref.param < param) {
      const CudaParamInfo& p = earlier[ref.param];
      ok = p.is_tensor && ref.dim < static_cast<int>(p.dims.size());
    } else if (ref.param == param) {
      ok = ref.dim < dim;
    }
  } else {
    ok = ref.param < param && !earlier[ref.param].is_tensor;
  }
  if (!ok) {
    return LineError(line, absl::StrCat("dim ", dim, " refers to ", RefName(ref),
                                        ", which is not an earlier tensor dim or scalar"));
  }
  return absl::OkStatus();
}

// Checks a count program against the kernel's parameters: every token a
// number, an operator or a reference to an existing dim or scalar, and the
// stack discipline (one value left).
absl::Status CheckCountProgram(const std::vector<std::string>& program,
                               const std::vector<CudaParamInfo>& params, int line) {
  int depth = 0;
  for (const std::string& tok : program) {
    int64_t value = 0;
    CudaRef ref;
    if (ParseOp(tok) != CountOp::kNone) {
      if (depth < 2) {
        return LineError(line, absl::StrCat("count operator ", tok, " has too few operands"));
      }
      --depth;
    } else if (ParseDecimal(tok, /*allow_negative=*/true, &value)) {
      ++depth;
    } else if (ParseRef(tok, &ref)) {
      bool ok = ref.param < static_cast<int>(params.size());
      if (ok) {
        const CudaParamInfo& p = params[ref.param];
        ok = ref.is_dim ? p.is_tensor && ref.dim < static_cast<int>(p.dims.size()) : !p.is_tensor;
      }
      if (!ok) {
        return LineError(line, absl::StrCat("count refers to ", tok,
                                            ", which is not a tensor dim or scalar parameter"));
      }
      ++depth;
    } else {
      return LineError(line, absl::StrCat("bad count token \"", tok, "\""));
    }
  }
  if (!program.empty() && depth != 1) {
    return LineError(line, absl::StrCat("count program leaves ", depth, " values, expected 1"));
  }
  return absl::OkStatus();
}

// The count program that ends a line: words[at] is its length n (at least
// `min_length`), the n words after it its tokens, checked by
// CheckCountProgram. `what` names it in messages ("count", "scratch size").
absl::Status ParseProgram(const std::vector<absl::string_view>& words, size_t at,
                          absl::string_view what, int64_t min_length,
                          const std::vector<CudaParamInfo>& params, int line,
                          std::vector<std::string>* out) {
  int64_t n = 0;
  if (!ParseDecimal(words[at], false, &n) || n < min_length || n > kMaxCountTokens) {
    return LineError(line, absl::StrCat("bad ", what, " length ", words[at]));
  }
  if (words.size() != static_cast<size_t>(n) + at + 1) {
    return LineError(line,
                     absl::StrCat(what, " has ", words.size() - at - 1, " tokens, expected ", n));
  }
  for (size_t t = at + 1; t < words.size(); ++t) out->emplace_back(words[t]);
  return CheckCountProgram(*out, params, line);
}

// ---- The blob ----------------------------------------------------------------

// ---- Counts ------------------------------------------------------------------

absl::Status CountError(const std::vector<std::string>& program, absl::string_view what) {
  return ValueError("count program \"", absl::StrJoin(program, " "), "\": ", what);
}

}  // namespace

// ---- Public API ----------------------------------------------------------------

std::string FormatCudaManifest(const std::vector<CudaKernelInfo>& kernels) {
  std::string out = absl::StrCat(kManifestMagic, "\n");
  for (const CudaKernelInfo& k : kernels) {
    absl::StrAppend(&out, "kernel ", k.name, " ", k.params.size(), " ", k.launches.size());
    if (!k.scratch.empty()) absl::StrAppend(&out, " ", k.scratch.size());
    absl::StrAppend(&out, "\n");
    for (const CudaParamInfo& p : k.params) {
      if (p.is_tensor) {
        absl::StrAppend(&out, "tensor ", p.dtype.ToString(), " ", p.dims.size());
        for (const std::string& d : p.dims) absl::StrAppend(&out, " ", d);
        absl::StrAppend(&out, "\n");
      } else {
        absl::StrAppend(&out, "int64\n");
      }
    }
    for (const CudaScratchInfo& b : k.scratch) {
      absl::StrAppend(&out, "scratch ", b.dtype.ToString(), " ", b.count.size());
      for (const std::string& t : b.count) absl::StrAppend(&out, " ", t);
      absl::StrAppend(&out, "\n");
    }
    for (const CudaLaunchInfo& l : k.launches) {
      absl::StrAppend(&out, "launch ", l.entry, " ", l.block, " ", l.count.size());
      for (const std::string& t : l.count) absl::StrAppend(&out, " ", t);
      absl::StrAppend(&out, "\n");
      if (l.dynamic_shared_bytes != 0) {
        absl::StrAppend(&out, "shared ", l.dynamic_shared_bytes, "\n");
      }
    }
  }
  absl::StrAppend(&out, "end\n");
  return out;
}

absl::StatusOr<std::vector<CudaKernelInfo>> ParseCudaManifest(absl::string_view text) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (lines.empty() || absl::StripTrailingAsciiWhitespace(lines[0]) != kManifestMagic) {
    return ValueError("cuda kernel manifest does not start with \"", kManifestMagic, "\"");
  }
  std::vector<CudaKernelInfo> kernels;
  absl::flat_hash_set<std::string> names;
  size_t i = 1;
  // The next line's words and 1-based number; false past the end.
  auto next = [&](std::vector<absl::string_view>* words, int* line_no) {
    if (i >= lines.size()) return false;
    *line_no = static_cast<int>(i) + 1;
    *words = Words(lines[i]);
    ++i;
    return true;
  };
  // Whether a line is a `shared` line (checked before it is taken).
  auto is_shared = [](absl::string_view text) {
    std::vector<absl::string_view> words = Words(text);
    return !words.empty() && words[0] == "shared";
  };
  bool ended = false;
  std::vector<absl::string_view> w;
  int line = 0;
  while (next(&w, &line)) {
    if (w.size() == 1 && w[0] == "end") {
      ended = true;
      break;
    }
    if (w.empty()) continue;  // blank lines between kernels
    TETHER_RETURN_IF_ERROR(CheckNotShared(w, line));
    if (w[0] != "kernel") return LineError(line, "expected kernel or end");
    if (w.size() != 4 && w.size() != 5) {
      return LineError(line, "expected kernel <name> <parameters> <launches> [<scratch>]");
    }
    CudaKernelInfo k;
    k.name = std::string(w[1]);
    int64_t num_params = 0;
    int64_t num_launches = 0;
    if (!ParseDecimal(w[2], false, &num_params) || num_params > kMaxParams) {
      return LineError(line, absl::StrCat("bad parameter count ", w[2]));
    }
    if (!ParseDecimal(w[3], false, &num_launches) || num_launches < 1 ||
        num_launches > kMaxLaunches) {
      return LineError(
          line, absl::StrCat("bad launch count ", w[3], " (expected 1 to ", kMaxLaunches, ")"));
    }
    int64_t num_scratch = 0;
    if (w.size() == 5 && (!ParseDecimal(w[4], false, &num_scratch) || num_scratch > kMaxScratch)) {
      return LineError(
          line, absl::StrCat("bad scratch count ", w[4], " (expected 0 to ", kMaxScratch, ")"));
    }
    if (!names.insert(k.name).second) {
      return LineError(line, absl::StrCat("duplicate kernel ", k.name));
    }
    const int kernel_line = line;
    for (int64_t p = 0; p < num_params; ++p) {
      if (!next(&w, &line)) {
        return LineError(kernel_line, absl::StrCat("kernel ", k.name, " is missing parameter ", p));
      }
      TETHER_RETURN_IF_ERROR(CheckNotShared(w, line));
      CudaParamInfo info;
      if (w.size() == 1 && w[0] == "int64") {
        k.params.push_back(std::move(info));
        continue;
      }
      if (w.size() < 3 || w[0] != "tensor") {
        return LineError(line, absl::StrCat("expected parameter ", p, " of kernel ", k.name,
                                            ": tensor <dtype> <ndim> <dims...> or int64"));
      }
      absl::StatusOr<DataType> dtype = DataType::Parse(w[1]);
      if (!dtype.ok() || !dtype->IsValidStorageType()) {
        return LineError(line, absl::StrCat("bad dtype ", w[1]));
      }
      info.is_tensor = true;
      info.dtype = *dtype;
      int64_t ndim = 0;
      if (!ParseDecimal(w[2], false, &ndim) || ndim > kMaxNdim) {
        return LineError(line, absl::StrCat("bad ndim ", w[2]));
      }
      if (w.size() != static_cast<size_t>(ndim) + 3) {
        return LineError(line, absl::StrCat("a tensor of ", ndim, " dims needs ", ndim,
                                            " dim specs, got ", w.size() - 3));
      }
      for (int d = 0; d < ndim; ++d) {
        TETHER_RETURN_IF_ERROR(CheckDimSpec(w[3 + d], static_cast<int>(p), d, k.params, line));
        info.dims.emplace_back(w[3 + d]);
      }
      k.params.push_back(std::move(info));
    }
    for (int64_t b = 0; b < num_scratch; ++b) {
      if (!next(&w, &line)) {
        return LineError(kernel_line, absl::StrCat("kernel ", k.name, " is missing scratch ", b));
      }
      TETHER_RETURN_IF_ERROR(CheckNotShared(w, line));
      if (w.size() < 4 || w[0] != "scratch") {
        return LineError(line, absl::StrCat("expected scratch ", b, " of kernel ", k.name,
                                            ": scratch <dtype> <n> <tokens...>"));
      }
      CudaScratchInfo info;
      absl::StatusOr<DataType> dtype = DataType::Parse(w[1]);
      if (!dtype.ok() || !dtype->IsValidStorageType()) {
        return LineError(line, absl::StrCat("bad dtype ", w[1]));
      }
      info.dtype = *dtype;
      TETHER_RETURN_IF_ERROR(
          ParseProgram(w, 2, "scratch size", /*min_length=*/1, k.params, line, &info.count));
      k.scratch.push_back(std::move(info));
    }
    for (int64_t l = 0; l < num_launches; ++l) {
      if (!next(&w, &line)) {
        return LineError(kernel_line, absl::StrCat("kernel ", k.name, " is missing launch ", l));
      }
      TETHER_RETURN_IF_ERROR(CheckNotShared(w, line));
      if (w.size() < 4 || w[0] != "launch") {
        return LineError(line, absl::StrCat("expected launch ", l, " of kernel ", k.name,
                                            ": launch <entry> <block> <n> <tokens...>"));
      }
      CudaLaunchInfo launch;
      launch.entry = std::string(w[1]);
      if (!IsPtxIdentifier(launch.entry)) {
        return LineError(line, absl::StrCat("entry \"", launch.entry, "\" is not a ptx name"));
      }
      int64_t block = 0;
      if (!ParseDecimal(w[2], false, &block) || block < 1 || block > kMaxBlock) {
        return LineError(line,
                         absl::StrCat("bad block size ", w[2], " (expected 1 to ", kMaxBlock, ")"));
      }
      launch.block = static_cast<int>(block);
      TETHER_RETURN_IF_ERROR(
          ParseProgram(w, 3, "count", /*min_length=*/0, k.params, line, &launch.count));
      // An optional `shared <bytes>` line right after it, at most one.
      if (i < lines.size() && is_shared(lines[i])) {
        next(&w, &line);
        if (w.size() != 2 || !ParseDecimal(w[1], false, &launch.dynamic_shared_bytes) ||
            launch.dynamic_shared_bytes < 1 ||
            launch.dynamic_shared_bytes > kCudaMaxDynamicSharedBytes) {
          return LineError(
              line, absl::StrCat("bad shared line \"", absl::StrJoin(w, " "), "\" for launch ",
                                 launch.entry, " (expected shared <bytes>, 1 to ",
                                 kCudaMaxDynamicSharedBytes, ")"));
        }
        if (i < lines.size() && is_shared(lines[i])) {
          return LineError(static_cast<int>(i) + 1,
                           absl::StrCat("a second shared line for launch ", launch.entry));
        }
      }
      k.launches.push_back(std::move(launch));
    }
    kernels.push_back(std::move(k));
  }
  if (!ended) return ValueError("cuda kernel manifest has no end line");
  for (; i < lines.size(); ++i) {
    if (!Words(lines[i]).empty()) {
      return LineError(static_cast<int>(i) + 1, "text after end");
    }
  }
  return kernels;
}

bool IsArchSpecific(const CudaImage& image) {
  // The `.target` directive follows `.version` at the top of the text.
  absl::string_view ptx(image.ptx);
  for (absl::string_view line : absl::StrSplit(ptx.substr(0, 4096), '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, ".target")) continue;
    absl::string_view first = absl::StripAsciiWhitespace(line);
    first = first.substr(0, first.find_first_of(", \t"));
    return absl::StartsWith(first, "sm_") && absl::EndsWith(first, "a");
  }
  return false;
}

const CudaImage* PickCudaImage(const std::vector<CudaImage>& images, int sm) {
  const CudaImage* best = nullptr;
  for (const CudaImage& img : images) {
    if (img.sm <= sm && (img.sm == sm || !IsArchSpecific(img))) best = &img;
  }
  return best;
}

std::string CudaImageNames(const std::vector<CudaImage>& images) {
  std::vector<std::string> names;
  for (const CudaImage& img : images) {
    names.push_back(absl::StrCat("sm_", img.sm, IsArchSpecific(img) ? "a" : ""));
  }
  return absl::StrJoin(names, ", ");
}

std::string WriteCudaBlob(const std::vector<CudaImage>& images, absl::string_view manifest) {
  std::vector<const CudaImage*> sorted;
  sorted.reserve(images.size());
  for (const CudaImage& img : images) sorted.push_back(&img);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const CudaImage* a, const CudaImage* b) { return a->sm < b->sm; });
  ByteWriter w;
  w.Bytes(kBlobMagic);
  w.U32(kBlobVersion);
  w.U32(static_cast<uint32_t>(sorted.size()));
  for (const CudaImage* img : sorted) {
    w.U32(static_cast<uint32_t>(img->sm));
    w.U32(0);
    w.U64(img->ptx.size() + 1);
    w.Bytes(img->ptx);
    w.U8(0);
  }
  w.U64(manifest.size());
  w.Bytes(manifest);
  return std::move(w.out());
}

KernelLibraryBlob MakeCudaKernelLibraryBlob(std::string target,
                                            const std::vector<CudaImage>& images,
                                            absl::string_view manifest) {
  KernelLibraryBlob blob;
  blob.target = std::move(target);
  blob.format = "ptx";
  blob.data = WriteCudaBlob(images, manifest);
  return blob;
}

absl::StatusOr<CudaBlobContents> ReadCudaBlob(absl::string_view data) {
  if (data.size() < kBlobMagic.size() || data.substr(0, kBlobMagic.size()) != kBlobMagic) {
    return ValueError("cuda kernel blob does not start with \"", kBlobMagic, "\" (", data.size(),
                      " bytes)");
  }
  ByteReader in(data.substr(kBlobMagic.size()), "cuda kernel blob");
  absl::StatusOr<uint32_t> version_read = in.U32("version");
  absl::StatusOr<uint32_t> count_read = in.U32("image count");
  if (!version_read.ok() || !count_read.ok()) {
    return ValueError("cuda kernel blob is truncated in its header (", data.size(), " bytes)");
  }
  const uint32_t version = *version_read;
  const uint32_t count = *count_read;
  if (version != kBlobVersion) {
    return ValueError("cuda kernel blob has version ", version, ", this runtime reads version ",
                      kBlobVersion);
  }
  if (count < 1 || count > kMaxImages) {
    return ValueError("cuda kernel blob has ", count, " images, expected 1 to ", kMaxImages);
  }
  CudaBlobContents out;
  for (uint32_t i = 0; i < count; ++i) {
    absl::StatusOr<uint32_t> sm_read = in.U32("image sm");
    absl::StatusOr<uint32_t> reserved_read = in.U32("image flags");
    absl::StatusOr<uint64_t> size_read = in.U64("image size");
    if (!sm_read.ok() || !reserved_read.ok() || !size_read.ok()) {
      return ValueError("cuda kernel blob is truncated in the header of image ", i);
    }
    const uint32_t sm = *sm_read;
    const uint32_t reserved = *reserved_read;
    const uint64_t size = *size_read;
    if (sm < kMinSm || sm > kMaxSm) {
      return ValueError("cuda kernel blob image ", i, " is for sm_", sm, ", expected sm_", kMinSm,
                        " to sm_", kMaxSm);
    }
    if (reserved != 0) {
      return ValueError("cuda kernel blob image ", i, " (sm_", sm, ") has reserved field ",
                        reserved, ", expected 0");
    }
    if (!out.images.empty() && static_cast<int>(sm) <= out.images.back().sm) {
      return ValueError("cuda kernel blob images are not sorted by sm and distinct: sm_", sm,
                        " follows sm_", out.images.back().sm);
    }
    absl::StatusOr<absl::string_view> ptx_read =
        size == 0 ? absl::InvalidArgumentError("empty") : in.Bytes(size, "ptx");
    if (!ptx_read.ok()) {
      return ValueError("cuda kernel blob image ", i, " (sm_", sm, ") has size ", size, "; ",
                        in.remaining(), " bytes are left in the blob");
    }
    absl::string_view ptx = *ptx_read;
    if (ptx.back() != '\0') {
      return ValueError("cuda kernel blob: the ptx for sm_", sm, " is not NUL-terminated");
    }
    ptx.remove_suffix(1);
    if (size_t nul = ptx.find('\0'); nul != absl::string_view::npos) {
      return ValueError("cuda kernel blob: the ptx for sm_", sm, " has a NUL byte at offset ", nul);
    }
    out.images.push_back(CudaImage{static_cast<int>(sm), std::string(ptx)});
  }
  absl::StatusOr<uint64_t> manifest_size = in.U64("manifest size");
  if (!manifest_size.ok()) {
    return ValueError("cuda kernel blob is truncated before its manifest size");
  }
  absl::StatusOr<absl::string_view> manifest = in.Bytes(*manifest_size, "manifest");
  if (!manifest.ok()) {
    return ValueError("cuda kernel blob has a manifest of ", *manifest_size, " bytes; ",
                      in.remaining(), " bytes are left in the blob");
  }
  if (in.remaining() != 0) {
    return ValueError("cuda kernel blob has ", in.remaining(), " trailing bytes");
  }
  out.manifest = std::string(*manifest);
  return out;
}

absl::StatusOr<int64_t> EvalCudaCount(const std::vector<std::string>& program,
                                      const CudaCountArgs& args) {
  if (program.empty()) return CountError(program, "empty program (the count is unknown)");
  absl::InlinedVector<int64_t, 16> stack;
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  for (const std::string& tok : program) {
    CountOp op = ParseOp(tok);
    int64_t value = 0;
    CudaRef ref;
    if (op == CountOp::kNone) {
      if (ParseDecimal(tok, /*allow_negative=*/true, &value)) {
        stack.push_back(value);
      } else if (ParseRef(tok, &ref)) {
        if (ref.is_dim) {
          if (static_cast<size_t>(ref.param) >= args.dims.size() ||
              static_cast<size_t>(ref.dim) >= args.dims[ref.param].size()) {
            return CountError(program, absl::StrCat("reference ", tok, " is out of range"));
          }
          stack.push_back(args.dims[ref.param][ref.dim]);
        } else {
          if (static_cast<size_t>(ref.param) >= args.scalars.size()) {
            return CountError(program, absl::StrCat("reference ", tok, " is out of range"));
          }
          stack.push_back(args.scalars[ref.param]);
        }
      } else {
        return CountError(program, absl::StrCat("bad token \"", tok, "\""));
      }
      continue;
    }
    if (stack.size() < 2) {
      return CountError(program, absl::StrCat("operator ", tok, " has too few operands"));
    }
    const int64_t b = stack.back();
    stack.pop_back();
    const int64_t a = stack.back();
    int64_t result = 0;
    bool overflow = false;
    switch (op) {
      case CountOp::kAdd:
        overflow = __builtin_add_overflow(a, b, &result);
        break;
      case CountOp::kSub:
        overflow = __builtin_sub_overflow(a, b, &result);
        break;
      case CountOp::kMul:
        overflow = __builtin_mul_overflow(a, b, &result);
        break;
      case CountOp::kDiv:
      case CountOp::kMod:
        if (b == 0) {
          return CountError(program, absl::StrCat("division by zero (", a, " ", tok, " 0)"));
        }
        if (a == kMin && b == -1) {
          overflow = op == CountOp::kDiv;
          result = 0;
          break;
        }
        if (op == CountOp::kDiv) {
          result = a / b;
          if (a % b != 0 && ((a < 0) != (b < 0))) --result;  // floor
        } else {
          result = a % b;
          if (result != 0 && ((result < 0) != (b < 0))) result += b;  // sign of the divisor
        }
        break;
      case CountOp::kMin:
        result = std::min(a, b);
        break;
      case CountOp::kMax:
        result = std::max(a, b);
        break;
      case CountOp::kNone:
        break;
    }
    if (overflow) {
      return CountError(program, absl::StrCat("overflow in ", a, " ", tok, " ", b));
    }
    stack.back() = result;
  }
  if (stack.size() != 1) {
    return CountError(program, absl::StrCat("leaves ", stack.size(), " values, expected 1"));
  }
  return stack.back();
}

}  // namespace tether
