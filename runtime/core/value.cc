// Value construction, names and printing.
#include "runtime/core/value.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/core/function.h"
#include "runtime/core/tensor.h"

namespace tether {

Value::Value(std::string v) : Value(MakeRef<StringObj>(std::move(v))) {}

const std::string& Value::string_value() const {
  return static_cast<const StringObj*>(u_.obj)->data;
}

Value MakeShape(ShapeObj::Dims dims) { return Value(MakeRef<ShapeObj>(std::move(dims))); }
Value MakeTuple(std::vector<Value> fields) { return Value(MakeRef<TupleObj>(std::move(fields))); }

std::string ShapeToString(std::span<const int64_t> dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

std::string Value::TypeName() const {
  switch (kind_) {
    case Kind::kNone:
      return "None";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kBool:
      return "bool";
    case Kind::kDataType:
      return "DataType";
    case Kind::kDevice:
      return "Device";
    case Kind::kOpaquePtr:
      return "pointer";
    case Kind::kObject:
      return std::string(u_.obj->type_key());
  }
  return "unknown";
}

std::string Value::ToString() const {
  switch (kind_) {
    case Kind::kNone:
      return "None";
    case Kind::kInt:
      return absl::StrCat(u_.i);
    case Kind::kFloat: {
      // Like Python: a float always reads as one ("2.0", not "2").
      std::string s = absl::StrCat(u_.f);
      if (s.find_first_of(".eni") == std::string::npos) s += ".0";
      return s;
    }
    case Kind::kBool:
      return u_.b ? "True" : "False";
    case Kind::kDataType:
      return dtype_value().ToString();
    case Kind::kDevice:
      return device_value().ToString();
    case Kind::kOpaquePtr:
      return absl::StrCat("<pointer ", reinterpret_cast<uintptr_t>(u_.ptr), ">");
    case Kind::kObject:
      break;
  }
  switch (u_.obj->type_index()) {
    case TypeIndex::kString:
      return absl::StrCat("\"", string_value(), "\"");
    case TypeIndex::kShape: {
      const auto& dims = static_cast<const ShapeObj*>(u_.obj)->dims;
      return absl::StrCat("Shape", ShapeToString({dims.data(), dims.size()}));
    }
    case TypeIndex::kTensor:
      return Tensor(AsRef<TensorObj>()).ToString();
    case TypeIndex::kTuple: {
      const auto& fields = static_cast<const TupleObj*>(u_.obj)->fields;
      std::string out = "(";
      for (size_t i = 0; i < fields.size(); ++i) {
        absl::StrAppend(&out, i ? ", " : "", fields[i].ToString());
      }
      absl::StrAppend(&out, fields.size() == 1 ? ",)" : ")");
      return out;
    }
    case TypeIndex::kFunction:
      return absl::StrCat("<Function ", static_cast<const FunctionObj*>(u_.obj)->name(), ">");
    default:
      return absl::StrCat("<", u_.obj->type_key(), ">");
  }
}

}  // namespace tether
