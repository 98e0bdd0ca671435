#include "common/protocol.h"

#include <gtest/gtest.h>

namespace cagent::protocol {
namespace {

TEST(Protocol, HelloRoundTripsThroughAFrame) {
  const Message hello = Make(Kind::kHello, 1, Hello{"cagent-agent/test", {1}});
  auto frame = EncodeMessage(hello);
  ASSERT_TRUE(frame.ok());
  FrameDecoder decoder;
  ASSERT_TRUE(decoder.Feed(*frame).ok());
  auto payload = decoder.Next();
  ASSERT_TRUE(payload.has_value());
  auto decoded = Decode(*payload, /*from_agent=*/true);
  ASSERT_TRUE(std::holds_alternative<Message>(decoded));
  const auto& m = std::get<Message>(decoded);
  EXPECT_EQ(m.header.kind, Kind::kHello);
  EXPECT_EQ(m.header.id, 1U);
  EXPECT_EQ(std::get<Hello>(m.body).agent, "cagent-agent/test");
}

TEST(Protocol, BrokerKindFromTheAgentIsUnknown) {
  const auto decoded = Decode(R"({"v":1,"type":"welcome","id":3})", /*from_agent=*/true);
  ASSERT_TRUE(std::holds_alternative<DecodeError>(decoded));
  EXPECT_EQ(std::get<DecodeError>(decoded).code, ErrorCode::kUnknownType);
  EXPECT_EQ(std::get<DecodeError>(decoded).id, 3U);
}

}  // namespace
}  // namespace cagent::protocol
