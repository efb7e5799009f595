#include "actors/connection/live_gate.hpp"

#include <algorithm>
#include <optional>

#include "messages/proto/client_message.hpp"

namespace waggle {

bool live_gate::offer(std::vector<std::string>& sub_ids, std::vector<uint64_t>& generations,
                      const std::string& event_id,
                      const std::shared_ptr<const std::string>& raw) {
  std::lock_guard lock{mtx_};
  if (closed_) {
    sub_ids.clear();
    generations.clear();
    return false;
  }
  // Many subscriptions of one connection matching one event: the actor's
  // work, not the hub's (the hub's thread is every community's; a client
  // must not make it write 64 frames per event per socket).
  if (owed_ > 0 || sub_ids.size() > max_direct_per_event) {
    ++owed_;
    return true;
  }
  std::optional<event_id_bin> id;  // converted once, only if a history needs it
  size_t kept = 0;
  for (size_t k = 0; k < sub_ids.size() && k < generations.size(); ++k) {
    auto i = subs_.find(sub_ids[k]);
    if (i == subs_.end() || i->second.generation != generations[k]) {
      // Not open here (loading its history, or stale): the actor decides.
      if (kept != k) {
        sub_ids[kept] = std::move(sub_ids[k]);
        generations[kept] = generations[k];
      }
      ++kept;
      continue;
    }
    auto& history = i->second.history;
    if (history && !history->empty()) {
      if (!id) {
        id.emplace();
        if (!id_from_hex(event_id, *id))
          id->fill(0);
      }
      if (std::binary_search(history->begin(), history->end(), *id))
        continue;  // its history carried it
    }
    out_frame frame;
    frame.shared_head = i->second.head;
    frame.shared = raw;
    frame.tail = proto::event_tail;
    sink_->send_frame(std::move(frame));
  }
  sub_ids.resize(kept);
  generations.resize(kept);
  if (kept == 0)
    return false;
  ++owed_;
  return true;
}

void live_gate::owe() {
  std::lock_guard lock{mtx_};
  ++owed_;
}

void live_gate::taken() {
  std::lock_guard lock{mtx_};
  if (owed_ > 0)
    --owed_;
}

void live_gate::open(const std::string& sub_id, uint64_t generation, history_ids_ptr history) {
  std::lock_guard lock{mtx_};
  subs_[sub_id] = live_sub{generation, std::move(history),
                           std::make_shared<const std::string>(proto::render_event_head(sub_id))};
}

void live_gate::shut(const std::string& sub_id) {
  std::lock_guard lock{mtx_};
  subs_.erase(sub_id);
}

void live_gate::close() {
  std::lock_guard lock{mtx_};
  closed_ = true;
  subs_.clear();
}

bool live_gate::open_for(const std::string& sub_id, uint64_t generation) {
  std::lock_guard lock{mtx_};
  auto i = subs_.find(sub_id);
  return !closed_ && owed_ == 0 && i != subs_.end() && i->second.generation == generation;
}

}  // namespace waggle
