#pragma once

// The community directory: keeps the Host -> community map the gateway reads
// on every request, and the node's readiness (database answers, migrations
// current). It owns one database connection (detached actor) and refreshes
// on a timer; the gateway reads an immutable snapshot without a mailbox hop.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "db/community_store.hpp"
#include "db/session.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

// Shared between the directory actor (writer) and io threads (readers).
class community_snapshot {
 public:
  using map = std::unordered_map<std::string, community>;  // normalized host -> community
  // Called (on the directory's thread) for each address blocked since the
  // previous snapshot, so the node closes its open connections from it.
  using block_hook = std::function<void(int64_t community_id, const std::string& ip)>;

  std::optional<community> find(std::string_view host) const;
  void publish(map m);
  // Set before the directory starts.
  void on_new_block(block_hook hook) { on_block_ = std::move(hook); }
  bool ready() const { return ready_.load(); }
  void set_ready(bool r) { ready_.store(r); }

 private:
  std::shared_ptr<const map> map_ = std::make_shared<const map>();
  std::atomic<bool> ready_{false};
  block_hook on_block_;
  bool published_ = false;  // the first snapshot finds no connections to close
};

struct community_directory_state;
using community_directory_ptr
  = community_directory_actor::stateful_pointer<community_directory_state>;

struct community_directory_state {
  static inline const char* name = "community_directory";

  community_directory_ptr self = nullptr;
  std::unique_ptr<db::session> session;
  std::shared_ptr<community_snapshot> snapshot;
  caf::timespan interval{};

  void init(community_directory_ptr self_ptr, std::string database_url,
            std::shared_ptr<community_snapshot> snap, caf::timespan every);
  void on_tick();
  void refresh_now() { refresh(); }

 private:
  void refresh();
};

community_directory_actor::behavior_type
community_directory_actor_impl(community_directory_ptr self, std::string database_url,
                               std::shared_ptr<community_snapshot> snapshot,
                               caf::timespan interval);

}  // namespace waggle
