#include "text/jinja/objects.h"

#include "core/error.h"
#include "text/jinja/builtins.h"

namespace dflash::jinja {

Value Namespace::GetAttr(const std::string& name) const {
  if (const Value* v = attrs_.Find(name)) return *v;
  return Value::Undefined("'Namespace' object has no attribute '" + name + "'");
}

void Namespace::SetAttr(const std::string& name, Value v) {
  if (v.holds_mutable()) {
    Fail("cannot store a namespace in namespace attribute '", name, "' (a namespace that could hold itself is not supported)");
  }
  attrs_.Set(Value::String(name), std::move(v));
}

std::string Namespace::Repr() const { return "<Namespace " + jinja::Repr(Value::MakeDict(attrs_)) + ">"; }

Value LoopObject::GetAttr(const std::string& name) const {
  const int64_t n = static_cast<int64_t>(items_->size());
  const int64_t i = static_cast<int64_t>(index_);
  if (name == "index") return Value::Int(i + 1);
  if (name == "index0") return Value::Int(i);
  if (name == "revindex") return Value::Int(n - i);
  if (name == "revindex0") return Value::Int(n - i - 1);
  if (name == "first") return Value::Bool(i == 0);
  if (name == "last") return Value::Bool(i == n - 1);
  if (name == "length") return Value::Int(n);
  if (name == "depth") return Value::Int(depth_);
  if (name == "depth0") return Value::Int(depth_ - 1);
  if (name == "previtem") return i > 0 ? (*items_)[i - 1] : Value::Undefined("there is no previous item");
  if (name == "nextitem") return i + 1 < n ? (*items_)[i + 1] : Value::Undefined("there is no next item");
  if (name == "cycle") {
    return MakeFunction("loop.cycle", [i](const CallArgs& args) {
      if (!args.keyword.empty()) Fail("loop.cycle() takes no keyword arguments");
      if (args.positional.empty()) Fail("loop.cycle(): no items for cycling given");
      return args.positional[i % args.positional.size()];
    });
  }
  if (name == "changed") Fail("loop.changed() is not supported");
  return Object::GetAttr(name);
}

std::string LoopObject::Repr() const {
  return "<LoopContext " + std::to_string(index_ + 1) + "/" + std::to_string(items_->size()) + ">";
}

Value BoundMethod::Call(const CallArgs& args) { return CallMethod(self_, name_, args); }

Value MakeFunction(std::string name, Function::Fn fn) {
  return Value::MakeObject(std::make_shared<Function>(std::move(name), std::move(fn)));
}

}  // namespace dflash::jinja
