//===- SLInterfaces.td - interfaces of the sl dialect's ops -----------------------------------===//
//
// Included by SLOps.td. SL_Op gives every op the kernel interface with its defaults (a compute
// kernel reading every operand); an op whose role differs overrides the methods it names in
// SL_Op's third argument, in lib/Dialect/KernelOps.cpp.
//
//===--------------------------------------------------------------------------------------------===//

#ifndef SL_INTERFACES_TD
#define SL_INTERFACES_TD

include "mlir/IR/OpBase.td"

def SL_KernelOpInterface : OpInterface<"KernelOpInterface"> {
  let cppNamespace = "::sl";
  let description = [{
    What the scheduling passes and the cost model need to know of an op's role once it runs as
    part of a schedule: whether it launches a kernel at all, whether the runtime writes its result
    before a step starts, which stream of an explicit step runs it, which operands its kernel
    reads as data, and how many FLOPs it performs. The free functions of
    `sl/Dialect/KernelOps.h` answer the same for any op (an op of another dialect, such as
    `func.return`, is no kernel).
  }];
  let methods = [
    InterfaceMethod<[{
        Whether the op launches a kernel. Parameters, parameter shards and constants name values
        the runtime holds; reshapes, sub-batches and views name bytes of another value; `empty`
        names uninitialised bytes; `program` separates programs; `shape` is folded away before a
        schedule exists. None of them launches one.
      }], "bool", "isKernel", (ins), [{}], [{ return true; }]>,
    InterfaceMethod<[{
        Whether the runtime writes the op's result before a step starts (parameters, parameter
        shards, constants): it lives on the host, and its buffer is never reused.
      }], "bool", "isPreloaded", (ins), [{}], [{ return false; }]>,
    InterfaceMethod<[{
        The stream that runs the op's kernel in an explicit step (for a kernel: see isKernel).
        Copies run on the h2d and d2h streams, collectives on their own, the optimizer and the
        kernels whose result lives on the host on the host stream, everything else on the
        compute stream.
      }], "::sl::StreamKind", "getStreamKind", (ins), [{}],
      [{ return ::sl::StreamKind::compute; }]>,
    InterfaceMethod<[{
        The operands the op's kernel reads as data, in order; the others are shapes, axes,
        bounds or counts that the schedule carries as attributes.
      }], "::llvm::SmallVector<unsigned>", "getDataOperandIndices", (ins), [{}],
      [{ return ::sl::allOperandIndices($_op); }]>,
    InterfaceMethod<[{
        The FLOPs the op's kernel performs (a multiply-add counts two): one per result element
        unless the op says otherwise (matrix products, attention and its gradient; none for
        pure data movement).
      }], "double", "getFlops", (ins), [{}],
      [{ return ::sl::resultElements($_op); }]>,
  ];
}

#endif // SL_INTERFACES_TD
