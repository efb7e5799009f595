// Ingest's push gate cache and the lease barrier (docs/push.md, "The gate
// cache, and why it loses no wake"), under test_coordinator with two fake
// writers whose replies the test releases.

#include "actors/fanout/hub_actor.hpp"
#include "actors/ingest/ingest_actor.hpp"
#include "tests/actors/actor_fixture.hpp"

using namespace waggle;
using namespace waggle::testing;

namespace {

// -- the cache as plain state ------------------------------------------------------

TEST(push_gate_cache, gates_everything_until_the_load_arrives) {
  push_gate_cache c;
  EXPECT_TRUE(c.decide({1, 2}).all);
  c.on_loaded({2});
  auto d = c.decide({1, 2, 2, 3});
  EXPECT_FALSE(d.all);
  EXPECT_EQ(d.gated, (std::vector<int64_t>{2}));
}

TEST(push_gate_cache, a_lease_seen_gates_its_community_and_collects_what_was_skipped) {
  push_gate_cache c;
  c.on_loaded({});
  auto before = c.decide({7});
  EXPECT_TRUE(before.gated.empty());
  c.on_lease_seen(7);
  EXPECT_TRUE(c.gates(7));
  c.note_stored(7, "skipped-id", before);         // dispatched before: skipped the gate
  c.note_stored(7, "gated-id", c.decide({7}));    // dispatched after: ran it
  EXPECT_EQ(c.take_skipped(7), (std::vector<std::string>{"skipped-id"}));
  EXPECT_TRUE(c.take_skipped(7).empty());
}

TEST(push_gate_cache, off_gates_nothing_and_uncached_gates_everything) {
  push_gate_cache off{false};
  off.on_loaded({});
  off.on_lease_seen(1);
  EXPECT_FALSE(off.decide({1}).all);
  EXPECT_TRUE(off.decide({1}).gated.empty());
  push_gate_cache uncached{true, false};
  uncached.on_loaded({});
  EXPECT_TRUE(uncached.decide({1}).all);
}

// -- the barrier in the ingest actor --------------------------------------------------

struct writer_log {
  struct held {
    write_batch_request req;
    caf::typed_response_promise<write_batch_reply> promise;
  };
  std::deque<held> batches;
};

caf::behavior fake_writer(caf::event_based_actor* self, std::shared_ptr<writer_log> log) {
  return {
    [self, log](write_batch_request& req) {
      auto promise = self->make_response_promise<write_batch_reply>();
      log->batches.push_back({req, promise});
      return promise;
    },
    [log](caf::atom_value) {
      auto h = std::move(log->batches.front());
      log->batches.pop_front();
      write_batch_reply reply;
      reply.results.assign(h.req.items.size(), write_result{write_outcome::stored, ""});
      h.promise.deliver(std::move(reply));
    },
  };
}

event_ptr event_of(int32_t kind, std::string content) {
  proto::event ev;
  ev.kind = kind;
  ev.created_at = 1'700'000'000;
  ev.content = std::move(content);
  proto::sign(ev, std::string(64, '1'));
  return std::make_shared<const proto::event>(std::move(ev));
}

class push_barrier_test : public actor_test {
 protected:
  push_barrier_test() {
    a = spawn(fake_writer, log_a);
    b = spawn(fake_writer, log_b);
    hub = spawn(hub_actor_impl, test_env());
    ingest_settings s;
    s.commit_delay = std::chrono::microseconds(0);
    ingest = spawn(ingest_actor_impl, s,
                   std::vector<writer_session_actor>{caf::actor_cast<writer_session_actor>(a),
                                                     caf::actor_cast<writer_session_actor>(b)},
                   hub, test_env());
    caf::anon_send(ingest, push_gate_loaded{{}});
    run();
  }
  ~push_barrier_test() override {
    log_a->batches.clear();
    log_b->batches.clear();
  }
  void publish(const event_ptr& ev) {
    auto client = spawn([this, ev](caf::event_based_actor* self) -> caf::behavior {
      self->request(ingest, caf::infinite, ingest_request{1, ev})
        .then([](ingest_reply&) {}, [](caf::error&) {});
      return {[](int) {}};
    });
    run();
  }
  size_t batches() const { return log_a->batches.size() + log_b->batches.size(); }
  const write_batch_request& last() const {
    return (log_a->batches.size() > log_b->batches.size() ? log_a : log_b)->batches.back().req;
  }

  std::shared_ptr<writer_log> log_a = std::make_shared<writer_log>();
  std::shared_ptr<writer_log> log_b = std::make_shared<writer_log>();
  caf::actor a, b;
  hub_actor hub;
  ingest_actor ingest;
};

// A message dispatched while the community had no lease skipped the gate; a
// lease arriving meanwhile must wait for that batch, then name the message.
// Red without the barrier: the lease goes to the idle writer at once, with
// nothing to backfill, and the message's wake is lost.
TEST_F(push_barrier_test, a_lease_waits_for_earlier_batches_and_names_what_they_skipped) {
  auto msg = event_of(9, "before the lease");
  publish(msg);
  ASSERT_EQ(log_b->batches.size() + log_a->batches.size(), 1u);
  EXPECT_FALSE(last().push_gate_all);
  EXPECT_TRUE(last().push_gated.empty()) << "no lease known: the gate is skipped";
  auto& first = log_b->batches.empty() ? a : b;

  publish(event_of(30350, "the lease"));
  publish(event_of(9, "after the lease"));
  EXPECT_EQ(batches(), 1u) << "the lease (and what queued behind it) waits for the batch in flight";

  caf::anon_send(first, caf::atom("commit"));
  run();
  ASSERT_EQ(batches(), 2u);
  const write_batch_request* lease = nullptr;
  const write_batch_request* after = nullptr;
  for (auto* log : {log_a.get(), log_b.get()})
    for (auto& h : log->batches)
      (h.req.lease ? lease : after) = &h.req;
  ASSERT_NE(lease, nullptr);
  EXPECT_EQ(lease->items.size(), 1u);
  EXPECT_EQ(lease->push_skipped, (std::vector<std::string>{msg->id}));
  // The message behind the lease goes beside it, and gates the community.
  ASSERT_NE(after, nullptr);
  EXPECT_EQ(after->push_gated, (std::vector<int64_t>{1}));
}

TEST_F(push_barrier_test, batches_after_a_lease_run_the_gate_for_its_community) {
  publish(event_of(30350, "the lease"));
  ASSERT_EQ(batches(), 1u);
  EXPECT_TRUE(last().lease);
  publish(event_of(9, "after"));
  ASSERT_EQ(batches(), 2u);
  const write_batch_request* after = nullptr;
  for (auto* log : {log_a.get(), log_b.get()})
    for (auto& h : log->batches)
      if (!h.req.lease)
        after = &h.req;
  ASSERT_NE(after, nullptr);
  EXPECT_EQ(after->push_gated, (std::vector<int64_t>{1}));
}

}  // namespace
