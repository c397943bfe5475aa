#include <sailor/models/gpt.hpp>

#include <doctest/doctest.h>

#include <map>
#include <thread>

#include <sailor/models/shapes.hpp>
#include <sailor/models/synthetic_data.hpp>

namespace {

using namespace sailor;
using namespace std::chrono_literals;

// Runs `body(tp)` on two threads forming one TP group of size 2.
void with_tp_pair(const std::function<void(const models::tp_group&)>& body) {
  comm::gloo_options options;
  options.in_process_store = comm::make_in_process_store();
  options.timeout = 20s;
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto factory = comm::make_gloo_factory(r, options);
      REQUIRE(factory.ok());
      auto group = (*factory)->create("tp", {0, 1});
      REQUIRE(group.ok());
      models::tp_group tp;
      tp.group = group->get();
      tp.rank = r;
      tp.size = 2;
      body(tp);
    });
  }
  for (auto& t : threads) t.join();
}

TEST_CASE("models: vocabulary-parallel cross-entropy equals torch's on one rank") {
  torch::manual_seed(3);
  auto logits = torch::randn({6, 10}, torch::requires_grad());
  auto targets = torch::tensor({0, 3, 9, 4, 4, 7}, torch::kLong);
  auto ours = models::vocab_parallel_cross_entropy(logits, targets, 0, {});
  auto ref_logits = logits.detach().clone().requires_grad_(true);
  auto theirs = torch::nn::functional::cross_entropy(
      ref_logits, targets, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  CHECK(torch::allclose(ours, theirs, 1e-5, 1e-6));
  ours.sum().backward();
  theirs.sum().backward();
  CHECK(torch::allclose(logits.grad(), ref_logits.grad(), 1e-5, 1e-6));
}

TEST_CASE("models: cross-entropy over two vocabulary shards equals the full one") {
  torch::manual_seed(4);
  auto full = torch::randn({5, 8});
  auto targets = torch::tensor({1, 6, 7, 0, 4}, torch::kLong);
  auto leaf = full.clone().requires_grad_(true);
  auto want = models::vocab_parallel_cross_entropy(leaf, targets, 0, {});
  want.sum().backward();
  std::vector<torch::Tensor> losses(2), grads(2);
  with_tp_pair([&](const models::tp_group& tp) {
    auto shard = full.narrow(1, tp.rank * 4, 4).clone().requires_grad_(true);
    auto loss = models::vocab_parallel_cross_entropy(shard, targets, tp.rank * 4, tp);
    loss.sum().backward();
    losses[tp.rank] = loss.detach();
    grads[tp.rank] = shard.grad();
  });
  for (int r = 0; r < 2; ++r) CHECK(torch::allclose(losses[r], want, 1e-5, 1e-6));
  CHECK(torch::allclose(torch::cat(grads, 1), leaf.grad(), 1e-5, 1e-6));
}

// A block of every family split over two TP ranks computes what the whole block computes
// (Llama: its 2 KV heads split one per rank, each serving two query heads).
void check_tp2_block(const config::model_shape& shape) {
  torch::manual_seed(5);
  auto x = torch::randn({2, shape.sequence, shape.hidden});
  models::stage_module whole(shape, 1, 2, {}, 42);
  auto xin = x.clone().requires_grad_(true);
  auto want = whole.forward(xin);
  want.pow(2).sum().backward();
  std::vector<torch::Tensor> outs(2), in_grads(2), q_grads(2), k_grads(2);
  with_tp_pair([&](const models::tp_group& tp) {
    models::stage_module half(shape, 1, 2, tp, 42);
    auto in = x.clone().requires_grad_(true);
    auto y = half.forward(in);
    y.pow(2).sum().backward();
    outs[tp.rank] = y.detach();
    in_grads[tp.rank] = in.grad();
    for (auto& p : half.parameters()) {
      if (p.name == "layer1.attn.q.weight") q_grads[tp.rank] = p.tensor.grad();
      if (p.name == "layer1.attn.k.weight") k_grads[tp.rank] = p.tensor.grad();
    }
  });
  for (int r = 0; r < 2; ++r) {
    CHECK(torch::allclose(outs[r], want, 1e-4, 1e-5));
    CHECK(torch::allclose(in_grads[r], xin.grad(), 1e-4, 1e-5));
  }
  torch::Tensor q_whole, k_whole;
  for (auto& p : whole.parameters()) {
    if (p.name == "layer1.attn.q.weight") q_whole = p.tensor.grad();
    if (p.name == "layer1.attn.k.weight") k_whole = p.tensor.grad();
  }
  CHECK(torch::allclose(torch::cat(q_grads, 0), q_whole, 1e-4, 1e-5));
  CHECK(torch::allclose(torch::cat(k_grads, 0), k_whole, 1e-4, 1e-5));
}

}  // namespace

TEST_CASE("models: a TP-2 block computes what the TP-1 block computes, in every family") {
  SUBCASE("gpt2") { check_tp2_block(models::tiny_gpt_shape()); }
  SUBCASE("opt") { check_tp2_block(models::tiny_opt_shape()); }
  SUBCASE("llama") { check_tp2_block(models::tiny_llama_shape()); }
}

TEST_CASE("models: each family holds the parameters config counts, on one rank and over TP 2") {
  for (auto shape : {models::tiny_gpt_shape(), models::tiny_opt_shape(), models::tiny_llama_shape()}) {
    CAPTURE(shape.name);
    models::stage_module whole(shape, 0, shape.num_all_layers(), {}, 3);
    CHECK(whole.num_parameters() == shape.total_params());
    models::tp_group r0;
    r0.size = 2;
    models::stage_module block(shape, 1, 2, r0, 3);
    std::int64_t replicated = 0;
    for (const auto& p : block.parameters())
      if (p.shard_dim < 0) replicated += p.tensor.numel();
    CHECK(block.num_parameters() == (shape.params_of_block() - replicated) / 2 + replicated);
  }
  // Llama: no biases, RMSNorm gains only, a gate, K and V half as wide as Q.
  auto llama = models::tiny_llama_shape();
  models::stage_module block(llama, 1, 2, {}, 3);
  std::map<std::string, std::vector<std::int64_t>> shapes;
  for (const auto& p : block.parameters()) {
    CHECK_MESSAGE(p.name.find(".bias") == std::string::npos, p.name);
    shapes[p.name] = p.tensor.sizes().vec();
  }
  CHECK(shapes.size() == 9);
  CHECK(shapes["layer1.attn.k.weight"] == std::vector<std::int64_t>{16, 32});
  CHECK(shapes["layer1.mlp.gate.weight"] == std::vector<std::int64_t>{64, 32});
  CHECK(shapes["layer1.mlp.fc2.weight"] == std::vector<std::int64_t>{32, 64});
}

TEST_CASE("models: Llama's rotary positions make attention depend on relative position") {
  // Without positions, causal attention at position 2 sees tokens 0 and 1 as a set: swapping
  // them would not change its output. Rotary positions make the order count.
  auto shape = models::tiny_llama_shape();
  models::stage_module m(shape, 0, 2, {}, 11);
  auto tokens = torch::randint(0, shape.vocabulary, {1, shape.sequence}, torch::kLong);
  auto swapped = tokens.clone();
  swapped.index_put_({0, 0}, tokens.index({0, 1}));
  swapped.index_put_({0, 1}, tokens.index({0, 0}));
  torch::NoGradGuard no_grad;
  auto a = m.forward(tokens), b = m.forward(swapped);
  // Position 2 sees the same set of earlier tokens in another order: it differs.
  CHECK_FALSE(torch::allclose(a.index({0, 2}), b.index({0, 2}), 1e-5, 1e-6));
}

TEST_CASE("models: OPT reads its position table from row 2") {
  auto shape = models::tiny_opt_shape();
  models::stage_module m(shape, 0, 1, {}, 12);
  REQUIRE(m.parameters().size() == 2);
  CHECK(m.parameters()[1].tensor.size(0) == shape.sequence + 2);
  torch::NoGradGuard no_grad;
  auto tokens = torch::zeros({1, 3}, torch::kLong);
  auto e = m.forward(tokens);
  auto want = m.parameters()[0].tensor[0] + m.parameters()[1].tensor[2];
  CHECK(torch::allclose(e.index({0, 0}), want));
}

TEST_CASE("models: a tied head reads the embedding's matrix") {
  auto shape = models::tiny_gpt_shape();
  shape.tied_embeddings = true;
  models::stage_module m(shape, 0, shape.num_all_layers(), {}, 13);
  CHECK(m.num_parameters() == shape.total_params());
  for (const auto& p : m.parameters()) CHECK(p.name.find("head.weight") == std::string::npos);
  auto tokens = torch::randint(0, shape.vocabulary, {2, shape.sequence + 1}, torch::kLong);
  auto loss = m.forward(tokens.narrow(1, 0, shape.sequence), tokens.narrow(1, 1, shape.sequence));
  loss.backward();
  // The embedding's gradient has rows beyond the input tokens' (the head's share).
  auto g = m.parameters()[0].tensor.grad();
  CHECK((g.abs().sum(1) > 0).sum().item<int>() == shape.vocabulary);
}

TEST_CASE("models: shards slice the same full weights, whatever the TP degree") {
  auto shape = models::tiny_gpt_shape();
  models::stage_module whole(shape, 0, shape.num_all_layers(), {}, 9);
  models::tp_group r1;
  r1.rank = 1;
  r1.size = 2;  // no communicator needed to build parameters
  models::stage_module half(shape, 0, shape.num_all_layers(), r1, 9);
  REQUIRE(whole.parameters().size() == half.parameters().size());
  for (std::size_t i = 0; i < whole.parameters().size(); ++i) {
    const auto& w = whole.parameters()[i];
    const auto& h = half.parameters()[i];
    CHECK(w.name == h.name);
    auto expect = w.shard_dim < 0 ? w.tensor
                                  : w.tensor.narrow(w.shard_dim, w.full_size / 2, w.full_size / 2);
    CHECK_MESSAGE(torch::equal(expect, h.tensor), w.name);
  }
  models::stage_module other_seed(shape, 0, 1, {}, 10);
  CHECK_FALSE(torch::equal(other_seed.parameters()[0].tensor, whole.parameters()[0].tensor));
}

TEST_CASE("models: an OPT-350M block shard has the parameters config counts") {
  auto opt = models::opt_350m_shape();
  models::tp_group tp;
  tp.size = 2;
  models::stage_module block(opt, 1, 2, tp, 1);
  const std::int64_t h = opt.hidden;
  const std::int64_t replicated = 4 * h + 2 * h;  // layer norms, biases after row-parallel layers
  CHECK(block.num_parameters() == (opt.params_of_block() - replicated) / 2 + replicated);
}

TEST_CASE("models: the Markov data set is deterministic and learnable") {
  models::markov_dataset a(64, 16, 7), b(64, 16, 7), c(64, 16, 8);
  CHECK(a.sample(123) == b.sample(123));
  CHECK(a.sample(123) != c.sample(123));
  CHECK(a.sample(1) != a.sample(2));
  models::markov_dataset epoch(64, 16, 7, 10);
  CHECK(epoch.sample(3) == epoch.sample(13));
  // Most transitions follow one of a token's two successors: a bigram table predicts them.
  std::map<std::pair<std::int64_t, std::int64_t>, int> counts;
  int total = 0;
  for (int i = 0; i < 200; ++i) {
    auto s = a.sample(i);
    for (std::size_t t = 1; t < s.size(); ++t, ++total) ++counts[{s[t - 1], s[t]}];
  }
  int frequent = 0;
  for (auto& [pair, n] : counts)
    if (n >= 5) frequent += n;
  CHECK(frequent > total * 0.7);
}

TEST_CASE("models: weight decay applies to matrices, not to layer norms or biases") {
  auto shape = models::tiny_gpt_shape();
  models::stage_module whole(shape, 0, shape.num_all_layers(), {}, 1);
  int decayed = 0, plain = 0;
  for (const auto& p : whole.parameters()) {
    const bool is_norm_or_bias = p.name.find(".bias") != std::string::npos ||
                                 p.name.find("ln") != std::string::npos;
    CHECK_MESSAGE(models::decays(p) == !is_norm_or_bias, p.name);
    (models::decays(p) ? decayed : plain) += 1;
  }
  // Per block: q, k, v, out, fc1, fc2 weights decay; 2 norms x 2 + 6 biases do not.
  CHECK(decayed == 2 + 6 * shape.num_layers + 1);
  CHECK(plain == 10 * shape.num_layers + 2);
}
