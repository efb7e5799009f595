#pragma once

// The `inspect` functions of the values the messages carry. The values live in
// the CAF-free layer (values.hpp, proto/, status.hpp) so that db and the proto
// tests link no CAF; their inspection is here, on the CAF side. Events and
// filters are inspected as their canonical JSON, which is what a trace reader
// wants to see.

#include <memory>
#include <string>

#include <caf/meta/type_name.hpp>

#include "messages/proto/event.hpp"
#include "messages/proto/filter.hpp"
#include "messages/proto/status.hpp"
#include "messages/values.hpp"

namespace waggle {
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, status& x) {
  return f(caf::meta::type_name("status"), x.code, x.reason);
}
}  // namespace waggle

namespace waggle::proto {
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, std::shared_ptr<const event>& x) {
  std::string json;
  if constexpr (Inspector::reads_state) {
    if (x)
      json = x->raw;
    return f(json);
  } else {
    auto err = f(json);
    if (auto parsed = parse_event(json))
      x = std::make_shared<const event>(std::move(*parsed));
    else
      x = nullptr;
    return err;
  }
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, filter& x) {
  std::string json;
  if constexpr (Inspector::reads_state) {
    json = to_json(x);
    return f(json);
  } else {
    auto err = f(json);
    if (auto parsed = parse_filter(json, filter_limits{}))
      x = std::move(*parsed);
    return err;
  }
}
}  // namespace waggle::proto

namespace waggle {
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ingest_item& x) {
  return f(caf::meta::type_name("ingest_item"), x.community_id, x.ev);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, write_result& x) {
  return f(caf::meta::type_name("write_result"), x.outcome, x.reason);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, group_change& x) {
  return f(caf::meta::type_name("group_change"), x.channel, x.roster_changed,
           x.metadata_changed, x.deleted, x.became_private, x.removed);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, channel_ref& x) {
  return f(caf::meta::type_name("channel_ref"), x.community_id, x.channel);
}
// A page of a history (reads.hpp); a value because db plans pages too.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, history_page& x) {
  return f(caf::meta::type_name("history_page"), x.rows, x.started, x.horizon_created_at,
           x.horizon_id, x.remaining);
}
}  // namespace waggle
