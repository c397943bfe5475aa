#pragma once
// The rendezvous store behind gloo_options (private to comm/src: the NCCL backend exchanges
// its unique ids through it too).

#include <memory>

#include <gloo/rendezvous/store.h>

#include <sailor/comm/collective.hpp>

namespace sailor::comm {

/// A FileStore at options.store_path, else the in-process store.
result<std::shared_ptr<gloo::rendezvous::Store>> make_gloo_store(const gloo_options& options);

}  // namespace sailor::comm
