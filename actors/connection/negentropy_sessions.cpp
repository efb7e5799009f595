#include "actors/connection/negentropy_sessions.hpp"

namespace waggle {

namespace neg = proto::negentropy;

void negentropy_sessions::configure(const negentropy_settings& s, memory_budget_ptr budget) {
  settings_ = s;
  budget_ = std::move(budget);
}

void negentropy_sessions::opening(const std::string& sub_id, uint64_t ticket, uint64_t request_id,
                                  std::string first_message) {
  close(sub_id);
  auto& s = sessions_[sub_id];
  s.ticket = ticket;
  s.request_id = request_id;
  s.first_message = std::move(first_message);
}

std::optional<negentropy_sessions::pending> negentropy_sessions::opening_of(
  const std::string& sub_id) const {
  auto it = sessions_.find(sub_id);
  if (it == sessions_.end() || it->second.reconciler)
    return std::nullopt;
  return pending{it->second.ticket, it->second.request_id};
}

bool negentropy_sessions::is_opening(const std::string& sub_id, uint64_t ticket) const {
  auto it = sessions_.find(sub_id);
  return it != sessions_.end() && !it->second.reconciler && it->second.ticket == ticket;
}

negentropy_sessions::opened negentropy_sessions::open(const std::string& sub_id,
                                                      std::string_view packed) {
  auto it = sessions_.find(sub_id);
  if (it == sessions_.end())
    return {"error: no such negentropy session", {}};
  auto& s = it->second;
  auto items = std::make_unique<neg::storage>();
  if (!neg::load_packed(packed, *items)) {
    sessions_.erase(it);
    return {"error: could not read the session's events", {}};
  }
  items->seal();
  // Charged before it is kept: the set is what a session costs the node.
  const size_t bytes = items->memory_bytes();
  if (budget_ && !budget_->try_reserve(bytes)) {
    sessions_.erase(it);
    return {"rate-limited: the relay holds too many negentropy sets, try again later", {}};
  }
  s.charged = bytes;
  s.items = std::move(items);
  s.reconciler = std::make_unique<neg::reconciler>(*s.items, settings_.frame_size_limit);
  auto first = std::move(s.first_message);
  s.first_message.clear();
  auto r = s.reconciler->respond(first);
  if (!r.error.empty()) {
    close(sub_id);
    return {"invalid: " + r.error, {}};
  }
  return {{}, std::move(r.message)};
}

negentropy_sessions::answered negentropy_sessions::on_message(const std::string& sub_id,
                                                              std::string_view message) {
  auto it = sessions_.find(sub_id);
  if (it == sessions_.end())
    return {"closed: no such negentropy session", {}};
  if (!it->second.reconciler) {
    // The first answer is not out yet: the client did not wait for it.
    close(sub_id);
    return {"invalid: NEG-MSG before the answer to NEG-OPEN", {}};
  }
  auto r = it->second.reconciler->respond(message);
  if (!r.error.empty()) {
    close(sub_id);
    return {"invalid: " + r.error, {}};
  }
  return {{}, std::move(r.message)};
}

void negentropy_sessions::close(const std::string& sub_id) {
  auto it = sessions_.find(sub_id);
  if (it == sessions_.end())
    return;
  if (budget_ && it->second.charged > 0)
    budget_->release(it->second.charged);
  sessions_.erase(it);
}

void negentropy_sessions::release_all() {
  if (budget_)
    for (auto& [id, s] : sessions_)
      if (s.charged > 0)
        budget_->release(s.charged);
  sessions_.clear();
}

}  // namespace waggle
