// jinja2's built-in filters (x | name(args)), plus transformers' replacement for tojson.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "text/jinja/builtins.h"
#include "text/jinja/limits.h"
#include "text/jinja/py_json.h"
#include "text/jinja/py_string.h"

namespace dflash::jinja {

namespace {

Value Str(std::string s) { return Value::String(std::move(s)); }

// `width` spaces (none when negative), as Python's ' ' * width; refused past kMaxTextBytes.
std::string Spaces(int64_t width, const char* what) {
  const uint64_t n = width > 0 ? static_cast<uint64_t>(width) : 0;
  CheckRepetition(1, n, kMaxTextBytes, what);
  return std::string(n, ' ');
}

// soft_str: str(value), but a Markup string stays Markup.
Value SoftStr(const Value& v) { return v.is_string() ? v : Str(ToStr(v)); }

Value LowerIfString(const Value& v) { return v.is_string() ? Value::String(py::Lower(v.str()), v.safe()) : v; }

// jinja2's make_attrgetter: "a.b.0" looks up item a, then b, then index 0 (via getitem).
class AttrGetter {
 public:
  AttrGetter(const Value& attribute, std::optional<Value> fallback = std::nullopt, bool ignore_case = false)
      : fallback_(std::move(fallback)), ignore_case_(ignore_case) {
    if (attribute.is_string()) {
      for (const std::string& part : py::Split(attribute.str(), std::string("."), -1, false)) {
        const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
        parts_.push_back(digits ? Value::Int(std::stoll(part)) : Str(part));
      }
    } else if (!attribute.is_none()) {
      parts_.push_back(attribute);
    }
  }
  Value operator()(Value item) const {
    for (const Value& part : parts_) {
      item = GetItem(item, part);
      if (fallback_ && item.is_undefined()) item = *fallback_;
    }
    return ignore_case_ ? LowerIfString(item) : item;
  }

 private:
  std::vector<Value> parts_;
  std::optional<Value> fallback_;
  bool ignore_case_;
};

// Python's int(str, base) and float(str); nullopt where Python raises ValueError.
std::optional<int64_t> ParseInt(const std::string& text, int base) {
  std::string s = py::Strip(text, std::nullopt, true, true);
  std::string digits;
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  if (i + 1 < s.size() && s[i] == '0') {
    const char p = s[i + 1] | 0x20;
    if ((p == 'x' && base == 16) || (p == 'o' && base == 8) || (p == 'b' && base == 2)) i += 2;
  }
  for (; i < s.size(); ++i) {
    if (s[i] == '_' && !digits.empty() && i + 1 < s.size() && s[i + 1] != '_') continue;
    digits += s[i];
  }
  if (digits.empty()) return std::nullopt;
  for (char c : digits) {
    const int d = (c >= '0' && c <= '9') ? c - '0' : ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') ? (c | 0x20) - 'a' + 10 : 99;
    if (d >= base) return std::nullopt;
  }
  errno = 0;
  const long long v = std::strtoll(digits.c_str(), nullptr, base);
  if (errno == ERANGE) Fail("int(): '", text, "' does not fit in 64 bits");
  return neg ? -v : v;
}

std::optional<double> ParseFloat(const std::string& text) {
  std::string s = py::Strip(text, std::nullopt, true, true);
  std::string clean;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      const bool ok = i > 0 && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i - 1])) &&
                      std::isdigit(static_cast<unsigned char>(s[i + 1]));
      if (!ok) return std::nullopt;
      continue;
    }
    clean += s[i];
  }
  if (clean.empty()) return std::nullopt;
  std::string lower = py::Lower(clean);
  const std::string body = (lower[0] == '+' || lower[0] == '-') ? lower.substr(1) : lower;
  if (body == "inf" || body == "infinity" || body == "nan") {
    const double v = body == "nan" ? NAN : INFINITY;
    return lower[0] == '-' ? -v : v;
  }
  if (body.find_first_not_of("0123456789.e+-") != std::string::npos || body.find("0x") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return v;
}

Value FAbs(const Value& in, const CallArgs& args) {
  BindArgs(args, "filter 'abs'", {});
  if (in.is_float()) return Value::Float(std::fabs(in.as_float()));
  if (in.is_int() || in.is_bool()) return in.as_int() < 0 ? Negate(in) : Value::Int(in.as_int());
  if (in.is_undefined()) FailUndefined(in);
  Fail("bad operand type for abs(): '", in.TypeName(), "'");
}

Value FAttr(const Value& in, const CallArgs& args) {
  auto a = BindArgs(args, "filter 'attr'", {{"name", std::nullopt}});
  return GetAttrOnly(in, RequireString(a[0], "attr name"));
}

Value FBatch(const Value& in, const CallArgs& args) {
  auto a = BindArgs(args, "filter 'batch'", {{"linecount", std::nullopt}, {"fill_with", Value::None()}});
  const int64_t n = RequireInt(a[0], "batch linecount");
  if (n <= 0) Fail("filter 'batch': linecount must be positive");
  CheckRepetition(1, static_cast<uint64_t>(n), kMaxListItems, "filter 'batch' linecount");
  List out, row;
  for (const Value& item : Iterate(in)) {
    if (static_cast<int64_t>(row.size()) == n) out.push_back(Value::MakeList(std::exchange(row, {})));
    row.push_back(item);
  }
  if (!row.empty()) {
    if (!a[1].is_none()) while (static_cast<int64_t>(row.size()) < n) row.push_back(a[1]);
    out.push_back(Value::MakeList(std::move(row)));
  }
  return Value::MakeList(std::move(out));
}

Value FCapitalize(const Value& in, const CallArgs& args) {
  BindArgs(args, "filter 'capitalize'", {});
  const Value s = SoftStr(in);
  return Value::String(py::Capitalize(s.str()), s.safe());
}

Value FCenter(const Value& in, const CallArgs& args) {
  auto a = BindArgs(args, "filter 'center'", {{"width", Value::Int(80)}});
  CallArgs call;
  call.positional = {a[0]};
  return CallMethod(Str(ToStr(in)), "center", call);
}

Value FDefault(const Value& in, const CallArgs& args) {
  auto a = BindArgs(args, "filter 'default'", {{"default_value", Str("")}, {"boolean", Value::Bool(false)}});
  if (in.is_undefined() || (Truthy(a[1]) && !Truthy(in))) return a[0];
  return in;
}

Value FDictSort(const Value& in, const CallArgs& args) {
  auto a = BindArgs(args, "filter 'dictsort'",
                    {{"case_sensitive", Value::Bool(false)}, {"by", Str("key")}, {"reverse", Value::Bool(false)}});
  if (in.is_undefined()) FailUndefined(in);
  if (!in.is_dict()) Fail("filter 'dictsort' needs a mapping, not ", in.TypeName());
  const std::string& by = RequireString(a[1], "dictsort by");
  if (by != "key" && by != "value") Fail("filter 'dictsort': you can only sort by either \"key\" or \"value\"");
  const size_t pos = by == "key" ? 0 : 1;
  const bool fold = !Truthy(a[0]), reverse = Truthy(a[2]);
  List pairs;
  for (const auto& [k, v] : in.dict().entries) pairs.push_back(Value::MakeTuple({k, v}));
  auto key = [&](const Value& pair) { return fold ? LowerIfString(pair.items()[pos]) : pair.items()[pos]; };
  std::stable_sort(pairs.begin(), pairs.end(),
                   [&](const Value& x, const Value& y) { return reverse ? Less(key(y), key(x)) : Less(key(x), key(y)); });
  return Value::MakeList(std::move(pairs));
}

Value FEscape(const Value& in, const CallArgs& args) {
  BindArgs(args, "filter 'escape'", {});
  return Escape(in);
}

Value FForceEscape(const Value& in, const CallArgs& args) {
  BindArgs(args, "filter 'forceescape'", {});
  return Escape(Str(ToStr(in)));
}

Value FFirst(const Value& in, const CallArgs& args) {
  BindArgs(args, "filter 'first'", {});
  const List items = Iterate(in);
  return items.empty() ? Value::Undefined("No first item, sequence was empty.") : items.front();
}

Value FLast(const Value& in, const CallArgs& args) {
  BindArgs(args, "filter 'last'", {});
  const List items = Iterate(in);
  return items.empty() ? Value::Undefined("No last item, sequence was empty.") : items.back();
}

Value FFloat(const Value& in, const CallArgs& args) {
  auto a = BindArgs(args, "filter 'float'", {{"default", Value::Float(0.0)}});
  if (in.is_undefined()) FailUndefined(in);
  if (in.is_number()) return Value::Float(in.as_float());
  if (in.is_string()) {
    if (auto f = ParseFloat(in.str())) return Value::Float(*f);
  }
  return a[0];
}

Value FFormat(const Value& in, const CallArgs& args) {
  if (!args.positional.empty() && !args.keyword.empty()) {
    Fail("filter 'format' can't handle positional and keyword arguments at the same time");
  }
  Value params;
  if (!args.keyword.empty()) {
    Dict d;
    for (const auto& [k, v] : args.keyword) d.Set(Str(k), v);
    params = Value::MakeDict(std::move(d));
  } else {
    params = Value::MakeTuple(args.positional);
  }
  const Value s = SoftStr(in);
  if (s.safe()) Fail("filter 'format' on a safe (Markup) string is not supported");
  return Str(PercentFormat(s.str(), params));
}

Value FIndent(const Value& in, const CallArgs& args) {
  auto a = BindArgs(args, "filter 'indent'", {{"width", Value::Int(4)}, {"first", Value::Bool(false)}, {"blank", Value::Bool(false)}});
  if (in.is_undefined()) FailUndefined(in);
  if (!in.is_string()) Fail("filter 'indent' needs a string, not ", in.TypeName());
  if (in.safe()) Fail("filter 'indent' on a safe (Markup) string is not supported");
  const std::string indention = a[0].is_string() ? a[0].str() : Spaces(RequireInt(a[0], "indent width"), "indent width");
  const std::vector<std::string> lines = py::SplitLines(in.str() + "\n", false);
  const bool blank = Truthy(a[2]);
  std::string out = Truthy(a[1]) ? indention : "";
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += '\n';
    if (i && (blank || !lines[i].empty())) AppendText(out, indention);
    AppendText(out, lines[i]);
  }
  return Str(out);
}

Value FInt(const Value& in, const CallArgs& args) {
  auto a = BindArgs(args, "filter 'int'", {{"default", Value::Int(0)}, {"base", Value::Int(10)}});
  if (in.is_undefined()) FailUndefined(in);
  if (in.is_int() || in.is_bool()) return Value::Int(in.as_int());
  auto from_float = [&](double f) -> Value {
    if (std::isnan(f)) return a[0];
    if (std::isinf(f) || std::fabs(f) >= 9.2e18) Fail("filter 'int': cannot convert ", py::FloatRepr(f), " to a 64-bit integer");
    return Value::Int(static_cast<int64_t>(std::trunc(f)));
  };
  if (in.is_float()) return from_float(in.as_float());
  if (in.is_string()) {
    const int64_t base = RequireInt(a[1], "int base");
    if (base < 2 || base > 36) Fail("filter 'int': base must be between 2 and 36");
    if (auto i = ParseInt(in.str(), static_cast<int>(base))) return Value::Int(*i);
    if (auto f = ParseFloat(in.str())) return from_float(*f);
  }
  return a[0];
}

Value FItems(const Value& in, const CallArgs& args) {
  BindArgs(args, "filter 'items'", {});
  if (in.is_undefined()) return Value::MakeList({});
  if (!in.is_dict()) Fail("filter 'items': can only get item pairs from a mapping, not ", in.TypeName());
  List out;
  for (const auto& [k, v] : in.dict().entries) out.push_back(Value::MakeTuple({k, v}));
  return Value::MakeList(std::move(out));
}

Value FJoin(const Value& in, const CallArgs& args) {
  auto a = BindArgs(args, "filter 'join'", {{"d", Str("")}, {"attribute", Value::None()}});
  const AttrGetter get(a[1]);
  const std::string sep = ToStr(a[0]);
  std::string out;
  const List items = Iterate(in);
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) AppendText(out, sep);
    AppendText(out, ToStr(get(items[i])));
  }
  return Str(out);
}

Value FLength(const Value& in, const CallArgs& args) {
  BindArgs(args, "filter 'length'", {});
  return Value::Int(Length(in));
}

Value FList(const Value& in, const CallArgs& args) {
  BindArgs(args, "filter 'list'", {});
  return Value::MakeList(Iterate(in));
}

Value FLower(const Value& in, const CallArgs& args) {
  BindArgs(args, "filter 'lower'", {});
  const Value s = SoftStr(in);
  return Value::String(py::Lower(s.str()), s.safe());
}

Value FUpper(const Value& in, const CallArgs& args) {
  BindArgs(args, "filter 'upper'", {});
  const Value s = SoftStr(in);
  return Value::String(py::Upper(s.str()), s.safe());
}

Value FTitle(const Value& in, const CallArgs& args) {
  BindArgs(args, "filter 'title'", {});
  const Value s = SoftStr(in);
  return Value::String(py::Title(s.str()), s.safe());
}

Value FTrim(const Value& in, const CallArgs& args) {
  auto a = BindArgs(args, "filter 'trim'", {{"chars", Value::None()}});
  const Value s = SoftStr(in);
  std::optional<std::string> chars;
  if (!a[0].is_none()) chars = RequireString(a[0], "trim chars");
  return Value::String(py::Strip(s.str(), chars, true, true), s.safe());
}

Value FMap(const Value& in, const CallArgs& args) {
  List out;
  const bool by_attribute = args.positional.empty() &&
                            std::any_of(args.keyword.begin(), args.keyword.end(), [](const auto& kv) { return kv.first == "attribute"; });
  if (by_attribute) {
    auto a = BindArgs(args, "filter 'map'", {{"attribute", std::nullopt}, {"default", Value::None()}});
    const AttrGetter get(a[0], a[1].is_none() ? std::nullopt : std::optional<Value>(a[1]));
    if (Truthy(in)) for (const Value& item : Iterate(in)) out.push_back(get(item));
    return Value::MakeList(std::move(out));
  }
  if (args.positional.empty()) Fail("filter 'map' requires a filter argument");
  const FilterFn filter = LookupFilter(RequireString(args.positional[0], "map filter name"));
  CallArgs rest{{args.positional.begin() + 1, args.positional.end()}, args.keyword};
  if (Truthy(in)) for (const Value& item : Iterate(in)) out.push_back(filter(item, rest));
  return Value::MakeList(std::move(out));
}

// select / reject / selectattr / rejectattr share jinja2's prepare_select_or_reject.
Value SelectOrReject(const Value& in, const CallArgs& args, bool by_attribute, bool keep_if, const char* what) {
  size_t off = 0;
  std::optional<AttrGetter> get;
  if (by_attribute) {
    if (args.positional.empty()) Fail("filter '", what, "': missing parameter for attribute name");
    get.emplace(args.positional[0]);
    off = 1;
  }
  TestFn test = nullptr;
  CallArgs rest;
  if (args.positional.size() > off) {
    test = LookupTest(RequireString(args.positional[off], std::string(what) + " test name"));
    rest.positional.assign(args.positional.begin() + off + 1, args.positional.end());
    rest.keyword = args.keyword;
  } else if (!args.keyword.empty()) {
    Fail("filter '", what, "': keyword arguments need a test name");
  }
  List out;
  if (!Truthy(in)) return Value::MakeList(std::move(out));
  for (const Value& item : Iterate(in)) {
    const Value subject = get ? (*get)(item) : item;
    const bool pass = test ? test(subject, rest) : Truthy(subject);
    if (pass == keep_if) out.push_back(item);
  }
  return Value::MakeList(std::move(out));
}

Value FSelect(const Value& in, const CallArgs& a) { return SelectOrReject(in, a, false, true, "select"); }
Value FReject(const Value& in, const CallArgs& a) { return SelectOrReject(in, a, false, false, "reject"); }
Value FSelectAttr(const Value& in, const CallArgs& a) { return SelectOrReject(in, a, true, true, "selectattr"); }
Value FRejectAttr(const Value& in, const CallArgs& a) { return SelectOrReject(in, a, true, false, "rejectattr"); }

Value MinOrMax(const Value& in, const CallArgs& args, bool max, const char* what) {
  auto a = BindArgs(args, what, {{"case_sensitive", Value::Bool(false)}, {"attribute", Value::None()}});
  const AttrGetter key(a[1], std::nullopt, !Truthy(a[0]));
  const List items = Iterate(in);
  if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = key(items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    const Value k = key(items[i]);
    if (max ? Less(best_key, k) : Less(k, best_key)) {
      best = i;
      best_key = k;
    }
  }
  return items[best];
}

Value FMax(const Value& in, const CallArgs& a) { return MinOrMax(in, a, true, "filter 'max'"); }
Value FMin(const Value& in, const CallArgs& a) { return MinOrMax(in, a, false, "filter 'min'"); }

Value FReplace(const Value& in, const CallArgs& args) {
  auto a = BindArgs(args, "filter 'replace'", {{"old", std::nullopt}, {"new", std::nullopt}, {"count", Value::None()}});
  CallArgs call;
  call.positional = {Str(ToStr(a[0])), Str(ToStr(a[1])), a[2].is_none() ? Value::Int(-1) : a[2]};
  return CallMethod(Str(ToStr(in)), "replace", call);
}

Value FReverse(const Value& in, const CallArgs& args) {
  BindArgs(args, "filter 'reverse'", {});
  if (in.is_string()) {
    std::u32string cps = py::Decode(in.str());
    std::reverse(cps.begin(), cps.end());
    return Value::String(py::Encode(cps), in.safe());
  }
  List items = Iterate(in);
  std::reverse(items.begin(), items.end());
  return Value::MakeList(std::move(items));
}

Value FRound(const Value& in, const CallArgs& args) {
  auto a = BindArgs(args, "filter 'round'", {{"precision", Value::Int(0)}, {"method", Str("common")}});
  if (in.is_undefined()) FailUndefined(in);
  if (!in.is_number()) Fail("filter 'round' needs a number, not ", in.TypeName());
  const int64_t precision = RequireInt(a[0], "round precision");
  const std::string& method = RequireString(a[1], "round method");
  if (method != "common" && method != "ceil" && method != "floor") {
    Fail("filter 'round': method must be 'common', 'ceil' or 'floor'");
  }
  if (precision < 0 || precision > 300) Fail("filter 'round': precision ", precision, " is not supported");
  const double x = in.as_float();
  if (method == "common") {
    if (!in.is_float()) return Value::Int(in.as_int());  // Python's round(int, n) stays an int
    if (!std::isfinite(x)) return in;
    // printf rounds the exact binary value half-to-even, as CPython's round(x, n) does.
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(precision), x);
    return Value::Float(std::strtod(buf, nullptr));
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  return Value::Float((method == "ceil" ? std::ceil(x * scale) : std::floor(x * scale)) / scale);
}

Value FSafe(const Value& in, const CallArgs& args) {
  BindArgs(args, "filter 'safe'", {});
  return in.is_string() && in.safe() ? in : Value::String(ToStr(in), true);
}

Value FSort(const Value& in, const CallArgs& args) {
  auto a = BindArgs(args, "filter 'sort'",
                    {{"reverse", Value::Bool(false)}, {"case_sensitive", Value::Bool(false)}, {"attribute", Value::None()}});
  const bool reverse = Truthy(a[0]);
  std::vector<AttrGetter> keys;
  if (a[2].is_string()) {
    for (const std::string& part : py::Split(a[2].str(), std::string(","), -1, false)) keys.emplace_back(Str(part), std::nullopt, !Truthy(a[1]));
  } else {
    keys.emplace_back(a[2], std::nullopt, !Truthy(a[1]));
  }
  auto key = [&](const Value& item) {
    List k;
    for (const AttrGetter& g : keys) k.push_back(g(item));
    return Value::MakeList(std::move(k));
  };
  List items = Iterate(in);
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& item : items) keyed.emplace_back(key(item), item);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? Less(y.first, x.first) : Less(x.first, y.first);
  });
  List out;
  for (auto& [k, v] : keyed) out.push_back(v);
  return Value::MakeList(std::move(out));
}

Value FString(const Value& in, const CallArgs& args) {
  BindArgs(args, "filter 'string'", {});
  return SoftStr(in);
}

Value FSum(const Value& in, const CallArgs& args) {
  auto a = BindArgs(args, "filter 'sum'", {{"attribute", Value::None()}, {"start", Value::Int(0)}});
  const AttrGetter get(a[0]);
  Value total = a[1];
  for (const Value& item : Iterate(in)) {
    const Value v = get(item);
    if (v.is_string()) Fail("filter 'sum' can't sum strings");
    total = Arithmetic("+", total, v);
  }
  return total;
}

Value FToJson(const Value& in, const CallArgs& args) {
  auto a = BindArgs(args, "filter 'tojson'",
                    {{"ensure_ascii", Value::Bool(false)}, {"indent", Value::None()}, {"separators", Value::None()}, {"sort_keys", Value::Bool(false)}});
  JsonDumpOptions o;
  o.ensure_ascii = Truthy(a[0]);
  if (a[1].is_string()) o.indent = a[1].str();
  else if (!a[1].is_none()) o.indent = Spaces(RequireInt(a[1], "tojson indent"), "tojson indent");
  if (!a[2].is_none()) {
    if (!a[2].is_sequence_like() || a[2].items().size() != 2) Fail("filter 'tojson': separators must be a pair of strings");
    o.item_separator = RequireString(a[2].items()[0], "tojson item separator");
    o.key_separator = RequireString(a[2].items()[1], "tojson key separator");
  }
  o.sort_keys = Truthy(a[3]);
  return Str(DumpJson(in, o));
}

Value FUnique(const Value& in, const CallArgs& args) {
  auto a = BindArgs(args, "filter 'unique'", {{"case_sensitive", Value::Bool(false)}, {"attribute", Value::None()}});
  const AttrGetter key(a[1], std::nullopt, !Truthy(a[0]));
  List out, seen;
  for (const Value& item : Iterate(in)) {
    const Value k = key(item);
    if (k.is_list() || k.is_dict()) Fail("filter 'unique': unhashable type '", k.TypeName(), "'");
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return Equal(s, k); })) {
      seen.push_back(k);
      out.push_back(item);
    }
  }
  return Value::MakeList(std::move(out));
}

struct FilterEntry {
  const char* name;
  FilterFn fn;
};

constexpr FilterEntry kFilters[] = {
    {"abs", FAbs},           {"attr", FAttr},         {"batch", FBatch},         {"capitalize", FCapitalize},
    {"center", FCenter},     {"count", FLength},      {"d", FDefault},           {"default", FDefault},
    {"dictsort", FDictSort}, {"e", FEscape},          {"escape", FEscape},       {"first", FFirst},
    {"float", FFloat},       {"forceescape", FForceEscape}, {"format", FFormat}, {"indent", FIndent},
    {"int", FInt},           {"items", FItems},       {"join", FJoin},           {"last", FLast},
    {"length", FLength},     {"list", FList},         {"lower", FLower},         {"map", FMap},
    {"max", FMax},           {"min", FMin},           {"reject", FReject},       {"rejectattr", FRejectAttr},
    {"replace", FReplace},   {"reverse", FReverse},   {"round", FRound},         {"safe", FSafe},
    {"select", FSelect},     {"selectattr", FSelectAttr}, {"sort", FSort},       {"string", FString},
    {"sum", FSum},           {"title", FTitle},       {"tojson", FToJson},       {"trim", FTrim},
    {"unique", FUnique},     {"upper", FUpper},
};

// jinja2 filters we do not carry: a template using one fails with a clear message.
constexpr const char* kUnsupportedFilters[] = {
    "filesizeformat", "groupby", "pprint", "random", "slice", "striptags", "truncate",
    "urlencode", "urlize", "wordcount", "wordwrap", "xmlattr",
};

}  // namespace

const std::string& RequireString(const Value& v, const std::string& what) {
  if (v.is_undefined()) FailUndefined(v);
  if (!v.is_string()) Fail(what, " must be a string, not ", v.TypeName());
  return v.str();
}

int64_t RequireInt(const Value& v, const std::string& what) {
  if (v.is_undefined()) FailUndefined(v);
  if (!v.is_int() && !v.is_bool()) Fail(what, " must be an integer, not ", v.TypeName());
  return v.as_int();
}

bool HasFilter(const std::string& name) {
  return std::any_of(std::begin(kFilters), std::end(kFilters), [&](const FilterEntry& f) { return name == f.name; });
}

FilterFn LookupFilter(const std::string& name) {
  for (const FilterEntry& f : kFilters) {
    if (name == f.name) return f.fn;
  }
  for (const char* u : kUnsupportedFilters) {
    if (name == u) Fail("filter '", name, "' is not supported by dflash's template engine");
  }
  Fail("unknown filter '", name, "'");
}

}  // namespace dflash::jinja
