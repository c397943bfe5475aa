#include "sailor/config/job.hpp"

#include "enum_names.hpp"

namespace sailor::config {

const char* to_string(objective o) {
  return o == objective::max_throughput ? "max_throughput" : "min_cost";
}

const char* to_string(optimizer_kind o) { return detail::name_in(detail::optimizer_names, o); }

const char* to_string(data_format f) { return detail::name_in(detail::data_format_names, f); }
const char* to_string(tokenizer_kind k) { return detail::name_in(detail::tokenizer_kind_names, k); }

}  // namespace sailor::config
