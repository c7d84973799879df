#include "commands.h"
#include "core/error.h"
namespace dflash::app {
int Bench(int, char**) { Fail("dflash bench: under construction"); }
}  // namespace dflash::app
