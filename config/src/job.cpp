#include "sailor/config/job.hpp"

#include "enum_names.hpp"

namespace sailor::config {

const char* to_string(objective o) {
  return o == objective::max_throughput ? "max_throughput" : "min_cost";
}

const char* to_string(optimizer_kind o) { return detail::name_in(detail::optimizer_names, o); }

const char* to_string(data_format f) { return detail::name_in(detail::data_format_names, f); }
const char* to_string(tokenizer_kind k) { return detail::name_in(detail::tokenizer_kind_names, k); }
const char* to_string(across_regions_mode m) { return detail::name_in(detail::across_regions_names, m); }
const char* to_string(outer_optimizer_kind k) { return detail::name_in(detail::outer_optimizer_names, k); }
const char* to_string(delta_compression c) { return detail::name_in(detail::compression_names, c); }

}  // namespace sailor::config
