#include "messages/proto/nip11.hpp"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "messages/proto/client_message.hpp"

namespace waggle::proto {

std::string relay_info_json(const relay_info& info) {
  using namespace rapidjson;
  StringBuffer buf;
  Writer<StringBuffer> w{buf};
  w.StartObject();
  w.Key("name");
  w.String(info.name);
  w.Key("description");
  w.String(info.description);
  if (!info.icon.empty()) {
    w.Key("icon");
    w.String(info.icon);
  }
  w.Key("pubkey");
  w.String(info.pubkey);
  w.Key("supported_nips");
  w.StartArray();
  for (int nip : {1, 9, 11, 29, 40, 42, 43, 45, 50, 77, 86, 98})
    if ((nip != 43 || info.nip43) && (nip != 50 || info.search) && (nip != 77 || info.negentropy))
      w.Int(nip);
  w.EndArray();
  w.Key("software");
  w.String("waggle");
  w.Key("version");
  w.String(software_version);
  w.Key("limitation");
  w.StartObject();
  w.Key("max_message_length");
  w.Uint64(info.max_message_length);
  w.Key("max_subscriptions");
  w.Uint64(info.max_subscriptions);
  w.Key("max_filters");
  w.Uint64(info.max_filters);
  w.Key("max_limit");
  w.Uint(info.max_limit);
  w.Key("default_limit");
  w.Uint(info.default_limit);
  // Custom fields (not in NIP-11): what a REQ's state may cost, in bytes
  // (docs/protocol.md#limits).
  w.Key("max_subscription_bytes");
  w.Uint64(info.max_subscription_bytes);
  w.Key("max_subscription_bytes_total");
  w.Uint64(info.max_subscription_bytes_total);
  w.Key("max_history_bytes_per_connection");
  w.Uint64(info.max_history_bytes_per_connection);
  w.Key("max_subid_length");
  w.Uint64(max_subscription_id_len);
  w.Key("auth_required");
  w.Bool(true);
  w.Key("max_auth_keys");  // waggle's own: NIP-42 keys one connection may prove
  w.Uint64(info.max_auth_keys);
  w.Key("restricted_writes");
  w.Bool(true);
  w.Key("created_at_lower_limit");
  w.Int64(info.created_at_window);
  w.Key("created_at_upper_limit");
  w.Int64(info.created_at_window);
  // Not NIP-11 fields (none exist for read rates): waggle's own, so a
  // client can pace itself (docs/protocol.md, "Read limits").
  w.Key("max_reads_in_flight");
  w.Uint64(info.max_reads_in_flight);
  w.Key("read_tokens_per_second");
  w.Int64(info.read_tokens_per_second);
  w.Key("read_token_burst");
  w.Int64(info.read_token_burst);
  // waggle's own: a replica's proof covers rows written, not rows removed,
  // so a client that must not see a deleted event within this window reads
  // it again after the window (docs/replicas.md#what-the-proof-does-not-cover-removals).
  if (info.replica_stale_removals_seconds > 0) {
    w.Key("replica_stale_removals_seconds");
    w.Int64(info.replica_stale_removals_seconds);
  }
  w.EndObject();
  w.EndObject();
  return buf.GetString();
}

}  // namespace waggle::proto
