// The training runtime's fused AdamW step against torch::optim::AdamW: same parameters and
// moments after several steps, with weight decay on one parameter group and not the other.

// Built only with LibTorch (the training executor); an empty program otherwise.
#if __has_include(<sailor/models/gpt.hpp>)

#include "../train/src/fused_adamw.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_train_fused_adamw {

namespace {

struct setup {
  std::vector<torch::Tensor> decayed, plain;
  std::unique_ptr<torch::optim::AdamW> optimizer;
};

// Odd sizes, so that the vector lanes and the scalar tail both run.
setup make(std::uint64_t seed) {
  torch::manual_seed(static_cast<std::int64_t>(seed));
  setup s;
  s.decayed = {torch::randn({37, 11}).requires_grad_(true), torch::randn({64, 8}).requires_grad_(true)};
  s.plain = {torch::randn({13}).requires_grad_(true)};
  torch::optim::AdamWOptions o(3e-3);
  o.betas({0.9, 0.95}).eps(1e-8).weight_decay(0.1);
  auto no_decay = std::make_unique<torch::optim::AdamWOptions>(o);
  no_decay->weight_decay(0.0);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(s.decayed, std::make_unique<torch::optim::AdamWOptions>(o));
  groups.emplace_back(s.plain, std::move(no_decay));
  s.optimizer = std::make_unique<torch::optim::AdamW>(std::move(groups), o);
  return s;
}

void set_grads(setup& s, int step) {
  torch::manual_seed(1000 + step);
  for (auto* list : {&s.decayed, &s.plain})
    for (auto& p : *list) p.mutable_grad() = torch::randn_like(p) * (step + 1);
}

}  // namespace

TEST_CASE("train: the fused AdamW step computes what torch::optim::AdamW computes") {
  auto fused = make(3), reference = make(3);
  for (int step = 0; step < 6; ++step) {
    set_grads(fused, step);
    set_grads(reference, step);
    REQUIRE(sailor::train::fused_adamw_step(*fused.optimizer));
    reference.optimizer->step();
  }
  for (std::size_t i = 0; i < fused.decayed.size(); ++i)
    CHECK(torch::allclose(fused.decayed[i], reference.decayed[i], 1e-5, 1e-6));
  CHECK(torch::allclose(fused.plain[0], reference.plain[0], 1e-5, 1e-6));
  // The state is AdamW's own: its step count and moments match torch's.
  for (auto* p : {&fused.decayed[0], &fused.plain[0]}) {
    auto key = c10::guts::to_string(p->unsafeGetTensorImpl());
    auto& mine = static_cast<torch::optim::AdamWParamState&>(*fused.optimizer->state().at(key));
    auto* q = p == &fused.decayed[0] ? &reference.decayed[0] : &reference.plain[0];
    auto& theirs = static_cast<torch::optim::AdamWParamState&>(
        *reference.optimizer->state().at(c10::guts::to_string(q->unsafeGetTensorImpl())));
    CHECK(mine.step() == 6);
    CHECK(mine.step() == theirs.step());
    CHECK(torch::allclose(mine.exp_avg(), theirs.exp_avg(), 1e-5, 1e-7));
    CHECK(torch::allclose(mine.exp_avg_sq(), theirs.exp_avg_sq(), 1e-5, 1e-7));
  }
  // The parameters moved: the comparison is not between two untouched copies.
  CHECK_FALSE(torch::allclose(fused.plain[0], make(3).plain[0]));
}

TEST_CASE("train: the fused AdamW step declines what it does not handle") {
  torch::Tensor p = torch::randn({4}, torch::kDouble).requires_grad_(true);
  p.mutable_grad() = torch::ones_like(p);
  torch::optim::AdamW adamw({p}, torch::optim::AdamWOptions(1e-3));
  auto before = p.detach().clone();
  CHECK_FALSE(sailor::train::fused_adamw_step(adamw));  // fp64
  CHECK(torch::equal(p.detach(), before));
  torch::Tensor f = torch::randn({4}).requires_grad_(true);
  f.mutable_grad() = torch::ones_like(f);
  torch::optim::SGD sgd({f}, torch::optim::SGDOptions(0.1));
  CHECK_FALSE(sailor::train::fused_adamw_step(sgd));  // not AdamW
  torch::optim::AdamW amsgrad({f}, torch::optim::AdamWOptions(1e-3).amsgrad(true));
  CHECK_FALSE(sailor::train::fused_adamw_step(amsgrad));
}

}  // namespace integration_train_fused_adamw
#endif
