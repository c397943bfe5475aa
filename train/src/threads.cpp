#include "threads.hpp"

#include <dlfcn.h>

#include <torch/torch.h>

namespace sailor::train {

void set_compute_threads(int n, int blas) {
  if (n <= 0) return;
  torch::set_num_threads(n);
  using setter = void (*)(int);
  if (auto* set = reinterpret_cast<setter>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads")))
    set(blas > 0 ? blas : n);
}

}  // namespace sailor::train
