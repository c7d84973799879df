// Replay rows on disk (JSON lines) and as tables.
#include <cstdio>
#include <fstream>
#include <map>

#include "core/error.h"
#include "serve/trace.h"

namespace dflash::serve {

namespace {

using OJson = nlohmann::ordered_json;

// "-" for the "not reported" value -1, so a missing number never reads as a measurement.
std::string Num(double v, const char* fmt = "%.1f") {
  if (v < 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string Ratio(double b, double a) { return a > 0 && b >= 0 ? Num(b / a, "%.2fx") : "-"; }

struct Totals {
  double tokens = 0, decode_ms = 0, ttft_ms = 0, wall_ms = 0;
  int ttft_n = 0, errors = 0;
};

Totals Sum(const std::vector<ReplayRow>& rows) {
  Totals t;
  for (const ReplayRow& r : rows) {
    if (!r.error.empty()) ++t.errors;
    t.wall_ms += r.wall_ms;
    if (r.ttft_ms >= 0) {
      t.ttft_ms += r.ttft_ms;
      ++t.ttft_n;
    }
    if (r.decode_tok_s > 0) {
      t.tokens += r.completion_tokens - 1;
      t.decode_ms += r.wall_ms - r.ttft_ms;
    }
  }
  return t;
}

double DecodeRate(const Totals& t) { return t.decode_ms > 0 ? t.tokens * 1000.0 / t.decode_ms : -1; }
double MeanTtft(const Totals& t) { return t.ttft_n ? t.ttft_ms / t.ttft_n : -1; }

}  // namespace

OJson ReplayRow::ToJson() const {
  return {{"index", index},           {"path", path},
          {"status", status},         {"error", error},
          {"ttft_ms", ttft_ms},       {"wall_ms", wall_ms},
          {"prompt_tokens", prompt_tokens}, {"completion_tokens", completion_tokens},
          {"cache_n", cache_n},       {"cache_hit", cache_n > 0},
          {"decode_tok_s", decode_tok_s}, {"tokens_per_cycle", tokens_per_cycle},
          {"acceptance", acceptance}, {"mode", mode},
          {"finish_reason", finish_reason}};
}

ReplayRow ReplayRow::FromJson(const OJson& j) {
  ReplayRow r;
  r.index = j.value("index", 0);
  r.path = j.value("path", std::string());
  r.status = j.value("status", 0);
  r.error = j.value("error", std::string());
  r.ttft_ms = j.value("ttft_ms", -1.0);
  r.wall_ms = j.value("wall_ms", 0.0);
  r.prompt_tokens = j.value("prompt_tokens", -1L);
  r.completion_tokens = j.value("completion_tokens", -1L);
  r.cache_n = j.value("cache_n", -1L);
  r.decode_tok_s = j.value("decode_tok_s", -1.0);
  r.tokens_per_cycle = j.value("tokens_per_cycle", -1.0);
  r.acceptance = j.value("acceptance", -1.0);
  r.mode = j.value("mode", std::string());
  r.finish_reason = j.value("finish_reason", std::string());
  return r;
}

void WriteRows(const std::string& path, const std::vector<ReplayRow>& rows) {
  std::ofstream out(path);
  for (const ReplayRow& r : rows) out << r.ToJson().dump() << "\n";
  if (!out) Fail(path, ": cannot write replay rows");
}

std::vector<ReplayRow> ReadRows(const std::string& path) {
  std::ifstream in(path);
  if (!in) Fail(path, ": cannot open replay rows");
  std::vector<ReplayRow> rows;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    try {
      rows.push_back(ReplayRow::FromJson(OJson::parse(line)));
    } catch (const nlohmann::json::exception& e) {
      Fail(path, ":", n, ": malformed replay row: ", e.what());
    }
  }
  return rows;
}

std::string FormatRows(const std::vector<ReplayRow>& rows) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%5s %-22s %6s %9s %9s %7s %7s %7s %8s %6s %6s  %s\n", "req", "path", "status",
                "ttft_ms", "wall_ms", "prompt", "cache_n", "tokens", "tok/s", "tau", "mode", "finish");
  out += line;
  for (const ReplayRow& r : rows) {
    std::snprintf(line, sizeof line, "%5d %-22s %6d %9s %9s %7s %7s %7s %8s %6s %6s  %s\n", r.index, r.path.c_str(),
                  r.status, Num(r.ttft_ms).c_str(), Num(r.wall_ms).c_str(), Num(r.prompt_tokens, "%.0f").c_str(),
                  Num(r.cache_n, "%.0f").c_str(), Num(r.completion_tokens, "%.0f").c_str(), Num(r.decode_tok_s).c_str(),
                  Num(r.tokens_per_cycle, "%.2f").c_str(), r.mode.empty() ? "-" : r.mode.c_str(),
                  r.error.empty() ? r.finish_reason.c_str() : ("error: " + r.error).c_str());
    out += line;
  }
  const Totals t = Sum(rows);
  std::snprintf(line, sizeof line, "%zu requests, %d errors, mean TTFT %s ms, decode %s tok/s (pooled), wall %.1f s\n",
                rows.size(), t.errors, Num(MeanTtft(t)).c_str(), Num(DecodeRate(t)).c_str(), t.wall_ms / 1000);
  out += line;
  return out;
}

std::string FormatComparison(const std::vector<ReplayRow>& a, const std::vector<ReplayRow>& b,
                             const std::string& label_a, const std::string& label_b) {
  std::map<int, const ReplayRow*> by_index;
  for (const ReplayRow& r : b) by_index[r.index] = &r;
  std::string out;
  char line[320];
  std::snprintf(line, sizeof line, "%5s | %9s %9s %7s | %8s %8s %7s | %6s %6s | %7s %7s\n", "req", "ttft A",
                "ttft B", "B/A", "tok/s A", "tok/s B", "B/A", "tau A", "tau B", "cache A", "cache B");
  out += "A = " + label_a + ", B = " + label_b + "\n";
  out += line;
  std::vector<ReplayRow> matched_a, matched_b;
  for (const ReplayRow& ra : a) {
    auto it = by_index.find(ra.index);
    if (it == by_index.end()) continue;
    const ReplayRow& rb = *it->second;
    matched_a.push_back(ra);
    matched_b.push_back(rb);
    std::snprintf(line, sizeof line, "%5d | %9s %9s %7s | %8s %8s %7s | %6s %6s | %7s %7s%s\n", ra.index,
                  Num(ra.ttft_ms).c_str(), Num(rb.ttft_ms).c_str(), Ratio(rb.ttft_ms, ra.ttft_ms).c_str(),
                  Num(ra.decode_tok_s).c_str(), Num(rb.decode_tok_s).c_str(),
                  Ratio(rb.decode_tok_s, ra.decode_tok_s).c_str(), Num(ra.tokens_per_cycle, "%.2f").c_str(),
                  Num(rb.tokens_per_cycle, "%.2f").c_str(), Num(ra.cache_n, "%.0f").c_str(),
                  Num(rb.cache_n, "%.0f").c_str(), ra.error.empty() && rb.error.empty() ? "" : "  (error)");
    out += line;
  }
  const Totals ta = Sum(matched_a), tb = Sum(matched_b);
  std::snprintf(line, sizeof line,
                "%zu requests in both: mean TTFT %s vs %s ms (%s), decode %s vs %s tok/s pooled (%s), wall %.1f vs "
                "%.1f s (%s)\n",
                matched_a.size(), Num(MeanTtft(ta)).c_str(), Num(MeanTtft(tb)).c_str(),
                Ratio(MeanTtft(tb), MeanTtft(ta)).c_str(), Num(DecodeRate(ta)).c_str(), Num(DecodeRate(tb)).c_str(),
                Ratio(DecodeRate(tb), DecodeRate(ta)).c_str(), ta.wall_ms / 1000, tb.wall_ms / 1000,
                Ratio(tb.wall_ms, ta.wall_ms).c_str());
  out += line;
  return out;
}

}  // namespace dflash::serve
