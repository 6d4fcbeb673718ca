#include "proxy/forward_order.h"

#include <gtest/gtest.h>

namespace syncline {
namespace {

TEST(ForwardOrderTest, FirstUsedByTheForwardPassIsMostUrgent) {
  ForwardOrder order;
  for (TensorId id : {0u, 1u, 2u, 3u}) order.Declared(id);  // declared as backward produces them
  for (TensorId id : {3u, 1u, 3u, 2u}) order.UsedByForward(id);  // a repeated use counts once
  order.FinishLearning();
  EXPECT_GT(order.PriorityOf(3), order.PriorityOf(1));
  EXPECT_GT(order.PriorityOf(1), order.PriorityOf(2));
  EXPECT_GT(order.PriorityOf(2), order.PriorityOf(0)) << "an unused tensor ranks after every used one";
  EXPECT_EQ(order.Order(), (std::vector<TensorId>{3, 1, 2}));
}

TEST(ForwardOrderTest, LearnedOnceThenFixed) {
  ForwardOrder order;
  order.UsedByForward(5);
  order.UsedByForward(6);
  EXPECT_TRUE(order.learning());
  order.FinishLearning();
  EXPECT_FALSE(order.learning());
  order.UsedByForward(7);  // a later iteration in another order changes nothing
  EXPECT_EQ(order.Order(), (std::vector<TensorId>{5, 6}));
}

TEST(ForwardOrderTest, UnusedTensorsGoByDeclarationOrder) {
  ForwardOrder order;
  for (TensorId id : {4u, 2u, 9u}) order.Declared(id);
  EXPECT_GT(order.PriorityOf(4), order.PriorityOf(2));
  EXPECT_GT(order.PriorityOf(2), order.PriorityOf(9));
  EXPECT_GT(order.PriorityOf(9), order.PriorityOf(77)) << "never declared: last";
}

TEST(ForwardOrderTest, AnOrderLearnedElsewhereIsAdopted) {
  ForwardOrder here, there;
  for (TensorId id : {2u, 0u, 1u}) there.UsedByForward(id);
  here.UsedByForward(0);
  here.FromOrder(there.Order());
  EXPECT_FALSE(here.learning());
  for (TensorId id : {0u, 1u, 2u}) EXPECT_EQ(here.PriorityOf(id), there.PriorityOf(id)) << id;
}

}  // namespace
}  // namespace syncline
