#pragma once

// The clients of the replica soak (replica_soak_test.cpp): each one a real
// WebSocket connection of its own key, cycling through publishes, head and
// covered history REQs, COUNTs and NIP-50 searches until a deadline. Every
// routed read it issues is tallied by path, so the test can compare them with
// the node's route decisions; every frame that is not the answer it waits for
// is checked, so an error anywhere (NOTICE, CLOSED, OK false, no EOSE) is seen.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <rapidjson/document.h>

#include "gateway/ws_client.hpp"
#include "messages/proto/filter.hpp"
#include "tests/support/event_builder.hpp"

namespace waggle::e2e::soak {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// NIP-50 search is built on its own branch (search17): once it is merged,
// proto::filter has `search` and the soak searches too; until then it cannot
// send a filter the relay would parse as something else.
template <class F>
constexpr bool has_search = requires(F f) { f.search; };
constexpr bool search_built = has_search<proto::filter>;

struct tally {
  // Routed reads, as the node should count them (docs/replicas.md, "Metrics"):
  // each REQ's first page (later pages are the node's waggle_history_pages_total).
  std::atomic<uint64_t> history_reqs{0};  // head and covered, kind 1 and channel
  std::atomic<uint64_t> covered_reqs{0};  // of those, with an `until` older than 20 min
  std::atomic<uint64_t> searches{0};
  std::atomic<uint64_t> counts{0};
  // Not routed.
  std::atomic<uint64_t> published{0};
  std::atomic<uint64_t> channel_posts{0};
  std::atomic<uint64_t> events_received{0};
  std::atomic<uint64_t> errors{0};

  uint64_t operations() const {
    return history_reqs + searches + counts + published + channel_posts;
  }

  void error(const std::string& what) {
    ++errors;
    std::lock_guard g{mtx};
    if (first_errors.size() < 10)
      first_errors.push_back(what);
  }
  std::vector<std::string> errors_seen() {
    std::lock_guard g{mtx};
    return first_errors;
  }

 private:
  std::mutex mtx;
  std::vector<std::string> first_errors;
};

// Words the published contents are made of, so searches find something.
inline const std::vector<std::string>& words() {
  static const std::vector<std::string> w{"harbour", "lantern", "meadow", "granite", "orchard",
                                          "compass", "thistle", "beacon"};
  return w;
}

class client {
 public:
  // `old_until`: an `until` older than 20 minutes, over the prefilled rows.
  client(gateway::ws_client& c, std::string sk, int n, int64_t old_until, tally& t)
    : c_(c), sk_(std::move(sk)), n_(n), old_until_(old_until), t_(t) {}

  // `n` COUNTs sent at once, then their answers: with every client doing it
  // together, more reads wait at the node than it has reader sessions, so
  // every one of them has opened its connection.
  void burst(int n) {
    std::vector<std::string> subs;
    for (int i = 0; i < n; ++i) {
      subs.push_back(next_sub("b"));
      ++t_.counts;
      c_.send_text("[\"COUNT\",\"" + subs.back() + "\",{\"kinds\":[1]}]");
    }
    size_t answered = 0;
    await([&](const rapidjson::Document& d, const std::string&) {
      if (std::string_view(d[0].GetString()) == "COUNT"
          && std::find(subs.begin(), subs.end(), d[1].GetString()) != subs.end())
        ++answered;
      return answered == subs.size();
    }, "COUNTs of a burst");
  }

  // One operation of the mix, chosen by the step number.
  void step(uint64_t k) {
    auto word = words()[(k + static_cast<uint64_t>(n_)) % words().size()];
    auto old = std::to_string(old_until_);
    switch (k % 12) {
      case 0: return publish(1, "soak " + word + " from client " + std::to_string(n_), {});
      case 1: return req(R"({"kinds":[1],"limit":40})", false);
      case 2: return req(R"({"kinds":[1],"until":)" + old + R"(,"limit":300})", true);
      case 3: return count(R"({"kinds":[1]})");
      case 4: return publish(9, word + " in the channel", {{"h", "soak"}});
      case 5: return req(R"({"kinds":[9],"#h":["soak"],"limit":30})", false);
      case 6: return search(R"({"search":")" + word + R"(","kinds":[1],"limit":20})");
      case 7: return count(R"({"kinds":[1],"until":)" + old + "}");
      case 8: return req(R"({"kinds":[1],"until":)" + old + R"(,"limit":60})", true);
      case 9: return search(R"({"search":")" + word + R"(","until":)" + old + "}");
      case 10: return publish(1, word + " again", {});
      default: return req(R"({"kinds":[1,9],"limit":120})", false);
    }
  }

 private:
  std::string next_sub(std::string prefix) {
    prefix.append(std::to_string(++subs_));
    return prefix;
  }

  void publish(int32_t kind, std::string content, std::vector<proto::tag> tags) {
    auto ev = test::event_builder{sk_}.kind(kind).at(now_unix()).content(std::move(content))
                .tags(std::move(tags)).sign();
    c_.send_text("[\"EVENT\"," + ev.raw + "]");
    await([&](const rapidjson::Document& d, const std::string& f) {
      if (std::string_view(d[0].GetString()) != "OK" || d[1].GetString() != ev.id)
        return false;
      if (!d[2].GetBool())
        t_.error("publish refused: " + f);
      return true;
    }, "OK for " + ev.id);
    ++(kind == 9 ? t_.channel_posts : t_.published);
  }

  void req(const std::string& filter, bool covered) {
    ++t_.history_reqs;
    if (covered)
      ++t_.covered_reqs;
    history(filter);
  }

  void search(const std::string& filter) {
    if constexpr (search_built) {
      ++t_.searches;
      history(filter);
    } else {
      req(R"({"kinds":[1],"limit":20})", false);  // the same slot, a head read meanwhile
    }
  }

  // REQ until EOSE, then CLOSE (head REQs stay live otherwise).
  void history(const std::string& filter) {
    auto sub = next_sub("h");
    c_.send_text("[\"REQ\",\"" + sub + "\"," + filter + "]");
    await([&](const rapidjson::Document& d, const std::string&) {
      std::string_view verb = d[0].GetString();
      if (d[1].GetString() != sub)
        return false;
      if (verb == "EVENT")
        ++t_.events_received;
      return verb == "EOSE";
    }, "EOSE of " + sub + " " + filter);
    c_.send_text("[\"CLOSE\",\"" + sub + "\"]");
  }

  void count(const std::string& filter) {
    ++t_.counts;
    auto sub = next_sub("c");
    c_.send_text("[\"COUNT\",\"" + sub + "\"," + filter + "]");
    await([&](const rapidjson::Document& d, const std::string&) {
      return std::string_view(d[0].GetString()) == "COUNT" && d[1].GetString() == sub;
    }, "COUNT of " + sub);
  }

  // Reads frames until `done` says this is the answer. A NOTICE or a CLOSED
  // (the relay never closes a subscription of ours unasked) is an error;
  // EVENTs of a subscription already closed are not.
  template <class Done>
  void await(Done done, const std::string& what) {
    auto until = steady::now() + 20s;  // a failure detector, not a latency claim
    while (steady::now() < until) {
      auto f = c_.read_text(std::chrono::duration_cast<std::chrono::milliseconds>(until - steady::now()));
      if (!f)
        break;
      rapidjson::Document d;
      d.Parse(f->c_str(), f->size());
      if (!d.IsArray() || d.Size() < 2 || !d[0].IsString() || !d[1].IsString()) {
        t_.error("unexpected frame: " + *f);
        continue;
      }
      std::string_view verb = d[0].GetString();
      if (verb == "NOTICE" || verb == "CLOSED") {
        t_.error(*f);
        if (verb == "CLOSED")
          return;  // the answer, an error
        continue;
      }
      if (done(d, *f))
        return;
    }
    t_.error("client " + std::to_string(n_) + ": no " + what + " within 20 s" +
             (c_.is_open() ? "" : " (socket closed: " + c_.error() + ")"));
  }

  static int64_t now_unix() {
    return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch()).count();
  }

  gateway::ws_client& c_;
  std::string sk_;
  int n_;
  int64_t old_until_;
  tally& t_;
  uint64_t subs_ = 0;
};

}  // namespace waggle::e2e::soak
