#pragma once
// Thread counts of this process's compute libraries.

namespace sailor::train {

/// Sets torch's intra-op threads to `n` and, when LibTorch runs on OpenBLAS, OpenBLAS's own
/// pool too: torch::set_num_threads leaves OpenBLAS alone, and its default pool (one thread
/// per core) spins while it waits, which on a machine with more single-threaded ranks than
/// cores steals the cores the other ranks compute on (a block's forward ran 30x slower with 4
/// ranks on 2 cores). OpenBLAS is looked up at run time; without it only torch is set.
/// `blas` > 0 gives OpenBLAS that many threads instead of `n`.
void set_compute_threads(int n, int blas = 0);

}  // namespace sailor::train
