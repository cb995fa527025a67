// The vm.builtin.* functions that compiled bytecode calls: storage and tensor
// allocation, value plumbing, closures, and the shape heap and checks that
// guard every function entry, plus the shape programs
// (vm.builtin.compute_shape_heap) that evaluate symbolic shape expressions
// such as n * 4 at run time (docs/design/compiler-pipeline.md). Semantics follow §3 of
// tvm-semantics.md; every bad argument is a Status, never a crash.
#include <algorithm>
#include <climits>
#include <cstring>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/core/registry.h"
#include "runtime/device/device_api.h"
#include "runtime/memory/allocator.h"
#include "runtime/vm/closure.h"
#include "runtime/vm/local_vm.h"
#include "runtime/vm/shape_program.h"

namespace tether::vm {
namespace {

// Codes of match_shape / make_shape, as the reference's builtin.h.
enum MatchShapeCode : int64_t {
  kAssertEqualToImm = 0,
  kStoreToHeap = 1,
  kNoOp = 2,
  kAssertEqualToLoad = 3
};
enum MakeShapeCode : int64_t { kUseImm = 0, kLoadShape = 1 };

absl::StatusOr<LocalVirtualMachine*> VmContext(const Value& v, absl::string_view builtin) {
  if (!v.is_opaque_ptr() || v.opaque_ptr() == nullptr) {
    return TypeError(builtin, ": first argument must be the vm context (%vm), got ", v.TypeName());
  }
  return static_cast<LocalVirtualMachine*>(v.opaque_ptr());
}

absl::StatusOr<std::span<const int64_t>> ShapeDims(const Value& v, absl::string_view what) {
  if (v.is_shape()) {
    const auto& dims = v.AsRef<ShapeObj>()->dims;
    return std::span<const int64_t>(dims.data(), dims.size());
  }
  if (v.is_tensor()) return v.AsRef<TensorObj>()->shape();
  return TypeError(what, ": expected a Tensor or Shape, got ", v.TypeName());
}

std::string ErrorPrefix(const Value& err_ctx) {
  return err_ctx.is_string() && !err_ctx.string_value().empty()
             ? absl::StrCat(err_ctx.string_value(), " ")
             : std::string();
}

absl::StatusOr<int64_t> IntArg(const Value& v, absl::string_view builtin, absl::string_view what) {
  if (v.is_int()) return v.int_value();
  return TypeError(builtin, ": ", what, " must be an int, got ", v.TypeName());
}

// The int64 shape heap: a CPU tensor (or None when no slot is ever used).
absl::StatusOr<std::span<int64_t>> HeapSlots(const Value& heap, absl::string_view builtin) {
  if (heap.is_none()) return std::span<int64_t>();
  if (!heap.is_tensor())
    return TypeError(builtin, ": shape heap must be a Tensor, got ", heap.TypeName());
  auto t = heap.AsRef<TensorObj>();
  if (t->dtype() != DataType::Int(64) || t->device().type != kDLCPU || t->ndim() != 1) {
    return TypeError(builtin, ": shape heap must be a 1-d int64 cpu tensor, got ",
                     Tensor(t).ToString());
  }
  return std::span<int64_t>(static_cast<int64_t*>(t->element_data()),
                            static_cast<size_t>(t->shape()[0]));
}

absl::Status CheckSlot(std::span<int64_t> heap, int64_t slot, absl::string_view builtin) {
  if (slot < 0 || static_cast<size_t>(slot) >= heap.size()) {
    return IndexError(builtin, ": shape heap slot ", slot, " out of range (heap of ", heap.size(),
                      ")");
  }
  return absl::OkStatus();
}

absl::StatusOr<Value> MatchShape(ArgSpan args) {
  constexpr absl::string_view kName = "vm.builtin.match_shape";
  if (args.size() < 4) return ValueError(kName, " expects at least 4 arguments, got ", args.size());
  TETHER_ASSIGN_OR_RETURN(auto dims, ShapeDims(args[0], kName));
  TETHER_ASSIGN_OR_RETURN(auto heap, HeapSlots(args[1], kName));
  TETHER_ASSIGN_OR_RETURN(int64_t ndim, IntArg(args[2], kName, "ndim"));
  if (ndim < 0 || args.size() != static_cast<size_t>(4 + 2 * ndim)) {
    return ValueError(kName, ": ", args.size(), " arguments do not fit ndim ", ndim);
  }
  std::string ctx = ErrorPrefix(args.back());
  if (static_cast<int64_t>(dims.size()) != ndim) {
    return ValueError(ctx, "match_cast shape size mismatch: expected ndim ", ndim, ", got ",
                      dims.size());
  }
  for (int64_t i = 0; i < ndim; ++i) {
    TETHER_ASSIGN_OR_RETURN(int64_t code, IntArg(args[3 + 2 * i], kName, "code"));
    TETHER_ASSIGN_OR_RETURN(int64_t val, IntArg(args[4 + 2 * i], kName, "value"));
    int64_t d = dims[static_cast<size_t>(i)];
    switch (code) {
      case kAssertEqualToImm:
        if (d != val)
          return ValueError(ctx, "shape[", i, "] mismatch to specified constant: expected ", val,
                            ", got ", d);
        break;
      case kStoreToHeap:
        TETHER_RETURN_IF_ERROR(CheckSlot(heap, val, kName));
        heap[static_cast<size_t>(val)] = d;
        break;
      case kNoOp:
        break;
      case kAssertEqualToLoad:
        TETHER_RETURN_IF_ERROR(CheckSlot(heap, val, kName));
        if (d != heap[static_cast<size_t>(val)]) {
          return ValueError(ctx, "shape[", i, "] mismatch to a previous populated value: expected ",
                            heap[static_cast<size_t>(val)], ", got ", d);
        }
        break;
      default:
        return ValueError(kName, ": unknown match code ", code);
    }
  }
  return Value();
}

absl::StatusOr<Value> MakeShapeFromHeap(ArgSpan args) {
  constexpr absl::string_view kName = "vm.builtin.make_shape";
  if (args.size() < 2) return ValueError(kName, " expects at least 2 arguments, got ", args.size());
  TETHER_ASSIGN_OR_RETURN(auto heap, HeapSlots(args[0], kName));
  TETHER_ASSIGN_OR_RETURN(int64_t ndim, IntArg(args[1], kName, "ndim"));
  if (ndim < 0 || args.size() != static_cast<size_t>(2 + 2 * ndim)) {
    return ValueError(kName, ": ", args.size(), " arguments do not fit ndim ", ndim);
  }
  ShapeObj::Dims dims;
  for (int64_t i = 0; i < ndim; ++i) {
    TETHER_ASSIGN_OR_RETURN(int64_t code, IntArg(args[2 + 2 * i], kName, "code"));
    TETHER_ASSIGN_OR_RETURN(int64_t val, IntArg(args[3 + 2 * i], kName, "value"));
    if (code == kUseImm) {
      dims.push_back(val);
    } else if (code == kLoadShape) {
      TETHER_RETURN_IF_ERROR(CheckSlot(heap, val, kName));
      dims.push_back(heap[static_cast<size_t>(val)]);
    } else {
      return ValueError(kName, ": unknown make code ", code);
    }
  }
  return MakeShape(std::move(dims));
}

absl::StatusOr<Value> CheckTensorInfo(ArgSpan args) {
  constexpr absl::string_view kName = "vm.builtin.check_tensor_info";
  if (args.size() != 3 && args.size() != 4)
    return ValueError(kName, " expects 3 or 4 arguments, got ", args.size());
  std::string ctx = ErrorPrefix(args.back());
  if (!args[0].is_tensor()) return TypeError(ctx, "expect a Tensor but get ", args[0].TypeName());
  auto t = args[0].AsRef<TensorObj>();
  TETHER_ASSIGN_OR_RETURN(int64_t ndim, IntArg(args[1], kName, "ndim"));
  if (ndim != -1 && ndim != t->ndim()) {
    return ValueError(ctx, "expect Tensor with ndim ", ndim, " but get ", t->ndim());
  }
  if (args.size() == 4 && !args[2].is_none()) {
    DataType want;
    if (!ValueTraits<DataType>::From(args[2], &want))
      return TypeError(kName, ": dtype must be a DataType");
    if (want != t->dtype()) {
      return ValueError(ctx, "expect Tensor with dtype ", want.ToString(), " but get ",
                        t->dtype().ToString());
    }
  }
  return Value();
}

absl::StatusOr<Value> CheckShapeInfo(const Value& arg, int64_t ndim, const Value& err_ctx) {
  std::string ctx = ErrorPrefix(err_ctx);
  if (!arg.is_shape()) return TypeError(ctx, "expect a Shape but get ", arg.TypeName());
  int64_t got = static_cast<int64_t>(arg.AsRef<ShapeObj>()->dims.size());
  if (ndim != -1 && ndim != got)
    return ValueError(ctx, "expect Shape with ndim ", ndim, " but get ", got);
  return Value();
}

absl::StatusOr<Value> CheckTupleInfo(const Value& arg, int64_t size, const Value& err_ctx) {
  std::string ctx = ErrorPrefix(err_ctx);
  if (!arg.is_tuple()) return TypeError(ctx, "expect a Tuple but get ", arg.TypeName());
  int64_t got = static_cast<int64_t>(arg.AsRef<TupleObj>()->fields.size());
  if (size != -1 && size != got)
    return ValueError(ctx, "expect a Tuple with ", size, " elements but get ", got);
  return Value();
}

absl::StatusOr<Value> ReadIfCond(const Value& v) {
  if (v.is_bool()) return v.bool_value();
  if (v.is_int()) return v.int_value() != 0;
  if (!v.is_tensor())
    return TypeError("vm.builtin.read_if_cond: expected a bool, int or Tensor, got ", v.TypeName());
  Tensor t(v.AsRef<TensorObj>());
  DataType dt = t->dtype();
  if (t->NumElements() != 1 || dt.lanes() != 1 || !(dt.is_int() || dt.is_uint() || dt.is_bool()) ||
      dt.bits() > 64) {
    return TypeError("vm.builtin.read_if_cond: expected a 1-element int, uint or bool tensor, got ",
                     t.ToString());
  }
  uint64_t raw = 0;
  TETHER_RETURN_IF_ERROR(t.CopyToBytes(&raw, static_cast<size_t>(dt.bytes())));
  return raw != 0;
}

absl::StatusOr<Value> AllocStorage(ArgSpan args) {
  constexpr absl::string_view kName = "vm.builtin.alloc_storage";
  if (args.size() != 5)
    return ValueError(kName,
                      " expects 5 arguments (vm, size, device_index, dtype_hint, scope), got ",
                      args.size());
  TETHER_ASSIGN_OR_RETURN(LocalVirtualMachine * vm, VmContext(args[0], kName));
  TETHER_ASSIGN_OR_RETURN(auto size, ShapeDims(args[1], kName));
  if (!args[1].is_shape() || size.size() != 1 || size[0] < 0) {
    return ValueError(kName, ": size must be a 1-d Shape of non-negative bytes, got ",
                      args[1].ToString());
  }
  TETHER_ASSIGN_OR_RETURN(int64_t index, IntArg(args[2], kName, "device_index"));
  if (vm->devices().empty())
    return PreconditionError(kName, ": did you forget to init the VirtualMachine with devices?");
  if (index == -1) index = static_cast<int64_t>(vm->host_index());
  if (index < 0 || static_cast<size_t>(index) >= vm->devices().size()) {
    return IndexError(kName, ": device index ", index, " out of range (", vm->devices().size(),
                      " devices)");
  }
  DataType hint;
  if (!ValueTraits<DataType>::From(args[3], &hint))
    return TypeError(kName, ": dtype_hint must be a DataType");
  if (args[4].is_string() && args[4].string_value() != "global") {
    return absl::UnimplementedError(
        absl::StrCat(kName, ": memory scope \"", args[4].string_value(), "\" is not supported"));
  }
  TETHER_ASSIGN_OR_RETURN(
      Ref<memory::StorageObj> storage,
      memory::StorageObj::Allocate(vm->allocator(static_cast<size_t>(index)),
                                   static_cast<size_t>(size[0]), memory::TensorAlignment(hint)));
  return Value(storage);
}

absl::StatusOr<Value> AllocTensor(ArgSpan args) {
  constexpr absl::string_view kName = "vm.builtin.alloc_tensor";
  if (args.size() != 4 && args.size() != 5)
    return ValueError(kName, " expects 4 or 5 arguments, got ", args.size());
  Ref<memory::StorageObj> storage;
  if (!ValueTraits<Ref<memory::StorageObj>>::From(args[0], &storage)) {
    return TypeError(kName, ": first argument must be a storage, got ", args[0].TypeName());
  }
  TETHER_ASSIGN_OR_RETURN(int64_t offset, IntArg(args[1], kName, "offset"));
  if (!args[2].is_shape())
    return TypeError(kName, ": shape must be a Shape, got ", args[2].TypeName());
  const auto& dims = args[2].AsRef<ShapeObj>()->dims;
  DataType dtype;
  if (!ValueTraits<DataType>::From(args[3], &dtype))
    return TypeError(kName, ": dtype must be a DataType");
  TETHER_ASSIGN_OR_RETURN(Tensor t,
                          storage->AllocTensor(offset, {dims.data(), dims.size()}, dtype));
  return Value(t);
}

// A tensor of `shape` and `dtype` from the allocator of device `device_index`
// (-1: the host): what R.builtin.alloc_tensor lowers to when no memory plan
// placed the tensor in a storage.
absl::StatusOr<Value> AllocTensorForShape(ArgSpan args) {
  constexpr absl::string_view kName = "vm.builtin.alloc_tensor_for_shape";
  if (args.size() != 4)
    return ValueError(kName, " expects 4 arguments (vm, shape, dtype, device_index), got ",
                      args.size());
  TETHER_ASSIGN_OR_RETURN(LocalVirtualMachine * vm, VmContext(args[0], kName));
  if (!args[1].is_shape())
    return TypeError(kName, ": shape must be a Shape, got ", args[1].TypeName());
  const auto& dims = args[1].AsRef<ShapeObj>()->dims;
  DataType dtype;
  if (!ValueTraits<DataType>::From(args[2], &dtype))
    return TypeError(kName, ": dtype must be a DataType, got ", args[2].TypeName());
  TETHER_ASSIGN_OR_RETURN(int64_t index, IntArg(args[3], kName, "device_index"));
  if (vm->devices().empty())
    return PreconditionError(kName, ": did you forget to init the VirtualMachine with devices?");
  if (index == -1) index = static_cast<int64_t>(vm->host_index());
  if (index < 0 || static_cast<size_t>(index) >= vm->devices().size()) {
    return IndexError(kName, ": device index ", index, " out of range (", vm->devices().size(),
                      " devices)");
  }
  for (int64_t d : dims) {
    if (d < 0) {
      return ValueError(kName, ": negative dimension in shape ",
                        ShapeToString({dims.data(), dims.size()}));
    }
  }
  TETHER_RETURN_IF_ERROR(CheckedNumElements({dims.data(), dims.size()}).status());
  size_t i = static_cast<size_t>(index);
  TETHER_ASSIGN_OR_RETURN(Tensor t, Tensor::Empty({dims.data(), dims.size()}, dtype,
                                                  vm->devices()[i], vm->allocator(i)));
  return Value(t);
}

absl::StatusOr<Value> ComputeShapeHeap(ArgSpan args) {
  constexpr absl::string_view kName = "vm.builtin.compute_shape_heap";
  if (args.size() != 2)
    return ValueError(kName, " expects 2 arguments (heap, program), got ", args.size());
  TETHER_ASSIGN_OR_RETURN(auto heap, HeapSlots(args[0], kName));
  if (!args[1].is_shape())
    return TypeError(kName, ": program must be a Shape, got ", args[1].TypeName());
  const auto& prog = args[1].AsRef<ShapeObj>()->dims;
  std::vector<int64_t> stack;
  auto pop = [&](int64_t* v) -> absl::Status {
    if (stack.empty()) return ValueError(kName, ": stack underflow in shape program");
    *v = stack.back();
    stack.pop_back();
    return absl::OkStatus();
  };
  for (size_t pc = 0; pc < prog.size(); ++pc) {
    auto op = static_cast<ShapeProgramOp>(prog[pc]);
    if (op == ShapeProgramOp::kPushImm || op == ShapeProgramOp::kLoad ||
        op == ShapeProgramOp::kStore) {
      if (pc + 1 >= prog.size())
        return ValueError(kName, ": opcode ", prog[pc], " lacks its operand");
      int64_t operand = prog[++pc];
      if (op == ShapeProgramOp::kPushImm) {
        stack.push_back(operand);
        continue;
      }
      TETHER_RETURN_IF_ERROR(CheckSlot(heap, operand, kName));
      if (op == ShapeProgramOp::kLoad) {
        stack.push_back(heap[static_cast<size_t>(operand)]);
      } else {
        TETHER_RETURN_IF_ERROR(pop(&heap[static_cast<size_t>(operand)]));
      }
      continue;
    }
    if (op == ShapeProgramOp::kNot) {
      int64_t a;
      TETHER_RETURN_IF_ERROR(pop(&a));
      stack.push_back(a == 0);
      continue;
    }
    if (op == ShapeProgramOp::kSelect) {
      int64_t c, t, f;
      TETHER_RETURN_IF_ERROR(pop(&f));
      TETHER_RETURN_IF_ERROR(pop(&t));
      TETHER_RETURN_IF_ERROR(pop(&c));
      stack.push_back(c != 0 ? t : f);
      continue;
    }
    int64_t a, b;
    TETHER_RETURN_IF_ERROR(pop(&b));
    TETHER_RETURN_IF_ERROR(pop(&a));
    // Wrapping arithmetic: shapes never get near overflow, and a hostile
    // program must not reach undefined behaviour.
    auto ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
    int64_t r = 0;
    switch (op) {
      case ShapeProgramOp::kAdd:
        r = static_cast<int64_t>(ua + ub);
        break;
      case ShapeProgramOp::kSub:
        r = static_cast<int64_t>(ua - ub);
        break;
      case ShapeProgramOp::kMul:
        r = static_cast<int64_t>(ua * ub);
        break;
      case ShapeProgramOp::kFloorDiv:
      case ShapeProgramOp::kFloorMod:
      case ShapeProgramOp::kTruncDiv: {
        if (b == 0) return ValueError(kName, ": division by zero in shape program");
        if (a == INT64_MIN && b == -1) return ValueError(kName, ": overflow in shape program");
        int64_t q = a / b, m = a % b;
        if (op == ShapeProgramOp::kTruncDiv) {
          r = q;
        } else {
          bool adjust = m != 0 && ((m < 0) != (b < 0));
          r = op == ShapeProgramOp::kFloorDiv ? (adjust ? q - 1 : q) : (adjust ? m + b : m);
        }
        break;
      }
      case ShapeProgramOp::kMin:
        r = std::min(a, b);
        break;
      case ShapeProgramOp::kMax:
        r = std::max(a, b);
        break;
      case ShapeProgramOp::kEQ:
        r = a == b;
        break;
      case ShapeProgramOp::kNE:
        r = a != b;
        break;
      case ShapeProgramOp::kLT:
        r = a < b;
        break;
      case ShapeProgramOp::kLE:
        r = a <= b;
        break;
      case ShapeProgramOp::kGT:
        r = a > b;
        break;
      case ShapeProgramOp::kGE:
        r = a >= b;
        break;
      case ShapeProgramOp::kAnd:
        r = (a != 0) && (b != 0);
        break;
      case ShapeProgramOp::kOr:
        r = (a != 0) || (b != 0);
        break;
      default:
        return ValueError(kName, ": unknown opcode ", static_cast<int64_t>(op), " at word ", pc);
    }
    stack.push_back(r);
  }
  if (!stack.empty())
    return ValueError(kName, ": shape program leaves ", stack.size(), " values on the stack");
  return Value();
}

absl::StatusOr<Value> MakeClosure(ArgSpan args) {
  if (args.empty())
    return ValueError("vm.builtin.make_closure expects a function and captured values");
  std::vector<Value> captured(args.begin() + 1, args.end());
  const Value& f = args[0];
  if (f.is_closure()) {
    const ClosureObj& c = *f.AsRef<ClosureObj>();
    std::vector<Value> bound = c.bound_args;
    bound.insert(bound.end(), captured.begin(), captured.end());
    return Value(MakeRef<ClosureObj>(c.func_name, c.func_index, c.callee, std::move(bound)));
  }
  if (f.is_function()) {
    auto fn = f.AsRef<FunctionObj>();
    return Value(MakeRef<ClosureObj>(fn->name(), -1, f, std::move(captured)));
  }
  return TypeError("vm.builtin.make_closure: expected a function or closure, got ", f.TypeName());
}

absl::StatusOr<Value> InvokeClosure(ArgSpan args) {
  constexpr absl::string_view kName = "vm.builtin.invoke_closure";
  if (args.size() < 2) return ValueError(kName, " expects the vm context and a closure");
  TETHER_ASSIGN_OR_RETURN(LocalVirtualMachine * vm, VmContext(args[0], kName));
  return vm->CallValue(args[1], args.subspan(2));
}

absl::StatusOr<Value> TensorToShape(const Tensor& t) {
  DataType dt = t->dtype();
  if (t->ndim() != 1 ||
      !(dt == DataType::Int(64) || dt == DataType::Int(32) || dt == DataType::Int(16))) {
    return TypeError("vm.builtin.tensor_to_shape: expected a 1-d int16/32/64 tensor, got ",
                     t.ToString());
  }
  TETHER_ASSIGN_OR_RETURN(Tensor host, t->device().type == kDLCPU ? absl::StatusOr<Tensor>(t)
                                                                  : t.CopyTo(Device::Cpu()));
  ShapeObj::Dims dims;
  for (int64_t i = 0; i < host->shape()[0]; ++i) {
    const char* p = static_cast<const char*>(host->element_data()) + i * dt.bytes();
    if (dt.bits() == 64)
      dims.push_back(*reinterpret_cast<const int64_t*>(p));
    else if (dt.bits() == 32)
      dims.push_back(*reinterpret_cast<const int32_t*>(p));
    else
      dims.push_back(*reinterpret_cast<const int16_t*>(p));
  }
  return MakeShape(std::move(dims));
}

void Check(absl::Status s) {
  if (!s.ok()) internal::DieOnRegistrationError(s);
}

}  // namespace

void RegisterBuiltins() {
  static std::once_flag once;
  std::call_once(once, [] {
    Check(Registry::RegisterPacked("vm.builtin.alloc_storage", AllocStorage));
    Check(Registry::RegisterPacked("vm.builtin.alloc_tensor", AllocTensor));
    Check(Registry::RegisterTyped("vm.builtin.null_value", [] { return Value(); }));
    Check(Registry::RegisterTyped("vm.builtin.copy", [](Value v) { return v; }));
    Check(Registry::RegisterTyped("vm.builtin.shape_of", [](Value v) -> absl::StatusOr<Value> {
      if (!v.is_tensor())
        return TypeError("vm.builtin.shape_of: expected a Tensor, got ", v.TypeName());
      auto s = v.AsRef<TensorObj>()->shape();
      return MakeShape(ShapeObj::Dims(s.begin(), s.end()));
    }));
    Check(Registry::RegisterTyped(
        "vm.builtin.reshape", [](Tensor t, Value shape) -> absl::StatusOr<Value> {
          if (!shape.is_shape())
            return TypeError("vm.builtin.reshape: expected a Shape, got ", shape.TypeName());
          const auto& dims = shape.AsRef<ShapeObj>()->dims;
          TETHER_ASSIGN_OR_RETURN(int64_t n, CheckedNumElements({dims.data(), dims.size()}));
          if (n != t->NumElements()) {
            return ValueError("vm.builtin.reshape: cannot reshape ", t.ToString(), " to ",
                              ShapeToString({dims.data(), dims.size()}));
          }
          TETHER_ASSIGN_OR_RETURN(Tensor view,
                                  t.CreateView({dims.data(), dims.size()}, t->dtype()));
          return Value(view);
        }));
    Check(
        Registry::RegisterPacked("vm.builtin.to_device", [](ArgSpan args) -> absl::StatusOr<Value> {
          if (args.size() != 3 && args.size() != 4)
            return ValueError("vm.builtin.to_device expects 3 or 4 arguments, got ", args.size());
          Tensor t;
          int64_t type = 0, id = 0;
          if (!ValueTraits<Tensor>::From(args[0], &t) ||
              !ValueTraits<int64_t>::From(args[1], &type) ||
              !ValueTraits<int64_t>::From(args[2], &id)) {
            return TypeError("vm.builtin.to_device: expected (Tensor, device_type, device_id)");
          }
          Device d{static_cast<DLDeviceType>(type), static_cast<int>(id)};
          if (!DeviceExists(d))
            return UnavailableError("vm.builtin.to_device: device ", d.ToString(),
                                    " does not exist");
          TETHER_ASSIGN_OR_RETURN(Tensor out, t.CopyTo(d));
          return Value(out);
        }));
    Check(Registry::RegisterTyped("vm.builtin.read_if_cond", ReadIfCond));
    // require(value, ok, message): value when ok != 0, else ValueError(message)
    // (the compiler's check of a condition on values read at run time).
    Check(Registry::RegisterTyped(
        "vm.builtin.require",
        [](Value value, int64_t ok, std::string message) -> absl::StatusOr<Value> {
          if (ok == 0) return ValueError(message);
          return value;
        }));
    RegisterDataDependentOps();
    RegisterSequenceOps();
    Check(Registry::RegisterPacked("vm.builtin.make_tuple",
                                   [](ArgSpan args) -> absl::StatusOr<Value> {
                                     return MakeTuple(std::vector<Value>(args.begin(), args.end()));
                                   }));
    Check(Registry::RegisterTyped(
        "vm.builtin.tuple_getitem", [](Value tuple, int64_t i) -> absl::StatusOr<Value> {
          if (!tuple.is_tuple())
            return TypeError("vm.builtin.tuple_getitem: expected a Tuple, got ", tuple.TypeName());
          const auto& fields = tuple.AsRef<TupleObj>()->fields;
          if (i < 0 || static_cast<size_t>(i) >= fields.size()) {
            return IndexError("tuple index ", i, " out of range (tuple of ", fields.size(), ")");
          }
          return fields[static_cast<size_t>(i)];
        }));
    Check(Registry::RegisterPacked("vm.builtin.alloc_tensor_for_shape", AllocTensorForShape));
    Check(Registry::RegisterPacked("vm.builtin.compute_shape_heap", ComputeShapeHeap));
    Check(Registry::RegisterPacked("vm.builtin.make_closure", MakeClosure));
    Check(Registry::RegisterPacked("vm.builtin.invoke_closure", InvokeClosure));
    Check(Registry::RegisterTyped(
        "vm.builtin.alloc_shape_heap", [](Value vm, int64_t size) -> absl::StatusOr<Value> {
          TETHER_RETURN_IF_ERROR(VmContext(vm, "vm.builtin.alloc_shape_heap").status());
          if (size < 0) return ValueError("vm.builtin.alloc_shape_heap: negative size ", size);
          int64_t shape[] = {size};
          TETHER_ASSIGN_OR_RETURN(Tensor heap,
                                  Tensor::Empty(shape, DataType::Int(64), Device::Cpu()));
          if (size > 0) std::memset(heap->element_data(), 0, static_cast<size_t>(size) * 8);
          return Value(heap);
        }));
    Check(Registry::RegisterPacked("vm.builtin.match_shape", MatchShape));
    Check(Registry::RegisterPacked("vm.builtin.make_shape", MakeShapeFromHeap));
    Check(Registry::RegisterTyped("vm.builtin.match_prim_value",
                                  [](int64_t v, Value heap, int64_t code, int64_t slot,
                                     Value err_ctx) -> absl::StatusOr<Value> {
                                    Value args[] = {MakeShape({v}), heap,        Value(int64_t{1}),
                                                    Value(code),    Value(slot), err_ctx};
                                    return MatchShape(args);
                                  }));
    Check(
        Registry::RegisterTyped("vm.builtin.make_prim_value",
                                [](Value heap, int64_t code, int64_t val) -> absl::StatusOr<Value> {
                                  Value args[] = {heap, Value(int64_t{1}), Value(code), Value(val)};
                                  TETHER_ASSIGN_OR_RETURN(Value shape, MakeShapeFromHeap(args));
                                  return shape.AsRef<ShapeObj>()->dims[0];
                                }));
    Check(Registry::RegisterPacked("vm.builtin.check_tensor_info", CheckTensorInfo));
    Check(Registry::RegisterTyped("vm.builtin.check_shape_info", CheckShapeInfo));
    Check(Registry::RegisterTyped("vm.builtin.check_tuple_info", CheckTupleInfo));
    Check(Registry::RegisterTyped("vm.builtin.tensor_to_shape", TensorToShape));
    Check(Registry::RegisterPacked(
        "vm.builtin.memory_manager.clear", [](ArgSpan args) -> absl::StatusOr<Value> {
          if (args.size() > 1)
            return ValueError("vm.builtin.memory_manager.clear takes at most the vm context");
          if (args.size() == 1) {
            TETHER_ASSIGN_OR_RETURN(LocalVirtualMachine * vm,
                                    VmContext(args[0], "vm.builtin.memory_manager.clear"));
            vm->ClearMemory();
          }
          return Value();
        }));
  });
}

}  // namespace tether::vm
