#pragma once
// Small string checks the tests share (one definition: unity builds compile several test files
// as one translation unit).
#include <string>

namespace sailor::testing {

inline bool contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

}  // namespace sailor::testing
