// The job token from a file (`pslaunch --token-file`): the one secret every
// process of a job proves, read so that it never appears on a command line.
#pragma once

#include <string>

#include "common/status.h"

namespace syncline::deploy {

// The whole file less a final newline ("\n" or "\r\n"): a token written by
// `openssl rand -hex 16 > FILE` or an editor reads back as typed. An error
// naming the file where it cannot be read, is not a regular file, is empty,
// holds more than one line or is longer than 4096 bytes.
Result<std::string> ReadTokenFile(const std::string& path);

}  // namespace syncline::deploy
