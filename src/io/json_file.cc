#include "io/json_file.h"

#include <fstream>
#include <sstream>

namespace dflash {

Json ReadJsonFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail(path, ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return Json::parse(ss.str());
  } catch (const Json::parse_error& e) {
    Fail(path, ": malformed JSON: ", e.what());
  }
}

}  // namespace dflash
