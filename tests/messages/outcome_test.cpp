// The one outcome table (messages/outcome.hpp): every answer to a submitted
// event, over WebSocket and HTTP, with its metric label and HTTP status.

#include <gtest/gtest.h>

#include "messages/outcome.hpp"

namespace waggle {
namespace {

TEST(OutcomeTable, EveryStatusCodeHasItsPrefixHttpStatusAndMetric) {
  struct row {
    ec code;
    bool accepted;
    const char* message;
    uint16_t http;
    const char* metric;
  };
  const row rows[] = {
    {ec::none, true, "", 200, "accepted"},
    {ec::duplicate, true, "duplicate: x", 200, "duplicate"},
    {ec::invalid, false, "invalid: x", 400, "invalid"},
    {ec::blocked, false, "blocked: x", 403, "blocked"},
    {ec::restricted, false, "restricted: x", 403, "restricted"},
    {ec::auth_required, false, "auth-required: x", 401, "auth-required"},
    {ec::rate_limited, false, "rate-limited: x", 429, "rate-limited"},
    {ec::unavailable, false, "error: x", 503, "error"},
    {ec::internal, false, "error: x", 503, "error"},
  };
  for (const auto& r : rows) {
    auto a = answer_for(status{r.code, r.code == ec::none ? "" : "x"});
    EXPECT_EQ(a.accepted, r.accepted) << r.message;
    EXPECT_EQ(a.message, r.message);
    EXPECT_EQ(a.http_status, r.http) << r.message;
    EXPECT_EQ(a.metric, r.metric) << r.message;
  }
}

TEST(OutcomeTable, WriteOutcomesAreAnsweredAsBefore) {
  auto stored = answer_for(write_outcome::stored, "");
  EXPECT_TRUE(stored.accepted);
  EXPECT_EQ(stored.message, "");
  EXPECT_EQ(stored.metric, "accepted");
  // Stored, with a word for the client (a removal other nodes did not confirm).
  auto unconfirmed = answer_for(write_outcome::stored, "committed; not yet confirmed by node(s) b");
  EXPECT_TRUE(unconfirmed.accepted);
  EXPECT_EQ(unconfirmed.message, "committed; not yet confirmed by node(s) b");
  EXPECT_EQ(unconfirmed.metric, "accepted");

  auto dup = answer_for(write_outcome::duplicate, "");
  EXPECT_TRUE(dup.accepted);
  EXPECT_EQ(dup.message, "duplicate: already have this event");
  EXPECT_EQ(dup.metric, "duplicate");
  EXPECT_EQ(dup.http_status, 200);

  EXPECT_EQ(answer_for(write_outcome::superseded, "").message,
            "duplicate: a newer version of this event is stored");
  EXPECT_EQ(answer_for(write_outcome::superseded, "newer in the same batch").message,
            "duplicate: newer in the same batch");

  auto rejected = answer_for(write_outcome::rejected, "value too long");
  EXPECT_FALSE(rejected.accepted);
  EXPECT_EQ(rejected.message, "invalid: value too long");
  EXPECT_EQ(rejected.http_status, 400);

  auto refused = answer_for(write_outcome::refused, "not a member");
  EXPECT_EQ(refused.message, "restricted: not a member");
  EXPECT_EQ(refused.http_status, 403);
  EXPECT_EQ(refused.metric, "restricted");

  // Never a false OK: a failure is an error, with a reason even when none was given.
  auto failed = answer_for(write_outcome::failed, "");
  EXPECT_FALSE(failed.accepted);
  EXPECT_EQ(failed.message, "error: database unavailable");
  EXPECT_EQ(failed.http_status, 503);
  EXPECT_EQ(failed.metric, "error");
  EXPECT_EQ(answer_for(write_outcome::failed, "ingest unavailable").message,
            "error: ingest unavailable");
}

TEST(OutcomeTable, CodesOfWriteOutcomes) {
  EXPECT_EQ(code_of(write_outcome::stored), ec::none);
  EXPECT_EQ(code_of(write_outcome::duplicate), ec::duplicate);
  EXPECT_EQ(code_of(write_outcome::superseded), ec::duplicate);
  EXPECT_EQ(code_of(write_outcome::rejected), ec::invalid);
  EXPECT_EQ(code_of(write_outcome::refused), ec::restricted);
  EXPECT_EQ(code_of(write_outcome::failed), ec::unavailable);
}

}  // namespace
}  // namespace waggle
