#include "sailor/config/job.hpp"

namespace sailor::config {

const char* to_string(objective o) {
  return o == objective::max_throughput ? "max_throughput" : "min_cost";
}

const char* to_string(optimizer_kind o) {
  switch (o) {
    case optimizer_kind::adamw: return "adamw";
    case optimizer_kind::adam: return "adam";
    case optimizer_kind::sgd: return "sgd";
  }
  return "?";
}

const char* to_string(data_format f) {
  switch (f) {
    case data_format::text: return "text";
    case data_format::tokens_u16: return "tokens-u16";
    case data_format::tokens_u32: return "tokens-u32";
  }
  return "?";
}

}  // namespace sailor::config
