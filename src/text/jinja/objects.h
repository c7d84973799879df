// The non-data objects templates handle: namespace() (the one mutable object, how templates
// carry state out of a loop), the `loop` variable, built-in functions and bound methods.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "text/jinja/value.h"

namespace dflash::jinja {

class Namespace : public Object {
 public:
  std::string TypeName() const override { return "Namespace"; }
  bool is_mutable() const override { return true; }
  Value GetAttr(const std::string& name) const override;
  void SetAttr(const std::string& name, Value v) override;
  std::string Repr() const override;  // <Namespace {'a': 1}>

 private:
  Dict attrs_;
};

// `loop` inside a for loop body: index, index0, revindex, first, last, length, previtem, ...
class LoopObject : public Object {
 public:
  LoopObject(std::shared_ptr<const List> items, size_t index, int depth)
      : items_(std::move(items)), index_(index), depth_(depth) {}
  std::string TypeName() const override { return "LoopContext"; }
  Value GetAttr(const std::string& name) const override;
  std::string Repr() const override;

 private:
  std::shared_ptr<const List> items_;
  size_t index_;
  int depth_;
};

// A C++ function exposed to templates (range, namespace, loop.cycle, ...).
class Function : public Object {
 public:
  using Fn = std::function<Value(const CallArgs&)>;
  Function(std::string name, Fn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  std::string TypeName() const override { return "builtin_function_or_method"; }
  bool callable() const override { return true; }
  Value Call(const CallArgs& args) override { return fn_(args); }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  Fn fn_;
};

// s.startswith, d.items, ...: the receiver and the method's name.
class BoundMethod : public Object {
 public:
  BoundMethod(Value self, std::string name) : self_(std::move(self)), name_(std::move(name)) {}
  std::string TypeName() const override { return "builtin_function_or_method"; }
  bool callable() const override { return true; }
  Value Call(const CallArgs& args) override;

 private:
  Value self_;
  std::string name_;
};

Value MakeFunction(std::string name, Function::Fn fn);

}  // namespace dflash::jinja
