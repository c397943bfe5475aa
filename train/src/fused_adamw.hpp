#pragma once
/// torch::optim::AdamW's step in one fused pass per parameter (internal to the training
/// runtime; includes LibTorch).
///
/// torch's C++ AdamW runs nine tensor operations per parameter, each reading and writing the
/// whole tensor; this computes the same arithmetic (decoupled weight decay, first and second
/// moments, bias-corrected step) in one loop over parameter, gradient and moments. It keeps
/// its state in the optimizer's own state map, under the same keys and types, so saving,
/// loading and checkpoints see an ordinary AdamW.

#include <torch/torch.h>

namespace sailor::train {

/// Steps `optimizer` if it is a torch::optim::AdamW without amsgrad over contiguous fp32 CPU
/// tensors, and returns true; otherwise does nothing and returns false (call its step()).
/// Parameters without a gradient are skipped, as torch does.
bool fused_adamw_step(torch::optim::Optimizer& optimizer);

}  // namespace sailor::train
