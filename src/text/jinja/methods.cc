// Methods of str, list, tuple and dict values that templates call: s.startswith('a'),
// s.split('</think>'), d.get('k'), d.items(), ...
#include <algorithm>

#include "core/error.h"
#include "text/jinja/builtins.h"
#include "text/jinja/limits.h"
#include "text/jinja/py_string.h"

namespace dflash::jinja {

namespace {

std::optional<std::string> OptionalString(const Value& v, const std::string& what) {
  if (v.is_none()) return std::nullopt;
  if (!v.is_string()) Fail(what, " must be None or a string, not ", v.TypeName());
  return v.str();
}

List Strings(const std::vector<std::string>& parts, bool safe) {
  List out;
  for (const std::string& p : parts) out.push_back(Value::String(p, safe));
  return out;
}

// Prefix/suffix tests accept a string or a tuple of strings.
bool AffixMatch(const std::string& s, const Value& affix, bool prefix, const std::string& what) {
  auto one = [&](const Value& a) {
    const std::string& t = RequireString(a, what);
    if (t.size() > s.size()) return false;
    return prefix ? s.compare(0, t.size(), t) == 0 : s.compare(s.size() - t.size(), t.size(), t) == 0;
  };
  if (affix.is_tuple()) return std::any_of(affix.items().begin(), affix.items().end(), one);
  return one(affix);
}

int64_t CodePointIndex(const std::string& s, size_t byte_offset) {
  return static_cast<int64_t>(py::Length(std::string_view(s).substr(0, byte_offset)));
}

std::string Pad(const std::string& s, int64_t width, const std::string& fill, char align) {
  const int64_t len = static_cast<int64_t>(py::Length(s));
  if (width <= len) return s;
  if (py::Length(fill) != 1) Fail("the fill character must be exactly one character long");
  const int64_t marg = width - len;
  CheckRepetition(fill.size(), static_cast<uint64_t>(marg), kMaxTextBytes - s.size(), "padding (bytes)");
  const int64_t left = align == '<' ? 0 : align == '>' ? marg : marg / 2 + (marg & width & 1);
  std::string out;
  out.reserve(s.size() + fill.size() * marg);
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < marg - left; ++i) out += fill;
  return out;
}

bool AllAscii(const std::string& s, bool (*pred)(char)) {
  if (s.empty()) return false;
  for (char c : s) {
    if (static_cast<unsigned char>(c) & 0x80) Fail("character classes of non-ASCII text are not supported");
    if (!pred(c)) return false;
  }
  return true;
}

// str.format with plain {} / {0} / {name} fields; format specs and conversions are refused.
std::string StrFormat(const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
    } else if (c == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') {
      out += '}';
      ++i;
    } else if (c == '{') {
      const size_t close = fmt.find('}', i);
      if (close == std::string::npos) Fail("str.format(): single '{' encountered in format string");
      const std::string field = fmt.substr(i + 1, close - i - 1);
      if (field.find_first_of(":!.[") != std::string::npos) {
        Fail("str.format(): field '{", field, "}' uses format specs or lookups, which are not supported");
      }
      const Value* v = nullptr;
      if (field.empty() || std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
        const size_t idx = field.empty() ? auto_index++ : std::stoul(field);
        if (idx >= args.positional.size()) Fail("str.format(): replacement index ", idx, " out of range");
        v = &args.positional[idx];
      } else {
        for (const auto& [k, val] : args.keyword) {
          if (k == field) v = &val;
        }
        if (!v) Fail("str.format(): no argument named '", field, "'");
      }
      AppendText(out, ToStr(*v));
      i = close;
    } else if (c == '}') {
      Fail("str.format(): single '}' encountered in format string");
    } else {
      out += c;
    }
  }
  return out;
}

Value StringMethod(const Value& self, const std::string& name, const CallArgs& args) {
  const std::string& s = self.str();
  const bool safe = self.safe();
  const std::string what = "str." + name;
  auto bind = [&](const std::vector<Param>& params) { return BindArgs(args, what, params); };
  auto str = [&](std::string v) { return Value::String(std::move(v), safe); };
  if (name == "startswith" || name == "endswith") {
    auto a = bind({{"prefix", std::nullopt}, {"start", Value::None()}, {"end", Value::None()}});
    if (!a[1].is_none() || !a[2].is_none()) Fail(what, "(): start/end arguments are not supported");
    return Value::Bool(AffixMatch(s, a[0], name == "startswith", what));
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    auto a = bind({{"chars", Value::None()}});
    return str(py::Strip(s, OptionalString(a[0], what + " chars"), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    auto a = bind({{"sep", Value::None()}, {"maxsplit", Value::Int(-1)}});
    return Value::MakeList(Strings(py::Split(s, OptionalString(a[0], what + " sep"), RequireInt(a[1], what + " maxsplit"),
                                             name == "rsplit"),
                                   safe));
  }
  if (name == "splitlines") {
    auto a = bind({{"keepends", Value::Bool(false)}});
    return Value::MakeList(Strings(py::SplitLines(s, Truthy(a[0])), safe));
  }
  if (name == "upper") {
    bind({});
    return str(py::Upper(s));
  }
  if (name == "lower") {
    bind({});
    return str(py::Lower(s));
  }
  if (name == "capitalize") {
    bind({});
    return str(py::Capitalize(s));
  }
  if (name == "replace") {
    if (safe) Fail("replace() on a safe (Markup) string is not supported");
    auto a = bind({{"old", std::nullopt}, {"new", std::nullopt}, {"count", Value::Int(-1)}});
    const std::string& from = RequireString(a[0], what + " old");
    const std::string& to = RequireString(a[1], what + " new");
    int64_t count = RequireInt(a[2], what + " count");
    if (count < 0) count = INT64_MAX;
    std::string out;
    if (from.empty()) {
      const std::u32string cps = py::Decode(s);
      for (size_t i = 0; i <= cps.size(); ++i) {
        if (count-- > 0) AppendText(out, to);
        if (i < cps.size()) py::AppendUtf8(out, cps[i]);
      }
      return Value::String(out);
    }
    size_t pos = 0;
    for (size_t hit; count > 0 && (hit = s.find(from, pos)) != std::string::npos; --count) {
      out.append(s, pos, hit - pos);
      AppendText(out, to);
      pos = hit + from.size();
    }
    out.append(s, pos, std::string::npos);
    return Value::String(out);
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    auto a = bind({{"sub", std::nullopt}, {"start", Value::None()}, {"end", Value::None()}});
    if (!a[1].is_none() || !a[2].is_none()) Fail(what, "(): start/end arguments are not supported");
    const std::string& sub = RequireString(a[0], what + " sub");
    if (name == "count") {
      if (sub.empty()) return Value::Int(static_cast<int64_t>(py::Length(s)) + 1);
      int64_t n = 0;
      for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
      return Value::Int(n);
    }
    const size_t hit = name[0] == 'r' ? s.rfind(sub) : s.find(sub);
    if (hit == std::string::npos) {
      if (name == "index" || name == "rindex") Fail(what, "(): substring not found");
      return Value::Int(-1);
    }
    return Value::Int(CodePointIndex(s, hit));
  }
  if (name == "join") {
    if (safe) Fail("join() on a safe (Markup) string is not supported");
    auto a = bind({{"iterable", std::nullopt}});
    std::string out;
    const List items = Iterate(a[0]);
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) Fail("str.join(): sequence item ", i, ": expected str instance, ", items[i].TypeName(), " found");
      if (i) AppendText(out, s);
      AppendText(out, items[i].str());
    }
    return Value::String(out);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    auto a = bind({{"affix", std::nullopt}});
    const std::string& t = RequireString(a[0], what + " argument");
    if (name == "removeprefix") return str(s.rfind(t, 0) == 0 ? s.substr(t.size()) : s);
    const bool ends = t.size() <= s.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
    return str(ends ? s.substr(0, s.size() - t.size()) : s);
  }
  if (name == "partition" || name == "rpartition") {
    auto a = bind({{"sep", std::nullopt}});
    const std::string& sep = RequireString(a[0], what + " sep");
    if (sep.empty()) Fail(what, "(): empty separator");
    const size_t hit = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (hit == std::string::npos) {
      return name == "partition" ? Value::MakeTuple({str(s), str(""), str("")}) : Value::MakeTuple({str(""), str(""), str(s)});
    }
    return Value::MakeTuple({str(s.substr(0, hit)), str(sep), str(s.substr(hit + sep.size()))});
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    auto a = bind({{"width", std::nullopt}, {"fillchar", Value::String(" ")}});
    return str(Pad(s, RequireInt(a[0], what + " width"), RequireString(a[1], what + " fillchar"),
                   name == "center" ? '^' : name == "ljust" ? '<' : '>'));
  }
  if (name == "zfill") {
    auto a = bind({{"width", std::nullopt}});
    const int64_t width = RequireInt(a[0], what + " width");
    const int64_t len = static_cast<int64_t>(py::Length(s));
    if (width <= len) return str(s);
    CheckRepetition(1, static_cast<uint64_t>(width - len), kMaxTextBytes - s.size(), "zfill padding (bytes)");
    const bool sign = !s.empty() && (s[0] == '+' || s[0] == '-');
    return str((sign ? s.substr(0, 1) : "") + std::string(width - len, '0') + (sign ? s.substr(1) : s));
  }
  if (name == "isspace") {
    bind({});
    const std::u32string cps = py::Decode(s);
    return Value::Bool(!cps.empty() && std::all_of(cps.begin(), cps.end(), py::IsSpace));
  }
  if (name == "isascii") {
    bind({});
    return Value::Bool(std::all_of(s.begin(), s.end(), [](char c) { return !(static_cast<unsigned char>(c) & 0x80); }));
  }
  if (name == "isdigit" || name == "isdecimal" || name == "isnumeric") {
    bind({});
    return Value::Bool(AllAscii(s, [](char c) { return c >= '0' && c <= '9'; }));
  }
  if (name == "isalpha") {
    bind({});
    return Value::Bool(AllAscii(s, [](char c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }));
  }
  if (name == "isalnum") {
    bind({});
    return Value::Bool(AllAscii(s, [](char c) { return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'); }));
  }
  if (name == "islower") {
    bind({});
    return Value::Bool(py::IsLower(s));
  }
  if (name == "isupper") {
    bind({});
    return Value::Bool(py::IsUpper(s));
  }
  if (name == "format") {
    if (safe) Fail("format() on a safe (Markup) string is not supported");
    return Value::String(StrFormat(s, args));
  }
  Fail("str.", name, "() is not supported");
}

Value SequenceMethod(const Value& self, const std::string& name, const CallArgs& args) {
  const std::string what = self.TypeName() + "." + name;
  const List& items = self.items();
  if (name == "copy") {
    BindArgs(args, what, {});
    return Value::MakeList(items);
  }
  auto a = BindArgs(args, what, {{"value", std::nullopt}});
  if (name == "count") {
    return Value::Int(std::count_if(items.begin(), items.end(), [&](const Value& v) { return Equal(v, a[0]); }));
  }
  for (size_t i = 0; i < items.size(); ++i) {  // index
    if (Equal(items[i], a[0])) return Value::Int(static_cast<int64_t>(i));
  }
  Fail(what, "(x): ", Repr(a[0]), " is not in ", self.TypeName());
}

Value DictMethod(const Value& self, const std::string& name, const CallArgs& args) {
  const std::string what = "dict." + name;
  const Dict& d = self.dict();
  if (name == "get") {
    auto a = BindArgs(args, what, {{"key", std::nullopt}, {"default", Value::None()}});
    const Value* v = d.Find(a[0]);
    return v ? *v : a[1];
  }
  BindArgs(args, what, {});
  if (name == "copy") return self;
  List out;
  for (const auto& [k, v] : d.entries) {
    if (name == "items") out.push_back(Value::MakeTuple({k, v}));
    else if (name == "keys") out.push_back(k);
    else if (name == "values") out.push_back(v);
    else Fail("dict.", name, "() is not supported");
  }
  return Value::MakeList(std::move(out));
}

}  // namespace

Value CallMethod(const Value& self, const std::string& name, const CallArgs& args) {
  if (self.is_string()) return StringMethod(self, name, args);
  if (self.is_sequence_like()) return SequenceMethod(self, name, args);
  if (self.is_dict()) return DictMethod(self, name, args);
  Fail(self.TypeName(), ".", name, "() is not supported");
}

std::vector<Value> BindArgs(const CallArgs& args, const std::string& what, const std::vector<Param>& params) {
  if (args.positional.size() > params.size()) {
    Fail(what, "() takes at most ", params.size(), " argument(s) (", args.positional.size(), " given)");
  }
  std::vector<std::optional<Value>> bound(params.size());
  for (size_t i = 0; i < args.positional.size(); ++i) bound[i] = args.positional[i];
  for (const auto& [key, value] : args.keyword) {
    size_t i = 0;
    while (i < params.size() && key != params[i].name) ++i;
    if (i == params.size()) Fail(what, "() got an unexpected keyword argument '", key, "'");
    if (bound[i]) Fail(what, "() got multiple values for argument '", key, "'");
    bound[i] = value;
  }
  std::vector<Value> out;
  out.reserve(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    if (!bound[i] && !params[i].fallback) Fail(what, "() missing required argument '", params[i].name, "'");
    out.push_back(bound[i] ? *bound[i] : *params[i].fallback);
  }
  return out;
}

}  // namespace dflash::jinja
