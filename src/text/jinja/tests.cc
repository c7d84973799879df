// jinja2's built-in tests: `x is defined`, `x is string`, `x is divisibleby 3`, ...
#include <algorithm>

#include "core/error.h"
#include "text/jinja/builtins.h"
#include "text/jinja/py_string.h"

namespace dflash::jinja {

namespace {

Value Arg(const CallArgs& args, const char* test, const char* name) {
  auto a = BindArgs(args, std::string("test '") + test + "'", {{name, std::nullopt}});
  return a[0];
}

void NoArgs(const CallArgs& args, const char* test) { BindArgs(args, std::string("test '") + test + "'", {}); }

bool TDefined(const Value& v, const CallArgs& a) {
  NoArgs(a, "defined");
  return !v.is_undefined();
}
bool TUndefined(const Value& v, const CallArgs& a) {
  NoArgs(a, "undefined");
  return v.is_undefined();
}
bool TNone(const Value& v, const CallArgs& a) {
  NoArgs(a, "none");
  return v.is_none();
}
bool TBoolean(const Value& v, const CallArgs& a) {
  NoArgs(a, "boolean");
  return v.is_bool();
}
bool TTrue(const Value& v, const CallArgs& a) {
  NoArgs(a, "true");
  return v.is_bool() && v.as_bool();
}
bool TFalse(const Value& v, const CallArgs& a) {
  NoArgs(a, "false");
  return v.is_bool() && !v.as_bool();
}
bool TInteger(const Value& v, const CallArgs& a) {
  NoArgs(a, "integer");
  return v.is_int();
}
bool TFloat(const Value& v, const CallArgs& a) {
  NoArgs(a, "float");
  return v.is_float();
}
bool TNumber(const Value& v, const CallArgs& a) {
  NoArgs(a, "number");
  return v.is_number();
}
bool TString(const Value& v, const CallArgs& a) {
  NoArgs(a, "string");
  return v.is_string();
}
bool TMapping(const Value& v, const CallArgs& a) {
  NoArgs(a, "mapping");
  return v.is_dict();
}
bool TEscaped(const Value& v, const CallArgs& a) {
  NoArgs(a, "escaped");
  return v.is_string() && v.safe();
}

// Python: len(v) and v.__getitem__ both exist. Undefined has both, so it counts.
bool TSequence(const Value& v, const CallArgs& a) {
  NoArgs(a, "sequence");
  return v.is_undefined() || v.is_string() || v.is_sequence_like() || v.is_dict();
}

// Python: iter(v) works. Undefined iterates as empty; the loop object is iterable too.
bool TIterable(const Value& v, const CallArgs& a) {
  NoArgs(a, "iterable");
  return v.is_undefined() || v.is_string() || v.is_sequence_like() || v.is_dict() ||
         (v.is_object() && v.object()->TypeName() == "LoopContext");
}

// Undefined defines __call__ (it raises), so Python's callable() says yes.
bool TCallable(const Value& v, const CallArgs& a) {
  NoArgs(a, "callable");
  return v.is_undefined() || (v.is_object() && v.object()->callable());
}

bool TOdd(const Value& v, const CallArgs& a) {
  NoArgs(a, "odd");
  return Equal(Arithmetic("%", v, Value::Int(2)), Value::Int(1));
}
bool TEven(const Value& v, const CallArgs& a) {
  NoArgs(a, "even");
  return Equal(Arithmetic("%", v, Value::Int(2)), Value::Int(0));
}
bool TDivisibleBy(const Value& v, const CallArgs& a) {
  return Equal(Arithmetic("%", v, Arg(a, "divisibleby", "num")), Value::Int(0));
}

bool TEq(const Value& v, const CallArgs& a) { return Equal(v, Arg(a, "eq", "other")); }
bool TNe(const Value& v, const CallArgs& a) { return !Equal(v, Arg(a, "ne", "other")); }
bool TLt(const Value& v, const CallArgs& a) { return Less(v, Arg(a, "lt", "other")); }
bool TGt(const Value& v, const CallArgs& a) { return Less(Arg(a, "gt", "other"), v); }
bool TLe(const Value& v, const CallArgs& a) {
  const Value o = Arg(a, "le", "other");
  return Less(v, o) || Equal(v, o);
}
bool TGe(const Value& v, const CallArgs& a) {
  const Value o = Arg(a, "ge", "other");
  return Less(o, v) || Equal(v, o);
}
bool TIn(const Value& v, const CallArgs& a) { return Contains(Arg(a, "in", "seq"), v); }

// Python identity: only meaningful for the singletons None/True/False and shared containers.
bool TSameAs(const Value& v, const CallArgs& a) {
  const Value o = Arg(a, "sameas", "other");
  if (v.is_none() || v.is_bool() || o.is_none() || o.is_bool()) {
    return v.kind() == o.kind() && (v.is_none() || v.as_bool() == o.as_bool());
  }
  if (v.is_sequence_like() || v.is_dict() || v.is_object()) return v.kind() == o.kind() && v.identity() == o.identity();
  Fail("test 'sameas' on ", v.TypeName(), " values depends on CPython object caching; not supported");
}

bool TLower(const Value& v, const CallArgs& a) {
  NoArgs(a, "lower");
  return py::IsLower(ToStr(v));
}
bool TUpper(const Value& v, const CallArgs& a) {
  NoArgs(a, "upper");
  return py::IsUpper(ToStr(v));
}
bool TFilter(const Value& v, const CallArgs& a) {
  NoArgs(a, "filter");
  return v.is_string() && HasFilter(v.str());
}
bool TTest(const Value& v, const CallArgs& a) {
  NoArgs(a, "test");
  return v.is_string() && HasTest(v.str());
}

struct TestEntry {
  const char* name;
  TestFn fn;
};

constexpr TestEntry kTests[] = {
    {"boolean", TBoolean}, {"callable", TCallable}, {"defined", TDefined}, {"divisibleby", TDivisibleBy},
    {"eq", TEq},           {"equalto", TEq},        {"==", TEq},           {"escaped", TEscaped},
    {"even", TEven},       {"false", TFalse},       {"filter", TFilter},   {"float", TFloat},
    {"ge", TGe},           {">=", TGe},             {"gt", TGt},           {"greaterthan", TGt},
    {">", TGt},            {"in", TIn},             {"integer", TInteger}, {"iterable", TIterable},
    {"le", TLe},           {"<=", TLe},             {"lower", TLower},     {"lt", TLt},
    {"lessthan", TLt},     {"<", TLt},              {"mapping", TMapping}, {"ne", TNe},
    {"!=", TNe},           {"none", TNone},         {"number", TNumber},   {"odd", TOdd},
    {"sameas", TSameAs},   {"sequence", TSequence}, {"string", TString},   {"test", TTest},
    {"true", TTrue},       {"undefined", TUndefined}, {"upper", TUpper},
};

}  // namespace

bool HasTest(const std::string& name) {
  return std::any_of(std::begin(kTests), std::end(kTests), [&](const TestEntry& t) { return name == t.name; });
}

TestFn LookupTest(const std::string& name) {
  for (const TestEntry& t : kTests) {
    if (name == t.name) return t.fn;
  }
  Fail("unknown test '", name, "'");
}

}  // namespace dflash::jinja
