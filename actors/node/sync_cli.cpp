#include "actors/node/sync_cli.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <tuple>

#include <pqxx/connection>

#include "actors/node/cli_args.hpp"
#include "actors/node/config.hpp"
#include "actors/node/event_loader.hpp"
#include "actors/node/sync_peer.hpp"
#include "db/event_store.hpp"
#include "messages/proto/event.hpp"
#include "messages/proto/nip29.hpp"
#include "messages/proto/relay_kinds.hpp"

namespace waggle {

namespace neg = proto::negentropy;

namespace {

int usage() {
  std::cerr << "usage: waggle sync URL [--filter JSON] [--dir down|up|both] [--community HOST]\n"
               "                   [--limit N] [--frame-limit BYTES] [--connect-to ADDR:PORT]\n"
               "                   [--database-url URL]\n"
               "  URL          the other relay, ws://host[:port][/path]\n"
               "  --filter     the events to reconcile (one NIP-01 filter; default {}: the\n"
               "               community's events outside channels; a channel is {\"#h\":[\"id\"]})\n"
               "  --dir        down: fetch what only the other relay has (default); up: send\n"
               "               what only this one has; both\n"
               "  --community  the local community (its host); default: the only one\n"
               "  --limit      move at most N events each way in this run (0: all)\n"
               "  --frame-limit  largest negentropy message we send, bytes (default 30000)\n"
               "  --connect-to   open the socket to ADDR:PORT instead of the URL's host\n"
               "The key that authenticates (NIP-42) is WAGGLE_SYNC_SECRET_KEY (64 hex) or the\n"
               "file named by WAGGLE_SYNC_SECRET_KEY_FILE. Events sent up by another author are\n"
               "accepted only by a relay that lists this key in --sync-pubkeys.\n";
  return 2;
}


std::string secret_key() {
  if (const char* k = std::getenv("WAGGLE_SYNC_SECRET_KEY"); k && *k)
    return k;
  if (const char* f = std::getenv("WAGGLE_SYNC_SECRET_KEY_FILE"); f && *f) {
    std::ifstream in(f);
    std::string k;
    in >> k;
    return k;
  }
  return {};
}

// Group state and NIP-43 lists are signed by each relay for itself: they are
// re-derived on each side, never carried across (docs/portability.md).
bool relay_derived(int32_t kind) { return proto::is_relay_derived(kind); }

std::vector<int32_t> relay_derived_kinds() {
  std::vector<int32_t> out;
  for (int32_t k = 0; k < 65536; ++k)
    if (relay_derived(k))
      out.push_back(k);
  return out;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

struct tally {
  size_t stored = 0, duplicates = 0, refused = 0, failed = 0, skipped = 0;
};

}  // namespace

int run_sync(std::vector<std::string> args, const std::string& database_url) {
  const auto t0 = std::chrono::steady_clock::now();
  auto filter_text = take_flag(args, "--filter", "{}");
  auto dir = take_flag(args, "--dir", "down");
  auto host = take_flag(args, "--community", "");
  auto connect_to = take_flag(args, "--connect-to", "");
  uint64_t limit = 0;
  size_t frame_limit = 30000;
  try {
    limit = std::stoull(take_flag(args, "--limit", "0"));
    frame_limit = std::stoul(take_flag(args, "--frame-limit", "30000"));
  } catch (const std::exception&) {
    std::cerr << "waggle sync: --limit and --frame-limit take numbers\n";
    return 2;
  }
  if (args.size() != 1 || (dir != "down" && dir != "up" && dir != "both") ||
      frame_limit < neg::min_frame_size_limit)
    return usage();
  const std::string url = args[0];
  proto::filter_limits lim;
  auto f = proto::parse_filter(filter_text, lim);
  if (!f) {
    std::cerr << "waggle sync: --filter: " << f.error().message() << "\n";
    return 2;
  }
  if (f->search) {
    std::cerr << "waggle sync: a search filter cannot be reconciled\n";
    return 2;
  }
  f->limit.reset();  // NIP-77 reconciles every match

  pqxx::connection conn{database_url};
  auto c = find_community(conn, host);
  if (!c) {
    std::cerr << "waggle sync: " << c.error().message() << "\n";
    return 1;
  }
  // Our side: exactly what a REQ with the filter could read here.
  auto ours = db::sync_items(conn, c->id, {*f}, unix_now(), 1000000000);  // no cap worth the name: our own set
  // Our own relay-signed state is never sent, so it is left out of our set
  // (the other relay's shows up as "only there" and is skipped when fetched).
  std::set<std::string> ours_derived;
  for (auto& id : db::ids_of_kinds(conn, c->id, relay_derived_kinds())) {
    std::string bin;
    if (neg::from_hex(id, bin))
      ours_derived.insert(std::move(bin));
  }
  neg::storage items;
  {
    neg::storage all;
    neg::load_packed(ours.packed, all);
    all.seal();
    items.reserve(all.size());
    for (size_t i = 0; i < all.size(); ++i) {
      std::string_view id(reinterpret_cast<const char*>(all.at(i).id.data()), neg::id_size);
      if (!ours_derived.contains(std::string(id)))
        items.insert(all.at(i).created_at, id);
    }
  }
  items.seal();
  std::cerr << "sync: " << items.size() << " local events of " << c->host << " match the filter\n";

  sync_peer peer;
  if (auto err = peer.connect(url, secret_key(), connect_to); !err.empty()) {
    std::cerr << "waggle sync: " << err << "\n";
    return 1;
  }
  auto diff = peer.reconcile(*f, items, frame_limit);
  if (!diff.error.empty()) {
    std::cerr << "waggle sync: " << diff.error << "\n";
    return 1;
  }
  std::cerr << "sync: reconciled in " << diff.round_trips << " round trips (" << diff.bytes_sent
            << " bytes sent, " << diff.bytes_received << " received): " << diff.have.size()
            << " only here, " << diff.need.size() << " only there\n";

  tally down, up;
  bool broken = false;
  if (dir != "up" && !diff.need.empty()) {
    std::string error;
    auto raws = peer.fetch(*f, diff.need, error);
    if (!error.empty()) {
      std::cerr << "waggle sync: " << error << "\n";
      broken = true;
    }
    // Oldest first, so a channel's commands are judged in the order they
    // were made; the other relay's own signatures are not carried over.
    std::vector<std::pair<std::tuple<int64_t, int, std::string>, std::string>> ordered;
    for (auto& raw : raws) {
      auto ev = proto::parse_event(raw);
      if (ev && relay_derived(ev->kind)) {
        ++down.skipped;
        continue;
      }
      auto key = ev ? std::tuple{ev->created_at, proto::nip29::replay_rank(ev->kind), ev->id}
                    : std::tuple{int64_t{0}, 0, std::string()};
      ordered.push_back({std::move(key), std::move(raw)});
    }
    std::sort(ordered.begin(), ordered.end());
    if (limit > 0 && ordered.size() > limit)
      ordered.resize(limit);  // the oldest first; the rest waits for the next run
    loader_config lc;
    if (auto st = parse_serve_config(lc.node, {}); !st.ok()) {
      std::cerr << "waggle sync: " << st.message() << "\n";
      return 1;
    }
    lc.node.database_url = database_url;
    lc.community = c->host;
    event_loader loader{lc};
    constexpr size_t batch = 500;
    for (size_t at = 0; at < ordered.size(); at += batch) {
      std::vector<std::string> chunk;
      for (size_t i = at; i < std::min(ordered.size(), at + batch); ++i)
        chunk.push_back(std::move(ordered[i].second));
      for (const auto& r : loader.load(std::move(chunk))) {
        switch (r.status) {
          case load_status::stored: ++down.stored; break;
          case load_status::duplicate: ++down.duplicates; break;
          case load_status::refused:
            ++down.refused;
            std::cerr << "sync: refused " << r.id << ": " << r.reason << "\n";
            break;
          case load_status::failed:
            ++down.failed;
            std::cerr << "sync: failed " << r.id << ": " << r.reason << "\n";
            break;
        }
      }
      std::cerr << "sync: down " << std::min(ordered.size(), at + batch) << "/" << ordered.size()
                << "\n";
    }
    if (auto st = loader.settle(); !st.ok())
      std::cerr << "sync: group state: " << st.message() << "\n";
  }
  if (dir != "down" && !diff.have.empty()) {
    auto have = diff.have;
    auto stored = db::live_events_by_id(conn, c->id, have, unix_now());
    std::vector<std::string> raws;
    for (auto& s : stored) {
      if (relay_derived(s.kind)) {
        ++up.skipped;
        continue;
      }
      if (limit > 0 && raws.size() >= limit)
        break;
      raws.push_back(std::move(s.raw));
    }
    std::string error;
    auto sent = peer.publish(raws, error);
    if (!error.empty()) {
      std::cerr << "waggle sync: " << error << "\n";
      broken = true;
    }
    up.stored = sent.accepted;
    up.duplicates = sent.duplicates;
    up.refused = sent.refused.size();
    for (const auto& [id, why] : sent.refused)
      std::cerr << "sync: the other relay refused " << id << ": " << why << "\n";
    std::cerr << "sync: up " << raws.size() << "/" << raws.size() << "\n";
  }
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cerr << "sync: done in " << seconds << " s: down stored " << down.stored << ", duplicates "
            << down.duplicates << ", refused " << down.refused << ", failed " << down.failed
            << ", relay-derived skipped " << down.skipped << "; up accepted " << up.stored
            << ", duplicates " << up.duplicates << ", refused " << up.refused
            << ", relay-derived skipped " << up.skipped << "\n";
  if (broken || down.failed > 0)
    return 1;
  return down.refused + up.refused > 0 ? 3 : 0;
}

}  // namespace waggle
