#pragma once

// The subscriptions a bus driver holds for the actors of its own node
// (docs/bus.md, "Local delivery"): who gets a message on a subject, with
// each queue group's members taken in turn. Every driver delivers through
// one; the networked drivers also read it to tell their transport which
// subjects and groups this node wants.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor_addr.hpp>

#include "messages/bus.hpp"

namespace waggle {

class bus_table {
 public:
  struct entry {
    uint64_t id = 0;
    std::string subject;
    std::string group;  // empty: a plain subscription
    bus_subscriber_actor subscriber;
  };

  // Adds a subscription; its id is unique in this table and never reused.
  uint64_t add(std::string subject, std::string group, bus_subscriber_actor subscriber);
  // Removes one subscription; nullopt if there is none with this id.
  std::optional<entry> remove(uint64_t id);
  // Removes every subscription of a subscriber that terminated.
  std::vector<entry> remove_subscriber(const caf::actor_addr& subscriber);

  // The plain subscribers of `subject`.
  std::vector<bus_subscriber_actor> plain(const std::string& subject) const;
  // The queue groups with a member here, in name order.
  std::vector<std::string> groups(const std::string& subject) const;
  // The next member of `group` on `subject`, in turn; null when it has none.
  bus_subscriber_actor next_member(const std::string& subject, const std::string& group);
  // The same, among the subscriptions `accept` takes (by id): a driver whose
  // transport hands a message to a subscriber that joined after it was
  // published leaves that subscriber out (the NATS driver).
  using accept_fn = std::function<bool(uint64_t)>;
  std::vector<bus_subscriber_actor> plain(const std::string& subject,
                                          const accept_fn& accept) const;
  bus_subscriber_actor next_member(const std::string& subject, const std::string& group,
                                   const accept_fn& accept);
  // Every plain subscriber and one member of each group: one message's recipients.
  std::vector<bus_subscriber_actor> recipients(const std::string& subject);

  bool wants(const std::string& subject) const { return subjects_.count(subject) > 0; }
  // Subjects with at least one subscription, in order.
  std::vector<std::string> subjects() const;
  size_t size() const { return by_id_.size(); }
  // Whether `subscriber` still holds a subscription (monitoring ends when not).
  bool holds(const caf::actor_addr& subscriber) const;

 private:
  struct group_members {
    std::vector<uint64_t> ids;
    size_t next = 0;
  };
  struct subject_entry {
    std::vector<uint64_t> plain;
    std::map<std::string, group_members> groups;
  };
  std::map<uint64_t, entry> by_id_;
  std::map<std::string, subject_entry> subjects_;
  uint64_t next_id_ = 1;
};

}  // namespace waggle
