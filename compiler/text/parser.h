// Parsing the Relax text format: a TVMScript subset (the @I.ir_module /
// @R.function dialect) into an IRModule. The grammar, the symbolic-variable
// rules and the operator mapping are in docs/design/text-format.md.
//
// The parser builds raw IR (every node carries the Span of its source) and
// then normalizes the module, so every expression has its struct info and
// type errors point at the offending source position.
//
// Thread contract: both functions are thread-safe (no shared state).
#ifndef TETHER_COMPILER_TEXT_PARSER_H_
#define TETHER_COMPILER_TEXT_PARSER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/relax/module.h"

namespace tether::compiler {

// Parses `text` (a module, or one or more bare @R.function definitions).
// INVALID_ARGUMENT "file:line:col: expected ..., got ..." on any syntax,
// name or type error; never crashes on malformed input.
[[nodiscard]] absl::StatusOr<IRModule> ParseModule(absl::string_view text,
                                                   absl::string_view file_name = "<input>");

// Reads and parses the file at `path`. NOT_FOUND when it cannot be opened;
// otherwise as ParseModule, with `path` in the positions.
[[nodiscard]] absl::StatusOr<IRModule> ParseModuleFile(const std::string& path);

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_TEXT_PARSER_H_
