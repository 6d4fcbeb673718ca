#include "deploy/remote_shell.h"

namespace syncline::deploy {
namespace {

bool IsSafeChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '@' ||
         c == '%' || c == '+' || c == '=' || c == ':' || c == ',' || c == '.' || c == '/' || c == '-';
}

}  // namespace

std::string ShellQuote(const std::string& word) {
  bool safe = !word.empty();
  for (char c : word) safe = safe && IsSafeChar(c);
  if (safe) return word;
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') {
      out += "'\\''";  // close the quote, an escaped ', reopen
    } else {
      out += c;
    }
  }
  out += "'";
  return out;
}

std::string ShellJoin(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) out += ' ';
    out += ShellQuote(w);
  }
  return out;
}

Result<std::vector<std::string>> SplitCommandWords(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;  // a word has begun (it may be empty: '')
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\\') {
      if (i + 1 == text.size()) return InvalidArgument("'" + text + "' ends with a backslash");
      char next = text[++i];
      if (next != '\n') word += next;  // backslash-newline continues the line
    } else if (c == '\'') {
      size_t end = text.find('\'', i + 1);
      if (end == std::string::npos) return InvalidArgument("unterminated ' in '" + text + "'");
      word += text.substr(i + 1, end - i - 1);
      i = end;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < text.size() && text[j] != '"'; ++j) {
        if (text[j] == '\\' && j + 1 < text.size()) {
          char next = text[j + 1];
          if (next == '"' || next == '\\' || next == '$' || next == '`') {
            word += next;
            ++j;
            continue;
          }
          if (next == '\n') {
            ++j;
            continue;
          }
        }
        word += text[j];
      }
      if (j == text.size()) return InvalidArgument("unterminated \" in '" + text + "'");
      i = j;
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(word);
  return words;
}

}  // namespace syncline::deploy
