//===- SLAttrs.td - typed attributes of the sl dialect -----------------------------------------===//
//
// Attributes whose values are a closed set the verifier, the passes and the schedule emitter
// switch over (enums), and the plans the scheduling passes hand each other (sl.plan,
// sl.generation, sl.bind_shapes; StepAttributes.h): typed parameters, never string keys.
//
//===--------------------------------------------------------------------------------------------===//

#ifndef SL_ATTRS_TD
#define SL_ATTRS_TD

include "mlir/IR/EnumAttr.td"
include "sl/SLDialect.td"

// The order of the dimensions of the attention kernels' per-head tensors (q, k, v, the result and
// their gradients). Exporters permute the projections' [batch, seq, heads, dim] to
// [batch, heads, seq, dim] before attention and back after it; with `bshd` the kernels read and
// write the projections' order and those permutations are never copied (sl-fold-head-transposes).
def SL_HeadLayout : I32EnumAttr<"HeadLayout", "order of the dimensions of per-head tensors", [
    I32EnumAttrCase<"bhsd", 0>,
    I32EnumAttrCase<"bshd", 1>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::sl";
}

def SL_HeadLayoutAttr : EnumAttr<SL_Dialect, SL_HeadLayout, "head_layout"> {
  let summary = "[batch, heads, seq, dim] (bhsd, the default) or [batch, seq, heads, dim] (bshd)";
  let assemblyFormat = "`<` $value `>`";
}

// The stream of an explicit step a kernel runs on (sl.stream, written by sl-assign-streams): the
// device's compute stream, the copies to and from the device, the host's own kernels (optimizer
// steps, host accumulations and concatenations, KV writes into host caches) and the collectives.
def SL_StreamKind : I32EnumAttr<"StreamKind", "the stream a kernel of an explicit step runs on", [
    I32EnumAttrCase<"compute", 0>,
    I32EnumAttrCase<"h2d", 1>,
    I32EnumAttrCase<"d2h", 2>,
    I32EnumAttrCase<"host", 3>,
    I32EnumAttrCase<"collective", 4>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::sl";
}

def SL_StreamKindAttr : EnumAttr<SL_Dialect, SL_StreamKind, "stream"> {
  let summary = "the stream a kernel runs on: compute, h2d, d2h, host or collective";
  let assemblyFormat = "`<` $value `>`";
}

// The schedule a step follows (sl.plan): how the scheduling passes order a training or inference
// step's sub-batches and blocks.
def SL_PlanMode : I32EnumAttr<"PlanMode", "the order a step runs its sub-batches and blocks in", [
    I32EnumAttrCase<"speedloader", 0>,
    I32EnumAttrCase<"canonical", 1>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::sl";
}

// Parameters of the plans below. Each optional one is printed only where it is set, so a plan
// says which of its figures a pass wrote; the verifiers check their ranges.
class SL_OptionalInt<string desc> : OptionalParameter<"std::optional<int64_t>", desc> {
  let parser = [{ [&]() -> ::mlir::FailureOr<std::optional<int64_t>> {
    auto value = ::mlir::FieldParser<int64_t>::parse($_parser);
    if (::mlir::failed(value))
      return ::mlir::failure();
    return std::optional<int64_t>(*value);
  }() }];
  let printer = [{ $_printer << *$_self }];
}
class SL_OptionalBool<string desc> : OptionalParameter<"std::optional<bool>", desc> {
  let parser = [{ [&]() -> ::mlir::FailureOr<std::optional<bool>> {
    if (::mlir::succeeded($_parser.parseOptionalKeyword("true")))
      return std::optional<bool>(true);
    if (::mlir::succeeded($_parser.parseOptionalKeyword("false")))
      return std::optional<bool>(false);
    return $_parser.emitError($_parser.getCurrentLocation(), "expected true or false");
  }() }];
  let printer = [{ $_printer << (*$_self ? "true" : "false") }];
}
// An APFloat, not a double: the attribute storage hashes its parameters, and LLVM hashes no double.
class SL_OptionalSeconds<string desc> : OptionalParameter<"std::optional<::llvm::APFloat>", desc> {
  let parser = [{ [&]() -> ::mlir::FailureOr<std::optional<::llvm::APFloat>> {
    double value;
    if (::mlir::failed($_parser.parseFloat(value)))
      return ::mlir::failure();
    return std::optional<::llvm::APFloat>(::llvm::APFloat(value));
  }() }];
  let printer = [{ $_printer.printFloat(*$_self) }];
}
def SL_OptionalPlanMode : OptionalParameter<"std::optional<::sl::PlanMode>",
                                            "speedloader or canonical"> {
  let parser = [{ [&]() -> ::mlir::FailureOr<std::optional<::sl::PlanMode>> {
    ::llvm::SMLoc loc = $_parser.getCurrentLocation();
    ::llvm::StringRef keyword;
    if (::mlir::failed($_parser.parseKeyword(&keyword)))
      return ::mlir::failure();
    if (std::optional<::sl::PlanMode> mode = ::sl::symbolizePlanMode(keyword))
      return mode;
    return $_parser.emitError(loc, "mode must be speedloader or canonical, got '") << keyword << "'";
  }() }];
  let printer = [{ $_printer << ::sl::stringifyPlanMode(*$_self) }];
}

class SL_Attr<string name, string attrMnemonic> : AttrDef<SL_Dialect, name> {
  let mnemonic = attrMnemonic;
}

// sl.plan on a module (from sl-plan) and on a training or inference step function (from
// sl-schedule-subbatches or sl-explicit-forward, whose sl.plan marks the step explicit).
// Parameters are in alphabetical order, as a dictionary's keys print.
def SL_PlanAttr : SL_Attr<"Plan", "plan"> {
  let summary = "the plan of a training or inference step";
  let description = [{
    How a step runs: its mode, `num_sub_batches` sub-batches of `sub_batch_size`, `live_blocks`
    blocks on the device at a time, over `world` ranks (1 where absent), and what sl-plan and the
    scheduling passes predicted or measured of it. Every figure is optional: a pass writes the
    ones it knows, and the schedule emitter writes 0 for one that is absent.

    Example:
    ```mlir
    module attributes {sl.plan = #sl.plan<live_blocks = 1, mode = speedloader,
                                          num_sub_batches = 3, sub_batch_size = 2>} {}
    ```
  }];
  let parameters = (ins
    SL_OptionalInt<"the largest activation that crosses a block boundary, in bytes">:$boundary_activation_bytes,
    SL_OptionalInt<"blocks on the device at a time (at least 1)">:$live_blocks,
    SL_OptionalPlanMode:$mode,
    SL_OptionalInt<"sub-batches per step (at least 1)">:$num_sub_batches,
    SL_OptionalInt<"the model's parameters, in bytes">:$parameter_bytes,
    SL_OptionalInt<"the device arena sl-plan predicts, in bytes">:$predicted_device_bytes,
    SL_OptionalInt<"the host memory sl-plan predicts, in bytes">:$predicted_host_bytes,
    SL_OptionalInt<"the host pool sl-plan predicts, in bytes">:$predicted_host_pool_bytes,
    SL_OptionalSeconds<"the step time sl-plan predicts, in seconds">:$predicted_step_seconds,
    SL_OptionalInt<"sequences per sub-batch (at least 1)">:$sub_batch_size,
    SL_OptionalInt<"ranks the step is sharded over (at least 1; absent: one)">:$world);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

// sl.generation on a module (from sl-split-generation) and sl.plan on the @generate step (from
// sl-schedule-generation, which adds the step's own sizes).
def SL_GenerationPlanAttr : SL_Attr<"GenerationPlan", "generation_plan"> {
  let summary = "the plan of a generation step";
  let description = [{
    The sizes sl-split-generation compiled prefill and decode at (`sub_batch_size` sequences,
    prompts of `max_prompt_len`, `max_new_tokens` new tokens, KV caches of `cache_len` =
    max_prompt_len + max_new_tokens positions, `vocab` logits), then what it planned
    (`num_sub_batches`, where the weights and KV caches live, predicted memory) and, on the step,
    what sl-schedule-generation built (`batch`, parameter and KV-cache bytes).

    Example:
    ```mlir
    module attributes {sl.generation = #sl.generation_plan<cache_len = 5, max_new_tokens = 2,
                                                           max_prompt_len = 3,
                                                           sub_batch_size = 2, vocab = 32>} {}
    ```
  }];
  let parameters = (ins
    SL_OptionalInt<"sequences per step (at least 1)">:$batch,
    AttrParameter<"int64_t", "KV cache positions: max_prompt_len + max_new_tokens (at least 1)">:$cache_len,
    SL_OptionalInt<"the KV caches, in bytes">:$kv_cache_bytes,
    SL_OptionalBool<"whether the KV caches stay on the device">:$kv_cache_on_device,
    AttrParameter<"int64_t", "tokens generated after the prompt (at least 1)">:$max_new_tokens,
    AttrParameter<"int64_t", "the longest prompt (at least 1)">:$max_prompt_len,
    SL_OptionalInt<"sub-batches per step (at least 1)">:$num_sub_batches,
    SL_OptionalInt<"the model's parameters, in bytes">:$parameter_bytes,
    SL_OptionalInt<"the device memory predicted, in bytes">:$predicted_device_bytes,
    SL_OptionalInt<"the host memory predicted, in bytes">:$predicted_host_bytes,
    AttrParameter<"int64_t", "sequences per sub-batch (at least 1)">:$sub_batch_size,
    AttrParameter<"int64_t", "logits per position (at least 1)">:$vocab,
    SL_OptionalBool<"whether the weights stay on the device">:$weights_on_device);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

// sl.bind_shapes on a module: the sizes sl-bind-shapes binds its batch and sequence dimensions to
// where its own options leave them 0 (written by sl-plan and sl-split-generation on the copies of
// a model they compile).
def SL_BindShapesAttr : SL_Attr<"BindShapes", "bind_shapes"> {
  let summary = "the batch and sequence sizes to bind a module at";
  let description = [{
    Example:
    ```mlir
    module attributes {sl.bind_shapes = #sl.bind_shapes<batch = 2, seq = 7>} {}
    ```
  }];
  let parameters = (ins SL_OptionalInt<"the batch size (at least 1)">:$batch,
                        SL_OptionalInt<"the sequence length (at least 1)">:$seq);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // SL_ATTRS_TD
