#include "actors/connection/subscription_table.hpp"

#include <algorithm>

namespace waggle {

namespace {

// Stored JSON is our own rendering, which starts with the id:
// {"id":"<64 hex>",...}. Anything else is used whole as its own key.
std::string_view id_of_raw(std::string_view raw) {
  constexpr std::string_view head = "{\"id\":\"";
  if (raw.size() >= head.size() + 64 && raw.substr(0, head.size()) == head)
    return raw.substr(head.size(), 64);
  return raw;
}

// Keeps of `kept` only the pubkeys `fresh` has too.
void keep_common(std::vector<std::string>& kept, const std::vector<std::string>& fresh) {
  std::erase_if(kept, [&](const std::string& pk) {
    return std::find(fresh.begin(), fresh.end(), pk) == fresh.end();
  });
}

}  // namespace

bool subscription::sent_in_history(const std::string& id) const {
  event_id_bin bin;
  return id_from_hex(id, bin) && std::binary_search(history_ids.begin(), history_ids.end(), bin);
}

subscription& subscription_table::add(const std::string& sub_id, uint64_t generation) {
  auto& sub = subs_[sub_id];
  sub.generation = generation;
  return sub;
}

subscription* subscription_table::find(const std::string& sub_id) {
  auto i = subs_.find(sub_id);
  return i == subs_.end() ? nullptr : &i->second;
}

bool subscription_table::is_current(const std::string& sub_id, uint64_t generation) const {
  auto i = subs_.find(sub_id);
  return i != subs_.end() && i->second.generation == generation;
}

void subscription_table::remove(const std::string& sub_id) {
  if (auto i = subs_.find(sub_id); i != subs_.end()) {
    bytes_ -= i->second.bytes;
    if (i->second.bytes > 0 && budget_)
      budget_->release(i->second.bytes);
    subs_.erase(i);
  }
}

subscription_charge subscription_table::charge(const std::string& sub_id, size_t bytes) {
  auto& sub = subs_[sub_id];
  if (max_bytes_ != 0 && bytes_ + bytes > max_bytes_)
    return subscription_charge::over_connection_cap;
  if (budget_ && !budget_->try_reserve(bytes))
    return subscription_charge::over_node_budget;
  sub.bytes += bytes;
  bytes_ += bytes;
  return subscription_charge::charged;
}

void subscription_table::release_all() {
  if (bytes_ > 0 && budget_)
    budget_->release(bytes_);
  bytes_ = 0;
}

void subscription_table::remember_history(subscription& sub,
                                          const std::vector<std::string>& raws) {
  auto old = sub.history_ids.size();
  sub.history_ids.reserve(old + raws.size());
  for (auto& raw : raws) {
    event_id_bin id;
    if (id_from_hex(id_of_raw(raw), id))
      sub.history_ids.push_back(id);
  }
  // Pages never repeat an id (each reads past the last one's horizon), so
  // the new ids merge into the sorted ones.
  std::sort(sub.history_ids.begin() + static_cast<std::ptrdiff_t>(old), sub.history_ids.end());
  std::inplace_merge(sub.history_ids.begin(),
                     sub.history_ids.begin() + static_cast<std::ptrdiff_t>(old),
                     sub.history_ids.end());
}

live_verdict subscription_table::on_live(const std::string& sub_id, uint64_t generation,
                                         const event_ptr& ev, size_t max_pending) {
  auto i = subs_.find(sub_id);
  if (i == subs_.end() || i->second.generation != generation)
    return live_verdict::stale;
  auto& sub = i->second;
  if (sub.live)
    return sub.sent_in_history(ev->id) ? live_verdict::sent : live_verdict::send;
  if (sub.pending.size() >= max_pending)
    return live_verdict::overflow;
  sub.pending.push_back(ev);
  return live_verdict::held;
}

std::vector<event_ptr> subscription_table::go_live(const std::string& sub_id) {
  auto& sub = subs_[sub_id];
  sub.live = true;
  std::vector<event_ptr> out;
  for (auto& ev : sub.pending)
    if (!sub.sent_in_history(ev->id))
      out.push_back(ev);
  sub.pending.clear();
  sub.pending.shrink_to_fit();
  return out;
}

void subscription_table::grant(const std::string& sub_id, std::vector<channel_grant>&& grants,
                               community_grant&& community) {
  auto& sub = subs_[sub_id];
  for (auto& g : grants)
    sub.grants[g.channel] = std::move(g);
  sub.community = std::move(community);
}

status subscription_table::recheck(const std::string& sub_id,
                                   const std::vector<channel_grant>& grants,
                                   const community_grant& community) {
  auto& sub = subs_[sub_id];
  // Keep only authority both checks granted: the first check's grant has had
  // every revocation since registration applied; the re-check (after
  // registration) saw every removal before it. A pubkey or an open channel
  // absent from either is gone.
  for (auto& fresh : grants) {
    auto g = sub.grants.find(fresh.channel);
    if (g == sub.grants.end())
      continue;
    auto& kept = g->second;
    kept.open = kept.open && fresh.open;
    keep_common(kept.members, fresh.members);
  }
  if (community.checked) {
    sub.community.open = sub.community.open && community.open;
    keep_common(sub.community.members, community.members);
    keep_common(sub.community.guests, community.guests);
  }
  if (!sub.community.allows())
    return {ec::restricted, "not a member of this community"};
  for (auto& [channel, grant] : sub.grants)
    if (!grant.open && grant.members.empty())
      return {ec::restricted, "no longer allowed to read channel " + channel};
  return {};
}

std::vector<std::string> subscription_table::revoke_channel(const channel_revoked& msg) {
  std::vector<std::string> ended;
  for (auto& [sub_id, sub] : subs_) {
    auto g = sub.grants.find(msg.channel);
    if (g == sub.grants.end())
      continue;
    auto& grant = g->second;
    if (msg.deleted) {
      ended.push_back(sub_id);
      continue;
    }
    if (msg.pubkey.empty())
      grant.open = false;  // the channel became private
    else
      std::erase(grant.members, msg.pubkey);
    if (!grant.open && grant.members.empty())
      ended.push_back(sub_id);
  }
  return ended;
}

std::vector<std::string> subscription_table::revoke_access(const std::string& pubkey) {
  std::vector<std::string> ended;
  for (auto& [sub_id, sub] : subs_) {
    auto& g = sub.community;
    // Still waiting for its access check: the history re-check sees this
    // change (it committed before the revocation was sent).
    if (!g.checked)
      continue;
    if (pubkey.empty()) {
      g.open = false;
    } else {
      std::erase(g.members, pubkey);
      std::erase(g.guests, pubkey);
    }
    if (!g.allows())
      ended.push_back(sub_id);
  }
  return ended;
}

}  // namespace waggle
