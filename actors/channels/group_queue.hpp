#pragma once

// The group actor's queue of database work (NIP-29 commands and roster
// publications), dealt to the group sessions by turns: across communities
// first, then across senders (a command's pubkey, or the relay for its own
// publications) within a community, so a community's backlog delays another
// community's next item by at most one item per session. A plain class (no
// mailbox), so the dealing order has tests of its own.
//
// Order: a channel's items leave in the order they came, whoever sent them,
// and one at a time: an item may go only when it is the oldest waiting item
// of its channel and that channel has nothing out (its next waits until
// done()). So the commands of one channel run in arrival order, as they did
// on one session (a 9000 sent right after its channel's 9007 must not
// overtake it, nor a 9001 an earlier 9000, whichever keys sent them).
// Nothing is promised across channels, not even for one sender: its items of
// two channels could run at once on two sessions anyway, so one that waits
// for its channel does not hold back the sender's items of other channels
// (among a sender's items that may go, the oldest goes first). Turns work
// across channels only: within one channel a backlog delays every later
// item of that channel by all of it (the per-community bound caps it).
// Items of different channels may run at once on different sessions; the
// database's locks (docs/lock-protocol.md) order them as they do any two
// writers.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

namespace waggle {

class group_queue {
 public:
  struct item {
    int64_t community_id = 0;
    std::string sender;   // who takes turns within the community
    std::string channel;  // a channel's items go one at a time, in arrival order
    uint64_t id = 0;      // the caller's handle for the work
    bool bounded = true;  // counts against (and may be refused by) the per-community bound
  };

  // `max_per_community`: bounded items waiting (not out) per community.
  explicit group_queue(size_t max_per_community = 1000) : max_(max_per_community) {}

  // False (and nothing queued) when a bounded item finds its community full.
  bool push(item it);
  // The next item to run, by turns; nullopt when nothing waiting may run now
  // (empty, or every channel with waiting items has one out).
  std::optional<item> next();
  // The item of (community, channel) that was out has finished.
  void done(int64_t community_id, const std::string& channel);

  size_t waiting() const { return waiting_; }
  size_t waiting(int64_t community_id) const;
  size_t out() const { return out_.size(); }

 private:
  // A turn-taker (a community, or a sender within one): the one served
  // longest ago goes next, and one that has not been served since it
  // started waiting goes before every one that has, so a newcomer waits
  // only for the items already out. Ties by who started waiting first.
  struct turn {
    uint64_t last_served = 0;  // 0: not since it started waiting
    uint64_t joined = 0;
    bool before(const turn& o) const {
      return last_served != o.last_served ? last_served < o.last_served : joined < o.joined;
    }
  };
  struct waiting_item {
    item it;
    uint64_t seq = 0;  // arrival order, across the whole queue
  };
  struct sender_queue {
    turn t;
    size_t items = 0;  // its waiting items
    // Those of its items that may go now (each the oldest of a channel with
    // nothing out), as (seq, channel): its oldest such goes first.
    std::set<std::pair<uint64_t, std::string>> ready;
  };
  struct community_queue {
    turn t;
    std::map<std::string, sender_queue> senders;  // those with waiting items
    std::map<std::string, std::deque<waiting_item>> channels;  // waiting, in arrival order
    size_t bounded = 0;
    size_t total = 0;
  };

  size_t max_;
  size_t waiting_ = 0;
  uint64_t tick_ = 0;
  uint64_t seq_ = 0;
  std::map<int64_t, community_queue> communities_;  // those with waiting items
  std::map<int64_t, uint64_t> served_;  // when each community was last served (one entry each)
  std::set<std::pair<int64_t, std::string>> out_;    // channels with an item out
};

}  // namespace waggle
