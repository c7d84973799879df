#include "text/jinja/parser.h"

#include <algorithm>
#include <set>

#include "text/jinja/located_error.h"

namespace dflash::jinja {

namespace {

// Expression/statement depth and the height of one expression's tree; deeper input is rejected,
// not a stack overflow (parsing, evaluating and destroying a tree all recurse once per level).
constexpr int kMaxNesting = 200;

std::string Describe(const Token& t) {
  switch (t.type) {
    case Tok::kData: return "template text";
    case Tok::kVariableBegin: return "'{{'";
    case Tok::kVariableEnd: return "end of print statement '}}'";
    case Tok::kBlockBegin: return "'{%'";
    case Tok::kBlockEnd: return "end of statement block '%}'";
    case Tok::kName: return "'" + t.text + "'";
    case Tok::kString: return "string literal";
    case Tok::kInteger:
    case Tok::kFloat: return "number " + t.text;
    case Tok::kOperator: return "'" + t.text + "'";
    case Tok::kEnd: return "end of template";
  }
  return "token";
}

ExprPtr MakeExpr(Expr::Type type, int line) {
  auto e = std::make_unique<Expr>();
  e->type = type;
  e->line = line;
  return e;
}

ExprPtr Literal(Value v, int line) {
  ExprPtr e = MakeExpr(Expr::Type::kLiteral, line);
  e->literal = std::move(v);
  return e;
}

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  Body ParseTemplate() {
    Body body = Subparse({});
    if (Cur().type != Tok::kEnd) FailAt(Cur().line, "unexpected ", Describe(Cur()));
    return body;
  }

 private:
  // ---- token stream ----
  const Token& Cur() const { return t_[i_]; }
  const Token& Look() const { return t_[std::min(i_ + 1, t_.size() - 1)]; }
  const Token& Next() {
    const Token& t = t_[i_];
    if (i_ + 1 < t_.size()) ++i_;
    return t;
  }
  bool IsOp(const char* op) const { return Cur().type == Tok::kOperator && Cur().text == op; }
  bool IsName(const char* name) const { return Cur().type == Tok::kName && Cur().text == name; }
  bool SkipOp(const char* op) {
    if (!IsOp(op)) return false;
    Next();
    return true;
  }
  bool SkipName(const char* name) {
    if (!IsName(name)) return false;
    Next();
    return true;
  }
  void ExpectOp(const char* op) {
    if (!SkipOp(op)) FailAt(Cur().line, "expected '", op, "', got ", Describe(Cur()));
  }
  const Token& ExpectName() {
    if (Cur().type != Tok::kName) FailAt(Cur().line, "expected a name, got ", Describe(Cur()));
    return Next();
  }
  void Expect(Tok type, const char* what) {
    if (Cur().type != type) FailAt(Cur().line, "expected ", what, ", got ", Describe(Cur()));
    Next();
  }
  void ExpectBlockEnd() { Expect(Tok::kBlockEnd, "end of statement block '%}'"); }

  struct DepthGuard {
    explicit DepthGuard(Parser* p) : p(p) {
      if (++p->depth_ > kMaxNesting) FailAt(p->Cur().line, "template nested too deeply (more than ", kMaxNesting, " levels)");
    }
    ~DepthGuard() { --p->depth_; }
    Parser* p;
  };

  // Sets the height of a finished node from its children. Chains such as a.b.c... or
  // a + b + c... grow a tree in a loop, without deepening the parser's recursion, so the tree is
  // measured as it is built.
  ExprPtr Sealed(ExprPtr e) {
    auto take = [&e](const ExprPtr& child) {
      if (child) e->height = std::max(e->height, child->height + 1);
    };
    for (const ExprPtr& a : e->args) take(a);
    for (const auto& [key, v] : e->kwargs) take(v);
    take(e->star_args);
    take(e->star_kwargs);
    if (e->height > kMaxNesting) FailAt(e->line, "expression nested too deeply (more than ", kMaxNesting, " levels)");
    return e;
  }

  // ---- statements ----

  // Parses until a block tag whose name is in `end_tags`, leaving the stream at that name.
  Body Subparse(const std::vector<std::string>& end_tags) {
    DepthGuard guard(this);
    Body body;
    while (true) {
      const Token& t = Cur();
      if (t.type == Tok::kEnd) return body;
      if (t.type == Tok::kData) {
        auto s = NewStmt(Stmt::Type::kText, t.line);
        s->text = t.text;
        body.push_back(std::move(s));
        Next();
      } else if (t.type == Tok::kVariableBegin) {
        Next();
        auto s = NewStmt(Stmt::Type::kPrint, t.line);
        s->exprs.push_back(ParseTuple(true, {}, false));
        Expect(Tok::kVariableEnd, "end of print statement '}}'");
        body.push_back(std::move(s));
      } else if (t.type == Tok::kBlockBegin) {
        Next();
        if (Cur().type == Tok::kName &&
            std::find(end_tags.begin(), end_tags.end(), Cur().text) != end_tags.end()) {
          return body;
        }
        body.push_back(ParseStatement());
        ExpectBlockEnd();
      } else {
        FailAt(t.line, "unexpected ", Describe(t));
      }
    }
  }

  // Body of a block statement: expects '%}', parses up to one of `end_tags` (left current).
  Body ParseBody(const std::vector<std::string>& end_tags, const std::string& opener, int open_line) {
    ExpectBlockEnd();
    Body body = Subparse(end_tags);
    if (Cur().type == Tok::kEnd) {
      std::string want;
      for (size_t k = 0; k < end_tags.size(); ++k) want += (k ? " or '" : "'") + end_tags[k] + "'";
      FailAt(open_line, "unexpected end of template: looking for ", want, " to close '", opener, "' from line ",
             open_line);
    }
    return body;
  }

  std::unique_ptr<Stmt> NewStmt(Stmt::Type type, int line) {
    auto s = std::make_unique<Stmt>();
    s->type = type;
    s->line = line;
    return s;
  }

  std::unique_ptr<Stmt> ParseStatement() {
    const Token& tag = Cur();
    if (tag.type != Tok::kName) FailAt(tag.line, "tag name expected, got ", Describe(tag));
    const std::string name = tag.text;
    const int line = tag.line;
    if (name == "for") return ParseFor();
    if (name == "if") return ParseIf();
    if (name == "set") return ParseSet();
    if (name == "macro") return ParseMacro();
    if (name == "call") return ParseCallBlock();
    if (name == "filter") return ParseFilterBlock();
    if (name == "with") return ParseWith();
    if (name == "print") {
      Next();
      auto s = NewStmt(Stmt::Type::kPrint, line);
      while (Cur().type != Tok::kBlockEnd) {
        if (!s->exprs.empty()) ExpectOp(",");
        s->exprs.push_back(ParseExpression(true));
      }
      return s;
    }
    if (name == "break" || name == "continue") {
      Next();
      if (loop_depth_ == 0) FailAt(line, "'", name, "' outside of a for loop");
      return NewStmt(name == "break" ? Stmt::Type::kBreak : Stmt::Type::kContinue, line);
    }
    if (name == "generation") {  // transformers' assistant-mask marker: renders its body
      Next();
      auto s = NewStmt(Stmt::Type::kScope, line);
      s->body = ParseBody({"endgeneration"}, name, line);
      Next();
      return s;
    }
    static const std::set<std::string> kUnsupported = {"block", "extends", "include", "import", "from",
                                                       "autoescape", "do", "trans", "pluralize"};
    if (kUnsupported.count(name)) FailAt(line, "tag '{% ", name, " %}' is not supported by dflash's template engine");
    static const std::set<std::string> kClosers = {"endfor", "endif", "elif", "else", "endset", "endmacro",
                                                   "endcall", "endfilter", "endwith", "endgeneration", "endraw"};
    if (kClosers.count(name)) FailAt(line, "unexpected '{% ", name, " %}' with no open block it could close");
    FailAt(line, "unknown tag '{% ", name, " %}'");
  }

  std::unique_ptr<Stmt> ParseFor() {
    const int line = Next().line;
    auto s = NewStmt(Stmt::Type::kFor, line);
    s->target = ParseTarget(false, "in");
    if (!SkipName("in")) FailAt(Cur().line, "expected 'in' in for loop, got ", Describe(Cur()));
    s->expr = ParseTuple(false, {"recursive"}, false);
    if (SkipName("if")) s->cond = ParseExpression(true);
    if (IsName("recursive")) FailAt(Cur().line, "recursive for loops are not supported by dflash's template engine");
    ++loop_depth_;
    s->body = ParseBody({"endfor", "else"}, "for", line);
    --loop_depth_;
    if (Next().text == "else") {
      s->else_body = ParseBody({"endfor"}, "for", line);
      Next();
    }
    return s;
  }

  std::unique_ptr<Stmt> ParseIf() {
    const int line = Next().line;
    auto s = NewStmt(Stmt::Type::kIf, line);
    ExprPtr cond = ParseTuple(false, {}, false);
    while (true) {
      Body body = ParseBody({"elif", "else", "endif"}, "if", line);
      s->branches.emplace_back(std::move(cond), std::move(body));
      const std::string tag = Next().text;
      if (tag == "elif") {
        cond = ParseTuple(false, {}, false);
        continue;
      }
      if (tag == "else") {
        s->else_body = ParseBody({"endif"}, "if", line);
        Next();
      }
      return s;
    }
  }

  std::unique_ptr<Stmt> ParseSet() {
    const int line = Next().line;
    Target target = ParseTarget(true, "");
    if (SkipOp("=")) {
      auto s = NewStmt(Stmt::Type::kSet, line);
      s->target = std::move(target);
      s->expr = ParseTuple(true, {}, false);
      return s;
    }
    auto s = NewStmt(Stmt::Type::kSetBlock, line);
    if (target.type != Target::Type::kName) FailAt(line, "block set needs a plain variable name");
    s->target = std::move(target);
    if (IsOp("|")) s->expr = ParseFilterChain(nullptr, false);
    s->body = ParseBody({"endset"}, "set", line);
    Next();
    return s;
  }

  void ParseSignature(Stmt* s) {
    ExpectOp("(");
    while (!IsOp(")")) {
      if (!s->params.empty()) ExpectOp(",");
      MacroParam p;
      p.name = ExpectName().text;
      if (SkipOp("=")) p.fallback = ParseExpression(true);
      else if (!s->params.empty() && s->params.back().fallback) FailAt(Cur().line, "non-default argument follows default argument");
      s->params.push_back(std::move(p));
    }
    ExpectOp(")");
  }

  // Records which of varargs/kwargs/caller the body of a macro (or call block) reads.
  void ParseMacroBody(Stmt* s, const std::string& end_tag, const std::string& opener) {
    std::set<std::string> names;
    name_sinks_.push_back(&names);
    const int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    s->body = ParseBody({end_tag}, opener, s->line);
    loop_depth_ = saved_loop_depth;
    name_sinks_.pop_back();
    Next();
    s->uses_varargs = names.count("varargs") > 0;
    s->uses_kwargs = names.count("kwargs") > 0;
    s->uses_caller = names.count("caller") > 0;
  }

  std::unique_ptr<Stmt> ParseMacro() {
    const int line = Next().line;
    auto s = NewStmt(Stmt::Type::kMacro, line);
    s->text = ExpectName().text;
    ParseSignature(s.get());
    ParseMacroBody(s.get(), "endmacro", "macro");
    return s;
  }

  std::unique_ptr<Stmt> ParseCallBlock() {
    const int line = Next().line;
    auto s = NewStmt(Stmt::Type::kCallBlock, line);
    if (IsOp("(")) ParseSignature(s.get());
    s->expr = ParseExpression(true);
    if (s->expr->type != Expr::Type::kCall) FailAt(line, "{% call %} needs a macro call, like {% call m() %}");
    ParseMacroBody(s.get(), "endcall", "call");
    return s;
  }

  std::unique_ptr<Stmt> ParseFilterBlock() {
    const int line = Next().line;
    auto s = NewStmt(Stmt::Type::kFilterBlock, line);
    s->expr = ParseFilterChain(nullptr, true);
    s->body = ParseBody({"endfilter"}, "filter", line);
    Next();
    return s;
  }

  std::unique_ptr<Stmt> ParseWith() {
    const int line = Next().line;
    auto s = NewStmt(Stmt::Type::kWith, line);
    while (Cur().type != Tok::kBlockEnd) {
      if (!s->targets.empty()) ExpectOp(",");
      s->targets.push_back(ParseTarget(false, ""));
      ExpectOp("=");
      s->exprs.push_back(ParseExpression(true));
    }
    s->body = ParseBody({"endwith"}, "with", line);
    Next();
    return s;
  }

  // x | a, b | (a, b) | ns.attr (only where with_namespace, i.e. in set).
  Target ParseTarget(bool with_namespace, const char* stop_name) {
    std::vector<Target> items;
    bool tuple = false;
    while (true) {
      if (!items.empty()) {
        if (!SkipOp(",")) break;
        tuple = true;
      }
      if (Cur().type == Tok::kBlockEnd || IsOp("=") || IsOp(")") || (*stop_name && IsName(stop_name))) break;
      items.push_back(ParseTargetItem(with_namespace));
    }
    if (items.empty()) FailAt(Cur().line, "expected an assignment target, got ", Describe(Cur()));
    if (!tuple) return std::move(items[0]);
    Target t;
    t.type = Target::Type::kTuple;
    t.line = items[0].line;
    t.items = std::move(items);
    return t;
  }

  Target ParseTargetItem(bool with_namespace) {
    DepthGuard guard(this);
    const int line = Cur().line;
    if (SkipOp("(")) {
      Target inner = ParseTarget(false, "");
      ExpectOp(")");
      return inner;
    }
    Target t;
    t.line = line;
    t.name = ExpectName().text;
    static const std::set<std::string> kConstants = {"true", "false", "none", "True", "False", "None"};
    if (kConstants.count(t.name)) FailAt(line, "can't assign to the constant '", t.name, "'");
    if (with_namespace && SkipOp(".")) {
      t.type = Target::Type::kAttr;
      t.attr = ExpectName().text;
    }
    return t;
  }

  // ---- expressions ----

  bool IsTupleEnd(const std::vector<std::string>& extra_end) const {
    const Token& t = Cur();
    if (t.type == Tok::kVariableEnd || t.type == Tok::kBlockEnd || t.type == Tok::kEnd) return true;
    if (t.type == Tok::kOperator && t.text == ")") return true;
    return t.type == Tok::kName && std::find(extra_end.begin(), extra_end.end(), t.text) != extra_end.end();
  }

  // a, b, c -> tuple; a single expression stays itself.
  ExprPtr ParseTuple(bool with_condexpr, const std::vector<std::string>& extra_end, bool explicit_parentheses) {
    const int line = Cur().line;
    std::vector<ExprPtr> items;
    bool tuple = false;
    while (true) {
      if (!items.empty()) ExpectOp(",");
      if (IsTupleEnd(extra_end)) break;
      items.push_back(ParseExpression(with_condexpr));
      if (IsOp(",")) tuple = true;
      else break;
    }
    if (!tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parentheses) FailAt(Cur().line, "expected an expression, got ", Describe(Cur()));
    }
    ExprPtr e = MakeExpr(Expr::Type::kTuple, line);
    e->args = std::move(items);
    return Sealed(std::move(e));
  }

  ExprPtr ParseExpression(bool with_condexpr) { return with_condexpr ? ParseCondExpr() : ParseOr(); }

  ExprPtr ParseCondExpr() {
    DepthGuard guard(this);
    ExprPtr expr = ParseOr();
    while (IsName("if")) {
      const int line = Next().line;
      ExprPtr cond = ParseOr();
      ExprPtr otherwise = SkipName("else") ? ParseCondExpr() : nullptr;
      ExprPtr e = MakeExpr(Expr::Type::kCondExpr, line);
      e->args.push_back(std::move(expr));
      e->args.push_back(std::move(cond));
      e->args.push_back(std::move(otherwise));
      expr = Sealed(std::move(e));
    }
    return expr;
  }

  ExprPtr Binary(Expr::Type type, ExprPtr a, ExprPtr b, int line, std::string op = "") {
    ExprPtr e = MakeExpr(type, line);
    e->name = std::move(op);
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return Sealed(std::move(e));
  }

  ExprPtr ParseOr() {
    ExprPtr left = ParseAnd();
    while (IsName("or")) {
      const int line = Next().line;
      left = Binary(Expr::Type::kOr, std::move(left), ParseAnd(), line);
    }
    return left;
  }

  ExprPtr ParseAnd() {
    ExprPtr left = ParseNot();
    while (IsName("and")) {
      const int line = Next().line;
      left = Binary(Expr::Type::kAnd, std::move(left), ParseNot(), line);
    }
    return left;
  }

  ExprPtr ParseNot() {
    if (IsName("not")) {
      DepthGuard guard(this);
      const int line = Next().line;
      ExprPtr e = MakeExpr(Expr::Type::kNot, line);
      e->args.push_back(ParseNot());
      return Sealed(std::move(e));
    }
    return ParseCompare();
  }

  ExprPtr ParseCompare() {
    const int line = Cur().line;
    ExprPtr first = ParseMath1();
    ExprPtr e;
    while (true) {
      std::string op;
      if (Cur().type == Tok::kOperator &&
          (Cur().text == "==" || Cur().text == "!=" || Cur().text == "<" || Cur().text == "<=" ||
           Cur().text == ">" || Cur().text == ">=")) {
        op = Next().text;
      } else if (SkipName("in")) {
        op = "in";
      } else if (IsName("not") && Look().type == Tok::kName && Look().text == "in") {
        Next();
        Next();
        op = "notin";
      } else {
        break;
      }
      if (!e) {
        e = MakeExpr(Expr::Type::kCompare, line);
        e->args.push_back(std::move(first));
      }
      e->ops.push_back(op);
      e->args.push_back(ParseMath1());
    }
    return e ? Sealed(std::move(e)) : std::move(first);
  }

  ExprPtr ParseMath1() {
    ExprPtr left = ParseConcat();
    while (IsOp("+") || IsOp("-")) {
      const Token& op = Next();
      left = Binary(Expr::Type::kBinary, std::move(left), ParseConcat(), op.line, op.text);
    }
    return left;
  }

  ExprPtr ParseConcat() {
    const int line = Cur().line;
    ExprPtr first = ParseMath2();
    if (!IsOp("~")) return first;
    ExprPtr e = MakeExpr(Expr::Type::kConcat, line);
    e->args.push_back(std::move(first));
    while (SkipOp("~")) e->args.push_back(ParseMath2());
    return Sealed(std::move(e));
  }

  ExprPtr ParseMath2() {
    ExprPtr left = ParsePow();
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const Token& op = Next();
      left = Binary(Expr::Type::kBinary, std::move(left), ParsePow(), op.line, op.text);
    }
    return left;
  }

  ExprPtr ParsePow() {
    ExprPtr left = ParseUnary(true);
    while (IsOp("**")) {
      const int line = Next().line;
      left = Binary(Expr::Type::kBinary, std::move(left), ParseUnary(true), line, "**");
    }
    return left;
  }

  ExprPtr ParseUnary(bool with_filter) {
    DepthGuard guard(this);
    const int line = Cur().line;
    ExprPtr node;
    if (SkipOp("-")) {
      node = MakeExpr(Expr::Type::kNeg, line);
      node->args.push_back(ParseUnary(false));
      node = Sealed(std::move(node));
    } else if (SkipOp("+")) {
      node = MakeExpr(Expr::Type::kPos, line);
      node->args.push_back(ParseUnary(false));
      node = Sealed(std::move(node));
    } else {
      node = ParsePrimary();
    }
    node = ParsePostfix(std::move(node));
    if (with_filter) node = ParseFilterExpr(std::move(node));
    return node;
  }

  ExprPtr ParsePrimary() {
    DepthGuard guard(this);
    const Token& t = Cur();
    const int line = t.line;
    if (t.type == Tok::kName) {
      Next();
      if (t.text == "true" || t.text == "True") return Literal(Value::Bool(true), line);
      if (t.text == "false" || t.text == "False") return Literal(Value::Bool(false), line);
      if (t.text == "none" || t.text == "None") return Literal(Value::None(), line);
      for (auto* sink : name_sinks_) sink->insert(t.text);
      ExprPtr e = MakeExpr(Expr::Type::kName, line);
      e->name = t.text;
      return e;
    }
    if (t.type == Tok::kString) {
      std::string s;
      while (Cur().type == Tok::kString) s += Next().text;  // adjacent literals concatenate
      return Literal(Value::String(std::move(s)), line);
    }
    if (t.type == Tok::kInteger || t.type == Tok::kFloat) {
      Next();
      return Literal(t.type == Tok::kInteger ? Value::Int(t.int_value) : Value::Float(t.float_value), line);
    }
    if (SkipOp("(")) {
      ExprPtr e = ParseTuple(true, {}, true);
      ExpectOp(")");
      return e;
    }
    if (SkipOp("[")) {
      ExprPtr e = MakeExpr(Expr::Type::kList, line);
      while (!IsOp("]")) {
        if (!e->args.empty()) ExpectOp(",");
        if (IsOp("]")) break;
        e->args.push_back(ParseExpression(true));
      }
      ExpectOp("]");
      return Sealed(std::move(e));
    }
    if (SkipOp("{")) {
      ExprPtr e = MakeExpr(Expr::Type::kDict, line);
      while (!IsOp("}")) {
        if (!e->args.empty()) ExpectOp(",");
        if (IsOp("}")) break;
        e->args.push_back(ParseExpression(true));
        ExpectOp(":");
        e->args.push_back(ParseExpression(true));
      }
      ExpectOp("}");
      return Sealed(std::move(e));
    }
    FailAt(line, "unexpected ", Describe(t));
  }

  ExprPtr ParsePostfix(ExprPtr node) {
    while (true) {
      if (IsOp(".") || IsOp("[")) node = ParseSubscript(std::move(node));
      else if (IsOp("(")) node = ParseCall(std::move(node));
      else return node;
    }
  }

  ExprPtr ParseFilterExpr(ExprPtr node) {
    while (true) {
      if (IsOp("|")) node = ParseFilterChain(std::move(node), false);
      else if (IsName("is")) node = ParseTest(std::move(node));
      else if (IsOp("(")) node = ParseCall(std::move(node));
      else return node;
    }
  }

  ExprPtr ParseSubscript(ExprPtr node) {
    const Token& t = Next();
    if (t.text == ".") {
      const Token& attr = Cur();
      if (attr.type == Tok::kName) {
        Next();
        ExprPtr e = MakeExpr(Expr::Type::kGetAttr, t.line);
        e->name = attr.text;
        e->args.push_back(std::move(node));
        return Sealed(std::move(e));
      }
      if (attr.type == Tok::kInteger) {
        Next();
        ExprPtr e = MakeExpr(Expr::Type::kGetItem, t.line);
        e->args.push_back(std::move(node));
        e->args.push_back(Literal(Value::Int(attr.int_value), t.line));
        return Sealed(std::move(e));
      }
      FailAt(attr.line, "expected a name or number after '.', got ", Describe(attr));
    }
    // '[' subscript or slice ']'
    std::vector<ExprPtr> subs;
    while (!IsOp("]")) {
      if (!subs.empty()) ExpectOp(",");
      subs.push_back(ParseSubscribed(t.line));
    }
    ExpectOp("]");
    if (subs.empty()) FailAt(t.line, "expected a subscript inside '[]'");
    ExprPtr key;
    if (subs.size() == 1) {
      key = std::move(subs[0]);
    } else {
      key = MakeExpr(Expr::Type::kTuple, t.line);
      key->args = std::move(subs);
      key = Sealed(std::move(key));
    }
    if (key->type == Expr::Type::kSlice) {
      key->args[0] = std::move(node);
      return Sealed(std::move(key));
    }
    ExprPtr e = MakeExpr(Expr::Type::kGetItem, t.line);
    e->args.push_back(std::move(node));
    e->args.push_back(std::move(key));
    return Sealed(std::move(e));
  }

  // One subscript: an expression or a slice start:stop:step. A slice comes back as kSlice
  // with args[0] reserved for the sliced object.
  ExprPtr ParseSubscribed(int line) {
    ExprPtr start;
    if (!IsOp(":")) {
      start = ParseExpression(true);
      if (!IsOp(":")) return start;
    }
    Next();  // ':'
    ExprPtr e = MakeExpr(Expr::Type::kSlice, line);
    e->args.push_back(nullptr);
    e->args.push_back(std::move(start));
    e->args.push_back(IsOp(":") || IsOp("]") || IsOp(",") ? nullptr : ParseExpression(true));
    ExprPtr step;
    if (SkipOp(":") && !IsOp("]") && !IsOp(",")) step = ParseExpression(true);
    e->args.push_back(std::move(step));
    return Sealed(std::move(e));
  }

  // (a, b, key=c, *args, **kwargs) into e->args (after any args already there) and e->kwargs.
  void ParseCallArgs(Expr* e) {
    ExpectOp("(");
    bool first = true;
    while (!IsOp(")")) {
      if (!first) {
        ExpectOp(",");
        if (IsOp(")")) break;
      }
      first = false;
      if (SkipOp("*")) {
        if (e->star_args || e->star_kwargs) FailAt(Cur().line, "invalid syntax for function call expression");
        e->star_args = ParseExpression(true);
      } else if (SkipOp("**")) {
        if (e->star_kwargs) FailAt(Cur().line, "invalid syntax for function call expression");
        e->star_kwargs = ParseExpression(true);
      } else if (Cur().type == Tok::kName && Look().type == Tok::kOperator && Look().text == "=") {
        if (e->star_kwargs) FailAt(Cur().line, "invalid syntax for function call expression");
        std::string key = Next().text;
        Next();
        e->kwargs.emplace_back(std::move(key), ParseExpression(true));
      } else {
        if (e->star_args || e->star_kwargs || !e->kwargs.empty()) {
          FailAt(Cur().line, "invalid syntax for function call expression (positional argument after keyword)");
        }
        e->args.push_back(ParseExpression(true));
      }
    }
    ExpectOp(")");
  }

  ExprPtr ParseCall(ExprPtr callee) {
    ExprPtr e = MakeExpr(Expr::Type::kCall, Cur().line);
    e->args.push_back(std::move(callee));
    ParseCallArgs(e.get());
    return Sealed(std::move(e));
  }

  std::string ParseDottedName() {
    std::string name = ExpectName().text;
    while (IsOp(".") && Look().type == Tok::kName) {
      Next();
      name += "." + Next().text;
    }
    return name;
  }

  // node | f | g(args); node is null for {% filter %} and {% set x | f %} (start_inline: no
  // leading '|').
  ExprPtr ParseFilterChain(ExprPtr node, bool start_inline) {
    while (IsOp("|") || start_inline) {
      if (!start_inline) Next();
      start_inline = false;
      const int line = Cur().line;
      ExprPtr e = MakeExpr(Expr::Type::kFilter, line);
      e->name = ParseDottedName();
      try {
        e->filter = LookupFilter(e->name);
      } catch (const Error& err) {
        FailAt(line, err.what());
      }
      e->args.push_back(std::move(node));
      if (IsOp("(")) ParseCallArgs(e.get());
      node = Sealed(std::move(e));
    }
    return node;
  }

  ExprPtr ParseTest(ExprPtr node) {
    const int line = Next().line;  // 'is'
    ExprPtr e = MakeExpr(Expr::Type::kTest, line);
    e->negated = SkipName("not");
    e->name = ParseDottedName();
    try {
      e->test = LookupTest(e->name);
    } catch (const Error& err) {
      FailAt(line, err.what());
    }
    e->args.push_back(std::move(node));
    const Token& t = Cur();
    if (IsOp("(")) {
      ParseCallArgs(e.get());
    } else if ((t.type == Tok::kName || t.type == Tok::kString || t.type == Tok::kInteger || t.type == Tok::kFloat ||
                IsOp("[") || IsOp("{")) &&
               !IsName("else") && !IsName("or") && !IsName("and")) {
      if (IsName("is")) FailAt(t.line, "you cannot chain multiple tests with 'is'");
      // One argument without parentheses: `x is divisibleby 3`, `x is sameas false`.
      e->args.push_back(ParsePostfix(ParsePrimary()));
    }
    return Sealed(std::move(e));
  }

  const std::vector<Token>& t_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  std::vector<std::set<std::string>*> name_sinks_;
};

}  // namespace

Body Parse(const std::vector<Token>& tokens) { return Parser(tokens).ParseTemplate(); }

}  // namespace dflash::jinja
