// control/local_group.h: host groups from the address book's host identities
// and labels, and a whole job whose workers are given emulated hosts.
#include "control/local_group.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/testing/in_process_job.h"

namespace syncline {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

proto::NodeInfo WorkerOn(int rank, const std::string& host_id, const std::string& label = "") {
  proto::NodeInfo n;
  n.set_role(proto::WORKER);
  n.set_rank(rank);
  n.set_host_id(host_id);
  n.set_host_label(label);
  return n;
}

TEST(LocalGroupTest, WorkersOfOneHostAreRankedInOrderOfTheirRanks) {
  // Registration order is arrival order: the group does not depend on it.
  const std::vector<proto::NodeInfo> workers = {WorkerOn(3, "b"), WorkerOn(0, "a"), WorkerOn(2, "a"),
                                                WorkerOn(1, "b"), WorkerOn(4, "a")};
  const LocalGroup g = LocalGroupOf(workers, 2).value();
  EXPECT_THAT(g.ranks, ElementsAre(0, 2, 4));
  EXPECT_EQ(g.local_rank, 1);
  EXPECT_EQ(g.local_size, 3);
  EXPECT_EQ(g.host, 0);  // host "a" holds rank 0
  EXPECT_EQ(g.num_hosts, 2);
  const LocalGroup h = LocalGroupOf(workers, 3).value();
  EXPECT_THAT(h.ranks, ElementsAre(1, 3));
  EXPECT_EQ(h.local_rank, 1);
  EXPECT_EQ(h.host, 1);
}

TEST(LocalGroupTest, LabelsSplitAMachineAndUnknownIdentitiesAreAlone) {
  const std::vector<proto::NodeInfo> workers = {WorkerOn(0, "m", "x"), WorkerOn(1, "m", "y"), WorkerOn(2, "m", "x"),
                                                WorkerOn(3, ""), WorkerOn(4, "")};
  EXPECT_THAT(LocalGroupOf(workers, 2).value().ranks, ElementsAre(0, 2));
  EXPECT_THAT(LocalGroupOf(workers, 1).value().ranks, ElementsAre(1));
  const LocalGroup unknown = LocalGroupOf(workers, 4).value();
  EXPECT_THAT(unknown.ranks, ElementsAre(4));
  EXPECT_EQ(unknown.num_hosts, 4);
  EXPECT_EQ(unknown.host, 3);
  EXPECT_FALSE(LocalGroupOf(workers, 9).ok());
}

TEST(LocalGroupTest, EveryRanksHostAtOnceAgreesWithEachWorkersGroup) {
  const std::vector<proto::NodeInfo> workers = {WorkerOn(3, "b"), WorkerOn(0, "a"), WorkerOn(2, "a", "x"),
                                                WorkerOn(1, "b"), WorkerOn(5, ""),  WorkerOn(4, "a")};
  const std::vector<int> host_of = HostIndexByRank(workers, 7).value();
  EXPECT_THAT(host_of, ElementsAre(0, 1, 2, 1, 0, 3, -1));  // rank 6 did not register
  for (const auto& w : workers) EXPECT_EQ(host_of[w.rank()], LocalGroupOf(workers, w.rank()).value().host) << w.rank();
  const auto past = HostIndexByRank(workers, 5);
  ASSERT_FALSE(past.ok());
  EXPECT_THAT(past.status().message(), HasSubstr("worker rank 5 out of range [0, 5)"));
}

TEST(LocalGroupTest, ALauncherThatDisagreesIsNamedOnlyWhereItSaidSomething) {
  LocalGroup g;
  g.local_rank = 1;
  g.local_size = 2;
  EXPECT_EQ(LauncherDisagreement(g, false, 0, 1), "");  // nothing given
  EXPECT_EQ(LauncherDisagreement(g, true, 1, 2), "");   // agrees
  EXPECT_THAT(LauncherDisagreement(g, true, 0, 4),
              HasSubstr("local rank 0 of 4, but registration puts this worker at local rank 1 of 2"));
  EXPECT_THAT(LauncherDisagreement(g, true, 0, 1), HasSubstr("local rank 0 of 1"));  // given, even as the defaults
}

TEST(LocalGroupTest, AJobsWorkersLearnTheirHostGroupsFromRegistration) {
  testing::InProcessJob::Options o;
  o.workers = 5;
  o.servers = 1;
  o.host_label = [](int rank) { return rank % 2 == 0 ? "even" : "odd"; };
  testing::InProcessJob job(o);
  ASSERT_TRUE(job.Start().ok());
  for (int r = 0; r < 5; ++r) {
    const LocalGroup& g = job.worker(r).local_group();
    EXPECT_EQ(g.ranks, r % 2 == 0 ? std::vector<int>({0, 2, 4}) : std::vector<int>({1, 3})) << r;
    EXPECT_EQ(g.local_rank, r / 2) << r;
    EXPECT_EQ(g.host, r % 2) << r;
    EXPECT_EQ(g.num_hosts, 2) << r;
    EXPECT_EQ(job.worker(r).local_rank(), r / 2) << "no launcher's: registration's";
    EXPECT_EQ(job.worker(r).local_size(), r % 2 == 0 ? 3 : 2) << r;
  }
  EXPECT_TRUE(job.Finish().ok());
}

}  // namespace
}  // namespace syncline
