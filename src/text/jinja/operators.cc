// + - * / // % ** and `in` with Python's semantics: int arithmetic stays integral (overflow is an
// error rather than a wrong number), / is true division, // and % floor, str + Markup escapes.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "text/jinja/builtins.h"
#include "text/jinja/limits.h"
#include "text/jinja/py_string.h"

namespace dflash::jinja {

namespace {

[[noreturn]] void Unsupported(const std::string& op, const Value& a, const Value& b) {
  Fail("unsupported operand type(s) for ", op, ": '", a.TypeName(), "' and '", b.TypeName(), "'");
}

// a op b for int64 with Python's promise of an exact result: overflow is an error.
template <typename Op>
int64_t Checked(Op op, int64_t a, int64_t b) {
  int64_t r;
  if (op(a, b, &r)) Fail("integer overflow in template arithmetic");
  return r;
}
constexpr auto kAdd = [](int64_t a, int64_t b, int64_t* r) { return __builtin_add_overflow(a, b, r); };
constexpr auto kSub = [](int64_t a, int64_t b, int64_t* r) { return __builtin_sub_overflow(a, b, r); };
constexpr auto kMul = [](int64_t a, int64_t b, int64_t* r) { return __builtin_mul_overflow(a, b, r); };

// seq * n. The size is checked before anything is built: '' * 10**18 must not spin 10**18
// times, and a product of two large operands must not overflow past the check.
Value Repeat(const Value& seq, int64_t n) {
  const uint64_t count = n > 0 ? static_cast<uint64_t>(n) : 0;
  if (seq.is_string()) {
    const std::string& unit = seq.str();
    CheckRepetition(unit.size(), count, kMaxTextBytes, "string repetition (bytes)");
    std::string out;
    if (!unit.empty()) {
      out.reserve(unit.size() * count);
      for (uint64_t i = 0; i < count; ++i) out += unit;
    }
    return Value::String(std::move(out), seq.safe());
  }
  const List& unit = seq.items();
  CheckRepetition(unit.size(), count, kMaxListItems, "list repetition (items)");
  List out;
  if (!unit.empty()) {
    out.reserve(unit.size() * count);
    for (uint64_t i = 0; i < count; ++i) out.insert(out.end(), unit.begin(), unit.end());
  }
  return seq.is_tuple() ? Value::MakeTuple(std::move(out)) : Value::MakeList(std::move(out));
}

// CPython's float floor division and modulo (float_divmod).
void FloatDivMod(double x, double y, double* div_out, double* mod_out) {
  if (y == 0) Fail("float division by zero");
  double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0) {
    if ((y < 0) != (mod < 0)) {
      mod += y;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, y);
  }
  double floordiv;
  if (div != 0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, x / y);
  }
  *div_out = floordiv;
  *mod_out = mod;
}

Value IntPow(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) result = Checked(kMul, result, base);
    exp >>= 1;
    if (exp) base = Checked(kMul, base, base);
  }
  return Value::Int(result);
}

}  // namespace

Value Escape(const Value& v) {
  if (v.is_string() && v.safe()) return v;
  std::string out;
  for (char c : ToStr(v)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return Value::String(out, true);
}

Value Arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) FailUndefined(a);
  if (b.is_undefined()) FailUndefined(b);
  const bool ints = (a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool());
  const bool nums = a.is_number() && b.is_number();
  if (op == "+") {
    if (ints) return Value::Int(Checked(kAdd, a.as_int(), b.as_int()));
    if (nums) return Value::Float(a.as_float() + b.as_float());
    if (a.is_string() && b.is_string()) {
      // markupsafe: adding to a Markup string escapes the plain operand.
      if (a.safe() || b.safe()) return Value::String(Escape(a).str() + Escape(b).str(), true);
      return Value::String(a.str() + b.str());
    }
    if (a.kind() == b.kind() && a.is_sequence_like()) {
      List out = a.items();
      out.insert(out.end(), b.items().begin(), b.items().end());
      return a.is_tuple() ? Value::MakeTuple(std::move(out)) : Value::MakeList(std::move(out));
    }
    if (a.is_string() || b.is_string()) {
      Fail("can only concatenate ", a.TypeName(), " (not \"", b.TypeName(), "\") to ", a.TypeName(), " (use ~ to join text)");
    }
    Unsupported(op, a, b);
  }
  if (op == "-") {
    if (ints) return Value::Int(Checked(kSub, a.as_int(), b.as_int()));
    if (nums) return Value::Float(a.as_float() - b.as_float());
    Unsupported(op, a, b);
  }
  if (op == "*") {
    if (ints) return Value::Int(Checked(kMul, a.as_int(), b.as_int()));
    if (nums) return Value::Float(a.as_float() * b.as_float());
    if ((a.is_string() || a.is_sequence_like()) && (b.is_int() || b.is_bool())) return Repeat(a, b.as_int());
    if ((b.is_string() || b.is_sequence_like()) && (a.is_int() || a.is_bool())) return Repeat(b, a.as_int());
    Unsupported(op, a, b);
  }
  if (op == "/") {
    if (!nums) Unsupported(op, a, b);
    if (b.as_float() == 0) Fail("division by zero");
    return Value::Float(a.as_float() / b.as_float());
  }
  if (op == "//" || op == "%") {
    if (op == "%" && a.is_string()) {
      if (a.safe()) Fail("'%' formatting of a safe (Markup) string is not supported");
      return Value::String(PercentFormat(a.str(), b));
    }
    if (!nums) Unsupported(op, a, b);
    if (ints) {
      const int64_t x = a.as_int(), y = b.as_int();
      if (y == 0) Fail("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) Fail("integer overflow in template arithmetic");
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        m += y;
        q -= 1;
      }
      return Value::Int(op == "//" ? q : m);
    }
    double div, mod;
    FloatDivMod(a.as_float(), b.as_float(), &div, &mod);
    return Value::Float(op == "//" ? div : mod);
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) return IntPow(a.as_int(), b.as_int());
    if (!nums) Unsupported(op, a, b);
    const double x = a.as_float(), y = b.as_float();
    if (x == 0 && y < 0) Fail("0.0 cannot be raised to a negative power");
    if (x < 0 && y != std::floor(y)) Fail("a negative number raised to a fractional power is complex; not supported");
    return Value::Float(std::pow(x, y));
  }
  Fail("unknown operator ", op);
}

Value Negate(const Value& v) {
  if (v.is_undefined()) FailUndefined(v);
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == INT64_MIN) Fail("integer overflow in template arithmetic");
    return Value::Int(-v.as_int());
  }
  if (v.is_float()) return Value::Float(-v.as_float());
  Fail("bad operand type for unary -: '", v.TypeName(), "'");
}

bool Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined: return false;  // iterating an Undefined yields nothing
    case Value::Kind::kString:
      if (item.is_undefined()) FailUndefined(item);
      if (!item.is_string()) Fail("'in <string>' requires string as left operand, not ", item.TypeName());
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      for (const Value& v : container.items()) {
        if (Equal(v, item)) return true;
      }
      return false;
    case Value::Kind::kDict: return container.dict().Find(item) != nullptr;
    default: Fail("argument of type '", container.TypeName(), "' is not iterable");
  }
}

std::string PercentFormat(const std::string& format, const Value& args) {
  const List values = args.is_tuple() ? args.items() : List{args};
  const bool mapping = args.is_dict();
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    if (++i >= format.size()) Fail("'%' format: incomplete format");
    const Value* arg = nullptr;
    if (format[i] == '(') {
      const size_t close = format.find(')', i);
      if (!mapping || close == std::string::npos) Fail("'%' format: bad mapping key");
      arg = args.dict().Find(format.substr(i + 1, close - i - 1));
      if (!arg) Fail("'%' format: key '", format.substr(i + 1, close - i - 1), "' not found");
      i = close + 1;
    }
    std::string spec = "%";
    while (i < format.size() && std::string_view("-+ #0123456789.").find(format[i]) != std::string_view::npos) spec += format[i++];
    if (i >= format.size()) Fail("'%' format: incomplete format");
    for (size_t k = 0; k < spec.size(); ++k) {  // keep snprintf's output within buf
      if (spec[k] >= '1' && spec[k] <= '9' && std::strtol(spec.c_str() + k, nullptr, 10) > 300) {
        Fail("'%' format: width or precision too large");
      }
    }
    const char conv = format[i];
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (!arg) {
      if (mapping) arg = &args;
      else if (next < values.size()) arg = &values[next++];
      else Fail("'%' format: not enough arguments for format string");
    }
    char buf[512];
    if (conv == 's' || conv == 'r') {
      // Only a width (optionally left-aligned) is supported for text; it counts code points.
      const bool left = spec.find('-') != std::string::npos;
      const size_t width_at = spec.find_first_not_of("%-");
      const std::string digits = width_at == std::string::npos ? "" : spec.substr(width_at);
      if (digits.find_first_not_of("0123456789") != std::string::npos) {
        Fail("'%' format: flags/precision for %", std::string(1, conv), " are not supported");
      }
      const std::string text = conv == 's' ? ToStr(*arg) : Repr(*arg);
      const size_t width = digits.empty() ? 0 : std::stoul(digits);
      const size_t len = py::Length(text);
      const std::string pad = width > len ? std::string(width - len, ' ') : "";
      AppendText(out, left ? text + pad : pad + text);
    } else if (conv == 'd' || conv == 'i' || conv == 'x' || conv == 'X' || conv == 'o') {
      if (!arg->is_number()) Fail("'%' format: %", std::string(1, conv), " format requires a number, not ", arg->TypeName());
      const long long v = arg->is_float() ? static_cast<long long>(std::trunc(arg->as_float())) : arg->as_int();
      std::snprintf(buf, sizeof buf, (spec + "ll" + (conv == 'i' ? 'd' : conv)).c_str(), v);
      out += buf;
    } else if (conv == 'f' || conv == 'F' || conv == 'e' || conv == 'E' || conv == 'g' || conv == 'G') {
      if (!arg->is_number()) Fail("'%' format: %", std::string(1, conv), " format requires a number, not ", arg->TypeName());
      std::snprintf(buf, sizeof buf, (spec + conv).c_str(), arg->as_float());
      out += buf;
    } else {
      Fail("'%' format: unsupported format character '", std::string(1, conv), "'");
    }
  }
  if (!mapping && next < values.size()) Fail("'%' format: not all arguments converted during string formatting");
  return out;
}

}  // namespace dflash::jinja
