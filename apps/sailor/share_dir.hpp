#pragma once
// Where Sailor's shipped data lies (configs/: clusters, models, jobs, plans): the defaults of
// `sailor demo`, `sailor train --cluster`, `sailor profile` and `sailor replay --live`, and the
// models `--model NAME` finds. An installed sailor finds it beside its bin/, a build-tree one in
// the source tree, so that the programs can be installed or copied (`make install`).
//
// The places, in order:
//   $SAILOR_SHARE_DIR                    when set, the only place (a wrong one is an error,
//                                        not a silent fall-back to another copy)
//   <running executable's dir>/../share/sailor    (/proc/self/exe): an installed copy
//   the source tree compiled in (SAILOR_SOURCE_DIR)  a build-tree run
// A place counts when it holds configs/.
#include <filesystem>
#include <string>
#include <vector>

#include "sailor/config/error.hpp"

namespace sailor::app {

/// One place looked at, and why it is looked at ("$SAILOR_SHARE_DIR", ...).
struct share_dir_candidate {
  std::filesystem::path path;
  std::string source;
};

/// The places looked at, in order (see the top of this file).
std::vector<share_dir_candidate> share_dir_candidates();

/// The first place that holds configs/; otherwise an error naming every place looked at.
result<std::filesystem::path> find_share_dir();

/// `relative` (e.g. "configs/jobs/tiny.yaml") inside the share dir, for an option's default
/// (so that --help shows the path that is used); "" when there is no share dir:
/// check_shipped_default() then says why.
std::string shipped_file(const std::string& relative);

/// An option whose default is a shipped file and is "" (no share dir): the error naming the
/// places looked at; nothing otherwise.
status check_shipped_default(const std::string& value, const std::string& option);

}  // namespace sailor::app
