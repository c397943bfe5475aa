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

/// The project's one error type: what the caller should do (kind), where it applies (file,
/// line 1-based or 0 when unknown, field path) and what was wrong. Made by the named
/// constructors below, one per kind; file and field may be empty.
struct error {
  error_kind kind = error_kind::failed;
  std::string message;  ///< what was wrong and what was expected
  std::string file;
  int line = 0;
  std::string field;  ///< dotted path such as `stages[1].replicas[0].tp`

  static error invalid_input(std::string file, std::string field, std::string message);
  /// A bad value that came from no file (an option, a job field given in code).
  static error invalid_input(std::string field, std::string message);
  static error not_found(std::string file, std::string field, std::string message);
  static error infeasible(std::string field, std::string message);
  static error failed(std::string message);
  static error disconnected(std::string message);
  static error unimplemented(std::string message);
  /// An error whose kind is chosen at run time.
  static error of(error_kind kind, std::string file, std::string field, std::string message);

  /// The same error at `line` of its file.
  error at_line(int at) && {
    line = at;
    return std::move(*this);
  }

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
