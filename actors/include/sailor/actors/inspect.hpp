#pragma once
/// SAILOR_INSPECT: the CAF 0.17 `inspect` overload of a message type whose fields travel as
/// they are.

#include <caf/meta/type_name.hpp>

/// Defines `inspect(f, type& x)`, which CAF 0.17 needs of every message type (to register,
/// copy, print and serialize it), in the namespace where it stands: put it in the type's own
/// namespace, so that argument-dependent lookup finds it. The name CAF knows the type by is
/// `type` as written, and the fields follow in order, each as `x.field`. A type with a field
/// to convert (an enum, an optional) keeps a hand-written overload with a load_callback.
#define SAILOR_INSPECT(type, ...)                                      \
  template <class Inspector>                                           \
  typename Inspector::result_type inspect(Inspector& f, type& x) {     \
    return f(caf::meta::type_name(#type), __VA_ARGS__);                \
  }
