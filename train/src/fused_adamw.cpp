#include "fused_adamw.hpp"

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace sailor::train {
namespace {

// One fused pass of AdamW over a contiguous fp32 tensor, the arithmetic of
// torch::optim::AdamW::step (decoupled decay, moments, bias-corrected step) in one loop
// instead of nine tensor operations (which read and write the whole tensor several times).
// Four lanes at a time where SSE is there (sqrt and division do not auto-vectorize under
// errno semantics); the lanes and the scalar tail compute the same expression.
void adamw_pass(float* __restrict p, const float* __restrict g, float* __restrict m,
                float* __restrict v, std::int64_t n, float decay, float beta1, float gain1,
                float beta2, float gain2, float inv_sqrt_correction2, float eps, float neg_step) {
  std::int64_t i = 0;
#if defined(__SSE2__)
  const __m128 b1 = _mm_set1_ps(beta1), k1 = _mm_set1_ps(gain1), b2 = _mm_set1_ps(beta2),
               k2 = _mm_set1_ps(gain2), c2 = _mm_set1_ps(inv_sqrt_correction2),
               e = _mm_set1_ps(eps), d = _mm_set1_ps(decay), s = _mm_set1_ps(neg_step);
  for (; i + 4 <= n; i += 4) {
    const __m128 gi = _mm_loadu_ps(g + i);
    const __m128 mi = _mm_add_ps(_mm_mul_ps(_mm_loadu_ps(m + i), b1), _mm_mul_ps(k1, gi));
    const __m128 vi =
        _mm_add_ps(_mm_mul_ps(_mm_loadu_ps(v + i), b2), _mm_mul_ps(_mm_mul_ps(k2, gi), gi));
    _mm_storeu_ps(m + i, mi);
    _mm_storeu_ps(v + i, vi);
    const __m128 denom = _mm_add_ps(_mm_mul_ps(_mm_sqrt_ps(vi), c2), e);
    _mm_storeu_ps(p + i, _mm_add_ps(_mm_mul_ps(_mm_loadu_ps(p + i), d),
                                    _mm_mul_ps(s, _mm_div_ps(mi, denom))));
  }
#endif
  for (; i < n; ++i) {
    const float gi = g[i];
    const float mi = m[i] * beta1 + gain1 * gi;
    const float vi = v[i] * beta2 + (gain2 * gi) * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * decay + neg_step * (mi / (std::sqrt(vi) * inv_sqrt_correction2 + eps));
  }
}

}  // namespace

bool fused_adamw_step(torch::optim::Optimizer& optimizer) {
  if (dynamic_cast<torch::optim::AdamW*>(&optimizer) == nullptr) return false;
  auto fits = [](const torch::Tensor& t, const torch::Tensor& like) {
    return t.defined() && t.is_cpu() && t.scalar_type() == torch::kFloat && t.is_contiguous() &&
           t.numel() == like.numel();
  };
  auto& state = optimizer.state();
  for (const auto& group : optimizer.param_groups()) {
    if (static_cast<const torch::optim::AdamWOptions&>(group.options()).amsgrad()) return false;
    for (const auto& p : group.params()) {
      if (!fits(p, p) || (p.grad().defined() && !fits(p.grad(), p))) return false;
      auto it = state.find(c10::guts::to_string(p.unsafeGetTensorImpl()));
      if (it == state.end()) continue;
      auto* st = dynamic_cast<torch::optim::AdamWParamState*>(it->second.get());
      if (st == nullptr || !fits(st->exp_avg(), p) || !fits(st->exp_avg_sq(), p)) return false;
    }
  }
  torch::NoGradGuard no_grad;
  for (auto& group : optimizer.param_groups()) {
    const auto& o = static_cast<const torch::optim::AdamWOptions&>(group.options());
    const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      // Keyed as torch::optim::AdamW keys it.
      const auto key = c10::guts::to_string(p.unsafeGetTensorImpl());
      auto it = state.find(key);
      if (it == state.end()) {
        auto fresh = std::make_unique<torch::optim::AdamWParamState>();
        fresh->step(0);
        fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        it = state.emplace(key, std::move(fresh)).first;
      }
      auto& st = static_cast<torch::optim::AdamWParamState&>(*it->second);
      st.step(st.step() + 1);
      const double correction1 = 1 - std::pow(beta1, static_cast<double>(st.step()));
      const double correction2 = 1 - std::pow(beta2, static_cast<double>(st.step()));
      adamw_pass(p.data_ptr<float>(), p.grad().data_ptr<float>(), st.exp_avg().data_ptr<float>(),
                 st.exp_avg_sq().data_ptr<float>(), p.numel(),
                 static_cast<float>(o.weight_decay() != 0 ? 1 - o.lr() * o.weight_decay() : 1.0),
                 static_cast<float>(beta1), static_cast<float>(1 - beta1), static_cast<float>(beta2),
                 static_cast<float>(1 - beta2), static_cast<float>(1 / std::sqrt(correction2)),
                 static_cast<float>(o.eps()), static_cast<float>(-o.lr() / correction1));
    }
  }
  return true;
}

}  // namespace sailor::train
