#pragma once
/// What the user asks of a training job: batch, objective and constraints.

#include <optional>
#include <string>

namespace sailor::config {

enum class objective { max_throughput, min_cost };
const char* to_string(objective o);

enum class optimizer_kind { adamw, adam, sgd };
const char* to_string(optimizer_kind o);

struct constraints {
  std::optional<double> max_cost_per_iteration_usd;
  std::optional<double> min_iterations_per_s;
  std::optional<double> max_cost_per_hour_usd;
};

/// Where the training tokens come from (the `data:` block of a job file). Without one the
/// runtime trains on its built-in synthetic Markov stream.
enum class data_format { text, tokens_u16, tokens_u32 };
const char* to_string(data_format f);

/// How a text's characters become token ids: `characters`, the file's own code points (the
/// default); `gpt2_bpe`, GPT-2's byte-level BPE from a vocab.json and merges.txt
/// (models/bpe.hpp); `sentencepiece`, a SentencePiece model file (models/sentencepiece.hpp).
/// Both of the latter tokenize once into a cached token file next to the data.
enum class tokenizer_kind { characters, gpt2_bpe, sentencepiece };
const char* to_string(tokenizer_kind k);

struct tokenizer_source {
  tokenizer_kind kind = tokenizer_kind::characters;
  std::string vocab;   ///< gpt2_bpe: vocab.json (relative to the working directory)
  std::string merges;  ///< gpt2_bpe: merges.txt
  std::string model;   ///< sentencepiece: the trained model (a .model file)
};

struct data_source {
  /// A path as written in the job file: relative paths are relative to the working
  /// directory, as a shell reads them (the recipes are run from the repository root).
  std::string path;
  /// text: UTF-8 read with a character-level tokenizer built from the file; tokens-u16 /
  /// tokens-u32: a flat little-endian array of token ids.
  data_format format = data_format::text;
  double validation_fraction = 0.1;  ///< the last part of the file, held out
  tokenizer_source tokenizer;        ///< text only
};

/// The optimizer's schedule and hyper-parameters (AdamW unless `optimizer` says otherwise).
struct optimizer_schedule {
  double lr = 1e-3;             ///< peak learning rate
  double min_lr = -1;           ///< floor of the cosine decay; < 0: lr (no decay)
  int warmup_iterations = 0;    ///< linear warm-up from lr / warmup to lr
  int decay_iterations = 0;     ///< the cosine reaches min_lr here; 0: no decay
  double beta1 = 0.9, beta2 = 0.999;
  double weight_decay = 0.0;    ///< on matrices only (not on norms and biases)
  double grad_clip = 1.0;       ///< global gradient-norm bound; 0 disables clipping
};

/// How the data-parallel replicas of different regions synchronise (the `data_parallel:`
/// block): `sync`, every iteration as inside a region; `diloco`, every `inner_steps`
/// iterations, averaging the regions' parameter deltas and stepping an outer optimizer
/// (DiLoCo; plan.hpp's local_sgd_plan). The fields after `inner_steps` are DiLoCo's.
enum class across_regions_mode { sync, diloco };
const char* to_string(across_regions_mode m);
enum class outer_optimizer_kind { nesterov, sgd };
const char* to_string(outer_optimizer_kind k);
/// The outer exchange's encoding: fp32, or int8 with one fp32 scale per block of values.
enum class delta_compression { none, int8 };
const char* to_string(delta_compression c);

struct data_parallel_options {
  across_regions_mode across_regions = across_regions_mode::sync;
  int inner_steps = 0;  ///< 0: the planner's choice (diloco) or unused (sync)
  outer_optimizer_kind outer_optimizer = outer_optimizer_kind::nesterov;
  double outer_lr = 0.7;        ///< DiLoCo's
  double outer_momentum = 0.9;  ///< DiLoCo's
  delta_compression compression = delta_compression::none;
  /// Streaming: the parameters are cut into this many fragments by layer range, each
  /// exchanged at its own point of the H iterations, so that no exchange carries the whole
  /// model at once.
  int fragments = 1;
  /// Iterations an exchange overlaps: its result is applied this many iterations after it
  /// started, with the local progress made meanwhile kept (0: the exchange blocks).
  int overlap_steps = 1;
};

struct job {
  int global_batch = 0;  ///< sequences per iteration
  objective goal = objective::max_throughput;
  constraints limits;
  optimizer_kind optimizer = optimizer_kind::adamw;
  bool mixed_precision = true;  ///< fp16/bf16 weights with fp32 master weights and states
  bool allow_recompute = true;  ///< the planner may choose activation recomputation
  int max_micro_batch = 0;      ///< 0: no limit beyond memory
  int seed = 1234;
  int iterations = 0;           ///< 0: run until stopped
  optimizer_schedule schedule;
  std::optional<data_source> data;
  int eval_every = 0;    ///< validation loss every this many iterations (0: never)
  int eval_batches = 1;  ///< batches of global_batch sequences averaged per evaluation
  /// A Hugging Face checkpoint of the model (train/pretrained.hpp) the job starts from
  /// instead of random weights (fine-tuning); relative to the working directory. Empty: none.
  std::string init_from;
  data_parallel_options data_parallel;
  /// The planner may join regions by DiLoCo (data_parallel's optimizer, inner_steps from a
  /// short list unless given) where that wins on the objective.
  bool allow_local_sgd = false;
};

}  // namespace sailor::config
