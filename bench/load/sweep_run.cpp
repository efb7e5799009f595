#include "bench/load/sweep_run.hpp"

#include <cmath>
#include <deque>
#include <fstream>
#include <functional>
#include <future>
#include <iostream>
#include <latch>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

#include "bench/load/json_fields.hpp"
#include "bench/load/meters.hpp"
#include "bench/load/receivers.hpp"
#include "bench/load/report.hpp"
#include "bench/load/setup.hpp"

namespace waggle::bench {

namespace {

using clock_type = std::chrono::steady_clock;

// A delivery wait ends early once this long passes without a new receipt:
// what has not come by then is missed, not late.
constexpr double stall_s = 5;

// Runs fn(i) on the strand of each client and waits for all of them: the
// role objects' own figures are read where they are written.
void on_each_strand(const std::vector<std::shared_ptr<nostr_client>>& clients,
                    const std::function<void(size_t)>& fn) {
  std::latch done{static_cast<std::ptrdiff_t>(clients.size())};
  for (size_t i = 0; i < clients.size(); ++i)
    boost::asio::post(clients[i]->executor(), [&, i] {
      fn(i);
      done.count_down();
    });
  done.wait();
}

// The step's channel is fresh, so there is no history to ask for: limit 0
// spares the relay a stored-events query per subscriber during set-up (5,000
// of them at the last step) without changing what arrives live.
std::string chat_filter(const std::string& channel, int64_t since) {
  return "{\"kinds\":[9],\"#h\":[\"" + channel + "\"],\"since\":" + std::to_string(since) +
         ",\"limit\":0}";
}

}  // namespace

int run_sweep(const load_options& o) {
  sweep_result res;
  res.options = o;
  res.started_at = utc_now();
  auto most = *std::max_element(o.sweep.begin(), o.sweep.end());
  if (auto e = raise_fd_limit(most + 64); !e.empty()) {
    std::cerr << "waggle-load: " << e << "\n";
    return 2;
  }
  relay_endpoint relay;
  if (auto e = resolve_relay(o.url, o.host, relay); !e.empty()) {
    std::cerr << "waggle-load: " << e << "\n";
    return 2;
  }
  // The publisher and the set-up on the main io context; subscribers on the
  // receiver pool (declared first: connections go before their contexts).
  res.receiver_threads = receiver_threads(o.receiver_threads);
  receiver_pool receivers{res.receiver_threads};
  boost::asio::io_context ioc;
  auto guard = boost::asio::make_work_guard(ioc);
  std::vector<std::thread> io_threads;
  for (size_t t = 0; t < o.threads; ++t)
    io_threads.emplace_back([&] { ioc.run(); });
  auto stop_io = [&] {
    guard.reset();
    ioc.stop();
    for (auto& t : io_threads)
      if (t.joinable())
        t.join();
    receivers.stop();
  };
  auto say = [&](const std::string& line) {
    if (o.progress)
      std::cerr << line << "\n";
  };

  // --- set-up (untimed): a channel per step, the publisher a member of each -----
  auto author = random_keypair();
  auto prefix = "sweep-" + random_hex(4);
  std::vector<std::string> channels;
  for (size_t si = 0; si < o.sweep.size(); ++si)
    channels.push_back(prefix + "-" + std::to_string(o.sweep[si]) + "-" + std::to_string(si));
  if (auto e = create_channels(relay, ioc, random_keypair(), channels, {author.pubkey}); !e.empty()) {
    std::cerr << "waggle-load: " << e << "\n";
    stop_io();
    return 2;
  }

  struct step_state {
    std::vector<prepared_event> events;
    std::unique_ptr<publish_clock> clock;
    progress_counters progress;
  };
  std::deque<step_state> states;
  for (size_t si = 0; si < o.sweep.size(); ++si) {
    sweep_step_result step;
    step.subscribers = o.sweep[si];
    step.rate = o.rate;
    step.seconds = o.step_seconds;
    auto tag = "step " + std::to_string(step.subscribers) + ": ";
    auto& channel = channels[si];
    // The step's events, signed before its clock starts.
    auto created_at = unix_now();
    auto n = static_cast<size_t>(std::ceil(o.rate * o.step_seconds)) + 1;
    // Kept for the whole run: a late handler of a closed step's connection still finds them.
    auto& state = states.emplace_back();
    state.events = sign_all(n, std::max(1u, std::thread::hardware_concurrency()),
                           [&](size_t i, const keypair*& signer) {
                             signer = &author;
                             proto::event ev;
                             ev.kind = 9;
                             ev.created_at = created_at;
                             ev.tags = {{"h", channel}};
                             ev.content = filler(o.content_bytes, si * 1'000'003 + i);
                             return ev;
                           });
    state.clock = std::make_unique<publish_clock>(state.events);
    auto& events = state.events;
    auto& clock = *state.clock;
    auto& progress = state.progress;
    auto errors = std::make_shared<error_list>();

    // Subscribers, spread over the receiver threads, listening before anything is sent.
    std::vector<std::shared_ptr<nostr_client>> sub_clients;
    std::vector<std::shared_ptr<subscriber>> subs;
    auto filter = chat_filter(channel, created_at - 5);
    for (size_t s = 0; s < step.subscribers; ++s) {
      sub_clients.push_back(
        std::make_shared<nostr_client>(receivers.next(), random_keypair(), relay.relay_url));
      subs.push_back(std::make_shared<subscriber>(sub_clients.back(), filter, &clock, progress));
    }
    say(tag + "opening " + std::to_string(step.subscribers) + " subscribers…");
    auto setup_from = now_ns();
    auto ready = open_all(
      relay, sub_clients,
      [&subs, &progress, errors](size_t s) {
        auto sub = subs[s];
        client_handlers h;
        h.ready = [sub] { sub->subscribe(); };
        h.eose = [sub](std::string_view) { sub->on_eose(); };
        h.event = [sub](std::string_view, std::string_view id) { sub->on_event(id); };
        h.closed = [sub](std::string_view, std::string_view m) { sub->on_closed(m); };
        // After it was listening: the relay closed it (a slow consumer?) or the socket broke.
        h.failed = [&progress, errors](const std::string& e) {
          if (progress.dropped.fetch_add(1) == 0)
            errors->add("a subscriber was dropped (the first; see dropped): " + e);
        };
        return h;
      },
      o.connect_parallel, std::chrono::seconds(180), errors);
    auto until = clock_type::now() + std::chrono::seconds(60);
    while (progress.subscribed + progress.refused < ready &&
           clock_type::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    step.setup_s = static_cast<double>(now_ns() - setup_from) / 1e9;
    say(tag + std::to_string(progress.subscribed.load()) + " listening after " +
        json::fixed(step.setup_s, 1) + " s");

    // The publisher: one connection, open loop at the step's rate.
    std::vector<std::shared_ptr<nostr_client>> pub_clients{
      std::make_shared<nostr_client>(ioc, author, relay.relay_url)};
    pacing pace;
    pace.rate = o.rate;
    auto pub = std::make_shared<publisher>(pub_clients[0], std::span<const prepared_event>{events},
                                           0, pace, progress, &clock);
    auto opened = open_all(
      relay, pub_clients,
      [pub](size_t) {
        client_handlers h;
        h.ok = [pub](std::string_view id, bool ok, std::string_view m) { pub->on_ok(id, ok, m); };
        return h;
      },
      1, std::chrono::seconds(30), errors);
    auto delivered = [&subs] {
      size_t d = 0;
      for (auto& s : subs)
        d += s->delivered();
      return d;
    };
    int64_t t0 = 0, drained_from = 0;
    double cpu0 = receivers.cpu_seconds();
    if (opened == 1) {
      t0 = now_ns();
      auto deadline = t0 + static_cast<int64_t>(o.step_seconds * 1e9);
      pub->start(t0, deadline);
      // Until the window ended and every event was answered (or 30 s more).
      size_t stable = 0;
      auto last_print = clock_type::now();
      while (true) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        auto now = now_ns();
        if (o.progress && clock_type::now() - last_print >= std::chrono::seconds(5)) {
          say("  [" + std::to_string((now - t0) / 1'000'000'000) + " s] sent " +
              std::to_string(progress.sent) + ", accepted " + std::to_string(progress.accepted) +
              ", delivered " + std::to_string(delivered()));
          last_print = clock_type::now();
        }
        if (now < deadline)
          continue;
        if (now > deadline + 30'000'000'000)
          break;
        stable = progress.answered == progress.sent ? stable + 1 : 0;
        if (stable >= 3)
          break;
      }
      // The last deliveries: until all are in, none came for stall_s, or the drain wait ran out.
      drained_from = std::max(now_ns(), deadline);
      auto goal = progress.accepted * progress.subscribed;
      auto last = delivered();
      auto last_change = clock_type::now();
      auto cap = clock_type::now() + std::chrono::duration<double>(o.drain_wait);
      auto last_print2 = clock_type::now();
      while (last < goal) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        auto d = delivered();
        auto now = clock_type::now();
        if (d != last) {
          last = d;
          last_change = now;
        }
        if (now - last_change >= std::chrono::duration<double>(stall_s))
          break;
        if (now >= cap) {
          step.drain_cut = true;
          break;
        }
        if (o.progress && now - last_print2 >= std::chrono::seconds(5)) {
          say("  draining: delivered " + std::to_string(d) + " of " + std::to_string(goal));
          last_print2 = now;
        }
      }
    } else {
      errors->add("the publisher did not open");
    }
    auto step_end = now_ns();
    auto cpu = receivers.cpu_seconds() - cpu0;

    // Freeze every subscriber on its strand, then read the figures.
    std::vector<double> delivery;
    int64_t last_receipt = 0;
    std::vector<const subscriber*> listening;
    on_each_strand(sub_clients, [&](size_t i) { subs[i]->freeze(); });
    for (auto& s : subs) {  // frozen: no strand writes any more
      step.duplicates += s->duplicates;
      step.foreign += s->foreign;
      delivery.insert(delivery.end(), s->delivery_ms.begin(), s->delivery_ms.end());
      last_receipt = std::max(last_receipt, s->last_ns);
      if (!s->refused.empty())
        errors->add("subscription refused: " + s->refused);
      if (s->listening())
        listening.push_back(s.get());
    }
    step.listening = listening.size();
    std::promise<void> read;
    bool ran_out = false;
    boost::asio::post(pub_clients[0]->executor(), [&] {
      step.outcomes = pub->counts;
      step.ack_ms = summarize_latency(pub->ack_ms);
      ran_out = pub->ran_out;
      read.set_value();
    });
    read.get_future().wait();
    auto answered = step.outcomes.accepted + step.outcomes.duplicate + step.outcomes.rejected;
    step.unanswered = step.outcomes.sent - std::min(step.outcomes.sent, answered);
    tally_deliveries(clock, listening, step);
    step.dropped = progress.dropped;
    step.delivery_ms = summarize_latency(delivery);
    step.offered_per_s = o.rate * static_cast<double>(step.listening);
    if (t0) {
      step.span_s = last_receipt > t0 ? static_cast<double>(last_receipt - t0) / 1e9 : 0;
      step.drain_s = static_cast<double>(std::max(last_receipt, drained_from) - drained_from) / 1e9;
      step.achieved_per_s =
        static_cast<double>(step.delivered) / std::max(o.step_seconds, step.span_s);
      // Over the time deliveries came in (not the idle end of a stalled drain).
      auto wall = std::max(o.step_seconds, step.span_s);
      step.receiver_cpu_s = cpu;
      step.receiver_busy = cpu / (wall * static_cast<double>(res.receiver_threads));
    }
    if (ran_out)
      errors->add("the publisher ran out of pre-signed events");
    if (step.listening != step.subscribers)
      errors->add(std::to_string(step.subscribers - step.listening) + " subscribers were not listening");
    for (auto& e : errors->take())
      res.errors.push_back(tag + e);
    say(tag + "accepted " + std::to_string(step.outcomes.accepted) + ", delivered " +
        std::to_string(step.delivered) + " of " + std::to_string(step.expected) + ", p99 " +
        json::fixed(step.delivery_ms.p99, 1) + " ms, " + json::fixed(step.achieved_per_s, 0) +
        " deliveries/s of " + json::fixed(step.offered_per_s, 0) + ", receivers " +
        json::fixed(step.receiver_busy * 100, 0) + " % busy");
    res.steps.push_back(std::move(step));

    // Close the step's connections and let the relay tear them down.
    pub_clients[0]->close();
    for (auto& c : sub_clients)
      c->close();
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  stop_io();
  res.knee = find_knee(res.steps, o.knee_p99_ms, o.knee_share, res.knee_reason);

  auto md = to_markdown(res);
  std::cout << md;
  if (!o.json_path.empty())
    std::ofstream(o.json_path) << to_json(res);
  if (!o.markdown_path.empty())
    std::ofstream(o.markdown_path) << md;
  return res.clean() ? 0 : 1;
}

}  // namespace waggle::bench
