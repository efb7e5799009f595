#include "bench/load/run.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <random>
#include <thread>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>

#include "bench/load/cpu_meter.hpp"
#include "bench/load/listener_run.hpp"
#include "bench/load/meters.hpp"
#include "bench/load/push_run.hpp"
#include "bench/load/receivers.hpp"
#include "bench/load/report.hpp"
#include "bench/load/roles.hpp"
#include "bench/load/setup.hpp"
#include "bench/load/sweep_run.hpp"

namespace waggle::bench {

namespace {

using clock_type = std::chrono::steady_clock;

// The channels of this run: fresh ids (channel ids are never reused), or the
// ones `seed` filled.
std::vector<std::string> channel_ids(const load_options& o) {
  std::vector<std::string> ids;
  auto prefix = o.channel_prefix.empty() ? "load-" + random_hex(4) : o.channel_prefix;
  for (size_t k = 0; k < o.channels; ++k)
    ids.push_back(prefix + "-" + std::to_string(k));
  return ids;
}

// How many events connection c publishes, and at what rate.
struct plan {
  std::vector<size_t> first;  // index of each publisher's first event
  std::vector<size_t> count;
  std::vector<pacing> pace;
  size_t total = 0;
};

bool listener_workload(const load_options& o) {
  return o.kind == workload::listener_latency || o.kind == workload::listener_burst;
}

// listener-latency: one publisher, the gaps between mentions drawn uniformly
// from [gap-min, gap-max] (the first mention one gap after the start).
std::vector<int64_t> mention_schedule(const load_options& o) {
  std::mt19937_64 rng{std::random_device{}()};
  std::uniform_real_distribution<double> gap{o.gap_min, o.gap_max};
  std::vector<int64_t> at;
  double t = 0;
  for (size_t k = 0; k < o.mentions; ++k)
    at.push_back(static_cast<int64_t>((t += gap(rng)) * 1e9));
  return at;
}

plan make_plan(const load_options& o, size_t publishers) {
  plan p;
  for (size_t c = 0; c < publishers; ++c) {
    pacing pace;
    size_t n;
    if (o.kind == workload::listener_latency) {
      pace.at_ns = mention_schedule(o);
      n = pace.at_ns.size();
    } else if (o.kind == workload::listener_burst) {
      // Everything at once: each connection keeps its window full until its
      // share of the mentions is out.
      pace.in_flight = o.in_flight;
      n = o.mentions / publishers + (c < o.mentions % publishers ? 1 : 0);
    } else if (o.rate > 0) {
      pace.rate = o.rate / static_cast<double>(publishers);
      pace.phase = static_cast<double>(c) / static_cast<double>(publishers);
      n = static_cast<size_t>(std::ceil(pace.rate * o.duration)) + 1;
    } else {
      pace.in_flight = o.in_flight;
      // Unpaced: signed ahead for 20,000 a second (this machine publishes
      // 8,200 a second at 50 in flight; 8,000 ran out before the deadline).
      auto all = o.events ? o.events : static_cast<size_t>(20000 * o.duration);
      n = all / publishers + (c < all % publishers ? 1 : 0);
    }
    p.first.push_back(p.total);
    p.count.push_back(n);
    p.pace.push_back(pace);
    p.total += n;
  }
  return p;
}

// listener_of (sized to the events, or empty): which listener each event's
// mention reaches (-1: none); `targets`: the listener workloads' targets, one
// per listener; chat members are registered with listener (member mod N).
std::vector<prepared_event> make_events(const load_options& o, const plan& p,
                                        const std::vector<keypair>& keys,
                                        const std::vector<std::string>& channels,
                                        int64_t created_at, const std::vector<std::string>& targets,
                                        std::vector<int>& listener_of) {
  std::vector<size_t> owner(p.total);
  for (size_t c = 0; c < p.count.size(); ++c)
    for (size_t k = 0; k < p.count[c]; ++k)
      owner[p.first[c] + k] = c;
  auto threads = std::max(1u, std::thread::hardware_concurrency());
  return sign_all(p.total, threads, [&](size_t i, const keypair*& signer) {
    signer = &keys[owner[i]];
    proto::event ev;
    ev.created_at = created_at;
    auto text = filler(o.content_bytes, i * 7919 + 17);
    if (o.kind == workload::publish) {
      ev.kind = 1;
      ev.content = std::move(text);
      return ev;
    }
    if (listener_workload(o)) {
      // A kind 9 mention outside any channel, round-robin over the listeners.
      ev.kind = 9;
      auto l = i % targets.size();
      listener_of[i] = static_cast<int>(l);
      ev.tags = {{"p", targets[l]}};
      std::string at_name{"@"};
      at_name.append(targets[l], 0, 8).append(" ");
      text.replace(0, std::min<size_t>(text.size(), at_name.size()), at_name);
      ev.content = std::move(text);
      return ev;
    }
    // chat and fanout: kind 9 posts; fanout keeps to channel 0, where the
    // subscribers listen.
    ev.kind = 9;
    auto channel = o.kind == workload::fanout ? 0 : (i * 2654435761u) % channels.size();
    ev.tags = {{"h", channels[channel]}};
    auto roll = static_cast<double>((i * 40503u) % 1000) / 1000.0;
    if (o.kind == workload::chat && roll < o.mention_share && keys.size() > 1) {
      auto m = (owner[i] + 1 + i % (keys.size() - 1)) % keys.size();
      auto& mentioned = keys[m];
      if (!listener_of.empty())
        listener_of[i] = static_cast<int>(m % o.listener_ports.size());
      ev.tags.push_back({"p", mentioned.pubkey});
      std::string at_name{"@"};
      at_name.append(mentioned.pubkey, 0, 8).append(" ");
      text.replace(0, std::min<size_t>(text.size(), at_name.size()), at_name);
    }
    ev.content = std::move(text);
    return ev;
  });
}

void print_progress(const load_options& o, const progress_counters& pc, size_t delivered,
                    const listener_side* lis, double t, bool final_line) {
  if (!o.progress)
    return;
  bool tty = isatty(STDERR_FILENO);
  char line[200];
  std::snprintf(line, sizeof line, "[%5.1fs] sent %zu  answered %zu  accepted %zu  rejected %zu%s",
                t, pc.sent.load(), pc.answered.load(), pc.accepted.load(), pc.rejected.load(),
                o.subscribers ? ("  delivered " + std::to_string(delivered)).c_str() : "");
  if (lis) {
    auto n = std::strlen(line);
    std::snprintf(line + n, sizeof line - n, "  listeners got %zu", lis->healthy_requests());
  }
  if (tty)
    std::fprintf(stderr, "\r%s\033[K%s", line, final_line ? "\n" : "");
  else
    std::fprintf(stderr, "%s\n", line);
}

}  // namespace

int run_load(const load_options& options) {
  if (options.kind == workload::push)
    return run_push(options);  // steps of its own (push_run.hpp)
  if (options.sweeping())
    return run_sweep(options);  // steps of its own (sweep_run.hpp)
  auto o = options;
  if (o.kind == workload::listener_burst || o.kind == workload::listener_latency)
    o.events = o.mentions;
  if (auto e = raise_fd_limit(o.connections + o.subscribers + 64); !e.empty()) {
    std::cerr << "waggle-load: " << e << "\n";
    return 2;
  }
  // relays: where the connections go, in turn; sub_relays: the subscribers'.
  // Set-up (channels, listeners) goes through the first.
  std::vector<relay_endpoint> relays, sub_relays;
  for (auto* list : {&o.urls, &o.subscriber_urls})
    for (auto& url : *list) {
      relay_endpoint r;
      if (auto e = resolve_relay(url, o.host, r); !e.empty()) {
        std::cerr << "waggle-load: " << e << "\n";
        return 2;
      }
      (list == &o.urls ? relays : sub_relays).push_back(std::move(r));
    }
  if (sub_relays.empty())
    sub_relays = relays;
  const relay_endpoint& relay = relays.front();
  boost::asio::io_context ioc;
  auto guard = boost::asio::make_work_guard(ioc);
  std::vector<std::thread> io_threads;
  for (size_t t = 0; t < o.threads; ++t)
    io_threads.emplace_back([&] { ioc.run(); });
  auto stop_io = [&] {
    guard.reset();
    ioc.stop();
    for (auto& t : io_threads)
      t.join();
  };

  run_result result;
  result.options = o;
  result.started_at = utc_now();
  auto errors = std::make_shared<error_list>();
  progress_counters progress;

  // --- set-up (untimed) ---------------------------------------------------------
  bool publishes = o.kind == workload::publish || o.kind == workload::chat ||
                   o.kind == workload::fanout || listener_workload(o);
  auto channels = channel_ids(o);
  std::vector<keypair> keys(o.connections);
  for (auto& k : keys)
    k = random_keypair();
  if ((o.kind == workload::chat || o.kind == workload::fanout) && o.channel_prefix.empty()) {
    std::vector<std::string> members;
    for (auto& k : keys)
      members.push_back(k.pubkey);
    auto failure = create_channels(relay, ioc, random_keypair(), channels, members);
    if (!failure.empty()) {
      std::cerr << "waggle-load: " << failure << "\n";
      stop_io();
      return 2;
    }
  }
  // Listeners: receivers up and targets registered before anything is signed.
  std::unique_ptr<listener_side> lis;
  if (o.listeners()) {
    try {
      lis = std::make_unique<listener_side>(o);
    } catch (const std::exception& e) {
      std::cerr << "waggle-load: listener receivers: " << e.what() << "\n";
      stop_io();
      return 2;
    }
    if (auto failure = lis->register_all(relay, o, keys); !failure.empty()) {
      std::cerr << "waggle-load: " << failure << "\n";
      stop_io();
      return 2;
    }
  }
  plan p = publishes ? make_plan(o, o.connections) : plan{};
  if (o.kind == workload::listener_latency)
    o.duration = static_cast<double>(p.pace[0].at_ns.back()) / 1e9 + 1;
  std::vector<prepared_event> events;
  std::vector<int> listener_of;
  // Subscribers ask for events since a little before this, so signing time
  // cannot push the run's events out of their filter.
  auto created_at = unix_now();
  if (publishes) {
    if (o.progress)
      std::cerr << "signing " << p.total << " events…\n";
    if (lis)
      listener_of.assign(p.total, -1);
    events = make_events(o, p, keys, channels, created_at, lis ? lis->targets() : std::vector<std::string>{},
                         listener_of);
  }
  std::unique_ptr<publish_clock> clock;
  if (o.subscribers || lis)
    clock = std::make_unique<publish_clock>(events);

  // Subscribers first, so they are listening before anything is published.
  // Subscribers on receiver threads of their own, apart from the publishers
  // (declared first: the connections must go before their io contexts).
  std::unique_ptr<receiver_pool> receivers;
  std::vector<std::shared_ptr<nostr_client>> sub_clients;
  std::vector<std::shared_ptr<subscriber>> subs;
  auto delivered = [&subs] {
    size_t n = 0;
    for (auto& s : subs)
      n += s->delivered();
    return n;
  };
  if (o.subscribers) {
    receivers = std::make_unique<receiver_pool>(receiver_threads(o.receiver_threads));
    auto since = std::to_string(created_at - 5);
    // Every channel of the run, so each accepted event reaches every subscriber.
    std::string h;
    for (auto& ch : channels)
      h += (h.empty() ? "\"" : ",\"") + ch + "\"";
    std::string filter = o.kind == workload::publish
                           ? "{\"kinds\":[1],\"since\":" + since + "}"
                           : "{\"kinds\":[9],\"#h\":[" + h + "],\"since\":" + since + "}";
    for (size_t s = 0; s < o.subscribers; ++s) {
      sub_clients.push_back(
        std::make_shared<nostr_client>(receivers->next(), random_keypair(),
                                       sub_relays[s % sub_relays.size()].relay_url));
      subs.push_back(std::make_shared<subscriber>(sub_clients.back(), filter, clock.get(), progress));
    }
    result.subscribers = open_all(
      sub_relays, sub_clients,
      [subs, &progress](size_t s) {
        auto sub = subs[s];
        client_handlers h;
        h.ready = [sub] { sub->subscribe(); };
        h.eose = [sub](std::string_view) { sub->on_eose(); };
        h.event = [sub](std::string_view, std::string_view id) { sub->on_event(id); };
        h.closed = [sub](std::string_view, std::string_view m) { sub->on_closed(m); };
        h.failed = [&progress](const std::string&) { progress.dropped.fetch_add(1); };
        return h;
      },
      o.connect_parallel, std::chrono::seconds(120), errors);
    auto until = clock_type::now() + std::chrono::seconds(60);
    while (progress.subscribed + progress.refused < result.subscribers &&
           clock_type::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (o.progress)
      std::cerr << progress.subscribed << " of " << o.subscribers << " subscribers listening\n";
  }

  // The measured connections: publishers, queriers or idle ones.
  std::vector<std::shared_ptr<nostr_client>> clients;
  std::vector<std::shared_ptr<publisher>> pubs;
  std::vector<std::shared_ptr<querier>> queries;
  for (size_t c = 0; c < o.connections; ++c) {
    clients.push_back(
      std::make_shared<nostr_client>(ioc, keys[c], relays[c % relays.size()].relay_url));
    if (publishes) {
      std::span<const prepared_event> slice{events.data() + p.first[c], p.count[c]};
      pubs.push_back(std::make_shared<publisher>(clients.back(), slice, p.first[c], p.pace[c],
                                                 progress, clock.get()));
    } else if (o.kind == workload::history) {
      std::vector<std::string> filters;
      std::string until;
      if (o.until_age >= 0)
        until = ",\"until\":" +
                std::to_string(created_at - static_cast<int64_t>(std::llround(o.until_age)));
      for (auto& ch : channels) {
        if (o.search.empty())
          filters.push_back("{\"kinds\":[9],\"#h\":[\"" + ch + "\"]" + until + ",\"limit\":50}");
        for (auto& w : o.search)
          filters.push_back("{\"search\":\"" + w + "\",\"#h\":[\"" + ch + "\"]" + until +
                            ",\"limit\":50}");
      }
      queries.push_back(std::make_shared<querier>(clients.back(), filters, o.in_flight, progress));
    }
  }
  auto opened = open_all(
    relays, clients,
    [pubs, queries, &progress](size_t c) {
      client_handlers h;
      h.failed = [&progress](const std::string&) { progress.dropped.fetch_add(1); };
      if (c < pubs.size()) {
        auto pub = pubs[c];
        h.ok = [pub](std::string_view id, bool ok, std::string_view m) { pub->on_ok(id, ok, m); };
      } else if (c < queries.size()) {
        auto q = queries[c];
        h.event = [q](std::string_view, std::string_view) { q->on_event(); };
        h.eose = [q](std::string_view sub) { q->on_eose(sub); };
        h.closed = [q](std::string_view sub, std::string_view m) { q->on_closed(sub, m); };
      }
      return h;
    },
    o.connect_parallel, std::chrono::seconds(300), errors);
  if (o.progress)
    std::cerr << opened << " of " << o.connections << " connections authenticated\n";

  // --- the measured window ---------------------------------------------------------
  std::unique_ptr<commit_meter> meter;
  long long control_from = 0, run_from = 0;
  int64_t control_from_ns = 0, run_from_ns = 0;
  double window = 0;
  if (!o.database_url.empty() && opened == o.connections) {
    // Equal windows (the load, or the idle control, plus one settle time),
    // each read after the counters of the window before it were flushed.
    meter = std::make_unique<commit_meter>(o.database_url);
    auto control = o.control_seconds >= 0 ? o.control_seconds : o.duration;
    window = control + std::chrono::duration<double>(commit_meter::settle_time).count();
    if (o.progress)
      std::cerr << "idle control window: " << window + 11 << " s…\n";
    commit_meter::settle();
    control_from_ns = now_ns();
    control_from = meter->read();
    std::this_thread::sleep_for(std::chrono::duration<double>(window));
    run_from_ns = now_ns();
    run_from = meter->read();
  }

  // Parsed and checked by parse_load_options.
  auto watches = o.cpu_watch.empty() ? std::vector<cpu_watch>{} : *parse_cpu_watches(o.cpu_watch);
  auto cpu_from = cpu_now(watches);
  auto t0 = now_ns();
  auto deadline = t0 + static_cast<int64_t>(o.duration * 1e9);
  if (opened == o.connections) {
    for (auto& pub : pubs)
      pub->start(t0, deadline);
    for (auto& q : queries)
      q->start(deadline);
  }
  // Until the deadline passed and every request was answered (or 30 s more).
  auto last_print = clock_type::now();
  size_t stable = 0;
  while (opened == o.connections) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto now = now_ns();
    if (clock_type::now() - last_print >= std::chrono::seconds(1)) {
      print_progress(o, progress, delivered(), lis.get(), static_cast<double>(now - t0) / 1e9, false);
      last_print = clock_type::now();
    }
    if (now < deadline)
      continue;
    if (o.kind == workload::idle || now > deadline + 30'000'000'000)
      break;
    stable = progress.answered == progress.sent ? stable + 1 : 0;
    if (stable >= 3)
      break;
  }
  if (lis) {
    // The healthy listeners get up to --delivery-wait s for what was accepted.
    size_t expected = 0;
    for (size_t k = 0; k < clock->size(); ++k)
      expected += listener_of[k] >= 0 && clock->accepted(k) &&
                  lis->healthy(static_cast<size_t>(listener_of[k]));
    auto until = clock_type::now() + std::chrono::duration<double>(o.delivery_wait);
    auto last = clock_type::now();
    while (clock_type::now() < until && lis->healthy_requests() < expected) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (clock_type::now() - last >= std::chrono::seconds(1)) {
        print_progress(o, progress, delivered(), lis.get(), static_cast<double>(now_ns() - t0) / 1e9, false);
        last = clock_type::now();
      }
    }
  }
  auto drained_ns = now_ns();
  if (!o.cpu_watch.empty())
    result.cpu = cpu_between(watches, cpu_from, cpu_now(watches));
  // Subscribers get up to 10 s for the last deliveries; what has not arrived
  // by then counts as missed.
  if (!subs.empty()) {
    auto until = clock_type::now() + std::chrono::seconds(10);
    while (clock_type::now() < until &&
           delivered() < progress.accepted * progress.subscribed)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  print_progress(o, progress, delivered(), lis.get(), static_cast<double>(now_ns() - t0) / 1e9, true);

  if (meter) {
    // The last commit needs a full settle time of idleness before the read;
    // if draining made the run window longer than the control window, the
    // idle baseline is scaled to the run window's length.
    auto read_at = std::max(run_from_ns + static_cast<int64_t>(window * 1e9),
                            drained_ns + static_cast<int64_t>(commit_meter::settle_time.count() * 1e9));
    if (auto left = read_at - now_ns(); left > 0)
      std::this_thread::sleep_for(std::chrono::nanoseconds(left));
    auto run_to_ns = now_ns();
    auto run_to = meter->read();
    commit_count cc;
    cc.window_s = static_cast<double>(run_to_ns - run_from_ns) / 1e9;
    auto control_s = static_cast<double>(run_from_ns - control_from_ns) / 1e9;
    cc.idle_control = static_cast<long long>(
      std::llround(static_cast<double>(run_from - control_from) * cc.window_s / control_s));
    cc.gross = run_to - run_from;
    cc.net = cc.gross - cc.idle_control;
    result.commits = cc;
  }
  if (o.relay_pid) {
    if (auto rss = read_rss(o.relay_pid)) {
      result.relay_rss_mib = rss->rss_mib;
      result.relay_peak_rss_mib = rss->peak_mib;
    } else {
      result.errors.push_back("cannot read /proc/" + std::to_string(o.relay_pid) + "/status");
    }
  }
  for (auto& c : clients)
    c->close();
  for (auto& c : sub_clients)
    c->close();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  stop_io();  // from here on, role objects are read by this thread alone
  if (receivers)
    receivers->stop();
  if (lis) {
    lis->stop();
    result.listeners = lis->collect(*clock, listener_of);
  }

  // --- results ------------------------------------------------------------------
  std::vector<double> latencies;
  int64_t last_answer = t0;
  for (auto& pub : pubs) {
    result.outcomes.merge(pub->counts);
    latencies.insert(latencies.end(), pub->ack_ms.begin(), pub->ack_ms.end());
    last_answer = std::max(last_answer, pub->last_answer_ns);
  }
  for (auto& q : queries) {
    result.outcomes.merge(q->counts);
    result.history_events += q->events;
    latencies.insert(latencies.end(), q->latency_ms.begin(), q->latency_ms.end());
    last_answer = std::max(last_answer, q->last_answer_ns);
  }
  result.ack_ms = summarize_latency(latencies);
  auto answered = result.outcomes.accepted + result.outcomes.duplicate + result.outcomes.rejected;
  result.unanswered = result.outcomes.sent - std::min(result.outcomes.sent, answered);
  result.elapsed_s = static_cast<double>(last_answer - t0) / 1e9;
  if (result.elapsed_s > 0)
    result.per_s = static_cast<double>(result.outcomes.accepted) / result.elapsed_s;
  if (result.commits && result.outcomes.accepted)
    result.commits->per_message =
      static_cast<double>(result.commits->net) / static_cast<double>(result.outcomes.accepted);
  if (!subs.empty()) {
    // Per event and per subscriber: every accepted event must have reached
    // every listening subscriber; deliveries of events whose OK never came
    // are not counted and cannot hide a miss.
    std::vector<double> delivery, after_ok;
    std::vector<const subscriber*> listening;
    for (auto& s : subs) {
      result.fanout_duplicates += s->duplicates;
      delivery.insert(delivery.end(), s->delivery_ms.begin(), s->delivery_ms.end());
      if (!s->refused.empty())
        errors->add("subscription refused: " + s->refused);
      if (s->listening())
        listening.push_back(s.get());
    }
    result.subscribers = listening.size();
    for (size_t k = 0; k < clock->size(); ++k) {
      if (!clock->accepted(k))
        continue;
      for (auto* s : listening) {
        ++result.fanout_expected;
        if (s->saw(k)) {
          ++result.fanout_delivered;
          // From the publisher's OK (the commit done) to the receipt: on
          // another node, the doorbell and its read alone. Negative when the
          // event arrived before the OK did.
          after_ok.push_back(
            static_cast<double>(s->received_at(k) - clock->accepted_at(k)) / 1e6);
        }
      }
    }
    result.delivery_after_ok_ms = summarize_latency(after_ok);
    result.fanout_missed = result.fanout_expected - result.fanout_delivered;
    result.delivery_ms = summarize_latency(delivery);
  }
  bool ran_out = false;
  for (auto& pub : pubs)
    ran_out = ran_out || pub->ran_out;
  if (ran_out && o.kind != workload::listener_burst)
    result.errors.push_back("a connection ran out of pre-signed events before the deadline; raise --events");
  if (progress.dropped)
    result.errors.push_back(std::to_string(progress.dropped.load()) +
                            " connections were lost after they authenticated");
  result.connections_open = opened - std::min<size_t>(opened, progress.dropped);
  if (o.kind == workload::history && result.history_events == 0)
    result.errors.push_back("the history queries returned no events: is --channel-prefix the seed's?");
  if (opened != o.connections)
    result.errors.push_back(std::to_string(o.connections - opened) + " connections did not open");
  for (auto& e : errors->take())
    result.errors.push_back(e);

  auto md = to_markdown(result);
  std::cout << md;
  if (!o.json_path.empty())
    std::ofstream(o.json_path) << to_json(result);
  if (!o.markdown_path.empty())
    std::ofstream(o.markdown_path) << md;
  bool clean = result.errors.empty() && result.outcomes.rejected == 0 &&
               result.outcomes.duplicate == 0 && result.unanswered == 0 &&
               result.fanout_missed == 0 && result.fanout_duplicates == 0 &&
               result.subscribers == o.subscribers &&
               (!result.listeners || result.listeners->missed == 0);
  return clean ? 0 : 1;
}

}  // namespace waggle::bench
