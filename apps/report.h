// Human and JSON renderings of generation results, shared by generate, bench and serve.
#pragma once

#include <cstdio>
#include <string>

#include "io/json_file.h"
#include "spec/generate.h"

namespace dflash::app {

Json ResultJson(const GenerateResult& r, const std::string& mode);
// Why a "length" finish came before -n tokens (the context of `context` positions was full),
// for stderr and the JSON notes; "" when the output simply reached -n or stopped.
std::string EarlyStopNote(const GenerateResult& r, int max_new_tokens, int context);
void PrintStats(FILE* out, const GenerateResult& r, const std::string& mode);
// Speedup as z-lab defines it: plain time per output token / DFlash time per output token.
double Speedup(const GenerateResult& plain, const GenerateResult& dflash);
// Says what was checked: identical tokens where the sampling promises them (greedy,
// reproducible sampling); under rejection sampling, that the outputs are not compared here.
void PrintComparison(FILE* out, const GenerateResult& plain, const GenerateResult& dflash, const SamplingParams& sampling);

// Progress of a slow step (loading, prefill, bench rounds) on stderr, only when stderr is a
// terminal, so that logs and captured output hold results alone. Each line replaces the last;
// `last` ends it.
void ShowStatus(const std::string& text, bool last);
void ShowProgress(const std::string& what, int done, int total);  // "WHAT DONE/TOTAL", last at done == total

}  // namespace dflash::app
