//===- SLPasses.td - passes of the sl dialect --------------------------------------------------===//

#ifndef SL_PASSES_TD
#define SL_PASSES_TD

include "mlir/Pass/PassBase.td"

def BindShapesPass : Pass<"sl-bind-shapes", "mlir::ModuleOp"> {
  let summary = "bind the symbolic batch and sequence dimensions to sizes";
  let description = [{
    Replaces the dynamic dimensions of every function's inputs with static sizes and propagates
    the new types through the body, so that the program is fully static and can be scheduled.

    Which size a dimension takes comes from its ONNX name, recorded by the importer in the input's
    `sl.dims` attribute: `batch`, `batch_size` and `N` take `batch`; `seq`, `sequence`,
    `seq_len`, `sequence_length` and `S` take `seq`. An unnamed dynamic dimension takes `batch` on
    axis 0 and `seq` on axis 1 (the model contract `[batch, seq, ...]`). Any other dynamic
    dimension is an error that names the input and the dimension.

    Example: with `batch=4`, `%x: tensor<?x32xf32> {sl.dims = ["batch", ""]}` becomes
    `tensor<4x32xf32>`, and an `sl.gemm` of it with a `tensor<64x32xf32>` weight now yields
    `tensor<4x64xf32>`.
  }];
  let options = [
    Option<"batch", "batch", "int64_t", /*default=*/"0",
           "Size bound to batch dimensions (0: none given)">,
    Option<"seq", "seq", "int64_t", /*default=*/"0",
           "Size bound to sequence dimensions (0: none given)">,
  ];
}

#endif // SL_PASSES_TD
