#include "actors/channels/group_queue.hpp"

namespace waggle {

bool group_queue::push(item it) {
  auto ci = communities_.find(it.community_id);
  if (ci == communities_.end()) {
    if (it.bounded && max_ == 0)
      return false;
    ci = communities_.emplace(it.community_id, community_queue{}).first;
    ci->second.t.joined = ++tick_;
    // Its turn is remembered across gaps: a flooder whose queue empties for
    // a moment does not come back as a newcomer ahead of the others.
    if (auto h = served_.find(it.community_id); h != served_.end())
      ci->second.t.last_served = h->second;
  } else if (it.bounded && ci->second.bounded >= max_) {
    return false;
  }
  auto& c = ci->second;
  auto si = c.senders.find(it.sender);
  if (si == c.senders.end()) {
    si = c.senders.emplace(it.sender, sender_queue{}).first;
    si->second.t.joined = ++tick_;
  }
  if (it.bounded)
    ++c.bounded;
  ++c.total;
  ++waiting_;
  ++si->second.items;
  auto seq = ++seq_;
  auto& channel = c.channels[it.channel];
  // Behind an older item of its channel, or one out: not its turn yet
  // (done() or the older one's leaving makes it ready).
  if (channel.empty() && !out_.count({it.community_id, it.channel}))
    si->second.ready.insert({seq, it.channel});
  channel.push_back({std::move(it), seq});
  return true;
}

std::optional<group_queue::item> group_queue::next() {
  using community_it = std::map<int64_t, community_queue>::iterator;
  using sender_it = std::map<std::string, sender_queue>::iterator;
  std::optional<std::pair<community_it, sender_it>> best;
  for (auto ci = communities_.begin(); ci != communities_.end(); ++ci) {
    if (best && !ci->second.t.before(best->first->second.t))
      continue;
    // This community's turn-taker: its sender served longest ago that has
    // an item that may go.
    std::optional<sender_it> pick;
    for (auto si = ci->second.senders.begin(); si != ci->second.senders.end(); ++si) {
      if (si->second.ready.empty())
        continue;
      if (!pick || si->second.t.before((*pick)->second.t))
        pick = si;
    }
    if (pick)
      best = std::make_pair(ci, *pick);
  }
  if (!best)
    return std::nullopt;
  auto [ci, si] = *best;
  auto& c = ci->second;
  auto& s = si->second;
  auto ci_channel = c.channels.find(s.ready.begin()->second);
  s.ready.erase(s.ready.begin());
  // Ready means the oldest of its channel: the channel's front.
  item it = std::move(ci_channel->second.front().it);
  ci_channel->second.pop_front();
  if (ci_channel->second.empty())
    c.channels.erase(ci_channel);
  out_.insert({ci->first, it.channel});
  --waiting_;
  --c.total;
  if (it.bounded)
    --c.bounded;
  --s.items;
  c.t.last_served = s.t.last_served = ++tick_;
  served_[ci->first] = tick_;
  // One with nothing left waiting stops taking turns (and starts afresh,
  // as a newcomer, when it has something again).
  if (s.items == 0)
    c.senders.erase(si);
  if (c.total == 0)
    communities_.erase(ci);
  return it;
}

void group_queue::done(int64_t community_id, const std::string& channel) {
  out_.erase({community_id, channel});
  // The channel's oldest waiting item, if any, may go now.
  auto ci = communities_.find(community_id);
  if (ci == communities_.end())
    return;
  auto& c = ci->second;
  auto ch = c.channels.find(channel);
  if (ch == c.channels.end())
    return;
  auto& head = ch->second.front();
  c.senders[head.it.sender].ready.insert({head.seq, channel});
}

size_t group_queue::waiting(int64_t community_id) const {
  auto i = communities_.find(community_id);
  return i == communities_.end() ? 0 : i->second.total;
}

}  // namespace waggle
