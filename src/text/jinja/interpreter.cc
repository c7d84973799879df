#include "text/jinja/interpreter.h"

#include <memory>

#include "text/jinja/limits.h"
#include "text/jinja/located_error.h"
#include "text/jinja/objects.h"

namespace dflash::jinja {

namespace {

constexpr int kMaxCallDepth = 100;  // nested macro calls, below kMaxRenderDepth's reach; jinja2 hits Python's recursion limit near here

struct Frame;
using FramePtr = std::shared_ptr<Frame>;

// One scope. Lookups walk outwards to the globals.
struct Frame {
  explicit Frame(FramePtr parent_frame) : parent(std::move(parent_frame)) {}
  const Value* Find(const std::string& name) const {
    for (const Frame* f = this; f; f = f->parent.get()) {
      for (const auto& [k, v] : f->vars) {
        if (k == name) return &v;
      }
    }
    return nullptr;
  }
  void Set(const std::string& name, Value v) {
    for (auto& [k, old] : vars) {
      if (k == name) {
        old = std::move(v);
        return;
      }
    }
    vars.emplace_back(name, std::move(v));
  }
  FramePtr parent;
  std::vector<std::pair<std::string, Value>> vars;
};

class Interpreter;

// A {% macro %} (or the body of a {% call %} block, bound as `caller`).
class Macro : public Object {
 public:
  Macro(Interpreter* interp, const Stmt* def, std::weak_ptr<Frame> closure, std::string name)
      : interp_(interp), def_(def), closure_(std::move(closure)), name_(std::move(name)) {}
  std::string TypeName() const override { return "Macro"; }
  bool callable() const override { return true; }
  Value Call(const CallArgs& args) override;
  std::string Repr() const override { return "<Macro '" + name_ + "'>"; }

 private:
  Interpreter* interp_;
  const Stmt* def_;
  std::weak_ptr<Frame> closure_;  // the interpreter keeps defining scopes alive for the render
  std::string name_;
};

class Interpreter {
 public:
  enum class Flow { kNormal, kBreak, kContinue };

  ~Interpreter() {
    // Scopes that define macros hold the macros, which point back at the scopes; drop the
    // bindings so the cycle is freed.
    for (const FramePtr& f : macro_scopes_) f->vars.clear();
  }

  Flow Exec(const Body& body, const FramePtr& f, std::string& out) {
    for (const auto& s : body) {
      const Flow flow = ExecLocated(*s, f, out);
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  Value Eval(const Expr& e, const FramePtr& f) {
    try {
      CountStep();
      const Nesting nesting(this);
      return EvalImpl(e, f);
    } catch (const LocatedError&) {
      throw;
    } catch (const TemplateRaised& err) {
      throw LocatedError(e.line, std::string("template raised an exception: ") + err.what());
    } catch (const Error& err) {
      throw LocatedError(e.line, err.what());
    } catch (const std::exception& err) {  // a bug of ours, reported rather than crashing the caller
      throw LocatedError(e.line, std::string("internal error: ") + err.what());
    }
  }

  Value CallMacro(const Stmt& def, const FramePtr& closure, const std::string& name, const CallArgs& args) {
    if (depth_ >= kMaxCallDepth) Fail("macro calls nested too deeply (more than ", kMaxCallDepth, ")");
    struct DepthGuard {
      int& d;
      ~DepthGuard() { --d; }
    } guard{++depth_};
    auto frame = std::make_shared<Frame>(closure);
    const auto& params = def.params;
    std::vector<bool> bound(params.size(), false);
    List extra;
    for (size_t i = 0; i < args.positional.size(); ++i) {
      if (i < params.size()) {
        frame->Set(params[i].name, args.positional[i]);
        bound[i] = true;
      } else {
        extra.push_back(args.positional[i]);
      }
    }
    if (!extra.empty() && !def.uses_varargs) {
      Fail("macro '", name, "' takes not more than ", params.size(), " argument(s)");
    }
    Dict kwargs;
    Value caller = Value::Undefined("No caller defined");
    for (const auto& [key, value] : args.keyword) {
      size_t i = 0;
      while (i < params.size() && params[i].name != key) ++i;
      if (i < params.size()) {
        if (bound[i]) Fail("macro '", name, "' got multiple values for argument '", key, "'");
        frame->Set(key, value);
        bound[i] = true;
      } else if (key == "caller" && def.uses_caller) {
        caller = value;
      } else if (def.uses_kwargs) {
        kwargs.Set(Value::String(key), value);
      } else {
        Fail("macro '", name, "' takes no keyword argument '", key, "'");
      }
    }
    for (size_t i = 0; i < params.size(); ++i) {
      if (bound[i]) continue;
      frame->Set(params[i].name, params[i].fallback ? Eval(*params[i].fallback, frame)
                                                    : Value::Undefined("parameter '" + params[i].name + "' was not provided"));
    }
    if (def.uses_varargs) frame->Set("varargs", Value::MakeTuple(std::move(extra)));
    if (def.uses_kwargs) frame->Set("kwargs", Value::MakeDict(std::move(kwargs)));
    if (def.uses_caller) frame->Set("caller", caller);
    std::string out;
    Exec(def.body, frame, out);
    return Value::String(std::move(out));
  }

 private:
  Flow ExecLocated(const Stmt& s, const FramePtr& f, std::string& out) {
    try {
      CountStep();
      const Nesting nesting(this);
      return ExecStmt(s, f, out);
    } catch (const LocatedError&) {
      throw;
    } catch (const TemplateRaised& err) {
      throw LocatedError(s.line, std::string("template raised an exception: ") + err.what());
    } catch (const Error& err) {
      throw LocatedError(s.line, err.what());
    } catch (const std::exception& err) {
      throw LocatedError(s.line, std::string("internal error: ") + err.what());
    }
  }

  Flow ExecStmt(const Stmt& s, const FramePtr& f, std::string& out) {
    switch (s.type) {
      case Stmt::Type::kText: AppendText(out, s.text); return Flow::kNormal;
      case Stmt::Type::kPrint:
        for (const auto& e : s.exprs) AppendText(out, ToStr(Eval(*e, f)));
        return Flow::kNormal;
      case Stmt::Type::kIf:
        for (const auto& [cond, body] : s.branches) {
          if (Truthy(Eval(*cond, f))) return Exec(body, f, out);
        }
        return Exec(s.else_body, f, out);
      case Stmt::Type::kFor: return ExecFor(s, f, out);
      case Stmt::Type::kSet: Assign(s.target, Eval(*s.expr, f), f); return Flow::kNormal;
      case Stmt::Type::kSetBlock: {
        Value v = Value::String(RenderScoped(s.body, f));
        if (s.expr) v = ApplyFilterChain(*s.expr, v, f);
        Assign(s.target, v, f);
        return Flow::kNormal;
      }
      case Stmt::Type::kMacro:
        f->Set(s.text, Value::MakeObject(std::make_shared<Macro>(this, &s, f, s.text)));
        macro_scopes_.push_back(f);
        return Flow::kNormal;
      case Stmt::Type::kCallBlock: {
        const Value caller = Value::MakeObject(std::make_shared<Macro>(this, &s, f, "caller"));
        macro_scopes_.push_back(f);
        const Expr& call = *s.expr;
        CallArgs args = EvalArgs(call, f);
        args.keyword.emplace_back("caller", caller);
        AppendText(out, ToStr(CallValue(Eval(*call.args[0], f), args)));
        return Flow::kNormal;
      }
      case Stmt::Type::kFilterBlock:
        AppendText(out, ToStr(ApplyFilterChain(*s.expr, Value::String(RenderScoped(s.body, f)), f)));
        return Flow::kNormal;
      case Stmt::Type::kWith: {
        auto inner = std::make_shared<Frame>(f);
        for (size_t i = 0; i < s.targets.size(); ++i) Assign(s.targets[i], Eval(*s.exprs[i], f), inner);
        return Exec(s.body, inner, out);
      }
      case Stmt::Type::kScope: AppendText(out, RenderScoped(s.body, f)); return Flow::kNormal;
      case Stmt::Type::kBreak: return Flow::kBreak;
      case Stmt::Type::kContinue: return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  std::string RenderScoped(const Body& body, const FramePtr& f) {
    std::string buf;
    if (Exec(body, std::make_shared<Frame>(f), buf) != Flow::kNormal) {
      Fail("{% break %}/{% continue %} cannot leave a set, filter or generation block");
    }
    return buf;
  }

  Flow ExecFor(const Stmt& s, const FramePtr& f, std::string& out) {
    List items = Iterate(Eval(*s.expr, f));
    if (s.cond) {  // {% for x in xs if cond %}: loop.index and loop.length count kept items only
      List kept;
      for (Value& item : items) {
        auto probe = std::make_shared<Frame>(f);
        Assign(s.target, item, probe);
        if (Truthy(Eval(*s.cond, probe))) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    if (items.empty()) return Exec(s.else_body, f, out);
    const auto shared = std::make_shared<const List>(std::move(items));
    for (size_t i = 0; i < shared->size(); ++i) {
      CountStep();  // an empty body costs nothing else, and loops nest
      auto iteration = std::make_shared<Frame>(f);
      Assign(s.target, (*shared)[i], iteration);
      iteration->Set("loop", Value::MakeObject(std::make_shared<LoopObject>(shared, i, 1)));
      if (Exec(s.body, iteration, out) == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  void Assign(const Target& t, const Value& v, const FramePtr& f) {
    switch (t.type) {
      case Target::Type::kName: f->Set(t.name, v); return;
      case Target::Type::kAttr: {
        const Value* ns = f->Find(t.name);
        if (!ns || !ns->is_object() || ns->object()->TypeName() != "Namespace") {
          FailAt(t.line, "cannot assign attribute on non-namespace object '", t.name, "'");
        }
        ns->object()->SetAttr(t.attr, v);
        return;
      }
      case Target::Type::kTuple: {
        const List items = Iterate(v);
        if (items.size() != t.items.size()) {
          FailAt(t.line, items.size() > t.items.size() ? "too many" : "not enough", " values to unpack (expected ",
                 t.items.size(), ", got ", items.size(), ")");
        }
        for (size_t i = 0; i < items.size(); ++i) Assign(t.items[i], items[i], f);
        return;
      }
    }
  }

  // Arguments of a call/filter/test expression: args[1...] are positional.
  CallArgs EvalArgs(const Expr& e, const FramePtr& f) {
    CallArgs a;
    for (size_t i = 1; i < e.args.size(); ++i) a.positional.push_back(Eval(*e.args[i], f));
    if (e.star_args) {
      for (Value& v : Iterate(Eval(*e.star_args, f))) a.positional.push_back(std::move(v));
    }
    for (const auto& [k, v] : e.kwargs) a.keyword.emplace_back(k, Eval(*v, f));
    if (e.star_kwargs) {
      const Value d = Eval(*e.star_kwargs, f);
      if (!d.is_dict()) Fail("argument after ** must be a mapping, not ", d.TypeName());
      for (const auto& [k, v] : d.dict().entries) {
        if (!k.is_string()) Fail("keywords must be strings");
        a.keyword.emplace_back(k.str(), v);
      }
    }
    return a;
  }

  Value CallValue(const Value& callee, const CallArgs& args) {
    if (callee.is_undefined()) FailUndefined(callee);
    if (callee.is_object() && callee.object()->callable()) {
      // Keep the object alive across the call, whatever the callee does to its bindings.
      const std::shared_ptr<Object> keep = callee.object_ptr();
      return keep->Call(args);
    }
    Fail("'", callee.TypeName(), "' object is not callable");
  }

  // A filter chain whose innermost operand is `hole` ({% filter %}, {% set x | f %}).
  Value ApplyFilterChain(const Expr& e, const Value& hole, const FramePtr& f) {
    const Value input = e.args[0] ? ApplyFilterChain(*e.args[0], hole, f) : hole;
    try {
      return e.filter(input, EvalArgs(e, f));
    } catch (const LocatedError&) {
      throw;
    } catch (const Error& err) {
      throw LocatedError(e.line, err.what());
    }
  }

  std::optional<int64_t> SliceBound(const Expr* e, const FramePtr& f) {
    if (!e) return std::nullopt;
    const Value v = Eval(*e, f);
    if (v.is_none()) return std::nullopt;
    if (v.is_int() || v.is_bool()) return v.as_int();
    if (v.is_undefined()) FailUndefined(v);
    Fail("slice indices must be integers or None, not ", v.TypeName());
  }

  Value EvalImpl(const Expr& e, const FramePtr& f) {
    switch (e.type) {
      case Expr::Type::kLiteral: return e.literal;
      case Expr::Type::kName: {
        const Value* v = f->Find(e.name);
        return v ? *v : Value::Undefined("'" + e.name + "' is undefined");
      }
      case Expr::Type::kList:
      case Expr::Type::kTuple: {
        List items;
        for (const auto& a : e.args) items.push_back(Eval(*a, f));
        return e.type == Expr::Type::kList ? Value::MakeList(std::move(items)) : Value::MakeTuple(std::move(items));
      }
      case Expr::Type::kDict: {
        Dict d;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          Value key = Eval(*e.args[i], f);
          if (key.is_list() || key.is_dict() || key.is_undefined()) Fail("unhashable dict key of type '", key.TypeName(), "'");
          d.Set(std::move(key), Eval(*e.args[i + 1], f));
        }
        return Value::MakeDict(std::move(d));
      }
      case Expr::Type::kGetAttr: return GetAttr(Eval(*e.args[0], f), e.name);
      case Expr::Type::kGetItem: {
        const Value obj = Eval(*e.args[0], f);
        return GetItem(obj, Eval(*e.args[1], f));
      }
      case Expr::Type::kSlice: {
        if (!e.args[0]) Fail("slices inside a tuple subscript are not supported");
        const Value obj = Eval(*e.args[0], f);
        const auto start = SliceBound(e.args[1].get(), f), stop = SliceBound(e.args[2].get(), f);
        return Slice(obj, start, stop, SliceBound(e.args[3].get(), f));
      }
      case Expr::Type::kCall: {
        const Value callee = Eval(*e.args[0], f);
        return CallValue(callee, EvalArgs(e, f));
      }
      case Expr::Type::kFilter: {
        const Value input = Eval(*e.args[0], f);
        return e.filter(input, EvalArgs(e, f));
      }
      case Expr::Type::kTest: {
        const Value input = Eval(*e.args[0], f);
        return Value::Bool(e.test(input, EvalArgs(e, f)) != e.negated);
      }
      case Expr::Type::kNot: return Value::Bool(!Truthy(Eval(*e.args[0], f)));
      case Expr::Type::kNeg: return Negate(Eval(*e.args[0], f));
      case Expr::Type::kPos: {
        const Value v = Eval(*e.args[0], f);
        if (v.is_undefined()) FailUndefined(v);
        if (!v.is_number()) Fail("bad operand type for unary +: '", v.TypeName(), "'");
        return v.is_bool() ? Value::Int(v.as_int()) : v;
      }
      case Expr::Type::kBinary: {
        const Value a = Eval(*e.args[0], f);
        return Arithmetic(e.name, a, Eval(*e.args[1], f));
      }
      case Expr::Type::kConcat: {
        std::string s;
        for (const auto& a : e.args) AppendText(s, ToStr(Eval(*a, f)));
        return Value::String(std::move(s));
      }
      case Expr::Type::kCompare: {
        Value left = Eval(*e.args[0], f);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value right = Eval(*e.args[i + 1], f);
          if (!Compare(e.ops[i], left, right)) return Value::Bool(false);
          left = std::move(right);
        }
        return Value::Bool(true);
      }
      case Expr::Type::kAnd: {
        Value a = Eval(*e.args[0], f);
        return Truthy(a) ? Eval(*e.args[1], f) : a;
      }
      case Expr::Type::kOr: {
        Value a = Eval(*e.args[0], f);
        return Truthy(a) ? a : Eval(*e.args[1], f);
      }
      case Expr::Type::kCondExpr:
        if (Truthy(Eval(*e.args[1], f))) return Eval(*e.args[0], f);
        if (e.args[2]) return Eval(*e.args[2], f);
        return Value::Undefined("the inline if-expression on line " + std::to_string(e.line) +
                                " evaluated to false and no else section was defined");
    }
    Fail("internal: unknown expression");
  }

  static bool Compare(const std::string& op, const Value& a, const Value& b) {
    if (op == "==") return Equal(a, b);
    if (op == "!=") return !Equal(a, b);
    if (op == "<") return Less(a, b);
    if (op == ">") return Less(b, a);
    if (op == "<=") return Less(a, b) || Equal(a, b);
    if (op == ">=") return Less(b, a) || Equal(a, b);
    if (op == "in") return Contains(b, a);
    return !Contains(b, a);  // notin
  }

  // The render budget of text/jinja/limits.h: every statement, expression and loop iteration
  // is a step; statements and expressions open at once are the nesting.
  void CountStep() {
    if (++steps_ > kMaxRenderSteps) {
      Fail("template render stopped after ", kMaxRenderSteps, " steps (statements, expressions and loop iterations)");
    }
  }
  class Nesting {
   public:
    explicit Nesting(Interpreter* in) : in_(in) {
      if (in_->nesting_ >= kMaxRenderDepth) Fail("template render nested more than ", kMaxRenderDepth, " levels deep");
      ++in_->nesting_;
    }
    ~Nesting() { --in_->nesting_; }
    Nesting(const Nesting&) = delete;
    Nesting& operator=(const Nesting&) = delete;

   private:
    Interpreter* in_;
  };

  int depth_ = 0;  // macro calls
  int nesting_ = 0;
  int64_t steps_ = 0;
  std::vector<FramePtr> macro_scopes_;
};

Value Macro::Call(const CallArgs& args) {
  const FramePtr closure = closure_.lock();
  if (!closure) Fail("macro '", name_, "' outlived the template render");
  return interp_->CallMacro(*def_, closure, name_, args);
}

}  // namespace

std::string Render(const Body& body, const std::vector<std::pair<std::string, Value>>& variables,
                   const GlobalOptions& options) {
  auto globals = std::make_shared<Frame>(nullptr);
  for (auto& [name, v] : Globals(options)) globals->Set(name, std::move(v));
  auto top = std::make_shared<Frame>(globals);
  for (const auto& [name, v] : variables) top->Set(name, v);
  // Template-level sets live in their own scope above the render variables, like jinja2's
  // context, so `set messages = messages[1:]` shadows rather than edits the input.
  auto scope = std::make_shared<Frame>(top);
  Interpreter interp;
  std::string out;
  interp.Exec(body, scope, out);
  return out;
}

}  // namespace dflash::jinja
