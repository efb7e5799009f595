#pragma once

// The other relay of `waggle sync`, over one WebSocket: NIP-42 AUTH, the
// NIP-77 exchange as initiator, REQ by ids to fetch, EVENT to send. A plain
// synchronous client: the CLI does one thing at a time.

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gateway/ws_client.hpp"
#include "messages/proto/filter.hpp"
#include "messages/proto/negentropy.hpp"

namespace waggle {

class sync_peer {
 public:
  explicit sync_peer(std::chrono::milliseconds timeout = std::chrono::seconds(60))
      : timeout_(timeout) {}

  // ws://host[:port][/path]; answers the AUTH challenge with `secret_hex`
  // when it is not empty. `connect_to` ("address:port", may be empty) is
  // where the socket goes instead of the URL's host (a tunnel, or a relay
  // reached by its community's name before DNS has it); the URL still names
  // the community (Host) and the relay (NIP-42). "" on success, else why not.
  std::string connect(const std::string& url, const std::string& secret_hex,
                      const std::string& connect_to = {});

  struct reconciled {
    std::string error;
    std::vector<std::string> have;  // hex ids only we hold
    std::vector<std::string> need;  // hex ids only the peer holds
    size_t round_trips = 0;
    size_t bytes_sent = 0;
    size_t bytes_received = 0;
  };
  reconciled reconcile(const proto::filter& f, const proto::negentropy::storage& ours,
                       size_t frame_size_limit);

  // The events of `ids` the peer serves under `f` (each REQ is `f` with a
  // chunk of the ids). Raw JSON as received; the caller validates.
  std::vector<std::string> fetch(const proto::filter& f, const std::vector<std::string>& ids,
                                 std::string& error);

  struct published {
    size_t accepted = 0;
    size_t duplicates = 0;
    std::vector<std::pair<std::string, std::string>> refused;  // id, OK message
  };
  published publish(const std::vector<std::string>& raws, std::string& error);

 private:
  std::string url_;
  std::chrono::milliseconds timeout_;
  gateway::ws_client ws_;
  size_t next_sub_ = 0;
};

}  // namespace waggle
