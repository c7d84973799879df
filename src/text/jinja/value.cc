#include "text/jinja/value.h"

#include <algorithm>

#include "core/error.h"
#include "text/jinja/limits.h"
#include "text/jinja/py_string.h"

namespace dflash::jinja {

const Value* Dict::Find(const Value& key) const {
  for (const auto& [k, v] : entries) {
    if (Equal(k, key)) return &v;
  }
  return nullptr;
}

const Value* Dict::Find(const std::string& key) const {
  for (const auto& [k, v] : entries) {
    if (k.is_string() && k.str() == key) return &v;
  }
  return nullptr;
}

void Dict::Set(Value key, Value value) {
  for (auto& [k, v] : entries) {
    if (Equal(k, key)) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

Value Value::Undefined(std::string why) {
  Value v(Kind::kUndefined);
  v.ptr_ = std::make_shared<const std::string>(std::move(why));
  return v;
}

Value Value::Bool(bool b) {
  Value v(Kind::kBool);
  v.int_ = b ? 1 : 0;
  return v;
}

Value Value::Int(int64_t i) {
  Value v(Kind::kInt);
  v.int_ = i;
  return v;
}

Value Value::Float(double f) {
  Value v(Kind::kFloat);
  v.float_ = f;
  return v;
}

Value Value::String(std::string s, bool safe) {
  if (s.size() > kMaxTextBytes) Fail("a string of ", s.size(), " bytes is over the limit of ", kMaxTextBytes >> 20, " MiB");
  Value v(Kind::kString);
  v.ptr_ = std::make_shared<const std::string>(std::move(s));
  v.safe_ = safe;
  return v;
}

Value Value::MakeList(List items) {
  Value v(Kind::kList);
  for (const Value& item : items) v.Hold(item);
  v.Seal(items.size());
  v.ptr_ = std::make_shared<const List>(std::move(items));
  return v;
}

Value Value::MakeTuple(List items) {
  Value v(Kind::kTuple);
  for (const Value& item : items) v.Hold(item);
  v.Seal(items.size());
  v.ptr_ = std::make_shared<const List>(std::move(items));
  return v;
}

Value Value::MakeDict(Dict d) {
  Value v(Kind::kDict);
  for (const auto& [key, item] : d.entries) {
    v.Hold(key);
    v.Hold(item);
  }
  v.Seal(d.entries.size());
  v.ptr_ = std::make_shared<const Dict>(std::move(d));
  return v;
}

Value Value::MakeObject(std::shared_ptr<Object> o) {
  Value v(Kind::kObject);
  v.holds_mutable_ = o->is_mutable();
  v.ptr_ = std::move(o);
  return v;
}

void Value::Hold(const Value& item) {
  depth_ = std::max<uint16_t>(depth_, item.depth_ + 1);
  holds_mutable_ = holds_mutable_ || item.holds_mutable_;
}

void Value::Seal(size_t count) const {
  if (count > kMaxListItems) Fail("a ", TypeName(), " of ", count, " items is over the limit of ", kMaxListItems);
  if (depth_ > kMaxValueDepth) {
    Fail("a ", TypeName(), " nested more than ", kMaxValueDepth, " levels deep (lists and dicts inside each other)");
  }
}

Value Value::FromJson(const nlohmann::ordered_json& j, const std::string& what) {
  CheckJsonDepth(j, what);
  return FromCheckedJson(j);
}

Value Value::FromCheckedJson(const nlohmann::ordered_json& j) {
  using J = nlohmann::ordered_json;
  switch (j.type()) {
    case J::value_t::null: return None();
    case J::value_t::boolean: return Bool(j.get<bool>());
    case J::value_t::number_integer: return Int(j.get<int64_t>());
    case J::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) Fail("integer ", u, " is too large for a template value");
      return Int(static_cast<int64_t>(u));
    }
    case J::value_t::number_float: return Float(j.get<double>());
    case J::value_t::string: return String(j.get<std::string>());
    case J::value_t::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(FromCheckedJson(e));
      return MakeList(std::move(items));
    }
    case J::value_t::object: {
      Dict d;
      d.entries.reserve(j.size());
      for (const auto& [k, e] : j.items()) d.entries.emplace_back(String(k), FromCheckedJson(e));
      return MakeDict(std::move(d));
    }
    default: Fail("unsupported JSON value (", j.type_name(), ") in template input");
  }
}

void CheckJsonDepth(const nlohmann::ordered_json& j, const std::string& what) {
  // Depth-first with an explicit stack of (container, its depth): the input may be nested far
  // deeper than a recursive walk could survive.
  std::vector<std::pair<const nlohmann::ordered_json*, int>> pending{{&j, 1}};
  while (!pending.empty()) {
    const auto [node, depth] = pending.back();
    pending.pop_back();
    if (!node->is_structured()) continue;
    if (depth > kMaxValueDepth) Fail(what, ": JSON nested more than ", kMaxValueDepth, " levels deep");
    for (const auto& child : *node) pending.emplace_back(&child, depth + 1);
  }
}

const std::string& Value::str() const {
  static const std::string kEmpty;
  const auto* p = std::get_if<std::shared_ptr<const std::string>>(&ptr_);
  return p ? **p : kEmpty;
}

const List& Value::items() const {
  static const List kEmpty;
  const auto* p = std::get_if<std::shared_ptr<const List>>(&ptr_);
  return p ? **p : kEmpty;
}

const Dict& Value::dict() const {
  static const Dict kEmpty;
  const auto* p = std::get_if<std::shared_ptr<const Dict>>(&ptr_);
  return p ? **p : kEmpty;
}

Object* Value::object() const {
  const auto* p = std::get_if<std::shared_ptr<Object>>(&ptr_);
  return p ? p->get() : nullptr;
}

const std::shared_ptr<Object>& Value::object_ptr() const {
  static const std::shared_ptr<Object> kNull;
  const auto* p = std::get_if<std::shared_ptr<Object>>(&ptr_);
  return p ? *p : kNull;
}

const void* Value::identity() const {
  return std::visit(
      [](const auto& p) -> const void* {
        if constexpr (std::is_same_v<std::decay_t<decltype(p)>, std::monostate>) return nullptr;
        else return p.get();
      },
      ptr_);
}

std::string Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return safe_ ? "Markup" : "str";
    case Kind::kList: return "list";
    case Kind::kTuple: return "tuple";
    case Kind::kDict: return "dict";
    case Kind::kObject: return object()->TypeName();
  }
  return "?";
}

Value Object::GetAttr(const std::string& name) const {
  std::string why = "'";
  why += TypeName();
  why += "' object has no attribute '" + name + "'";
  return Value::Undefined(std::move(why));
}

void Object::SetAttr(const std::string& name, Value) {
  Fail("cannot assign attribute '", name, "' on a ", TypeName(), " object (only on namespace())");
}

Value Object::Call(const CallArgs&) { Fail("'", TypeName(), "' object is not callable"); }

std::string Object::Repr() const {
  Fail("cannot render a ", TypeName(), " object as text (Python would print its address)");
}

bool Truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return false;
    case Value::Kind::kBool:
    case Value::Kind::kInt: return v.as_int() != 0;
    case Value::Kind::kFloat: return v.as_float() != 0;
    case Value::Kind::kString: return !v.str().empty();
    case Value::Kind::kList:
    case Value::Kind::kTuple: return !v.items().empty();
    case Value::Kind::kDict: return !v.dict().entries.empty();
    case Value::Kind::kObject: return true;
  }
  return false;
}

std::string Repr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "Undefined";
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return v.as_bool() ? "True" : "False";
    case Value::Kind::kInt: return std::to_string(v.as_int());
    case Value::Kind::kFloat: return py::FloatRepr(v.as_float());
    case Value::Kind::kString: return v.safe() ? "Markup(" + py::Repr(v.str()) + ")" : py::Repr(v.str());
    case Value::Kind::kList:
    case Value::Kind::kTuple: {
      const bool tuple = v.is_tuple();
      std::string out = tuple ? "(" : "[";
      const List& items = v.items();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += ", ";
        AppendText(out, Repr(items[i]));
      }
      if (tuple && items.size() == 1) out += ",";
      return out + (tuple ? ")" : "]");
    }
    case Value::Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, e] : v.dict().entries) {
        if (!first) out += ", ";
        AppendText(out, Repr(k));
        out += ": ";
        AppendText(out, Repr(e));
        first = false;
      }
      return out + "}";
    }
    case Value::Kind::kObject: return v.object()->Repr();
  }
  return "";
}

std::string ToStr(const Value& v) {
  if (v.is_string()) return v.str();
  if (v.is_undefined()) return "";
  return Repr(v);
}

bool Equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.str() == b.str();
    case Value::Kind::kList:
    case Value::Kind::kTuple: {
      const List &x = a.items(), &y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!Equal(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const Dict &x = a.dict(), &y = b.dict();
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [k, e] : x.entries) {
        const Value* other = y.Find(k);
        if (!other || !Equal(e, *other)) return false;
      }
      return true;
    }
    case Value::Kind::kObject: return a.object() == b.object();
    default: return false;
  }
}

bool Less(const Value& a, const Value& b) {
  if (a.is_undefined()) FailUndefined(a);
  if (b.is_undefined()) FailUndefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() < b.as_float();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 order == code point order
  if (a.kind() == b.kind() && a.is_sequence_like()) {
    const List &x = a.items(), &y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!Equal(x[i], y[i])) return Less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  Fail("'<' not supported between instances of '", a.TypeName(), "' and '", b.TypeName(), "'");
}

List Iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return {};
    case Value::Kind::kList:
    case Value::Kind::kTuple: return v.items();
    case Value::Kind::kDict: {
      List keys;
      keys.reserve(v.dict().entries.size());
      for (const auto& [k, e] : v.dict().entries) keys.push_back(k);
      return keys;
    }
    case Value::Kind::kString: {
      const std::u32string cps = py::Decode(v.str());
      if (cps.size() > kMaxListItems) Fail("cannot iterate over a string of ", cps.size(), " characters (limit ", kMaxListItems, ")");
      List chars;
      chars.reserve(cps.size());
      for (char32_t c : cps) {
        std::string s;
        py::AppendUtf8(s, c);
        chars.push_back(Value::String(std::move(s), v.safe()));
      }
      return chars;
    }
    default: Fail("'", v.TypeName(), "' object is not iterable");
  }
}

int64_t Length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return 0;
    case Value::Kind::kString: return static_cast<int64_t>(py::Length(v.str()));
    case Value::Kind::kList:
    case Value::Kind::kTuple: return static_cast<int64_t>(v.items().size());
    case Value::Kind::kDict: return static_cast<int64_t>(v.dict().entries.size());
    default: Fail("object of type '", v.TypeName(), "' has no len()");
  }
}

void FailUndefined(const Value& v) {
  Fail(v.str().empty() ? std::string("value is undefined") : v.str());
}

}  // namespace dflash::jinja
