// Human and JSON renderings of generation results, shared by generate, bench and serve.
#pragma once

#include <cstdio>
#include <string>

#include "io/json_file.h"
#include "spec/generate.h"

namespace dflash::app {

Json ResultJson(const GenerateResult& r, const std::string& mode);
void PrintStats(FILE* out, const GenerateResult& r, const std::string& mode);
// Speedup as z-lab defines it: plain time per output token / DFlash time per output token.
double Speedup(const GenerateResult& plain, const GenerateResult& dflash);
// Says what was checked: identical tokens where the sampling promises them (greedy,
// reproducible sampling); under rejection sampling, that the outputs are not compared here.
void PrintComparison(FILE* out, const GenerateResult& plain, const GenerateResult& dflash, const SamplingParams& sampling);

}  // namespace dflash::app
