// A rendezvous store in this process's memory, for ranks running as threads of one process.
#include "sailor/comm/channel.hpp"

#include <condition_variable>
#include <map>
#include <mutex>

namespace sailor::comm {
namespace {

class memory_store final : public rendezvous_store {
public:
  status set(const std::string& key, const std::vector<char>& value) override {
    {
      std::lock_guard lock{mu_};
      values_[key] = value;
    }
    changed_.notify_all();
    return {};
  }
  result<std::vector<char>> get(const std::string& key,
                                std::chrono::milliseconds timeout) override {
    std::unique_lock lock{mu_};
    if (!changed_.wait_for(lock, timeout, [&] { return values_.count(key) > 0; }))
      return error::disconnected("store: '" + key + "' was not set within " +
                            std::to_string(timeout.count()) + " ms");
    return values_.at(key);
  }

private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, std::vector<char>> values_;
};

}  // namespace

std::shared_ptr<rendezvous_store> make_memory_store() { return std::make_shared<memory_store>(); }

}  // namespace sailor::comm
