#pragma once
/// Errors of loading and validating inputs, as values.

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace sailor {

/// What the caller should do about an error (after Cap'n Proto's classification).
enum class error_kind {
  invalid_input,  ///< the input is wrong: fix it and try again
  not_found,      ///< a file, GPU type, zone or profile that was named does not exist
  infeasible,     ///< the input is well formed but no answer satisfies it
  failed,         ///< an operation failed for another reason
  disconnected,   ///< a peer went away
  unimplemented,  ///< not built yet
};

const char* to_string(error_kind kind);

/// An error with where it happened: file, line (1-based, 0 when unknown) and field path.
struct error {
  error_kind kind = error_kind::failed;
  std::string message;  ///< what was wrong and what was expected
  std::string file;
  int line = 0;
  std::string field;  ///< dotted path such as `stages[1].replicas[0].tp`

  /// One line for a person: `file:line: field: message`.
  std::string to_string() const;
};

/// A value or an error (std::expected is C++23; this is the part we need).
template <class T>
class result {
public:
  result(T value) : state_(std::move(value)) {}
  result(sailor::error err) : state_(std::move(err)) {}

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const sailor::error& error() const { return std::get<1>(state_); }

private:
  std::variant<T, sailor::error> state_;
};

/// Success or an error.
using status = std::optional<error>;

}  // namespace sailor
