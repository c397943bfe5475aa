#pragma once
// The names of config's enums, one table per enum: to_string prints a value by its table and
// the YAML loader reads one by the same table, so the two directions cannot disagree.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "sailor/config/job.hpp"
#include "sailor/config/model.hpp"

namespace sailor::config::detail {

template <class E>
struct enum_name {
  E value;
  const char* name;
};

inline constexpr enum_name<dtype> dtype_names[] = {
  {dtype::fp32, "fp32"},
  {dtype::fp16, "fp16"},
  {dtype::bf16, "bf16"},
};
inline constexpr enum_name<architecture> architecture_names[] = {
  {architecture::gpt2, "gpt2"},
  {architecture::opt, "opt"},
  {architecture::llama, "llama"},
};
inline constexpr enum_name<optimizer_kind> optimizer_names[] = {
  {optimizer_kind::adamw, "adamw"},
  {optimizer_kind::adam, "adam"},
  {optimizer_kind::sgd, "sgd"},
};
inline constexpr enum_name<tokenizer_kind> tokenizer_kind_names[] = {
  {tokenizer_kind::characters, "characters"},
  {tokenizer_kind::gpt2_bpe, "gpt2_bpe"},
  {tokenizer_kind::sentencepiece, "sentencepiece"},
};

inline constexpr enum_name<data_format> data_format_names[] = {
  {data_format::text, "text"},
  {data_format::tokens_u16, "tokens-u16"},
  {data_format::tokens_u32, "tokens-u32"},
};

inline constexpr enum_name<across_regions_mode> across_regions_names[] = {
  {across_regions_mode::sync, "sync"},
  {across_regions_mode::diloco, "diloco"},
};
inline constexpr enum_name<outer_optimizer_kind> outer_optimizer_names[] = {
  {outer_optimizer_kind::nesterov, "nesterov"},
  {outer_optimizer_kind::sgd, "sgd"},
};
inline constexpr enum_name<delta_compression> compression_names[] = {
  {delta_compression::none, "none"},
  {delta_compression::int8, "int8"},
};

/// The name of `value` ("?" for a value outside the table).
template <class E, std::size_t N>
const char* name_in(const enum_name<E> (&table)[N], E value) {
  for (const auto& e : table)
    if (e.value == value) return e.name;
  return "?";
}

/// The value named `name`; nothing for a name outside the table.
template <class E, std::size_t N>
std::optional<E> value_in(const enum_name<E> (&table)[N], std::string_view name) {
  for (const auto& e : table)
    if (name == e.name) return e.value;
  return std::nullopt;
}

/// The names for a person: "a, b or c".
template <class E, std::size_t N>
std::string names_in(const enum_name<E> (&table)[N]) {
  std::string out;
  for (std::size_t i = 0; i < N; ++i)
    out += (i == 0 ? "" : i + 1 == N ? " or " : ", ") + std::string(table[i].name);
  return out;
}

}  // namespace sailor::config::detail
