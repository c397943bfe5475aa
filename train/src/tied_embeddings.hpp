#pragma once
// Tied input embedding and output head across pipeline stages, as Megatron-LM ties them
// (internal to the training runtime; includes LibTorch).
//
// With tied embeddings and more than one stage, the first stage holds the embedding matrix
// and the last stage a copy drawn alike (models::stage_module::tied_head_copy). After the
// data-parallel reduction, the two gradients are summed and both copies take the sum, so the
// optimizer keeps them equal. The sum runs as one all-reduce over the world, of a full
// vocabulary x hidden buffer to which replica 0 of the first and of the last stage add their
// shards (TP degrees may differ between the two stages): simple and right for every plan,
// at the price of involving every rank; a group of the first and last stages alone would
// move the same bytes among fewer ranks.

#include <torch/torch.h>

#include <sailor/train/executor.hpp>
#include <sailor/comm/collective.hpp>
#include <sailor/models/gpt.hpp>

namespace sailor::train::detail {

/// Sums the tied gradients over `world` (the plan's ranks, or under DiLoCo the region's);
/// every rank of it calls it (a no-op without tied embeddings or with one stage). Only the
/// `counted` replica's copy enters the sum (the replicas hold the same after their
/// data-parallel reduction). Throws on a communication failure.
void sum_tied_gradients(const config::plan& plan, const rank_role& role, bool counted,
                        models::stage_module& module, comm::communicator& world);

}  // namespace sailor::train::detail
