// Group commit in the ingest actor, driven by test_coordinator with fake
// writer sessions whose replies the test releases: batches form while the
// writers are busy, every sender hears back only after its batch's commit,
// and a dead writer never yields a false OK.

#include "actors/fanout/hub_actor.hpp"
#include "actors/ingest/ingest_actor.hpp"
#include "tests/actors/actor_fixture.hpp"

using namespace waggle;
using namespace waggle::testing;

namespace {

struct fake_writer_log {
  struct held {
    write_batch_request req;
    caf::typed_response_promise<write_batch_reply> promise;
  };
  std::deque<held> batches;
};

// Holds each batch until told "commit" (stores all) or "fail" (quits with an error).
caf::behavior fake_writer(caf::event_based_actor* self, std::shared_ptr<fake_writer_log> log) {
  return {
    [self, log](write_batch_request& req) {
      auto promise = self->make_response_promise<write_batch_reply>();
      log->batches.push_back({req, promise});
      return promise;
    },
    [self, log](caf::atom_value what) {
      if (what == caf::atom("fail")) {
        self->quit(caf::sec::runtime_error);
        return;
      }
      auto h = std::move(log->batches.front());
      log->batches.pop_front();
      write_batch_reply reply;
      reply.results.assign(h.req.items.size(), write_result{write_outcome::stored, ""});
      h.promise.deliver(std::move(reply));
    },
  };
}

std::shared_ptr<const proto::event> event_with(std::string content, char signer = '1') {
  proto::event ev;
  ev.kind = 1;
  ev.created_at = 1'700'000'000;
  ev.content = std::move(content);
  proto::sign(ev, std::string(64, signer));
  return std::make_shared<const proto::event>(std::move(ev));
}

// Collects ingest replies as a client would.
struct replies {
  std::vector<std::pair<std::string, write_outcome>> got;
};

class ingest_test : public actor_test {
 protected:
  ingest_test() {
    writer_raw = spawn(fake_writer, writer_log);
    hub = spawn(hub_actor_impl, test_env());
    ingest = spawn(ingest_actor_impl, ingest_settings{},
                   std::vector<writer_session_actor>{caf::actor_cast<writer_session_actor>(writer_raw)}, hub,
                   test_env());
    client = spawn_client();
    run();
  }

  // A client of ingest (a connection, as ingest sees it) that records replies.
  caf::actor spawn_client() {
    return spawn([this](caf::event_based_actor* self) -> caf::behavior {
      return {
        [this, self](event_ptr& ev) {
          auto id = ev->id;
          self->request(ingest, caf::infinite, ingest_request{1, ev})
            .then([this, id](ingest_reply& r) { out->got.emplace_back(id, r.outcome); },
                  [this, id](caf::error&) { out->got.emplace_back(id, write_outcome::failed); });
        },
      };
    });
  }
  ~ingest_test() override { writer_log->batches.clear(); }

  void publish(const event_ptr& ev) {
    caf::anon_send(client, ev);
    run();
  }

  std::shared_ptr<fake_writer_log> writer_log = std::make_shared<fake_writer_log>();
  std::shared_ptr<replies> out = std::make_shared<replies>();
  caf::actor writer_raw;
  caf::actor client;
  hub_actor hub;
  ingest_actor ingest;
};

TEST_F(ingest_test, a_lone_event_is_a_batch_of_one_with_no_timer) {
  auto ev = event_with("one");
  publish(ev);
  ASSERT_EQ(writer_log->batches.size(), 1u);
  EXPECT_EQ(writer_log->batches[0].req.items.size(), 1u);
  EXPECT_FALSE(sched().has_pending_timeout()) << "group commit must not wait on a timer";
}

TEST_F(ingest_test, events_queued_while_the_writer_is_busy_form_one_batch) {
  publish(event_with("first"));
  ASSERT_EQ(writer_log->batches.size(), 1u);
  std::vector<event_ptr> queued;
  for (int i = 0; i < 10; ++i) {
    queued.push_back(event_with("queued " + std::to_string(i)));
    publish(queued.back());
  }
  EXPECT_EQ(writer_log->batches.size(), 1u) << "the writer is busy, so nothing new is sent";
  EXPECT_TRUE(out->got.empty()) << "no reply before any commit";
  caf::anon_send(writer_raw, caf::atom("commit"));
  run();
  ASSERT_EQ(out->got.size(), 1u);
  ASSERT_EQ(writer_log->batches.size(), 1u);
  ASSERT_EQ(writer_log->batches[0].req.items.size(), 10u) << "everything queued, in one batch";
  for (size_t i = 0; i < queued.size(); ++i)
    EXPECT_EQ(writer_log->batches[0].req.items[i].ev->id, queued[i]->id);
  caf::anon_send(writer_raw, caf::atom("commit"));
  run();
  EXPECT_EQ(out->got.size(), 11u);
  for (auto& [id, outcome] : out->got)
    EXPECT_EQ(outcome, write_outcome::stored);
}

TEST_F(ingest_test, batches_are_capped) {
  publish(event_with("first"));
  ingest_settings defaults;
  for (size_t i = 0; i < defaults.max_batch + 5; ++i)
    publish(event_with(std::string("q").append(std::to_string(i))));
  caf::anon_send(writer_raw, caf::atom("commit"));
  run();
  ASSERT_EQ(writer_log->batches.size(), 1u);
  EXPECT_EQ(writer_log->batches[0].req.items.size(), defaults.max_batch);
}

TEST_F(ingest_test, a_writer_that_dies_mid_batch_never_yields_an_ok) {
  publish(event_with("in flight"));
  publish(event_with("queued"));
  caf::anon_send(writer_raw, caf::atom("fail"));
  run();
  ASSERT_EQ(out->got.size(), 2u);
  for (auto& [id, outcome] : out->got)
    EXPECT_EQ(outcome, write_outcome::failed);
}

TEST_F(ingest_test, committed_events_reach_live_subscribers_only_after_commit) {
  auto sink = std::make_shared<recording_sink>();
  auto listener = spawn(stand_in_connection,
                        [sink](const live_event& ev) { sink->frames.push_back(ev.ev->id); });
  caf::anon_send(hub, hub_subscribe{listener, 1, "s", 0, {proto::filter{}}});
  run();
  auto ev = event_with("watched");
  publish(ev);
  EXPECT_TRUE(sink->frames.empty()) << "not fanned out before commit";
  caf::anon_send(writer_raw, caf::atom("commit"));
  run();
  EXPECT_EQ(sink->frames, std::vector<std::string>{ev->id});
}

}  // namespace

// ---- commit delay: several authors at once are grouped, a lone one never waits ----

class commit_delay_test : public ingest_test {
 protected:
  caf::actor another_client() { return spawn_client(); }
  void publish_from(const caf::actor& who, const event_ptr& ev) {
    caf::anon_send(who, ev);
    run();
  }
  static constexpr auto delay = std::chrono::microseconds(2000);
};

TEST_F(commit_delay_test, events_of_several_connections_wait_for_one_batch) {
  ingest_settings defaults;
  ASSERT_EQ(defaults.commit_delay, delay);
  ASSERT_EQ(defaults.commit_siblings, 4u);
  std::vector<caf::actor> clients;
  for (int i = 0; i < 4; ++i)
    clients.push_back(another_client());
  // The first three authors: fewer than commit_siblings, no holding.
  for (int i = 0; i < 3; ++i) {
    publish_from(clients[i], event_with("early " + std::to_string(i), static_cast<char>('1' + i)));
    caf::anon_send(writer_raw, caf::atom("commit"));
    run();
  }
  ASSERT_TRUE(writer_log->batches.empty());
  EXPECT_EQ(out->got.size(), 3u);
  // Now a fourth author publishes: four publish at once, so the batch is
  // held, and what the others send meanwhile joins it.
  publish_from(clients[3], event_with("a", '4'));
  EXPECT_TRUE(writer_log->batches.empty()) << "held for more events";
  EXPECT_TRUE(sched().has_pending_timeout());
  publish_from(clients[0], event_with("b", '1'));
  publish_from(clients[1], event_with("c", '2'));
  EXPECT_TRUE(writer_log->batches.empty());
  sched().advance_time(delay);
  run();
  ASSERT_EQ(writer_log->batches.size(), 1u);
  EXPECT_EQ(writer_log->batches[0].req.items.size(), 3u) << "one batch for all three";
  EXPECT_EQ(out->got.size(), 3u) << "still answered only after the commit";
  caf::anon_send(writer_raw, caf::atom("commit"));
  run();
  EXPECT_EQ(out->got.size(), 6u);
}

TEST_F(commit_delay_test, a_full_batch_goes_without_waiting) {
  std::vector<caf::actor> clients;
  for (int i = 0; i < 4; ++i)
    clients.push_back(another_client());
  for (int i = 0; i < 4; ++i)
    publish_from(clients[i], event_with("warm " + std::to_string(i), static_cast<char>('1' + i)));
  caf::anon_send(writer_raw, caf::atom("commit"));  // the first went alone (3 siblings)
  run();
  writer_log->batches.clear();
  ingest_settings defaults;
  size_t sent = 0;
  while (writer_log->batches.empty() && sent < defaults.max_batch + 1) {
    publish_from(clients[sent % 4],
                 event_with("fill " + std::to_string(sent), static_cast<char>('1' + sent % 4)));
    ++sent;
  }
  ASSERT_EQ(writer_log->batches.size(), 1u) << "a full batch is not held";
  EXPECT_EQ(writer_log->batches[0].req.items.size(), defaults.max_batch);
}

TEST_F(commit_delay_test, a_lone_connection_never_waits_however_fast_it_sends) {
  for (int i = 0; i < 20; ++i) {
    publish(event_with("lone " + std::to_string(i)));
    ASSERT_EQ(writer_log->batches.size(), 1u) << i;
    EXPECT_FALSE(sched().has_pending_timeout());
    caf::anon_send(writer_raw, caf::atom("commit"));
    run();
  }
  EXPECT_EQ(out->got.size(), 20u);
}

TEST_F(commit_delay_test, one_author_over_many_senders_is_one_publisher) {
  // POST /events spawns an actor per request: senders differ, the author does not.
  for (int i = 0; i < 10; ++i) {
    publish_from(another_client(), event_with("over http " + std::to_string(i)));
    ASSERT_EQ(writer_log->batches.size(), 1u) << i;
    EXPECT_FALSE(sched().has_pending_timeout());
    caf::anon_send(writer_raw, caf::atom("commit"));
    run();
  }
  EXPECT_EQ(out->got.size(), 10u);
}
