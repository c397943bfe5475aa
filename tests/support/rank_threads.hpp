#pragma once
// Every rank of a plan as a thread of this process, meeting through in-process stores: Gloo
// for collectives, comm's TCP transport on loopback for activations and gradients (behind the
// link shaper when the options name links).
// Needs LibTorch (include only from tests built with it).

#include <chrono>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <sailor/train/data_plane.hpp>
#include <sailor/train/executor.hpp>
#include <sailor/comm/channel.hpp>
#include <sailor/comm/collective.hpp>

#include "arrive_on_exit.hpp"

namespace sailor::testing {

/// Runs `body(rank, executor)` on one thread per rank of `plan`, after creating the rank's
/// executor with `options`. The body returns "" or what went wrong; the result holds one
/// such string per rank (a failed create included). No rank's executor (and communicators) is
/// destroyed before every rank is done: a rank that finishes early would otherwise break the
/// others' Gloo connections.
template <class Body>
std::vector<std::string> run_rank_threads(const config::model_shape& model, const config::plan& plan,
                                          const train::train_options& options, Body body,
                                          std::chrono::milliseconds timeout = std::chrono::seconds{30}) {
  const int n = train::world_size(plan);
  comm::gloo_options gopts;
  gopts.in_process_store = comm::make_in_process_store();
  gopts.timeout = timeout;
  auto p2p_store = comm::make_memory_store();
  std::vector<std::string> errors(n);
  std::latch finished(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<comm::communicator_factory> factory;  // destroyed after the guard
      std::unique_ptr<train::stage_executor> exec;
      arrive_on_exit guard{finished};
      auto made_factory = comm::make_gloo_factory(r, gopts);
      if (!made_factory) {
        errors[r] = made_factory.error().to_string();
        return;
      }
      factory = std::move(*made_factory);
      comm::transport_channel_options copts;
      copts.store = p2p_store;
      copts.timeout = timeout;
      copts = train::data_plane_options(plan, train::role_of(plan, r), options.links, copts);
      auto p2p = comm::make_transport_channel_factory(r, copts);
      auto made = train::stage_executor::create(model, plan, train::role_of(plan, r), *factory,
                                                options, p2p.get());
      if (!made) {
        errors[r] = made.error().to_string();
        return;
      }
      exec = std::move(*made);
      errors[r] = body(r, *exec);
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace sailor::testing
