// The values a chat template computes with. They mirror the Python objects jinja2 sees when
// transformers renders a template: JSON data arrives as dict/list/str/int/float/bool/None, the
// template adds tuples, undefined values, namespaces, macros, loop objects and bound methods.
// Lists, tuples and dicts are immutable (transformers renders in jinja2's immutable sandbox), so
// copies share storage; namespaces are the one mutable object.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace dflash::jinja {

class Value;
class Object;
using List = std::vector<Value>;

// A Python dict: insertion-ordered; keys compare with Python equality (1 == 1.0 == True).
struct Dict {
  std::vector<std::pair<Value, Value>> entries;
  const Value* Find(const Value& key) const;
  const Value* Find(const std::string& key) const;
  void Set(Value key, Value value);
};

// Arguments of a call: f(a, b, key=c).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kTuple, kDict, kObject };

  Value() : kind_(Kind::kUndefined) {}
  // `why` is the message an operation on this value reports, e.g. "'tools' is undefined".
  static Value Undefined(std::string why);
  static Value None() { return Value(Kind::kNone); }
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double f);
  // `safe` marks markupsafe.Markup (the `safe` filter): `+` then escapes the other operand.
  // Strings, lists, tuples and dicts throw Error past the bounds of text/jinja/limits.h.
  static Value String(std::string s, bool safe = false);
  static Value MakeList(List items);
  static Value MakeTuple(List items);
  static Value MakeDict(Dict d);
  static Value MakeObject(std::shared_ptr<Object> o);

  // JSON in (ordered, so tools keep their key order in tojson). Throws Error naming `what`,
  // before any recursion, when `j` nests deeper than kMaxValueDepth (see CheckJsonDepth).
  static Value FromJson(const nlohmann::ordered_json& j, const std::string& what = "template input");

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kBool || kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kTuple; }
  bool is_sequence_like() const { return kind_ == Kind::kList || kind_ == Kind::kTuple; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_object() const { return kind_ == Kind::kObject; }

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return int_; }  // bool and int
  double as_float() const { return kind_ == Kind::kFloat ? float_ : static_cast<double>(int_); }
  const std::string& str() const;              // string, or the reason of an undefined value
  bool safe() const { return safe_; }
  const List& items() const;                   // list and tuple
  const Dict& dict() const;
  Object* object() const;
  const std::shared_ptr<Object>& object_ptr() const;
  const void* identity() const;                // storage address, for `is sameas`

  std::string TypeName() const;  // Python's type name: 'str', 'dict', 'NoneType', ...

  // Levels of lists/tuples/dicts: 0 for anything else, 1 + the deepest item for a container.
  int depth() const { return depth_; }
  // Whether a mutable object (a namespace) is reachable through this value's items.
  bool holds_mutable() const { return holds_mutable_; }

 private:
  explicit Value(Kind k) : kind_(k), depth_(k == Kind::kList || k == Kind::kTuple || k == Kind::kDict ? 1 : 0) {}
  static Value FromCheckedJson(const nlohmann::ordered_json& j);
  // Takes `item` into this container's depth and mutability; Seal() then enforces
  // kMaxValueDepth and kMaxListItems on the finished container of `count` items.
  void Hold(const Value& item);
  void Seal(size_t count) const;

  Kind kind_;
  bool safe_ = false;
  bool holds_mutable_ = false;
  uint16_t depth_ = 0;  // at most kMaxValueDepth, checked whenever a container is made
  int64_t int_ = 0;
  double float_ = 0;
  std::variant<std::monostate, std::shared_ptr<const std::string>, std::shared_ptr<const List>,
               std::shared_ptr<const Dict>, std::shared_ptr<Object>>
      ptr_;
};

// Template-visible objects that are not plain data.
class Object {
 public:
  virtual ~Object() = default;
  virtual std::string TypeName() const = 0;
  virtual Value GetAttr(const std::string& name) const;  // undefined unless overridden
  virtual void SetAttr(const std::string& name, Value v);
  virtual bool callable() const { return false; }
  // A mutable object (namespace()) may not be stored inside another, which keeps values
  // acyclic: an object that could come to hold itself would make repr/==/tojson recurse forever.
  virtual bool is_mutable() const { return false; }
  virtual Value Call(const CallArgs& args);
  virtual std::string Repr() const;  // what str() prints; throws where Python prints an address
};

// Python truthiness.
bool Truthy(const Value& v);
// str(v) as jinja2 prints it: undefined -> "", None -> "None", True -> "True", lists as repr.
std::string ToStr(const Value& v);
std::string Repr(const Value& v);
// Python ==, and ordering (<) that throws TypeError-like errors across incomparable types.
bool Equal(const Value& a, const Value& b);
bool Less(const Value& a, const Value& b);
// iter(v) materialised: list/tuple items, dict keys, string characters; undefined is empty.
List Iterate(const Value& v);
int64_t Length(const Value& v);  // len(v)

// Throws Error naming `what` when `j` nests deeper than kMaxValueDepth. Walks without recursion,
// so it is safe on any parsed JSON and can run before code that copies or converts it
// recursively (nlohmann's copy, FromJson).
void CheckJsonDepth(const nlohmann::ordered_json& j, const std::string& what);

// Turns an undefined value into its error; every operation that Python would refuse on an
// Undefined object calls this.
[[noreturn]] void FailUndefined(const Value& v);

}  // namespace dflash::jinja
