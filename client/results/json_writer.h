// JsonWriter: builds a JSON document in order, with the commas, escaping and
// number spelling of runtime/profiling/json.h (strings escaped, doubles as
// the shortest round-trip decimal, non-finite doubles as null), indented two
// spaces per level so stored results diff well.
//
//   JsonWriter w;
//   w.BeginObject().Key("median").Double(1.5e-3).Key("samples").BeginArray();
//   for (double s : samples) w.Double(s);
//   w.EndArray().EndObject();
//
// Thread contract: thread-compatible. Misuse (a value where a key is due,
// unbalanced ends) is a programmer error and aborts.
#ifndef TETHER_CLIENT_RESULTS_JSON_WRITER_H_
#define TETHER_CLIENT_RESULTS_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace tether::results {

class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  // The next member's name (inside an object only).
  JsonWriter& Key(absl::string_view key);
  JsonWriter& String(absl::string_view value);
  JsonWriter& Double(double value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Bool(bool value);
  JsonWriter& Null();
  // A complete JSON value written by someone else, inserted as it is.
  JsonWriter& Raw(absl::string_view json);

  // The document; complete once every Begin has its End.
  const std::string& text() const { return out_; }

 private:
  struct Level {
    bool object;
    bool empty = true;
  };
  // Separator and indentation before a value (or a key in an object).
  void BeforeValue();
  void Newline();

  std::string out_;
  std::vector<Level> levels_;
  bool key_pending_ = false;
};

}  // namespace tether::results

#endif  // TETHER_CLIENT_RESULTS_JSON_WRITER_H_
