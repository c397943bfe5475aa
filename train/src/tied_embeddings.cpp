#include "tied_embeddings.hpp"

#include <stdexcept>

namespace sailor::train::detail {

void sum_tied_gradients(const config::plan& plan, const rank_role& role, bool counted,
                        models::stage_module& module, comm::communicator& world) {
  const auto& model = module.model();
  const int stages = plan.num_stages();
  if (!model.tied_embeddings || stages == 1) return;
  torch::NoGradGuard no_grad;
  int index = -1;
  if (role.stage == 0) index = 0;  // layer0.word.weight comes first
  else if (role.stage == stages - 1) index = module.tied_head_copy();
  auto device = module.parameters().empty() ? torch::Device(torch::kCPU)
                                            : module.parameters().front().tensor.device();
  auto full = torch::zeros({model.vocabulary, model.hidden}, torch::TensorOptions().device(device));
  torch::Tensor grad;
  std::int64_t rows = 0;
  if (index >= 0) {
    grad = module.parameters()[index].tensor.grad();
    rows = grad.size(0);
    if (counted) full.narrow(0, role.tp_rank * rows, rows).copy_(grad);
  }
  auto st = world.all_reduce({full.data_ptr(), static_cast<std::size_t>(full.numel()), comm::element_type::f32});
  if (st) throw std::runtime_error("tied embedding gradients: " + st->to_string());
  if (index >= 0) grad.copy_(full.narrow(0, role.tp_rank * rows, rows));
}

}  // namespace sailor::train::detail
