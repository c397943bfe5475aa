#pragma once
/// The base of comm's resource types (as in Cap'n Proto's value types versus resource types):
/// a connection, a transport, a communicator or a channel has one owner and is never copied
/// or moved, since callbacks and other threads hold on to its address.

namespace sailor::comm {

/// Derive from it (privately: it is no part of the interface) to make a type neither copyable
/// nor movable. Not for deleting through: its destructor is protected and not virtual.
class non_copyable {
public:
  non_copyable(const non_copyable&) = delete;
  non_copyable& operator=(const non_copyable&) = delete;

protected:
  non_copyable() = default;
  ~non_copyable() = default;
};

}  // namespace sailor::comm
