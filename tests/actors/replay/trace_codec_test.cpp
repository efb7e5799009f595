// The trace codec (messages/trace_codec.hpp) on input no node writes: what
// tests/fuzz/trace_fuzz.cpp found, each red on the code before its fix.

#include <string>

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "messages/trace_codec.hpp"
#include "messages/type_ids.hpp"

using namespace waggle;

namespace {

template <class T>
bool decodes(const std::string& json, T& out) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag>(json.data(), json.size());
  return !doc.HasParseError() && trace_codec::decode(doc, out);
}

}  // namespace

// A record may omit fields at its end (traces older than the field keep its
// default), but an event's default is null, and the actor a replay feeds it
// to dereferences it: `waggle replay` crashed on ["membership_request",[5]].
TEST(TraceCodecFuzzFindings, AMessageMissingItsEventIsRefused) {
  membership_request msg;
  EXPECT_FALSE(decodes("[5]", msg));
  EXPECT_FALSE(decodes("[5,\"\"]", msg));
}

// An integer outside its field's type was wrapped: 4294967297 as an int32
// kind read back as kind 1, so a trace said one thing and replayed another.
TEST(TraceCodecFuzzFindings, AnIntegerOutsideItsFieldsRangeIsRefused) {
  bus_request req;
  EXPECT_TRUE(decodes("[\"a.b\",\"x\",5000]", req));
  EXPECT_EQ(req.timeout_ms, 5000u);
  EXPECT_FALSE(decodes("[\"a.b\",\"x\",4294967297]", req));
  EXPECT_FALSE(decodes("[\"a.b\",\"x\",-1]", req));
  bus_peer_frame frame;
  EXPECT_TRUE(decodes("[\"node-a\",2,\"\"]", frame));
  EXPECT_FALSE(decodes("[\"node-a\",2147483648,\"\"]", frame));
}
