// Sequences and optionals whose structure only the run time knows, run by
// the VM on the host as packed functions (R.call_pure_packed). A sequence is
// a Tuple value of any length (its fields tensors); an optional is its value,
// or None when empty (docs/design/vm.md, "Sequences and optionals"):
//
//   vm.builtin.sequence_length(seq) -> Shape [n]: the number of tensors (a
//     shape, so the compiler reads it into a symbolic var with a match cast,
//     and no host tensor reaches a device kernel).
//   vm.builtin.sequence_at(seq, pos) -> the tensor at `pos`, a one-element
//     integer tensor (negative counts from the back).
//   vm.builtin.sequence_insert(seq, x[, pos]) -> a new sequence with x
//     before `pos` (at the end without it; pos may equal the length).
//   vm.builtin.sequence_erase(seq[, pos]) -> a new sequence without the
//     tensor at `pos` (the last without it).
//   vm.builtin.sequence_concat(seq, axis, new_axis) -> the tensors
//     concatenated along `axis` (an int in range for the result), stacked
//     on a new axis when new_axis is 1 (ONNX ConcatFromSequence). They must
//     agree in dtype, rank and every other dim; the result goes to the first
//     tensor's device.
//   vm.builtin.split_to_sequence(x, axis, split, keepdims) -> a sequence of
//     the pieces of x along `axis` (ONNX SplitToSequence): `split` None gives
//     pieces of 1 (squeezed when keepdims is 0), a one-element tensor pieces
//     of that size (the last smaller), a 1-D tensor those sizes (which must
//     be non-negative and sum to the axis). The pieces go to x's device.
//   vm.builtin.optional_has_element(x) -> Shape [1] when x holds a value,
//     Shape [0] when it is None.
//   vm.builtin.optional_get_element(x) -> x; INVALID_ARGUMENT when None.
//
// A position out of range, a value that is not a sequence and tensors that
// do not concatenate are INVALID_ARGUMENT naming the builtin.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/core/registry.h"
#include "runtime/core/tensor.h"
#include "runtime/vm/local_vm.h"

namespace tether::vm {
namespace {

absl::StatusOr<const std::vector<Value>*> Fields(const Value& seq, absl::string_view name) {
  if (!seq.is_tuple()) {
    return ValueError(name, ": expected a sequence (a Tuple), got ", seq.TypeName());
  }
  return &seq.AsRef<TupleObj>()->fields;
}

// The position `pos` (a one-element integer tensor, or an int) within
// [-n, n + extra), made non-negative.
absl::StatusOr<int64_t> Position(const Value& pos, size_t size, int64_t extra,
                                 absl::string_view name) {
  int64_t p = 0;
  if (pos.is_int()) {
    p = pos.int_value();
  } else if (pos.is_tensor()) {
    Tensor t(pos.AsRef<TensorObj>());
    const DataType dt = t->dtype();
    if (t->NumElements() != 1 || dt.lanes() != 1 || !(dt.is_int() || dt.is_uint()) ||
        dt.bits() > 64) {
      return ValueError(name, ": the position must be one integer, got ", t.ToString());
    }
    Tensor host = t;
    if (t->device().type != kDLCPU) {
      TETHER_ASSIGN_OR_RETURN(host, t.CopyTo(Device::Cpu()));
    }
    const char* p8 = static_cast<const char*>(host->element_data());
    switch (dt.bits()) {
      case 8:
        p = dt.is_int() ? int64_t{*reinterpret_cast<const int8_t*>(p8)}
                        : int64_t{*reinterpret_cast<const uint8_t*>(p8)};
        break;
      case 16: {
        int16_t v;
        std::memcpy(&v, p8, sizeof(v));
        p = v;
        break;
      }
      case 32: {
        int32_t v;
        std::memcpy(&v, p8, sizeof(v));
        p = v;
        break;
      }
      default:
        std::memcpy(&p, p8, sizeof(p));
    }
  } else {
    return ValueError(name, ": the position must be an integer tensor, got ", pos.TypeName());
  }
  const int64_t n = static_cast<int64_t>(size);
  if (p < -n || p >= n + extra) {
    return ValueError(name, ": position ", p, " is out of range for a sequence of ", n,
                      " tensors (valid: ", -n, " to ", n + extra - 1, ")");
  }
  return p < 0 ? p + n : p;
}

absl::StatusOr<Value> SequenceLength(ArgSpan args) {
  constexpr absl::string_view kName = "vm.builtin.sequence_length";
  if (args.size() != 1) return ValueError(kName, " expects 1 argument, got ", args.size());
  TETHER_ASSIGN_OR_RETURN(const std::vector<Value>* fields, Fields(args[0], kName));
  return MakeShape(ShapeObj::Dims{static_cast<int64_t>(fields->size())});
}

absl::StatusOr<Value> SequenceAt(ArgSpan args) {
  constexpr absl::string_view kName = "vm.builtin.sequence_at";
  if (args.size() != 2) return ValueError(kName, " expects 2 arguments, got ", args.size());
  TETHER_ASSIGN_OR_RETURN(const std::vector<Value>* fields, Fields(args[0], kName));
  TETHER_ASSIGN_OR_RETURN(int64_t at, Position(args[1], fields->size(), 0, kName));
  return (*fields)[static_cast<size_t>(at)];
}

absl::StatusOr<Value> SequenceInsert(ArgSpan args) {
  constexpr absl::string_view kName = "vm.builtin.sequence_insert";
  if (args.size() != 2 && args.size() != 3) {
    return ValueError(kName, " expects 2 or 3 arguments, got ", args.size());
  }
  TETHER_ASSIGN_OR_RETURN(const std::vector<Value>* fields, Fields(args[0], kName));
  if (!args[1].is_tensor())
    return ValueError(kName, ": expected a tensor, got ", args[1].TypeName());
  int64_t at = static_cast<int64_t>(fields->size());
  if (args.size() == 3) {
    TETHER_ASSIGN_OR_RETURN(at, Position(args[2], fields->size(), 1, kName));
  }
  std::vector<Value> out = *fields;
  out.insert(out.begin() + at, args[1]);
  return MakeTuple(std::move(out));
}

absl::StatusOr<Value> SequenceErase(ArgSpan args) {
  constexpr absl::string_view kName = "vm.builtin.sequence_erase";
  if (args.size() != 1 && args.size() != 2) {
    return ValueError(kName, " expects 1 or 2 arguments, got ", args.size());
  }
  TETHER_ASSIGN_OR_RETURN(const std::vector<Value>* fields, Fields(args[0], kName));
  if (fields->empty()) return ValueError(kName, ": cannot erase from an empty sequence");
  int64_t at = static_cast<int64_t>(fields->size()) - 1;
  if (args.size() == 2) {
    TETHER_ASSIGN_OR_RETURN(at, Position(args[1], fields->size(), 0, kName));
  }
  std::vector<Value> out = *fields;
  out.erase(out.begin() + at);
  return MakeTuple(std::move(out));
}

absl::StatusOr<Value> SequenceConcat(ArgSpan args) {
  constexpr absl::string_view kName = "vm.builtin.sequence_concat";
  if (args.size() != 3 || !args[1].is_int() || !args[2].is_int()) {
    return ValueError(kName, " expects (sequence, axis, new_axis)");
  }
  TETHER_ASSIGN_OR_RETURN(const std::vector<Value>* fields, Fields(args[0], kName));
  if (fields->empty()) return ValueError(kName, ": concat of an empty sequence");
  const int64_t axis = args[1].int_value();
  const bool new_axis = args[2].int_value() != 0;
  std::vector<Tensor> parts;
  for (const Value& f : *fields) {
    if (!f.is_tensor()) return ValueError(kName, ": sequence element is a ", f.TypeName());
    Tensor t(f.AsRef<TensorObj>());
    if (t->device().type != kDLCPU) {
      TETHER_ASSIGN_OR_RETURN(t, t.CopyTo(Device::Cpu()));
    }
    parts.push_back(t);
  }
  const Tensor& first = parts[0];
  // Each part viewed as [outer, len, inner] around the axis.
  std::vector<int64_t> shape(first->shape().begin(), first->shape().end());
  if (new_axis) shape.insert(shape.begin() + std::min<int64_t>(axis, shape.size()), 1);
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (axis < 0 || axis >= rank) {
    return ValueError(kName, ": axis ", axis, " out of range for tensors ", first.ToString());
  }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= shape[static_cast<size_t>(d)];
  int64_t total = 0;
  std::vector<int64_t> lens;
  for (size_t k = 0; k < parts.size(); ++k) {
    const Tensor& t = parts[k];
    std::vector<int64_t> s(t->shape().begin(), t->shape().end());
    if (new_axis) s.insert(s.begin() + std::min<int64_t>(axis, s.size()), 1);
    bool ok = t->dtype() == first->dtype() && s.size() == shape.size();
    for (size_t d = 0; ok && d < s.size(); ++d) {
      ok = static_cast<int64_t>(d) == axis || s[d] == shape[d];
    }
    if (!ok) {
      return ValueError(kName, ": sequence element ", k, " ", t.ToString(),
                        " does not concatenate with element 0 ", first.ToString(), " along axis ",
                        axis, new_axis ? " (new axis)" : "");
    }
    lens.push_back(s[static_cast<size_t>(axis)]);
    total += lens.back();
  }
  std::vector<int64_t> out_shape = shape;
  out_shape[static_cast<size_t>(axis)] = total;
  TETHER_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(out_shape, first->dtype(), Device::Cpu()));
  const int64_t elem = first->dtype().bytes();
  char* dst = static_cast<char*>(out->element_data());
  for (int64_t o = 0; o < outer; ++o) {
    for (size_t k = 0; k < parts.size(); ++k) {
      const int64_t row = lens[k] * inner * elem;
      std::memcpy(dst, static_cast<const char*>(parts[k]->element_data()) + o * row,
                  static_cast<size_t>(row));
      dst += row;
    }
  }
  Tensor like(fields->front().AsRef<TensorObj>());
  if (like->device().type == kDLCPU) return Value(out);
  TETHER_ASSIGN_OR_RETURN(Tensor moved, out.CopyTo(like->device()));
  return Value(moved);
}

absl::StatusOr<Value> SplitToSequence(ArgSpan args) {
  constexpr absl::string_view kName = "vm.builtin.split_to_sequence";
  if (args.size() != 4 || !args[0].is_tensor() || !args[1].is_int() || !args[3].is_int() ||
      !(args[2].is_none() || args[2].is_tensor())) {
    return ValueError(kName, " expects (tensor, axis, split or None, keepdims)");
  }
  Tensor x(args[0].AsRef<TensorObj>());
  const Device device = x->device();
  if (device.type != kDLCPU) {
    TETHER_ASSIGN_OR_RETURN(x, x.CopyTo(Device::Cpu()));
  }
  const int64_t axis = args[1].int_value();
  const bool keepdims = args[3].int_value() != 0;
  std::vector<int64_t> shape(x->shape().begin(), x->shape().end());
  if (axis < 0 || axis >= static_cast<int64_t>(shape.size())) {
    return ValueError(kName, ": axis ", axis, " out of range for ", x.ToString());
  }
  const int64_t len = shape[static_cast<size_t>(axis)];
  std::vector<int64_t> sizes;
  if (args[2].is_none()) {
    sizes.assign(static_cast<size_t>(len), 1);
  } else {
    Tensor split(args[2].AsRef<TensorObj>());
    if (split->device().type != kDLCPU) {
      TETHER_ASSIGN_OR_RETURN(split, split.CopyTo(Device::Cpu()));
    }
    const DataType dt = split->dtype();
    if (!(dt == DataType::Int(64) || dt == DataType::Int(32)) || split->ndim() > 1) {
      return ValueError(kName, ": split must be an int32 or int64 scalar or 1-D tensor, got ",
                        split.ToString());
    }
    std::vector<int64_t> values;
    for (int64_t i = 0; i < split->NumElements(); ++i) {
      values.push_back(dt == DataType::Int(64)
                           ? static_cast<const int64_t*>(split->element_data())[i]
                           : static_cast<const int32_t*>(split->element_data())[i]);
    }
    if (split->ndim() == 0) {
      const int64_t chunk = values[0];
      if (chunk <= 0) return ValueError(kName, ": split ", chunk, " is not positive");
      for (int64_t done = 0; done < len; done += chunk)
        sizes.push_back(std::min(chunk, len - done));
    } else {
      int64_t sum = 0;
      for (int64_t v : values) {
        if (v < 0) return ValueError(kName, ": split size ", v, " is negative");
        sum += v;
      }
      if (sum != len) {
        return ValueError(kName, ": split sizes sum to ", sum, ", but axis ", axis, " has size ",
                          len);
      }
      sizes = values;
    }
  }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t elem = x->dtype().bytes();
  const bool squeeze = !keepdims && args[2].is_none();
  std::vector<Value> pieces;
  int64_t offset = 0;
  for (int64_t size : sizes) {
    std::vector<int64_t> piece_shape = shape;
    piece_shape[static_cast<size_t>(axis)] = size;
    if (squeeze) piece_shape.erase(piece_shape.begin() + axis);
    TETHER_ASSIGN_OR_RETURN(Tensor piece, Tensor::Empty(piece_shape, x->dtype(), Device::Cpu()));
    const int64_t row = size * inner * elem;
    for (int64_t o = 0; o < outer; ++o) {
      std::memcpy(static_cast<char*>(piece->element_data()) + o * row,
                  static_cast<const char*>(x->element_data()) + (o * len + offset) * inner * elem,
                  static_cast<size_t>(row));
    }
    offset += size;
    if (device.type != kDLCPU) {
      TETHER_ASSIGN_OR_RETURN(piece, piece.CopyTo(device));
    }
    pieces.push_back(Value(piece));
  }
  return MakeTuple(std::move(pieces));
}

absl::StatusOr<Value> OptionalHasElement(ArgSpan args) {
  if (args.size() != 1) {
    return ValueError("vm.builtin.optional_has_element expects 1 argument, got ", args.size());
  }
  return MakeShape(ShapeObj::Dims{args[0].is_none() ? 0 : 1});
}

absl::StatusOr<Value> OptionalGetElement(ArgSpan args) {
  constexpr absl::string_view kName = "vm.builtin.optional_get_element";
  if (args.size() != 1) return ValueError(kName, " expects 1 argument, got ", args.size());
  if (args[0].is_none()) return ValueError(kName, ": the optional is empty");
  return args[0];
}

void Check(absl::Status s) {
  if (!s.ok()) internal::DieOnRegistrationError(s);
}

}  // namespace

void RegisterSequenceOps() {
  Check(Registry::RegisterPacked("vm.builtin.sequence_length", SequenceLength));
  Check(Registry::RegisterPacked("vm.builtin.sequence_at", SequenceAt));
  Check(Registry::RegisterPacked("vm.builtin.sequence_insert", SequenceInsert));
  Check(Registry::RegisterPacked("vm.builtin.sequence_erase", SequenceErase));
  Check(Registry::RegisterPacked("vm.builtin.sequence_concat", SequenceConcat));
  Check(Registry::RegisterPacked("vm.builtin.split_to_sequence", SplitToSequence));
  Check(Registry::RegisterPacked("vm.builtin.optional_has_element", OptionalHasElement));
  Check(Registry::RegisterPacked("vm.builtin.optional_get_element", OptionalGetElement));
}

}  // namespace tether::vm
