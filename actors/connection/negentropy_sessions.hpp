#pragma once

// A connection's NIP-77 sessions (docs/negentropy.md): each holds the set it
// reconciles, read once at NEG-OPEN, and answers the client's messages from
// it. Owned by the connection actor; no I/O here.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "actors/connection/subscription_memory.hpp"
#include "messages/proto/negentropy.hpp"

namespace waggle {

struct negentropy_settings {
  bool enabled = true;
  size_t max_sessions = 4;       // open or opening at once, per connection
  uint64_t max_items = 500000;   // per session
  // Cap of every answer, binary bytes (the hex frame is twice this); kept
  // under the frame size clients are told (NIP-11 max_message_length).
  size_t frame_size_limit = 32 * 1024;
};

class negentropy_sessions {
 public:
  negentropy_sessions() = default;
  negentropy_sessions(const negentropy_sessions&) = delete;
  negentropy_sessions& operator=(const negentropy_sessions&) = delete;
  ~negentropy_sessions() { release_all(); }

  void configure(const negentropy_settings& s, memory_budget_ptr budget);
  const negentropy_settings& settings() const { return settings_; }

  size_t size() const { return sessions_.size(); }
  bool contains(const std::string& sub_id) const { return sessions_.contains(sub_id); }

  // A NEG-OPEN whose items are being read: `ticket` tells its reply from a
  // later session of the same id.
  void opening(const std::string& sub_id, uint64_t ticket, uint64_t request_id,
               std::string first_message);
  // The read ticket and pool request of an opening session, if it is one.
  struct pending {
    uint64_t ticket = 0;
    uint64_t request_id = 0;
  };
  std::optional<pending> opening_of(const std::string& sub_id) const;
  bool is_opening(const std::string& sub_id, uint64_t ticket) const;

  struct opened {
    std::string error;   // non-empty: refused (the session is gone)
    std::string answer;  // the first NEG-MSG's negentropy message
  };
  // The items arrived: the set is built, charged to the node's budget, and
  // the first message answered.
  opened open(const std::string& sub_id, std::string_view packed);

  struct answered {
    std::string error;  // non-empty: the session is gone
    std::string answer;
  };
  answered on_message(const std::string& sub_id, std::string_view message);

  void close(const std::string& sub_id);
  void release_all();

 private:
  struct session {
    uint64_t ticket = 0;
    uint64_t request_id = 0;
    std::string first_message;  // until the items arrive
    std::unique_ptr<proto::negentropy::storage> items;
    std::unique_ptr<proto::negentropy::reconciler> reconciler;
    size_t charged = 0;
  };
  negentropy_settings settings_;
  memory_budget_ptr budget_;
  std::map<std::string, session> sessions_;
};

}  // namespace waggle
