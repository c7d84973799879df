#include "commands.h"
#include "core/error.h"
namespace dflash::app {
int Generate(int, char**) { Fail("dflash generate: under construction"); }
}  // namespace dflash::app
