#include "actors/replay/push_match_check.hpp"

#include <algorithm>
#include <charconv>
#include <vector>

#include <rapidjson/document.h>

#include "messages/proto/push.hpp"
#include "messages/push.hpp"
#include "messages/trace_codec.hpp"

namespace waggle {

namespace {

// A lease's channels, kinds or mutes as the record joins them (push_matcher.cpp).
std::vector<std::string> split(const std::string& joined) {
  std::vector<std::string> out;
  if (joined.empty())
    return out;
  size_t from = 0;
  for (;;) {
    auto comma = joined.find(',', from);
    out.push_back(joined.substr(from, comma - from));
    if (comma == std::string::npos)
      return out;
    from = comma + 1;
  }
}

std::string render(const std::vector<proto::push::wake_request>& wakes) {
  std::string out = "wakes [";
  for (size_t i = 0; i < wakes.size(); ++i)
    out += (i ? " " : "") + std::to_string(wakes[i].event) + ":" + std::to_string(wakes[i].lease);
  return out + "] (event:lease)";
}

}  // namespace

match_check check_push_match(const std::string& msg) {
  match_check out;
  rapidjson::Document doc;
  doc.Parse(msg.data(), msg.size());
  push_match_record r;
  auto bad = [&](std::string why) {
    out.recorded = msg;
    out.replayed = "not a push_match_record: " + why;
    return out;
  };
  if (doc.HasParseError() || !trace_codec::decode(doc, r))
    return bad("does not decode");
  const size_t events = r.event_ids.size(), leases = r.lease_authors.size();
  if (r.event_authors.size() != events || r.event_channels.size() != events
      || r.event_kinds.size() != events)
    return bad("its event columns differ in length");
  if (r.lease_installations.size() != leases || r.lease_channels.size() != leases
      || r.lease_kinds.size() != leases || r.lease_mutes.size() != leases)
    return bad("its lease columns differ in length");
  if (r.readable_events.size() != r.readable_authors.size()
      || r.wake_events.size() != r.wake_leases.size())
    return bad("its pair columns differ in length");

  std::vector<proto::push::match_event> ev(events);
  for (size_t i = 0; i < events; ++i) {
    ev[i].id = r.event_ids[i];
    ev[i].author = r.event_authors[i];
    ev[i].kind = r.event_kinds[i];
    if (!r.event_channels[i].empty())
      ev[i].channel = r.event_channels[i];
  }
  std::vector<proto::push::match_lease> ls(leases);
  for (size_t i = 0; i < leases; ++i) {
    ls[i].author = r.lease_authors[i];
    ls[i].installation_id = r.lease_installations[i];
    ls[i].channels = split(r.lease_channels[i]);
    ls[i].mutes = split(r.lease_mutes[i]);
    for (const auto& k : split(r.lease_kinds[i])) {
      int32_t kind = 0;
      auto [end, ec] = std::from_chars(k.data(), k.data() + k.size(), kind);
      if (ec != std::errc{} || end != k.data() + k.size())
        return bad("a lease kind '" + k + "' is no number");
      ls[i].kinds.push_back(kind);
    }
  }
  std::vector<proto::push::readable_pair> readable;
  for (size_t i = 0; i < r.readable_events.size(); ++i) {
    if (r.readable_events[i] >= events)
      return bad("a readable pair names event " + std::to_string(r.readable_events[i]));
    readable.push_back({static_cast<size_t>(r.readable_events[i]), r.readable_authors[i]});
  }
  std::sort(readable.begin(), readable.end());  // as the matcher hands it over

  std::vector<proto::push::wake_request> recorded;
  for (size_t i = 0; i < r.wake_events.size(); ++i)
    recorded.push_back({static_cast<size_t>(r.wake_events[i]), static_cast<size_t>(r.wake_leases[i])});
  auto replayed = proto::push::match_wakes(ev, ls, &readable);
  out.ok = replayed == recorded;
  out.recorded = render(recorded);
  out.replayed = render(replayed);
  return out;
}

}  // namespace waggle
