// Job-wide settings: the few settings every node of a job must share (the
// synchronization mode, its period, deterministic summation, local reduce). A node sends
// its own with its registration; the scheduler compares them with its own and
// ends the job at once, naming the setting and both values, instead of letting
// workers that synchronize differently deadlock or train on different rules.
#pragma once

#include <string>

#include "common/settings.h"
#include "syncline.pb.h"

namespace syncline {

// The job-wide part of `settings`, as a registration carries it (the OSP
// period only in osp mode: in the others it means nothing and is 0).
proto::JobWideSettings JobWideSettingsOf(const Settings& settings);

// "" where `node` equals `job`; else which setting differs and how, e.g.
// "SYNCLINE_SYNC_MODE=osp where the job has bsp" (the first difference).
std::string JobWideDifference(const proto::JobWideSettings& job, const proto::JobWideSettings& node);

}  // namespace syncline
