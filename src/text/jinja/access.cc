// obj.attr, obj[key] and obj[a:b:c], following jinja2's SandboxedEnvironment.getattr/getitem.
#include <algorithm>
#include <array>

#include "core/error.h"
#include "text/jinja/builtins.h"
#include "text/jinja/objects.h"
#include "text/jinja/py_string.h"

namespace dflash::jinja {

namespace {

enum class Method { kNone, kSafe, kUnsafe };

bool In(const std::string& name, std::initializer_list<const char*> names) {
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return name == n; });
}

// Which Python methods exist on the value's type, and which the immutable sandbox blocks
// because they modify the object.
Method ClassifyMethod(const Value& v, const std::string& name) {
  if (name.size() > 4 && name.rfind("__", 0) == 0) return Method::kUnsafe;  // dunder attributes
  switch (v.kind()) {
    case Value::Kind::kString:
      return In(name, {"capitalize", "casefold", "center", "count", "encode", "endswith", "expandtabs", "find",
                       "format", "format_map", "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit",
                       "isidentifier", "islower", "isnumeric", "isprintable", "isspace", "istitle", "isupper",
                       "join", "ljust", "lower", "lstrip", "maketrans", "partition", "removeprefix",
                       "removesuffix", "replace", "rfind", "rindex", "rjust", "rpartition", "rsplit", "rstrip",
                       "split", "splitlines", "startswith", "strip", "swapcase", "title", "translate", "upper",
                       "zfill"}) ||
                     (v.safe() && In(name, {"escape", "unescape", "striptags"}))
                 ? Method::kSafe
                 : Method::kNone;
    case Value::Kind::kList:
      if (In(name, {"copy", "count", "index"})) return Method::kSafe;
      return In(name, {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"}) ? Method::kUnsafe
                                                                                                    : Method::kNone;
    case Value::Kind::kTuple: return In(name, {"count", "index"}) ? Method::kSafe : Method::kNone;
    case Value::Kind::kDict:
      if (In(name, {"copy", "fromkeys", "get", "items", "keys", "values"})) return Method::kSafe;
      return In(name, {"clear", "pop", "popitem", "setdefault", "update"}) ? Method::kUnsafe : Method::kNone;
    default: return Method::kNone;
  }
}

// The method as a value, or the sandbox's undefined for a blocked one; nullopt if no such method.
std::optional<Value> MethodValue(const Value& obj, const std::string& name) {
  switch (ClassifyMethod(obj, name)) {
    case Method::kSafe: return Value::MakeObject(std::make_shared<BoundMethod>(obj, name));
    case Method::kUnsafe:
      return Value::Undefined("access to attribute '" + name + "' of '" + obj.TypeName() + "' object is unsafe");
    case Method::kNone: return std::nullopt;
  }
  return std::nullopt;
}

Value NoAttribute(const Value& obj, const std::string& name) {
  return Value::Undefined(std::string("'") + obj.TypeName() + " object' has no attribute '" + name + "'");
}

// Attributes Python numbers have that a template could mean; we do not model them.
void RejectNumberAttribute(const Value& obj, const std::string& name) {
  if (In(name, {"real", "imag", "numerator", "denominator", "conjugate", "bit_length", "bit_count", "to_bytes",
                "from_bytes", "as_integer_ratio", "is_integer", "hex", "fromhex"})) {
    Fail("attribute '", name, "' of ", obj.TypeName(), " values is not supported");
  }
}

std::optional<int64_t> IndexOf(const Value& key) {
  if (key.is_int() || key.is_bool()) return key.as_int();
  return std::nullopt;
}

}  // namespace

Value GetAttr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined: FailUndefined(obj);
    case Value::Kind::kDict:
      if (auto m = MethodValue(obj, name)) return *m;
      if (const Value* v = obj.dict().Find(name)) return *v;
      return NoAttribute(obj, name);
    case Value::Kind::kString:
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      if (auto m = MethodValue(obj, name)) return *m;
      return NoAttribute(obj, name);
    case Value::Kind::kObject: return obj.object()->GetAttr(name);
    case Value::Kind::kBool:
    case Value::Kind::kInt:
    case Value::Kind::kFloat:
      RejectNumberAttribute(obj, name);
      return NoAttribute(obj, name);
    case Value::Kind::kNone: return NoAttribute(obj, name);
  }
  return NoAttribute(obj, name);
}

Value GetAttrOnly(const Value& obj, const std::string& name) {
  if (obj.is_object()) return obj.object()->GetAttr(name);
  if (auto m = MethodValue(obj, name)) return *m;
  if (obj.is_number()) RejectNumberAttribute(obj, name);
  return NoAttribute(obj, name);
}

Value GetItem(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined: FailUndefined(obj);
    case Value::Kind::kDict:
      if (const Value* v = obj.dict().Find(key)) return *v;
      break;
    case Value::Kind::kList:
    case Value::Kind::kTuple:
    case Value::Kind::kString:
      if (auto i = IndexOf(key)) {
        if (obj.is_string()) {
          const std::u32string cps = py::Decode(obj.str());
          const int64_t n = static_cast<int64_t>(cps.size());
          const int64_t k = *i < 0 ? *i + n : *i;
          if (k >= 0 && k < n) return Value::String(py::Encode(std::u32string_view(cps).substr(k, 1)), obj.safe());
        } else {
          const List& items = obj.items();
          const int64_t n = static_cast<int64_t>(items.size());
          const int64_t k = *i < 0 ? *i + n : *i;
          if (k >= 0 && k < n) return items[k];
        }
        return Value::Undefined(std::string("'") + obj.TypeName() + " object' has no element " + std::to_string(*i));
      }
      break;
    default: break;
  }
  // jinja2 falls back to getattr when the subscript fails and the key is a string.
  if (key.is_string()) {
    if (obj.is_object()) return obj.object()->GetAttr(key.str());
    if (auto m = MethodValue(obj, key.str())) return *m;
    if (obj.is_number()) RejectNumberAttribute(obj, key.str());
    return NoAttribute(obj, key.str());
  }
  return Value::Undefined(std::string("'") + obj.TypeName() + " object' has no element " + Repr(key));
}

Value Slice(const Value& obj, const std::optional<int64_t>& start, const std::optional<int64_t>& stop,
            const std::optional<int64_t>& step) {
  if (obj.is_undefined()) FailUndefined(obj);
  if (obj.is_string()) {
    const std::u32string cps = py::Decode(obj.str());
    std::u32string out;
    for (int64_t i : py::SliceIndices(static_cast<int64_t>(cps.size()), start, stop, step)) out += cps[i];
    return Value::String(py::Encode(out), obj.safe());
  }
  if (obj.is_sequence_like()) {
    const List& items = obj.items();
    List out;
    for (int64_t i : py::SliceIndices(static_cast<int64_t>(items.size()), start, stop, step)) out.push_back(items[i]);
    return obj.is_tuple() ? Value::MakeTuple(std::move(out)) : Value::MakeList(std::move(out));
  }
  return Value::Undefined(std::string("'") + obj.TypeName() + " object' cannot be sliced");
}

}  // namespace dflash::jinja
