// Shell words for remote starts: quoting a word so that a POSIX shell (the
// remote login shell that ssh hands its command string to) reads it back
// unchanged, and splitting a user's `--ssh "ssh -i KEY -p 2222"` into words.
// Pure functions, no OS access.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace syncline::deploy {

// `word` as one POSIX shell word: unchanged when it is made only of characters
// no shell treats specially ([A-Za-z0-9_@%+=:,./-], not empty); otherwise in
// single quotes, each ' written as '\''. Spaces, $, `, \, ", globs and
// newlines all survive: nothing is special inside single quotes.
std::string ShellQuote(const std::string& word);

// The words joined by single spaces, each quoted.
std::string ShellJoin(const std::vector<std::string>& words);

// Splits a command given as one string into words the way sh would, without
// expansions: blanks separate words; '...' is literal; "..." keeps everything
// but \" \\ \$ \` and \newline; a backslash outside quotes escapes the next
// character. An unterminated quote or a trailing backslash is an error.
Result<std::vector<std::string>> SplitCommandWords(const std::string& text);

}  // namespace syncline::deploy
