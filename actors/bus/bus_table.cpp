#include "actors/bus/bus_table.hpp"

#include <algorithm>

namespace waggle {

uint64_t bus_table::add(std::string subject, std::string group, bus_subscriber_actor subscriber) {
  auto id = next_id_++;
  auto& s = subjects_[subject];
  if (group.empty())
    s.plain.push_back(id);
  else
    s.groups[group].ids.push_back(id);
  by_id_.emplace(id, entry{id, std::move(subject), std::move(group), std::move(subscriber)});
  return id;
}

std::optional<bus_table::entry> bus_table::remove(uint64_t id) {
  auto i = by_id_.find(id);
  if (i == by_id_.end())
    return std::nullopt;
  auto gone = std::move(i->second);
  by_id_.erase(i);
  auto s = subjects_.find(gone.subject);
  auto erase_id = [id](std::vector<uint64_t>& ids) {
    ids.erase(std::remove(ids.begin(), ids.end(), id), ids.end());
  };
  if (gone.group.empty()) {
    erase_id(s->second.plain);
  } else {
    auto g = s->second.groups.find(gone.group);
    erase_id(g->second.ids);
    if (g->second.ids.empty())
      s->second.groups.erase(g);
  }
  if (s->second.plain.empty() && s->second.groups.empty())
    subjects_.erase(s);
  return gone;
}

std::vector<bus_table::entry> bus_table::remove_subscriber(const caf::actor_addr& subscriber) {
  std::vector<uint64_t> ids;
  for (const auto& [id, e] : by_id_)
    if (e.subscriber.address() == subscriber)
      ids.push_back(id);
  std::vector<entry> out;
  for (auto id : ids)
    out.push_back(*remove(id));
  return out;
}

std::vector<bus_subscriber_actor> bus_table::plain(const std::string& subject) const {
  std::vector<bus_subscriber_actor> out;
  if (auto s = subjects_.find(subject); s != subjects_.end())
    for (auto id : s->second.plain)
      out.push_back(by_id_.at(id).subscriber);
  return out;
}

std::vector<bus_subscriber_actor> bus_table::plain(const std::string& subject,
                                                   const accept_fn& accept) const {
  std::vector<bus_subscriber_actor> out;
  if (auto s = subjects_.find(subject); s != subjects_.end())
    for (auto id : s->second.plain)
      if (accept(id))
        out.push_back(by_id_.at(id).subscriber);
  return out;
}

bus_subscriber_actor bus_table::next_member(const std::string& subject, const std::string& group,
                                            const accept_fn& accept) {
  auto s = subjects_.find(subject);
  if (s == subjects_.end())
    return {};
  auto g = s->second.groups.find(group);
  if (g == s->second.groups.end())
    return {};
  auto& members = g->second;
  for (size_t k = 0; k < members.ids.size(); ++k) {
    auto at = (members.next + k) % members.ids.size();
    if (!accept(members.ids[at]))
      continue;
    members.next = (at + 1) % members.ids.size();
    return by_id_.at(members.ids[at]).subscriber;
  }
  return {};
}

std::vector<std::string> bus_table::groups(const std::string& subject) const {
  std::vector<std::string> out;
  if (auto s = subjects_.find(subject); s != subjects_.end())
    for (const auto& [name, members] : s->second.groups)
      out.push_back(name);
  return out;
}

bus_subscriber_actor bus_table::next_member(const std::string& subject, const std::string& group) {
  return next_member(subject, group, [](uint64_t) { return true; });
}

std::vector<bus_subscriber_actor> bus_table::recipients(const std::string& subject) {
  auto out = plain(subject);
  for (const auto& group : groups(subject))
    out.push_back(next_member(subject, group));
  return out;
}

std::vector<std::string> bus_table::subjects() const {
  std::vector<std::string> out;
  out.reserve(subjects_.size());
  for (const auto& [subject, e] : subjects_)
    out.push_back(subject);
  return out;
}

bool bus_table::holds(const caf::actor_addr& subscriber) const {
  return std::any_of(by_id_.begin(), by_id_.end(),
                     [&](const auto& kv) { return kv.second.subscriber.address() == subscriber; });
}

}  // namespace waggle
