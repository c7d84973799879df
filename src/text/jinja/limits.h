// Bounds on what one template render may build or do. A chat template comes from a model
// download and its variables from request bodies, so both are untrusted: each runaway (deep
// nesting, huge repetition, a loop that never ends) stops with an Error naming its bound, never
// with a crash, a hang or an allocation that takes the process down. Every bound sits far above
// what real chat templates need (tests/template_limits_test.cc renders them all within it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dflash::jinja {

// Levels of lists/dicts in one value, from JSON or built by a template. Tool schemas nest under
// 20 levels and tojson already refused 512; every walk over a value (repr, ==, tojson, its
// destructor) recurses once per level, and 512 levels keep those walks far inside any stack.
constexpr int kMaxValueDepth = 512;

// Bytes of one string, the rendered prompt included: four times the server's default request
// body limit (8 MiB), so any conversation it accepts still renders, and some 60 times the
// longest context of the supported models (128k tokens are about 0.5 MiB of text).
constexpr size_t kMaxTextBytes = size_t{32} << 20;

// Items of one list built from a count (repetition, batch) or from a string's characters: ten
// times jinja2's own MAX_RANGE. A million values take about 50 MiB.
constexpr size_t kMaxListItems = 1'000'000;

// Statements run, expressions evaluated and loop iterations in one render. The shipped templates
// take under 2,000 for the test conversations (well under a hundred per message); ten million
// take about a second and a half, so a loop that cannot end stops before a client gives up.
constexpr int64_t kMaxRenderSteps = 10'000'000;

// Statements and expressions open at once while rendering, macro calls included. The parser
// keeps one expression or block within 200 levels, so only recursion gets here. A level takes
// about 0.5 KiB of stack in a release build but about 6 KiB under ASan (measured: some 1,200
// levels fit in its 8 MiB main stack, 1,500 overflowed it), so 1000 levels keep every build
// inside the 8 MiB of a main thread or a default pthread.
constexpr int kMaxRenderDepth = 1000;

// Fails naming `what` unless `count` repetitions of `unit` items stay within `limit`. Divides
// rather than multiplies, so no product can overflow.
void CheckRepetition(uint64_t unit, uint64_t count, uint64_t limit, const char* what);

// out += piece, failing first when out would grow past kMaxTextBytes.
void AppendText(std::string& out, std::string_view piece);

}  // namespace dflash::jinja
