// The parsed template: expression and statement trees. Nodes are plain structs with the line they
// came from, so every runtime error can name it.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/builtins.h"
#include "text/jinja/value.h"

namespace dflash::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Type {
    kLiteral,   // literal
    kName,      // name
    kList,      // [args...]
    kTuple,     // (args...)
    kDict,      // {args[0]: args[1], args[2]: args[3], ...}
    kGetAttr,   // args[0].name
    kGetItem,   // args[0][args[1]]
    kSlice,     // args[0][args[1]:args[2]:args[3]], absent parts are null
    kCall,      // args[0](args[1...], kwargs)
    kFilter,    // args[0] | name(args[1...], kwargs); args[0] is null inside {% filter %} / {% set x | f %}
    kTest,      // args[0] is [not] name(args[1...], kwargs)
    kNot,       // not args[0]
    kNeg,       // -args[0]
    kPos,       // +args[0]
    kBinary,    // args[0] <name> args[1] for + - * / // % **
    kConcat,    // args[0] ~ args[1] ~ ...
    kCompare,   // args[0] ops[0] args[1] ops[1] args[2] ... (== != < <= > >= in notin)
    kAnd,       // args[0] and args[1]
    kOr,        // args[0] or args[1]
    kCondExpr,  // args[0] if args[1] else args[2] (args[2] may be null)
  };

  Type type;
  int line;
  Value literal;
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  ExprPtr star_args, star_kwargs;  // f(*a, **k)
  std::vector<std::string> ops;
  bool negated = false;            // kTest: "is not"
  FilterFn filter = nullptr;       // kFilter, resolved at parse time
  TestFn test = nullptr;           // kTest, resolved at parse time
  int height = 1;                  // levels of this tree, itself included; the parser bounds it
};

// An assignment target: x, (a, b), or ns.attr.
struct Target {
  enum class Type { kName, kTuple, kAttr };
  Type type = Type::kName;
  std::string name, attr;
  std::vector<Target> items;
  int line = 0;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct MacroParam {
  std::string name;
  ExprPtr fallback;  // null when required
};

struct Stmt {
  enum class Type {
    kText,         // text
    kPrint,        // {{ expr }} / {% print a, b %}: exprs
    kIf,           // branches (cond, body); else_body
    kFor,          // for target in expr [if cond]: body; else_body
    kSet,          // set target = expr
    kSetBlock,     // set target [| filter]: body; endset (filter in expr)
    kMacro,        // macro name(params): body
    kCallBlock,    // call(params) expr: body
    kFilterBlock,  // filter expr: body
    kWith,         // with targets = exprs: body
    kScope,        // {% generation %}: body rendered in a scope of its own
    kBreak,
    kContinue,
  };

  Type type;
  int line;
  std::string text;  // kText; kMacro: the macro's name
  ExprPtr expr;
  ExprPtr cond;
  std::vector<ExprPtr> exprs;
  Target target;
  std::vector<Target> targets;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body, else_body;
  std::vector<MacroParam> params;
  // Which of the implicit macro variables the body reads; Python errors on surplus arguments
  // unless the body reads varargs/kwargs, and only accepts caller= when it reads caller.
  bool uses_varargs = false, uses_kwargs = false, uses_caller = false;
};

}  // namespace dflash::jinja
