#include "bench/load/push_run.hpp"

#include <cmath>
#include <ctime>
#include <fstream>
#include <future>
#include <iostream>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <pqxx/pqxx>

#include "bench/load/meters.hpp"
#include "bench/load/setup.hpp"

namespace waggle::bench {

namespace {

using clock_type = std::chrono::steady_clock;
constexpr double settle_s = static_cast<double>(commit_meter::settle_time.count());

void sleep_s(double s) {
  if (s > 0)
    std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

// The lease of scenario B (wire contract, docs/push.md): every kind 9 of the channel.
proto::event make_lease(const std::string& installation, const std::string& grant,
                        const std::string& channel) {
  proto::event ev;
  ev.kind = 30350;
  ev.tags = {{"d", installation},
             {"endpoint", grant},
             {"app", "waggle-bench"},
             {"expiration", std::to_string(unix_now() + 86400)},
             {"generation", "1"},
             {"channel", channel},
             {"k", "9"}};
  return ev;
}

proto::event chat_message(const std::string& channel, std::string text) {
  proto::event ev;
  ev.kind = 9;
  ev.tags = {{"h", channel}};
  ev.content = std::move(text);
  return ev;
}

// The relay's push queues: what is left to match or to send.
struct queue_probe {
  explicit queue_probe(const std::string& url) : conn(url) {}
  void read(long long& match_jobs, long long& wakes_due) {
    pqxx::nontransaction tx{conn};
    auto row = tx.exec1(
      "SELECT (SELECT count(*) FROM push_match_queue),"
      " (SELECT count(*) FROM push_wake_outbox WHERE state IN ('pending', 'sending'))");
    match_jobs = row[0].as<long long>();
    wakes_due = row[1].as<long long>();
  }
  pqxx::connection conn;
};

struct step_state {
  std::vector<prepared_event> events;
  std::unique_ptr<publish_clock> clock;
};

}  // namespace

int run_push(const load_options& o) {
  push_result res;
  res.options = o;
  res.started_at = utc_now();
  bool b = o.push_scenario == "B";
  std::unique_ptr<mock_push_gateway> gateway;
  try {
    gateway = std::make_unique<mock_push_gateway>(o.push_gateway_port);
  } catch (const std::exception& e) {
    std::cerr << "waggle-load: mock push gateway on port " << o.push_gateway_port << ": "
              << e.what() << "\n";
    return 2;
  }
  res.gateway_url = gateway->url();
  if (o.push_scenario == "idle" && o.database_url.empty()) {
    std::cerr << "waggle-load: --push-scenario idle counts commits: it needs --database-url\n";
    return 2;
  }
  relay_endpoint relay;
  if (auto e = resolve_relay(o.url, o.host, relay); !e.empty()) {
    std::cerr << "waggle-load: " << e << "\n";
    return 2;
  }
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
  };
  auto fail = [&](const std::string& why) {
    std::cerr << "waggle-load: " << why << "\n";
    stop_io();
    return 2;
  };
  auto say = [&](const std::string& line) {
    if (o.progress)
      std::cerr << line << "\n";
  };

  // --- set-up (untimed): the channel, the lease, one warm-up message --------------
  auto holder = random_keypair(), author = random_keypair(), admin = random_keypair();
  res.channel = "push-" + random_hex(4);
  auto grant = "bench-grant-" + random_hex(8);
  std::string warmup_id;
  if (o.push_scenario != "idle") {
    if (auto e = create_channels(relay, ioc, admin, {res.channel}, {holder.pubkey, author.pubkey});
        !e.empty())
      return fail(e);
    if (b) {
      if (auto e = publish_events(relay, ioc, holder,
                                  {make_lease("bench-" + random_hex(4), grant, res.channel)});
          !e.empty())
        return fail("the lease: " + e);
      res.lease_accepted = true;
    }
    // B: the pipeline must wake for one message before minutes are spent on it.
    std::vector<std::string> ids;
    if (auto e = publish_events(relay, ioc, author, {chat_message(res.channel, "warm-up")}, &ids);
        !e.empty())
      return fail("the warm-up message: " + e);
    warmup_id = ids.at(0);
    if (b) {
      auto until = clock_type::now() + std::chrono::duration<double>(o.drain_wait);
      bool woke = false;
      while (!woke && clock_type::now() < until) {
        gateway->wait_for(gateway->requests() + 1, std::chrono::milliseconds(200));
        for (auto& w : gateway->wakes())
          woke = woke || w.event_id == warmup_id;
      }
      if (!woke)
        return fail("no wake for the warm-up message within " + rate_key(o.drain_wait) +
                    " s: is the relay's --push-gateway-url " + gateway->url() + "?");
      say("warm-up woke the gateway");
    }
  }

  // --- the idle control: the relay with push on and no traffic ---------------------
  std::unique_ptr<commit_meter> meter;
  std::unique_ptr<queue_probe> probe;
  if (!o.database_url.empty()) {
    meter = std::make_unique<commit_meter>(o.database_url);
    probe = std::make_unique<queue_probe>(o.database_url);
    auto window = o.step_seconds + settle_s;
    say("idle control: " + std::to_string(static_cast<int>(window + settle_s)) + " s…");
    commit_meter::settle();
    auto from_ns = now_ns();
    auto from = meter->read();
    sleep_s(window);
    auto to_ns = now_ns();
    push_idle_control idle;
    idle.commits = meter->read() - from;
    idle.window_s = static_cast<double>(to_ns - from_ns) / 1e9;
    idle.per_s = static_cast<double>(idle.commits) / idle.window_s;
    res.idle = idle;
  }

  // --- the steps ---------------------------------------------------------------------
  std::vector<step_state> states;
  states.reserve(o.push_scenario == "idle" ? 0 : o.push_rates.size());
  for (size_t si = 0; o.push_scenario != "idle" && si < o.push_rates.size(); ++si) {
    auto rate = o.push_rates[si];
    push_step_result step;
    step.rate = rate;
    step.seconds = o.step_seconds;
    auto& st = states.emplace_back();
    auto n = static_cast<size_t>(std::ceil(rate * o.step_seconds)) + 1;
    auto created_at = unix_now();
    auto threads = std::max(1u, std::thread::hardware_concurrency());
    st.events = sign_all(n, threads, [&](size_t i, const keypair*& signer) {
      signer = &author;
      auto ev = chat_message(res.channel, filler(o.content_bytes, si * 1'000'003 + i));
      ev.created_at = created_at;
      return ev;
    });
    st.clock = std::make_unique<publish_clock>(st.events);
    progress_counters progress;
    std::vector<std::shared_ptr<nostr_client>> clients{
      std::make_shared<nostr_client>(ioc, author, relay.relay_url)};
    pacing pace;
    pace.rate = rate;
    auto pub = std::make_shared<publisher>(clients[0], std::span<const prepared_event>{st.events},
                                           0, pace, progress, st.clock.get());
    auto errors = std::make_shared<error_list>();
    auto opened = open_all(
      relay, clients,
      [pub, &progress](size_t) {
        client_handlers h;
        h.ok = [pub](std::string_view id, bool ok, std::string_view m) { pub->on_ok(id, ok, m); };
        h.failed = [&progress](const std::string&) { progress.dropped.fetch_add(1); };
        return h;
      },
      1, std::chrono::seconds(30), errors);
    if (opened != 1) {
      for (auto& e : errors->take())
        res.errors.push_back("step " + rate_key(rate) + "/s: " + e);
      res.steps.push_back(step);
      break;
    }
    long long from = 0;
    int64_t from_ns = 0;
    if (meter) {
      commit_meter::settle();  // the set-up's and the last check's commits are flushed
      from_ns = now_ns();
      from = meter->read();
    }
    say("step " + rate_key(rate) + " msgs/s for " + rate_key(o.step_seconds) + " s…");
    auto t0 = now_ns();
    auto deadline = t0 + static_cast<int64_t>(o.step_seconds * 1e9);
    pub->start(t0, deadline);
    // Until the deadline passed and every message was answered (or 30 s more).
    size_t stable = 0;
    auto last_print = clock_type::now();
    while (true) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      auto now = now_ns();
      if (o.progress && clock_type::now() - last_print >= std::chrono::seconds(5)) {
        std::cerr << "  [" << static_cast<int>(static_cast<double>(now - t0) / 1e9) << " s] sent "
                  << progress.sent << ", accepted " << progress.accepted << ", rejected "
                  << progress.rejected << ", gateway got " << gateway->requests() << "\n";
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
    // Every owed wake at the gateway, or the drain wait is over.
    auto acked_ns = now_ns();
    size_t owed = 0;
    for (size_t k = 0; b && k < st.clock->size(); ++k)
      owed += st.clock->accepted(k);
    size_t got = 0;
    size_t looked_at = static_cast<size_t>(-1);
    auto until = clock_type::now() + std::chrono::duration<double>(o.drain_wait);
    while (got < owed && clock_type::now() < until) {
      auto requests = gateway->wait_for(looked_at == static_cast<size_t>(-1) ? 0 : looked_at + 1,
                                        std::chrono::milliseconds(100));
      if (requests == looked_at)
        continue;
      looked_at = requests;
      got = owed_received(gateway->wakes(), *st.clock);
    }
    step.shortfall_at_drain = owed - std::min(owed, got);
    step.drain_s = static_cast<double>(now_ns() - acked_ns) / 1e9;
    if (meter) {
      // The last commit (the wake marked delivered) needs a settle time.
      sleep_s(settle_s);
      auto to_ns = now_ns();
      commit_count cc;
      cc.gross = meter->read() - from;
      cc.window_s = static_cast<double>(to_ns - from_ns) / 1e9;
      cc.idle_control = std::llround(res.idle->per_s * cc.window_s);
      cc.net = cc.gross - cc.idle_control;
      step.commits = cc;
    }
    if (probe) {
      // After the window: these reads are commits too.
      step.queues_checked = true;
      auto until_empty = clock_type::now() + std::chrono::duration<double>(o.drain_wait);
      try {
        while (true) {
          probe->read(step.match_queue_left, step.outbox_left);
          step.queues_drained = step.match_queue_left == 0 && step.outbox_left == 0;
          if (step.queues_drained || clock_type::now() >= until_empty)
            break;
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
      } catch (const std::exception& e) {
        res.errors.push_back("the push queues: " + std::string{e.what()});
      }
    }
    // The publisher's figures, read on its strand.
    std::promise<void> read;
    bool ran_out = false;
    boost::asio::post(clients[0]->executor(), [&] {
      step.outcomes = pub->counts;
      step.ack_ms = summarize_latency(pub->ack_ms);
      ran_out = pub->ran_out;
      read.set_value();
    });
    read.get_future().wait();
    if (step.commits && step.outcomes.accepted)
      step.commits->per_message = static_cast<double>(step.commits->net) /
                                  static_cast<double>(step.outcomes.accepted);
    auto answered = step.outcomes.accepted + step.outcomes.duplicate + step.outcomes.rejected;
    step.unanswered = step.outcomes.sent - std::min(step.outcomes.sent, answered);
    if (ran_out || progress.dropped)
      res.errors.push_back("step " + rate_key(rate) + "/s: the publisher ran out or was dropped");
    clients[0]->close();
    for (auto& e : errors->take())
      res.errors.push_back("step " + rate_key(rate) + "/s: " + e);
    res.steps.push_back(step);
    say("  accepted " + std::to_string(step.outcomes.accepted) + ", rejected " +
        std::to_string(step.outcomes.rejected) + ", wakes " + std::to_string(got) + " of " +
        std::to_string(owed));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  stop_io();
  gateway->stop();

  std::vector<push_step_book> books;
  for (auto& st : states)
    books.push_back({st.clock.get(), b});
  tally_wakes(gateway->wakes(), grant, warmup_id, books, res);
  if (b && res.warmup_wakes == 0)
    res.errors.push_back("no wake for the warm-up message");

  auto md = to_markdown(res);
  std::cout << md;
  if (!o.json_path.empty())
    std::ofstream(o.json_path) << to_json(res);
  if (!o.markdown_path.empty())
    std::ofstream(o.markdown_path) << md;
  return res.clean() ? 0 : 1;
}

}  // namespace waggle::bench
