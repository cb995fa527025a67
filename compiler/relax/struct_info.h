// StructInfo: what the compiler knows about a Relax value, as TVM's
// relax.StructInfo: Object, Prim, Shape, Tensor (with symbolic dims), Tuple
// and Func (with a params list, or opaque). Every Relax expression carries
// one after normalization (BlockBuilder, compiler/relax/block_builder.h).
//
// Thread contract: immutable after construction; safe to share.
#ifndef TETHER_COMPILER_RELAX_STRUCT_INFO_H_
#define TETHER_COMPILER_RELAX_STRUCT_INFO_H_

#include <optional>
#include <string>
#include <vector>

#include "compiler/tir/prim_expr.h"
#include "runtime/core/device.h"

namespace tether::compiler {

enum class StructInfoKind : uint8_t { kObject, kPrim, kShape, kTensor, kTuple, kFunc };

class StructInfoNode : public Object {
 public:
  explicit StructInfoNode(StructInfoKind kind) : kind_(kind) {}
  absl::string_view type_key() const override { return "StructInfo"; }
  StructInfoKind kind() const { return kind_; }

 private:
  StructInfoKind kind_;
};

class StructInfo {
 public:
  StructInfo() = default;
  explicit StructInfo(Ref<const StructInfoNode> node) : node_(std::move(node)) {}
  const StructInfoNode* get() const { return node_.get(); }
  const StructInfoNode* operator->() const { return node_.get(); }
  bool defined() const { return node_ != nullptr; }
  StructInfoKind kind() const { return node_->kind(); }
  template <typename T>
  const T* as() const {
    return node_ && node_->kind() == T::kKind ? static_cast<const T*>(node_.get()) : nullptr;
  }
  bool same_as(const StructInfo& o) const { return node_.get() == o.node_.get(); }

 private:
  Ref<const StructInfoNode> node_;
};

class ObjectStructInfoNode : public StructInfoNode {
 public:
  static constexpr StructInfoKind kKind = StructInfoKind::kObject;
  ObjectStructInfoNode() : StructInfoNode(kKind) {}
};

// A scalar of `dtype`, optionally with a known (symbolic) value.
class PrimStructInfoNode : public StructInfoNode {
 public:
  static constexpr StructInfoKind kKind = StructInfoKind::kPrim;
  PrimStructInfoNode(DataType dtype, PrimExpr value)
      : StructInfoNode(kKind), dtype(dtype), value(std::move(value)) {}
  const DataType dtype;
  const PrimExpr value;  // may be undefined
};

// A shape: known values (each a PrimExpr), or only its rank (ndim, -1 unknown).
class ShapeStructInfoNode : public StructInfoNode {
 public:
  static constexpr StructInfoKind kKind = StructInfoKind::kShape;
  ShapeStructInfoNode(std::optional<std::vector<PrimExpr>> values, int ndim)
      : StructInfoNode(kKind), values(std::move(values)), ndim(ndim) {}
  const std::optional<std::vector<PrimExpr>> values;
  const int ndim;  // == values->size() when values are known
};

// A tensor: dtype (nullopt when unknown, TVM's "void"), shape when known,
// rank (-1 unknown), and the device it lives on when placed.
class TensorStructInfoNode : public StructInfoNode {
 public:
  static constexpr StructInfoKind kKind = StructInfoKind::kTensor;
  TensorStructInfoNode(std::optional<std::vector<PrimExpr>> shape, std::optional<DataType> dtype,
                       int ndim, std::optional<Device> vdevice)
      : StructInfoNode(kKind),
        shape(std::move(shape)),
        dtype(dtype),
        ndim(ndim),
        vdevice(vdevice) {}
  const std::optional<std::vector<PrimExpr>> shape;
  const std::optional<DataType> dtype;  // nullopt: unknown ("void" in TVM)
  const int ndim;                       // == shape->size() when the shape is known; -1 unknown
  const std::optional<Device> vdevice;
};

class TupleStructInfoNode : public StructInfoNode {
 public:
  static constexpr StructInfoKind kKind = StructInfoKind::kTuple;
  explicit TupleStructInfoNode(std::vector<StructInfo> fields)
      : StructInfoNode(kKind), fields(std::move(fields)) {}
  const std::vector<StructInfo> fields;
};

// A function: params and return (params nullopt: opaque, e.g. an ExternFunc).
class FuncStructInfoNode : public StructInfoNode {
 public:
  static constexpr StructInfoKind kKind = StructInfoKind::kFunc;
  FuncStructInfoNode(std::optional<std::vector<StructInfo>> params, StructInfo ret, bool purity)
      : StructInfoNode(kKind), params(std::move(params)), ret(std::move(ret)), purity(purity) {}
  const std::optional<std::vector<StructInfo>> params;
  const StructInfo ret;
  const bool purity;
};

StructInfo ObjectSInfo();
StructInfo PrimSInfo(DataType dtype, PrimExpr value = PrimExpr());
StructInfo ShapeSInfo(std::vector<PrimExpr> values);
StructInfo ShapeSInfoOfRank(int ndim);  // values unknown
StructInfo TensorSInfo(std::vector<PrimExpr> shape, std::optional<DataType> dtype,
                       std::optional<Device> vdevice = std::nullopt);
StructInfo TensorSInfoOfRank(int ndim, std::optional<DataType> dtype,
                             std::optional<Device> vdevice = std::nullopt);
StructInfo TupleSInfo(std::vector<StructInfo> fields);
StructInfo FuncSInfo(std::vector<StructInfo> params, StructInfo ret, bool purity = true);
StructInfo OpaqueFuncSInfo(StructInfo ret = ObjectSInfo(), bool purity = false);

// TVMScript text: R.Tensor((n, 784), "float32"), R.Tuple(...), R.Shape([n]),
// R.Prim("int64"), R.Object, R.Callable((...), ...).
std::string ToString(const StructInfo& sinfo);

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_RELAX_STRUCT_INFO_H_
