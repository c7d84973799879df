// Command-line flags shared by every `dflash` sub-command: declare each flag once with its
// help text; --help is generated from the declarations, unknown flags are errors.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace dflash::app {

class Args {
 public:
  Args(std::string command, std::string summary);

  // Declares a flag. `names` is "-m,--model"; `value_name` empty means a boolean switch.
  void Flag(const std::string& names, bool* out, const std::string& help);
  void Option(const std::string& names, std::string* out, const std::string& value_name,
              const std::string& help);
  void Option(const std::string& names, int* out, const std::string& value_name,
              const std::string& help);
  void Option(const std::string& names, double* out, const std::string& value_name,
              const std::string& help);
  void Option(const std::string& names, unsigned long long* out, const std::string& value_name,
              const std::string& help);

  // Declares the positional arguments, in order (e.g. "DIR"); each is required.
  void Positional(const std::string& name, std::string* out, const std::string& help);

  // Parses argv (after the sub-command). Returns false when --help was printed.
  // Throws Error naming the flag on unknown flags, missing or malformed values.
  bool Parse(int argc, char** argv);
  bool Given(const std::string& long_name) const;  // e.g. "--temp"
  std::string Help() const;

 private:
  struct Spec {
    std::vector<std::string> names;
    std::string value_name;
    std::string help;
    std::string default_text;
    std::function<void(const std::string&)> set;
  };
  void Add(const std::string& names, const std::string& value_name, const std::string& help,
           std::string default_text, std::function<void(const std::string&)> set);

  std::string command_, summary_;
  std::vector<Spec> specs_;
  struct PositionalSpec {
    std::string name, help;
    std::string* out;
  };
  std::vector<PositionalSpec> positionals_;
  std::vector<std::string> given_;
};

// "1,2,3" -> {1,2,3}; throws Error naming `what` on malformed input.
std::vector<int> ParseIntList(const std::string& text, const std::string& what);

}  // namespace dflash::app
