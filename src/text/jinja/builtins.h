// The built-in vocabulary of jinja2 as transformers sets it up: filters (x | trim), tests
// (x is defined), methods of Python objects (s.startswith('a'), d.items()), attribute and item
// access with the sandbox's rules, operators, and the global functions (range, namespace,
// raise_exception, strftime_now).
#pragma once

#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "text/jinja/value.h"

namespace dflash::jinja {

using FilterFn = Value (*)(const Value& input, const CallArgs& args);
using TestFn = bool (*)(const Value& input, const CallArgs& args);

// Throw Error naming the filter/test when jinja2 has no such thing or when we do not carry it,
// so a template that uses one fails when it is loaded, not mid-conversation.
FilterFn LookupFilter(const std::string& name);
TestFn LookupTest(const std::string& name);
bool HasFilter(const std::string& name);
bool HasTest(const std::string& name);

// Python-style argument binding: params in order, each with a default or required.
struct Param {
  const char* name;
  std::optional<Value> fallback;
};
std::vector<Value> BindArgs(const CallArgs& args, const std::string& what, const std::vector<Param>& params);

// An argument of the named type, else Error naming `what` and the type it got.
const std::string& RequireString(const Value& v, const std::string& what);
int64_t RequireInt(const Value& v, const std::string& what);

// obj.name and obj[key] with jinja2's sandboxed lookup order: attribute first for `.`, item
// first for `[]`, falling back to the other; dict methods win over keys of the same name.
Value GetAttr(const Value& obj, const std::string& name);
Value GetItem(const Value& obj, const Value& key);
// Python's getattr() alone, without the item fallback (the `attr` filter).
Value GetAttrOnly(const Value& obj, const std::string& name);
Value Slice(const Value& obj, const std::optional<int64_t>& start, const std::optional<int64_t>& stop,
            const std::optional<int64_t>& step);
// Calls a method of a str/list/dict value (the target of a bound method).
Value CallMethod(const Value& self, const std::string& name, const CallArgs& args);

// Operators with Python semantics: "+", "-", "*", "/", "//", "%", "**".
Value Arithmetic(const std::string& op, const Value& a, const Value& b);
Value Negate(const Value& v);
bool Contains(const Value& container, const Value& item);  // item in container
// markupsafe.escape: & < > " ' become entities; safe strings pass through.
Value Escape(const Value& v);
// Python's str % args.
std::string PercentFormat(const std::string& format, const Value& args);

// The global functions every template sees.
struct GlobalOptions {
  std::optional<std::tm> now;  // strftime_now's clock; the current local time when unset
};
std::vector<std::pair<std::string, Value>> Globals(const GlobalOptions& options);

// The error raise_exception() throws, so callers can tell a template's own refusal apart.
class TemplateRaised : public Error {
 public:
  explicit TemplateRaised(const std::string& message) : Error(message) {}
};

}  // namespace dflash::jinja
