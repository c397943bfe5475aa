#pragma once
// A Prometheus text exposition (format 0.0.4) as tests read it back: each sample by its name
// with its labels ("sailor_nodes{state=\"ready\"}"), each family's type. Strict: HELP then
// TYPE before a family's samples, one TYPE each, every sample a name, at most one label and
// a number. For the tests of /metrics (apps/sailor/job_metrics.test.cpp, integration tests).

#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <doctest/doctest.h>

namespace sailor::testing {

struct exposition {
  std::map<std::string, double> samples;
  std::map<std::string, std::string> types;  // family -> type
  bool has(const std::string& sample) const { return samples.count(sample) == 1; }
  double at(const std::string& sample) const {
    INFO("sample " << sample);
    REQUIRE(has(sample));
    return samples.at(sample);
  }
};

inline exposition parse_exposition(const std::string& text) {
  exposition out;
  static const std::regex help{R"(# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .+)"};
  static const std::regex type{R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge))"};
  static const std::regex sample{
    R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"\})? (\S+))"};
  std::set<std::string> helped;
  std::istringstream lines{text};
  std::string line;
  std::smatch m;
  while (std::getline(lines, line)) {
    INFO("line: " << line);
    if (std::regex_match(line, m, help)) {
      helped.insert(m[1]);
    } else if (std::regex_match(line, m, type)) {
      CHECK(helped.count(m[1]) == 1);
      CHECK(out.types.count(m[1]) == 0);  // one TYPE per family
      out.types[m[1]] = m[2];
    } else {
      REQUIRE(std::regex_match(line, m, sample));
      CHECK(out.types.count(m[1]) == 1);  // typed before its samples
      out.samples[std::string{m[1]} + std::string{m[2]}] = std::stod(m[3]);
    }
  }
  return out;
}

}  // namespace sailor::testing
