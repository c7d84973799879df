// The functions every template can call: jinja2's range/dict/namespace/joiner and the two
// transformers adds, raise_exception and strftime_now.
#include <memory>

#include "core/error.h"
#include "text/jinja/builtins.h"
#include "text/jinja/objects.h"

namespace dflash::jinja {

namespace {

constexpr int64_t kMaxRange = 100000;  // jinja2.sandbox.MAX_RANGE

int64_t IntArg(const Value& v, const char* what) {
  if (v.is_undefined()) FailUndefined(v);
  if (!v.is_int() && !v.is_bool()) Fail(what, ": '", v.TypeName(), "' object cannot be interpreted as an integer");
  return v.as_int();
}

Value Range(const CallArgs& args) {
  if (!args.keyword.empty()) Fail("range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3) Fail("range() expects 1 to 3 arguments, got ", p.size());
  int64_t start = 0, stop, step = 1;
  if (p.size() == 1) {
    stop = IntArg(p[0], "range()");
  } else {
    start = IntArg(p[0], "range()");
    stop = IntArg(p[1], "range()");
    if (p.size() == 3) step = IntArg(p[2], "range()");
  }
  if (step == 0) Fail("range() arg 3 must not be zero");
  const __int128 span = step > 0 ? (__int128)stop - start : (__int128)start - stop;
  const __int128 abs_step = step > 0 ? step : -(__int128)step;
  const __int128 count = span <= 0 ? 0 : (span + abs_step - 1) / abs_step;
  if (count > kMaxRange) Fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (", kMaxRange, ").");
  const int64_t n = static_cast<int64_t>(count);
  List out;
  out.reserve(n);
  int64_t v = start;
  for (int64_t i = 0; i < n; ++i) {
    out.push_back(Value::Int(v));
    // Step to the next item, which lies between start and stop; start + i * step could
    // overflow for a step near the int64 range.
    if (i + 1 < n) v += step;
  }
  return Value::MakeList(std::move(out));
}

// dict(mapping_or_pairs, **kwargs), the way Python builds it.
Dict BuildDict(const CallArgs& args, const char* what) {
  if (args.positional.size() > 1) Fail(what, " expected at most 1 positional argument, got ", args.positional.size());
  Dict d;
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (src.is_dict()) {
      d = src.dict();
    } else {
      for (const Value& pair : Iterate(src)) {
        if (!pair.is_sequence_like() || pair.items().size() != 2) Fail(what, ": sequence elements must be pairs");
        d.Set(pair.items()[0], pair.items()[1]);
      }
    }
  }
  for (const auto& [k, v] : args.keyword) d.Set(Value::String(k), v);
  return d;
}

Value MakeNamespace(const CallArgs& args) {
  auto ns = std::make_shared<Namespace>();
  for (const auto& [k, v] : BuildDict(args, "namespace()").entries) {
    if (!k.is_string()) Fail("namespace(): attribute names must be strings");
    ns->SetAttr(k.str(), v);
  }
  return Value::MakeObject(ns);
}

Value RaiseException(const CallArgs& args) {
  auto a = BindArgs(args, "raise_exception", {{"message", std::nullopt}});
  throw TemplateRaised(ToStr(a[0]));
}

Value StrftimeNow(const std::optional<std::tm>& fixed, const CallArgs& args) {
  auto a = BindArgs(args, "strftime_now", {{"format", std::nullopt}});
  if (!a[0].is_string()) Fail("strftime_now(): format must be a string, not ", a[0].TypeName());
  const std::string& fmt = a[0].str();
  if (fmt.find("%f") != std::string::npos || fmt.find("%:z") != std::string::npos) {
    Fail("strftime_now(): %f and %:z are not supported");
  }
  std::tm tm{};
  if (fixed) {
    tm = *fixed;
  } else {
    const std::time_t t = std::time(nullptr);
    localtime_r(&t, &tm);
  }
  if (fmt.empty()) return Value::String("");
  for (size_t cap = 128; cap <= 65536; cap *= 4) {
    std::string buf(cap, '\0');
    const size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
    if (n > 0) return Value::String(buf.substr(0, n));
  }
  Fail("strftime_now(): format '", fmt, "' produced no output");
}

Value Joiner(const CallArgs& args) {
  auto a = BindArgs(args, "joiner", {{"sep", Value::String(", ")}});
  auto used = std::make_shared<bool>(false);
  const std::string sep = ToStr(a[0]);
  return MakeFunction("joiner", [used, sep](const CallArgs& call) {
    BindArgs(call, "joiner", {});
    if (!*used) {
      *used = true;
      return Value::String("");
    }
    return Value::String(sep);
  });
}

Value Unsupported(const char* name) {
  return MakeFunction(name, [name](const CallArgs&) -> Value { Fail(name, "() is not supported by dflash's template engine"); });
}

}  // namespace

std::vector<std::pair<std::string, Value>> Globals(const GlobalOptions& options) {
  const std::optional<std::tm> now = options.now;
  return {
      {"range", MakeFunction("range", Range)},
      {"dict", MakeFunction("dict", [](const CallArgs& a) { return Value::MakeDict(BuildDict(a, "dict()")); })},
      {"namespace", MakeFunction("namespace", MakeNamespace)},
      {"joiner", MakeFunction("joiner", Joiner)},
      {"cycler", Unsupported("cycler")},
      {"lipsum", Unsupported("lipsum")},
      {"raise_exception", MakeFunction("raise_exception", RaiseException)},
      {"strftime_now", MakeFunction("strftime_now", [now](const CallArgs& a) { return StrftimeNow(now, a); })},
  };
}

}  // namespace dflash::jinja
