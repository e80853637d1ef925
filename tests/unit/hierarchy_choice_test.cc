// HierarchyChoice: which calls are trials, the fastest trial of each way is kept, the agreed
// costs decide later calls, and classes (kind x size rounded to a power of two) are independent.
#include <gtest/gtest.h>

#include "core/hierarchy.h"

namespace weft {
namespace {

TEST(HierarchyChoice, ThreeHierarchicalThenThreeFlatTrialsThenTheCheaperWay) {
  HierarchyChoice c;
  const OpKind k = OpKind::allreduce;
  ASSERT_EQ(HierarchyChoice::kTrials, 6);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(c.admit(k, 4096), std::min(i, HierarchyChoice::kTrials));
  for (int i = 0; i < HierarchyChoice::kTrials; ++i) EXPECT_EQ(c.hierarchical(k, 4096, i), i < 3) << i;
  c.record(k, 4096, 0, 9e-6);  // the first call of each way pays for warming up
  c.record(k, 4096, 1, 3e-6);
  c.record(k, 4096, 2, 3.5e-6);
  c.record(k, 4096, 3, 8e-6);
  c.record(k, 4096, 4, 5e-6);
  c.record(k, 4096, 5, 4e-6);
  const auto costs = c.costs(k, 4096);
  EXPECT_EQ(costs[0], 3e-6);
  EXPECT_EQ(costs[1], 4e-6);
  EXPECT_TRUE(c.hierarchical(k, 4096, HierarchyChoice::kTrials));  // undecided: hierarchical
  c.decide(k, 4096, {6e-6, 4e-6});  // another rank was slower hierarchically: agreed flat
  EXPECT_FALSE(c.hierarchical(k, 4096, HierarchyChoice::kTrials));
  c.decide(k, 4096, {6e-6, 7e-6});
  EXPECT_TRUE(c.hierarchical(k, 4096, HierarchyChoice::kTrials));
}

TEST(HierarchyChoice, ClassesAreKindAndSizeRoundedUpToAPowerOfTwo) {
  HierarchyChoice c;
  EXPECT_EQ(c.admit(OpKind::allreduce, 3000), 0);
  EXPECT_EQ(c.admit(OpKind::allreduce, 4096), 1);  // same class as 3000 (2049..4096)
  EXPECT_EQ(c.admit(OpKind::allreduce, 4097), 0);
  EXPECT_EQ(c.admit(OpKind::broadcast, 3000), 0);
  EXPECT_EQ(c.admit(OpKind::allgather, 3000), 0);
  EXPECT_EQ(c.admit(OpKind::reduce_scatter, 3000), 0);
  EXPECT_EQ(c.admit(OpKind::allreduce, 0), 0);
  c.decide(OpKind::broadcast, 3000, {2.0, 1.0});
  EXPECT_FALSE(c.hierarchical(OpKind::broadcast, 2500, HierarchyChoice::kTrials));
  EXPECT_TRUE(c.hierarchical(OpKind::allreduce, 2500, HierarchyChoice::kTrials));
  EXPECT_TRUE(c.hierarchical(OpKind::broadcast, 5000, HierarchyChoice::kTrials));
}

}  // namespace
}  // namespace weft
