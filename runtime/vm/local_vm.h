// LocalVirtualMachine: the bytecode interpreter of an Executable on this
// process's devices. Bytecode-to-bytecode calls push frames on a heap stack (no
// native recursion), so deep recursion in a model is bounded by memory, not by
// the C++ stack; after an error every frame the failed call pushed is popped, so
// the VM stays usable.
#ifndef TETHER_RUNTIME_VM_LOCAL_VM_H_
#define TETHER_RUNTIME_VM_LOCAL_VM_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "runtime/memory/allocator.h"
#include "runtime/module/param_dict.h"
#include "runtime/vm/compiled_function.h"
#include "runtime/vm/executable.h"
#include "runtime/vm/param_binding.h"
#include "runtime/vm/trace.h"
#include "runtime/vm/virtual_machine.h"

namespace tether::vm {

class ProfileRecorder;

// Thread contract: thread-hostile (see VirtualMachine).
class LocalVirtualMachine final : public VirtualMachine {
 public:
  // Frames deeper than this fail with RESOURCE_EXHAUSTED instead of exhausting memory.
  static constexpr size_t kMaxFrames = 1 << 16;
  // Compiled functions run on the C++ stack: calls between them nest at most
  // this deep (RESOURCE_EXHAUSTED beyond).
  static constexpr size_t kMaxCompiledNesting = 1024;

  // Creates a VM for `exec` on `devices` (the first is the default device for
  // constants and inputs; a CPU host is appended when the last is not a CPU),
  // each with the allocator type `memory_cfg` gives it. Resolves every packed
  // function now: NOT_FOUND naming it if neither a kernel library of the
  // executable nor the global registry has it. UNAVAILABLE for a missing device.
  static absl::StatusOr<std::unique_ptr<LocalVirtualMachine>> Create(
      Ref<Executable> exec, std::vector<Device> devices,
      const memory::MemoryConfig& memory_cfg = memory::MemoryConfig());
  ~LocalVirtualMachine() override;

  // VirtualMachine.
  absl::StatusOr<Value> Invoke(absl::string_view func_name, ArgSpan args) override;
  absl::StatusOr<Value> InvokeClosure(const Value& closure, ArgSpan args) override;
  absl::Status SaveFunction(absl::string_view func_name, absl::string_view saved_name, ArgSpan args,
                            bool include_return = true) override;
  absl::Status SetInput(absl::string_view func_name, ArgSpan args) override;
  absl::Status SetInputNamed(absl::string_view func_name, ArgSpan positional,
                             const NamedArgs& named) override;
  absl::Status InvokeStateful(absl::string_view func_name) override;
  absl::StatusOr<Value> GetOutputs(absl::string_view func_name) override;
  absl::StatusOr<int64_t> GetFunctionArity(absl::string_view func_name) override;
  absl::StatusOr<std::vector<std::string>> GetFunctionParamNames(
      absl::string_view func_name) override;
  absl::StatusOr<std::vector<std::string>> GetFunctionBoundParamNames(
      absl::string_view func_name) override;
  absl::Status SetInstrumentByName(absl::string_view factory_name, ArgSpan args) override;
  absl::StatusOr<profiling::BenchmarkResult> TimeEvaluator(
      absl::string_view func_name, Device device, const profiling::TimeEvaluatorOptions& options,
      ArgSpan args) override;
  absl::StatusOr<profiling::Report> Profile(absl::string_view func_name, ArgSpan args) override;
  absl::StatusOr<profiling::Report> GetTrace(bool clear) override;
  absl::StatusOr<std::vector<ModuleFunction>> ListFunctions() override;
  absl::StatusOr<Value> CallKernel(absl::string_view kernel_name, ArgSpan args) override;

  // Binds weights (TVM's keep_params_in_input flow, on the device): every
  // parameter of a bytecode function that `params` names takes that tensor,
  // copied to the VM's first device once, now (runtime/vm/param_binding.h).
  // From then on Invoke, SetInput, SaveFunction, TimeEvaluator and Profile
  // take the other parameters only, in their order; GetFunctionArity and
  // GetFunctionParamNames describe those, GetFunctionBoundParamNames the
  // bound ones. `params_name` and `module_name` name the two in messages.
  // INVALID_ARGUMENT (kind value) as ParamBinding::Create;
  // FAILED_PRECONDITION when the VM has params bound already.
  absl::Status BindParams(const ParamList& params, absl::string_view params_name = "param dict",
                          absl::string_view module_name = "the executable");

  // Installs `instrument` (null removes it). It is called before each Call
  // instruction as instrument(func, func_symbol, true, None, args...) and, unless
  // it returned InstrumentReturnKind::kSkipRun, after it as
  // instrument(func, func_symbol, false, result, args...).
  void SetInstrument(Function instrument) { instrument_ = std::move(instrument); }

  // While *code is non-zero (an absl::StatusCode), the running call stops at the
  // next instruction boundary and fails with that code. The flag must outlive
  // the VM or be reset to null; it may be set from any thread.
  void SetInterrupt(const std::atomic<int>* code) { interrupt_ = code; }

  // Caps the threads of the kernels this VM runs (ScopedThreadLimit);
  // <= 0: the process's NumThreads().
  void SetNumThreads(int num_threads) { num_threads_ = num_threads; }
  int num_threads() const { return num_threads_; }

  // --- The VM context that builtins receive as `%vm`. ---
  const std::vector<Device>& devices() const { return devices_; }
  // The allocator of devices()[i].
  memory::Allocator* allocator(size_t i) const { return allocators_[i].get(); }
  // The index of the host device (the last one).
  size_t host_index() const { return devices_.size() - 1; }
  // Calls a Function or a closure value.
  absl::StatusOr<Value> CallValue(const Value& callee, ArgSpan args);
  const Executable& executable() const { return *exec_; }
  // Statistics of each device's allocator, in devices() order.
  std::vector<memory::AllocatorStats> MemoryStats() const;
  // Returns cached memory of every allocator to its device.
  void ClearMemory();

 private:
  // The arguments of one packed call: Values constructed in place in storage
  // that is kept across calls, destroyed right after the call (kill semantics).
  // Cheaper than std::vector's bookkeeping on the dispatch path.
  class ArgBuffer {
   public:
    ArgBuffer() = default;
    ArgBuffer(const ArgBuffer&) = delete;
    ArgBuffer& operator=(const ArgBuffer&) = delete;
    ~ArgBuffer() { clear(); }
    // Makes room for `n` arguments; the buffer must be empty.
    Value* Prepare(size_t n) {
      if (n > capacity_) {
        storage_.reset(new Value::Storage[n]);
        capacity_ = n;
      }
      return reinterpret_cast<Value*>(storage_.get());
    }
    void set_size(size_t n) { size_ = n; }
    std::span<const Value> span() const {
      return {reinterpret_cast<const Value*>(storage_.get()), size_};
    }
    void clear() {
      Value* values = reinterpret_cast<Value*>(storage_.get());
      for (size_t i = 0; i < size_; ++i) values[i].~Value();
      size_ = 0;
    }

   private:
    std::unique_ptr<Value::Storage[]> storage_;
    size_t capacity_ = 0;
    size_t size_ = 0;
  };

  struct Frame {
    Index func_index = 0;
    Index return_pc = 0;
    RegName caller_dst = kVoidRegister;
    std::vector<Value> registers;
    ArgBuffer call_args;  // reused argument buffer of packed calls
  };

  LocalVirtualMachine() = default;
  absl::Status Init(Ref<Executable> exec, std::vector<Device> devices,
                    const memory::MemoryConfig& memory_cfg);

  // Runs function `func_index` (bytecode or compiled) with `args` to completion.
  absl::StatusOr<Value> RunFunction(Index func_index, ArgSpan args);
  struct CompiledActivation;
  struct DecodedInstr;
  // Compiled functions (compiled_functions.cc): finds the code and the
  // site table of function `func_index` in the kernel libraries and checks
  // the table as the verifier checks bytecode; runs it in the frame on top.
  absl::Status FindCompiledFunction(Index func_index);
  absl::Status RunCompiled(size_t entry_depth, Value* result);
  // The services a compiled function calls (compiled_function.h).
  static int32_t CompiledCall(void* ctx, int64_t site);
  static int32_t CompiledCond(void* ctx, int64_t reg, int64_t* out);
  static int32_t CompiledRet(void* ctx, int64_t reg);
  static int32_t CompiledSlowCall(CompiledActivation& a, const DecodedInstr& site);
  absl::Status RunLoop(size_t entry_depth, Value* result);
  Frame* PushFrame(Index func_index);
  void PopFrame();
  absl::Status CallPacked(const Value& callee, Index func_index, Frame* frame, Value* result);
  // Builds program_ from the executable's bytecode (after the pools exist).
  absl::Status Decode();
  absl::Status CheckArity(Index func_index, size_t num_args) const;
  // The arguments of every parameter of `func_index` from the caller's
  // `args`: the bound weights filled in. A wrong count is INVALID_ARGUMENT
  // naming the caller's parameters and the bound ones.
  absl::StatusOr<std::vector<Value>> WithBoundParams(Index func_index, ArgSpan args) const;

  // Name lookups.
  absl::StatusOr<Index> FindVMFunction(absl::string_view name) const;
  absl::StatusOr<Value> ConvertArgToDevice(const Value& arg);
  // The callable TimeEvaluator and Profile run for `func_name`.
  absl::StatusOr<Function> TimedFunction(absl::string_view func_name);
  // Kernel `name` of the kernel libraries, refused when it cannot be checked.
  absl::StatusOr<Function> CheckedKernel(absl::string_view name);

  Ref<Executable> exec_;
  std::vector<Device> devices_;
  std::vector<Ref<memory::Allocator>> allocators_;
  std::vector<Value> constants_;  // constants, tensors on devices_[0]
  std::vector<Value> func_pool_;  // a Function or a ClosureObj per function-table entry
  std::vector<Ref<Module>> kernel_libraries_;
  // Per function-table entry: when compiled, its code and its call sites
  // (checked, pointing into its kernel library), decoded into
  // compiled_sites_ from first_site on.
  struct CompiledFunction {
    TetherVMFunctionFn code = nullptr;
    std::vector<Instruction> calls;
    size_t first_site = 0;
  };
  std::vector<CompiledFunction> compiled_;

  // The bytecode decoded once at creation: one entry per instruction, each
  // argument either a register index or a pointer to a fixed value (constant,
  // function, immediate, %void, %vm), so the run loop does no bit decoding.
  struct DecodedArg {
    RegName reg;         // >= 0: an ordinary register
    const Value* fixed;  // otherwise the value itself
  };
  struct DecodedInstr {
    Opcode op = Opcode::kRet;
    RegName reg = 0;  // Call: dst; Ret: result; If: cond
    int64_t imm = 0;  // Call: function index; Goto: offset; If: false offset
    int64_t num_args = 0;
    size_t args_begin = 0;  // index into decoded_args_
    // Call of a packed function: the function itself (owned by func_pool_).
    const FunctionObj* packed = nullptr;
  };
  std::vector<DecodedInstr> program_;
  std::vector<DecodedInstr> compiled_sites_;  // the call sites of compiled functions
  std::vector<DecodedArg> decoded_args_;
  std::vector<Value> immediates_;  // reserved up front; never reallocated
  Value special_values_[2];        // %void, %vm

  std::vector<std::unique_ptr<Frame>> frames_;
  std::vector<std::unique_ptr<Frame>> free_frames_;
  size_t nesting_ = 0;  // RunLoop and compiled activations on the C++ stack

  ParamBinding binding_;  // weights bound by BindParams, on devices_[0]
  bool params_bound_ = false;
  absl::flat_hash_map<std::string, std::vector<Value>> inputs_;
  absl::flat_hash_map<std::string, Value> outputs_;
  absl::flat_hash_map<std::string, Value> saved_functions_;  // closures
  int num_threads_ = 0;                                      // SetNumThreads

  Function instrument_;
  Ref<TraceLogObj> trace_;  // the last "trace" instrument installed
  const std::atomic<int>* interrupt_ = nullptr;
  ProfileRecorder* profiler_ = nullptr;
  bool slow_calls_ = false;  // an instrument or the profiler sees every call
};

// Registers the vm.builtin.* functions (idempotent; Create calls it).
void RegisterBuiltins();
// The operators with data-dependent output shapes (data_dependent_ops.cc:
// nonzero, compress, non_max_suppression); RegisterBuiltins calls it.
void RegisterDataDependentOps();
// Sequences and optionals of run-time structure (sequence_ops.cc:
// sequence_length, sequence_at, ..., optional_get_element); RegisterBuiltins
// calls it.
void RegisterSequenceOps();

}  // namespace tether::vm

#endif  // TETHER_RUNTIME_VM_LOCAL_VM_H_
