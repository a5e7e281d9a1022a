// ATTENTION and ATTENTION_GRAD through cuDNN's fused attention, where cuDNN takes the case
// (cudnn_attention.cc says which, and how cuDNN is found); attention.cu's launchers try these first
// and run the reference kernels when they return false. Built only with the cuDNN frontend's
// headers (SLRT_WITH_CUDNN_FRONTEND); without them, every case runs the reference kernels.
#pragma once

#include "backends/cuda/cuda_kernels.h"

namespace slrt::cuda {

// The per-context cuDNN state (a handle on the context's stream, built graphs); Context owns it.
struct CudnnAttention;
void destroyCudnnAttention(CudnnAttention *state) noexcept;

// Each returns true when cuDNN ran the op (enqueued on ctx.stream()), false when the reference
// kernels must (cuDNN does not take the case, is not loaded, or is turned off with
// SLRT_CUDNN_ATTENTION=0). With SLRT_CUDNN_ATTENTION=require, a case cuDNN does not take is an
// Error instead.
// With `bshd`, q, k, v, dy, y and the gradients are [B, S, H, D] (attention.layout BSHD).
bool cudnnAttention(Context &ctx, bool causal, float scale, bool bshd, const Tensor &q,
                    const Tensor &k, const Tensor &v, const Tensor *mask, const Tensor *slopes,
                    const Tensor &y);
bool cudnnAttentionGrad(Context &ctx, bool causal, float scale, bool bshd, const Tensor &q,
                        const Tensor &k, const Tensor &v, const Tensor &dy, const Tensor *mask,
                        const Tensor *slopes, const Tensor &dq, const Tensor &dk,
                        const Tensor &dv);

} // namespace slrt::cuda
