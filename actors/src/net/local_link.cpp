// Two links joined in memory, for tests of the bridge in one process: each end delivers the
// frames sent to it on its own thread, in order, as a link over a transport does.
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "sailor/actors/link.hpp"

namespace sailor::actors {
namespace {

// What the delivery thread shares with its link: the thread keeps it alive while the owner
// decides the link's lifetime.
struct inbox {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::vector<char>> frames;
  bool closed = false;     // this end closed: nothing more is delivered
  bool peer_gone = false;  // the other end closed: what it sent is delivered, then this closes
};

class local_link final : public link, public std::enable_shared_from_this<local_link> {
public:
  explicit local_link(std::string peer) : peer_(std::move(peer)) {}

  ~local_link() override {
    close("link destroyed");
    if (reader_.joinable()) {
      if (reader_.get_id() == std::this_thread::get_id())
        reader_.detach();
      else
        reader_.join();
    }
  }

  void join(const std::shared_ptr<local_link>& other) { other_ = other; }

  void start(link_handlers handlers) override {
    handlers_ = std::move(handlers);
    std::weak_ptr<local_link> weak = shared_from_this();
    reader_ = std::thread([weak, box = inbox_] { deliver(weak, box); });
  }

  bool send(const std::vector<char>& frame) override {
    auto other = other_.lock();
    if (!other || is_closed())
      return false;
    auto& box = *other->inbox_;
    {
      std::lock_guard<std::mutex> guard{box.mutex};
      if (box.closed)
        return false;
      box.frames.push_back(frame);
    }
    box.changed.notify_all();
    return true;
  }

  void close(const std::string& reason) override {
    {
      std::lock_guard<std::mutex> guard{inbox_->mutex};
      if (inbox_->closed)
        return;
      inbox_->closed = true;
    }
    inbox_->changed.notify_all();
    if (handlers_.on_closed)
      handlers_.on_closed(reason);
    if (auto other = other_.lock())
      other->peer_closed();
  }

  const std::string& peer() const override { return peer_; }

private:
  void peer_closed() {
    {
      std::lock_guard<std::mutex> guard{inbox_->mutex};
      inbox_->peer_gone = true;
    }
    inbox_->changed.notify_all();
  }

  bool is_closed() const {
    std::lock_guard<std::mutex> guard{inbox_->mutex};
    return inbox_->closed;
  }

  static void deliver(const std::weak_ptr<local_link>& weak, const std::shared_ptr<inbox>& box) {
    for (;;) {
      std::optional<std::vector<char>> frame;  // none: the peer closed and all was delivered
      {
        std::unique_lock<std::mutex> lock{box->mutex};
        box->changed.wait(lock, [&] { return box->closed || box->peer_gone || !box->frames.empty(); });
        if (box->closed)
          return;
        if (!box->frames.empty()) {
          frame = std::move(box->frames.front());
          box->frames.pop_front();
        }
      }
      auto self = weak.lock();
      if (!self)
        return;
      if (!frame) {
        self->close("peer closed the connection");
        return;
      }
      if (self->handlers_.on_frame)
        self->handlers_.on_frame(std::move(*frame));
    }
  }

  std::string peer_;
  std::shared_ptr<inbox> inbox_ = std::make_shared<inbox>();
  std::weak_ptr<local_link> other_;
  link_handlers handlers_;
  std::thread reader_;
};

}  // namespace

std::pair<std::shared_ptr<link>, std::shared_ptr<link>> local_link_pair() {
  auto a = std::make_shared<local_link>("local:a");
  auto b = std::make_shared<local_link>("local:b");
  a->join(b);
  b->join(a);
  return {a, b};
}

}  // namespace sailor::actors
