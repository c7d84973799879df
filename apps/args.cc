#include "args.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <sstream>

#include "core/error.h"

namespace dflash::app {

namespace {

std::vector<std::string> SplitNames(const std::string& names) {
  std::vector<std::string> out;
  std::stringstream ss(names);
  std::string n;
  while (std::getline(ss, n, ',')) out.push_back(n);
  return out;
}

template <typename T>
T ParseNumber(const std::string& flag, const std::string& text) {
  T value{};
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || text.empty()) {
    Fail("flag ", flag, ": '", text, "' is not a valid number");
  }
  return value;
}

}  // namespace

Args::Args(std::string command, std::string summary)
    : command_(std::move(command)), summary_(std::move(summary)) {}

void Args::Add(const std::string& names, const std::string& value_name, const std::string& help,
               std::string default_text, std::function<void(const std::string&)> set) {
  specs_.push_back({SplitNames(names), value_name, help, std::move(default_text), std::move(set)});
}

void Args::Flag(const std::string& names, bool* out, const std::string& help) {
  Add(names, "", help, "", [out](const std::string&) { *out = true; });
}

void Args::Option(const std::string& names, std::string* out, const std::string& value_name,
                  const std::string& help) {
  Add(names, value_name, help, *out, [out](const std::string& v) { *out = v; });
}

void Args::Option(const std::string& names, int* out, const std::string& value_name,
                  const std::string& help) {
  const std::string flag = SplitNames(names).back();
  Add(names, value_name, help, std::to_string(*out),
      [out, flag](const std::string& v) { *out = ParseNumber<int>(flag, v); });
}

void Args::Option(const std::string& names, unsigned long long* out,
                  const std::string& value_name, const std::string& help) {
  const std::string flag = SplitNames(names).back();
  Add(names, value_name, help, std::to_string(*out),
      [out, flag](const std::string& v) { *out = ParseNumber<unsigned long long>(flag, v); });
}

void Args::Option(const std::string& names, double* out, const std::string& value_name,
                  const std::string& help) {
  const std::string flag = SplitNames(names).back();
  std::ostringstream def;
  def << *out;
  Add(names, value_name, help, def.str(),
      [out, flag](const std::string& v) { *out = ParseNumber<double>(flag, v); });
}

void Args::Positional(const std::string& name, std::string* out, const std::string& help) {
  positionals_.push_back({name, help, out});
}

bool Args::Parse(int argc, char** argv) {
  size_t next_positional = 0;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(Help().c_str(), stdout);
      return false;
    }
    if (!arg.empty() && arg[0] != '-' && next_positional < positionals_.size()) {
      *positionals_[next_positional++].out = arg;
      continue;
    }
    std::string inline_value;
    bool has_inline = false;
    if (arg.rfind("--", 0) == 0) {
      const size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        inline_value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
        has_inline = true;
      }
    }
    auto it = std::find_if(specs_.begin(), specs_.end(), [&](const Spec& s) {
      return std::find(s.names.begin(), s.names.end(), arg) != s.names.end();
    });
    if (it == specs_.end()) {
      Fail("dflash ", command_, ": unknown argument '", arg, "' (see dflash ", command_,
           " --help)");
    }
    if (it->value_name.empty()) {
      if (has_inline) Fail("flag ", arg, " takes no value");
      it->set("");
    } else {
      if (!has_inline) {
        if (i + 1 >= argc) Fail("flag ", arg, " needs a value (", it->value_name, ")");
        inline_value = argv[++i];
      }
      it->set(inline_value);
    }
    given_.push_back(it->names.back());
  }
  if (next_positional < positionals_.size()) {
    Fail("dflash ", command_, ": missing ", positionals_[next_positional].name, " (see dflash ", command_, " --help)");
  }
  return true;
}

bool Args::Given(const std::string& long_name) const {
  return std::find(given_.begin(), given_.end(), long_name) != given_.end();
}

std::string Args::Help() const {
  std::ostringstream os;
  os << "usage: dflash " << command_;
  for (const PositionalSpec& p : positionals_) os << " " << p.name;
  os << " [options]\n\n" << summary_ << "\n\n";
  for (const PositionalSpec& p : positionals_) {
    const std::string left = "  " + p.name;
    os << left << std::string(left.size() < 30 ? 30 - left.size() : 1, ' ') << p.help << "\n";
  }
  os << (positionals_.empty() ? "" : "\n") << "options:\n";
  for (const Spec& s : specs_) {
    std::string left = "  ";
    for (size_t i = 0; i < s.names.size(); ++i) left += (i ? ", " : "") + s.names[i];
    if (!s.value_name.empty()) left += " " + s.value_name;
    os << left;
    if (left.size() < 30) os << std::string(30 - left.size(), ' ');
    else os << "\n" << std::string(30, ' ');
    os << s.help;
    // Help that already explains its default (e.g. "from generation_config.json") keeps its own words.
    if (!s.value_name.empty() && !s.default_text.empty() && s.help.find("(default") == std::string::npos) {
      os << " (default: " << s.default_text << ")";
    }
    os << "\n";
  }
  os << "  -h, --help                  show this help\n";
  return os.str();
}

std::vector<int> ParseIntList(const std::string& text, const std::string& what) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t\n"));
    item.erase(item.find_last_not_of(" \t\n") + 1);
    if (item.empty()) continue;
    out.push_back(ParseNumber<int>(what, item));
  }
  if (out.empty()) Fail(what, ": empty list");
  return out;
}

}  // namespace dflash::app
