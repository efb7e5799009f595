#include "actors/node/config_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>
#include <string_view>

#include "actors/node/config_options.hpp"
#include "messages/proto/text.hpp"

namespace waggle {

namespace {

const serve_option* find_key(std::string_view key) {
  for (auto& o : serve_option_table())
    if (config_key(o.doc) == key)
      return &o;
  return nullptr;
}

// What an unknown key most likely meant: a flag or a variable written as is.
std::string unknown_key_hint(std::string_view key) {
  for (auto& o : serve_option_table()) {
    if (o.doc.flag == key)
      return "write it without the --: " + config_key(o.doc);
    if (o.doc.env == key)
      return "the key of " + o.doc.env + " is " + config_key(o.doc);
  }
  return "a key is a flag of `waggle serve --help` without its --";
}

status cannot_read(const std::string& path, int error) {
  return {ec::invalid, path + ": cannot read the config file: " + std::strerror(error)};
}

// The whole file, or why not, as errno says it (a directory opens, and its
// first read fails: EISDIR).
status read_whole(const std::string& path, std::string& text) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file)
    return cannot_read(path, errno);
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, file)) > 0)
    text.append(buffer, n);
  int error = std::ferror(file) ? errno : 0;
  std::fclose(file);
  if (error != 0)
    return cannot_read(path, error);
  return {};
}

// Splits `text` into lines of at most `width` characters, at spaces.
std::vector<std::string> wrap(const std::string& text, size_t width) {
  std::vector<std::string> lines;
  std::istringstream words{text};
  std::string line;
  for (std::string word; words >> word;) {
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      lines.push_back(line);
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty())
    lines.push_back(line);
  return lines;
}

}  // namespace

std::string config_line_error(const std::string& path, const config_line& line,
                              const std::string& what) {
  return path + ":" + std::to_string(line.number) + ": " + line.key + ": " + what;
}

status read_config_file(const std::string& path, std::vector<config_line>& out) {
  out.clear();
  std::string text;
  if (auto st = read_whole(path, text); !st.ok())
    return st;
  // A byte-order mark from an editor that writes one is no part of the key.
  if (text.starts_with("\xEF\xBB\xBF"))
    text.erase(0, 3);
  std::map<std::string, size_t, std::less<>> first_line;
  std::string_view rest = text;
  for (size_t number = 1; !rest.empty(); ++number) {
    auto end = rest.find('\n');
    auto raw = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
    if (raw.ends_with('\r'))
      raw.remove_suffix(1);
    auto trimmed = proto::trim(raw);
    if (trimmed.empty() || trimmed.front() == '#')
      continue;
    auto refuse = [&](std::string key, const std::string& why) {
      return status{ec::invalid, config_line_error(path, {std::move(key), {}, number}, why)};
    };
    auto eq = trimmed.find('=');
    auto key = proto::trim(trimmed.substr(0, eq));
    if (eq == std::string_view::npos || key.empty())
      return refuse(std::string(trimmed), "not a `key = value` line");
    if (!find_key(key))
      return refuse(std::string(key), "unknown key (" + unknown_key_hint(key) + ")");
    if (auto seen = first_line.find(key); seen != first_line.end())
      return refuse(std::string(key),
                    "given twice (first on line " + std::to_string(seen->second) + ")");
    first_line.emplace(std::string(key), number);
    out.push_back({std::string(key), std::string(proto::trim(trimmed.substr(eq + 1))), number});
  }
  return {};
}

std::string config_example() {
  std::ostringstream out;
  out << R"(# waggle.conf.example: every setting of `waggle serve`, each commented out at its
# default.
#
# GENERATED from the option table (actors/node/config_options.cpp): do not edit it by
# hand. Regenerate it with
#   waggle serve --print-config-example > docs/waggle.conf.example
# (config_example_test fails while the checked-in copy differs).
#
# Use: waggle serve --config FILE, or WAGGLE_CONFIG=FILE ./scripts/run. One `key = value`
# per line, the key being the flag without its leading --; blank lines and lines that
# start with # are skipped. The value is the rest of the line, spaces around it trimmed:
# no quotes, and a # inside it is part of it. A list takes the text its environment
# variable takes; a switch takes on or off. An unknown key, a bad value, a line that is
# not `key = value` or a key given twice stops start-up, naming the file, the line and
# the key. A flag wins over its environment variable, and both over this file
# (docs/operations.md, "Configuration file").
#
# To set an option, remove the # in front of its key and change the value.
)";
  for (auto& o : serve_option_table()) {
    out << "\n";
    for (auto& line : wrap(o.doc.help, 86))
      out << "# " << line << "\n";
    out << "# flag " << o.doc.flag << ", env " << o.doc.env << "\n";
    out << "#" << config_key(o.doc) << " =";
    if (!o.doc.default_value.empty())
      out << " " << o.doc.default_value;
    out << "\n";
  }
  return out.str();
}

}  // namespace waggle
