// Job-wide settings: a node whose synchronization mode, OSP period, SSP
// staleness or deterministic summation differs from the job's ends the job at
// registration, named with the setting and both values; equal settings join.
#include "control/job_wide_settings.h"

#include "scheduler_testing.h"

namespace syncline::scheduler_testing {
namespace {

TEST(JobWideSettingsTest, DifferenceNamesTheFirstSettingThatDiffers) {
  Settings job;
  EXPECT_EQ(JobWideDifference(JobWideSettingsOf(job), JobWideSettingsOf(job)), "");
  Settings osp = job;
  osp.sync_mode = "osp";
  EXPECT_EQ(JobWideDifference(JobWideSettingsOf(job), JobWideSettingsOf(osp)),
            "SYNCLINE_SYNC_MODE=osp where the job has bsp");
  Settings async = job;
  async.async = true;  // set directly, as by code that builds Settings itself
  EXPECT_EQ(JobWideSettingsOf(async).sync_mode(), "async");
  Settings period = osp;
  period.osp_period = 2;
  EXPECT_EQ(JobWideDifference(JobWideSettingsOf(osp), JobWideSettingsOf(period)),
            "SYNCLINE_OSP_PERIOD=2 where the job has 0");
  Settings bsp_with_a_period = job;  // the period means nothing outside osp: not compared
  bsp_with_a_period.osp_period = 4;
  EXPECT_EQ(JobWideDifference(JobWideSettingsOf(job), JobWideSettingsOf(bsp_with_a_period)), "");
  Settings ssp = job;
  ssp.sync_mode = "ssp";
  Settings staler = ssp;
  staler.ssp_staleness = 5;
  EXPECT_EQ(JobWideDifference(JobWideSettingsOf(ssp), JobWideSettingsOf(staler)),
            "SYNCLINE_SSP_STALENESS=5 where the job has 2");
  Settings bsp_with_a_staleness = job;  // nor the staleness outside ssp
  bsp_with_a_staleness.ssp_staleness = 5;
  EXPECT_EQ(JobWideDifference(JobWideSettingsOf(job), JobWideSettingsOf(bsp_with_a_staleness)), "");
  Settings deterministic = job;
  deterministic.deterministic = true;
  EXPECT_EQ(JobWideDifference(JobWideSettingsOf(job), JobWideSettingsOf(deterministic)),
            "SYNCLINE_DETERMINISTIC=1 where the job has 0");
  EXPECT_THAT(JobWideDifference(JobWideSettingsOf(job), proto::JobWideSettings{}), HasSubstr("(not sent: an older Syncline)"));
}

TEST_F(SchedulerTest, AWorkerWithAnotherSyncModeEndsTheJobNamingTheSetting) {
  Settings s = JobSettings(2, 1);
  StartScheduler(s);
  Settings osp = s;
  osp.sync_mode = "osp";
  Node& w0 = AddNode("w0", Role::kWorker, s);
  Node& w1 = AddNode("w1", Role::kWorker, osp);
  Node& srv = AddNode("s0", Role::kServer, s);
  auto j0 = JoinAsync(w0), j1 = JoinAsync(w1), j2 = JoinAsync(srv);
  // Every node hears why; none waits for the startup timeout.
  Status st = ExpectAbortHeardByAll({&j0, &j1, &j2});
  EXPECT_THAT(st.message(), HasSubstr("worker (node"));
  EXPECT_THAT(st.message(), HasSubstr("loop://w1"));
  EXPECT_THAT(st.message(), HasSubstr("SYNCLINE_SYNC_MODE=osp where the job has bsp"));
}

TEST_F(SchedulerTest, AServerWithAnotherOspPeriodEndsTheJob) {
  Settings s = JobSettings(1, 1);
  s.sync_mode = "osp";
  StartScheduler(s);
  Settings other = s;
  other.osp_period = 4;
  Node& w0 = AddNode("w0", Role::kWorker, s);
  Node& srv = AddNode("s0", Role::kServer, other);
  auto j0 = JoinAsync(w0), j1 = JoinAsync(srv);
  Status st = ExpectAbortHeardByAll({&j0, &j1});
  EXPECT_THAT(st.message(), HasSubstr("server (node"));
  EXPECT_THAT(st.message(), HasSubstr("SYNCLINE_OSP_PERIOD=4 where the job has 0"));
}

TEST_F(SchedulerTest, ASchedulerStartedWithoutTheSettingIsTheOneNamed) {
  Settings s = JobSettings(2, 1);
  StartScheduler(s);  // bsp, where every node runs osp
  Settings osp = s;
  osp.sync_mode = "osp";
  auto j0 = JoinAsync(AddNode("w0", Role::kWorker, osp)), j1 = JoinAsync(AddNode("w1", Role::kWorker, osp)),
       j2 = JoinAsync(AddNode("s0", Role::kServer, osp));
  Status st = ExpectAbortHeardByAll({&j0, &j1, &j2});
  EXPECT_THAT(st.message(), HasSubstr("the scheduler has SYNCLINE_SYNC_MODE=bsp where the job has osp"));
}

TEST_F(SchedulerTest, NodesWithTheJobsOspSettingsJoin) {
  Settings s = JobSettings(2, 1);
  s.sync_mode = "osp";
  s.osp_period = 3;
  StartScheduler(s);
  JoinAll({&AddNode("w0", Role::kWorker, s), &AddNode("w1", Role::kWorker, s), &AddNode("s0", Role::kServer, s)});
  EXPECT_FALSE(Ready(run_, 0));
}

}  // namespace
}  // namespace syncline::scheduler_testing
