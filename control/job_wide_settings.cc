#include "control/job_wide_settings.h"

namespace syncline {

proto::JobWideSettings JobWideSettingsOf(const Settings& settings) {
  proto::JobWideSettings s;
  const std::string mode = settings.async ? "async" : settings.sync_mode;
  s.set_sync_mode(mode);
  s.set_osp_period(mode == "osp" ? settings.osp_period : 0);  // means nothing in the other modes
  s.set_ssp_staleness(mode == "ssp" ? settings.ssp_staleness : 0);  // nor this
  s.set_deterministic(settings.deterministic);
  s.set_flat(!settings.local_reduce);
  return s;
}

std::string JobWideDifference(const proto::JobWideSettings& job, const proto::JobWideSettings& node) {
  auto differs = [](const char* name, const std::string& node_value, const std::string& job_value) {
    return std::string(name) + "=" + node_value + " where the job has " + job_value;
  };
  auto flag = [](bool on) { return std::string(on ? "1" : "0"); };
  if (node.sync_mode() != job.sync_mode())
    return differs("SYNCLINE_SYNC_MODE", node.sync_mode().empty() ? "(not sent: an older Syncline)" : node.sync_mode(), job.sync_mode());
  if (node.osp_period() != job.osp_period())
    return differs("SYNCLINE_OSP_PERIOD", std::to_string(node.osp_period()), std::to_string(job.osp_period()));
  if (node.ssp_staleness() != job.ssp_staleness())
    return differs("SYNCLINE_SSP_STALENESS", std::to_string(node.ssp_staleness()), std::to_string(job.ssp_staleness()));
  if (node.deterministic() != job.deterministic())
    return differs("SYNCLINE_DETERMINISTIC", flag(node.deterministic()), flag(job.deterministic()));
  if (node.flat() != job.flat())
    return differs("SYNCLINE_LOCAL_REDUCE", flag(!node.flat()), flag(!job.flat()));
  return "";
}

}  // namespace syncline
