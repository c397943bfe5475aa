#pragma once
/// Model shapes the training runtime is tested and measured with (no LibTorch here).

#include <sailor/config/model.hpp>

namespace sailor::models {

/// A GPT that trains on one CPU core in seconds: 4 blocks, hidden 32, 4 heads, sequence 16,
/// vocabulary 64, fp32.
config::model_shape tiny_gpt_shape();
/// The tiny GPT's sizes as an OPT (ReLU, positions from OPT's offset).
config::model_shape tiny_opt_shape();
/// The tiny GPT's sizes as a Llama: RMSNorm, rotary positions, SwiGLU (ffn 64), 4 query heads
/// sharing 2 KV heads, no biases.
config::model_shape tiny_llama_shape();

/// OPT-350M's shape (configs/models/opt-350m.yaml: OPT's block family, 24 blocks, hidden 1024,
/// 16 heads, sequence 2048, vocabulary 50272) in the given precision; our decoder has no
/// project-in/out of OPT's 512-wide embedding.
config::model_shape opt_350m_shape(config::dtype precision = config::dtype::fp32);

}  // namespace sailor::models
