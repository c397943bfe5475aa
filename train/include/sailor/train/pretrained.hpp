#pragma once
/// Starting from a model trained elsewhere (`sailor train --init-from`, a job's `init_from`): a
/// Hugging Face checkpoint of the model's family (GPT2LMHeadModel, OPTForCausalLM,
/// LlamaForCausalLM with grouped-query attention), one .safetensors file or a folder with
/// model.safetensors or the shards of model.safetensors.index.json. F32, F16, BF16 and F64 are
/// read (and trained in fp32). Every rank loads its own slice (stage_executor::load_pretrained),
/// so any plan starts from it, whatever its stages and TP degrees. No LibTorch in this header.
///
/// Names and shapes follow the model's config: a tensor missing, of another shape or dtype,
/// or holding a NaN is refused, naming the file and the tensor. Where they may differ: the
/// file's word embedding (and untied head) may have fewer rows than the model's vocabulary (a
/// vocabulary padded for a TP degree: the extra rows keep their initial values), its position
/// table more rows than the model's sequence (the first ones are used). GPT-2's own files,
/// whose names lack "transformer.", are read too; attention-mask buffers are skipped.

#include <cstdint>
#include <string>
#include <vector>

#include <sailor/config/error.hpp>
#include <sailor/config/model.hpp>

namespace sailor::train {

struct pretrained_summary {
  int tensors = 0;          ///< the model's parameters it fills
  std::int64_t bytes = 0;   ///< bytes of the file's tensors read
  /// The file's tensors that fill no parameter of the model (listed for the user's log).
  std::vector<std::string> unused;
};

/// Reads the whole checkpoint at `path` against `model` (one layer at a time, so memory stays
/// at one layer's), as every rank will: what the coordinator does before it plans, so that a
/// file that cannot start the job is refused before any node works. A file whose bias the
/// model lacks (`bias: false`) is refused unless that bias is zero.
result<pretrained_summary> check_pretrained(const config::model_shape& model, const std::string& path);

}  // namespace sailor::train
