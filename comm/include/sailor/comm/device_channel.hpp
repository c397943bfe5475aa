#pragma once
/// A channel for buffers in CUDA device memory, over any channel for host memory.
///
/// Each send copies the device buffer into a pinned host buffer on the channel's stream
/// (ordered after the work already queued on the device's default stream, where a CUDA
/// LibTorch computes the tensor), then hands it to the inner channel; each receive lands in a
/// pinned buffer and is copied to the device when it completes. The pinned buffers come from
/// a pool (pinning costs milliseconds, too much per transfer). So activations and gradients on
/// GPUs travel over the same transports, shaping and authentication as on CPUs.
///
/// In a build without CUDA, or on a machine without a usable GPU, make_device_channel returns
/// the reason.

#include <memory>

#include "sailor/comm/channel.hpp"

namespace sailor::comm {

/// A channel whose buffers are on device `device`, carried by `inner` (owned). Requests of the
/// returned channel complete when the bytes are in place on the device (receive) or have left
/// this rank's hands (send); an error of `inner` is the request's error.
result<std::unique_ptr<channel>> make_device_channel(std::unique_ptr<channel> inner, int device);

}  // namespace sailor::comm
