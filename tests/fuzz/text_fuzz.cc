// Fuzz target: text -> the .rx parser; what parses must print and parse
// again (the round trip the text format promises).
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "compiler/text/parser.h"
#include "compiler/text/printer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<tether::compiler::IRModule> module = tether::compiler::ParseModule(text);
  if (!module.ok()) return 0;
  const std::string printed = tether::compiler::PrintModule(*module);
  absl::StatusOr<tether::compiler::IRModule> again = tether::compiler::ParseModule(printed);
  if (!again.ok()) {
    std::fprintf(stderr, "printed module does not parse: %s\n%s\n",
                 std::string(again.status().message()).c_str(), printed.c_str());
    std::abort();
  }
  return 0;
}
