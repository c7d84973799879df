#!/usr/bin/env python3
"""Golden files for dflash's chat-template engine, rendered by transformers itself.

Writes tests/goldens/templates/:
  cases.json        the conversations (messages, tools) every template is rendered over
  <template>.json   per shipped template: special tokens and, per (case, add_generation_prompt,
                    kwargs), the prompt transformers renders or the error it raises
  snippets.json     small templates exercising one interpreter feature each, with the output
                    (or error) of transformers' jinja2 environment
  tokenizer_qwen3.json  tokenizer.apply_chat_template(tokenize=False and True) on the shipped Qwen3
                    tokenizer directory, for the load-from-model-dir path

Run with the reference venv:
  .venv-ref/bin/python tools/make_template_goldens.py
(the templates and the Qwen3 tokenizer default to the vendored copies under tests/data)
"""

import argparse
import copy
import datetime
import json
import os

from transformers import AutoTokenizer
from transformers.utils.chat_template_utils import _compile_jinja_template, render_jinja_template

# strftime_now() is the one input transformers takes from the clock; pin it.
NOW = datetime.datetime(2025, 3, 14, 9, 26, 53)


def strftime_now(fmt):
    return NOW.strftime(fmt)


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a location.",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "City name, e.g. \"Paris\""},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit",
                         "default": "celsius"},
            },
            "required": ["location"],
        },
    },
}

SEARCH = {
    "type": "function",
    "function": {
        "name": "search_docs",
        "description": "Search the documentation.\nReturns the best matches first.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Free text <query> & keywords"},
                "top_k": {"type": "integer", "description": "How many results", "minimum": 1, "default": 3},
                "tags": {"type": "array", "items": {"type": "string"}, "description": "Only these tags"},
                "options": {"type": "object", "description": "Search options",
                            "properties": {"lang": {"type": "string", "description": "Language code"},
                                           "fuzzy": {"type": "boolean"}}},
                "score": {"type": "number", "nullable": True, "default": 0.5},
            },
            "required": ["query"],
        },
    },
}

TOOLS = [WEATHER, SEARCH]


def call(call_id, name, arguments):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


CASES = {
    "user_only": {"messages": [{"role": "user", "content": "Hello! What's 2+2?"}]},
    "system_user": {"messages": [
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": "Name a prime number."}]},
    "multi_turn": {"messages": [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke."}]},
    "multi_turn_no_system": {"messages": [
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": "Paris."},
        {"role": "user", "content": "And of Italy?"}]},
    "ends_with_assistant": {"messages": [
        {"role": "user", "content": "Say hi."},
        {"role": "assistant", "content": "Hi!"}]},
    "reasoning_history": {"messages": [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4.", "reasoning_content": "Two plus two makes four."},
        {"role": "user", "content": "And 3+3?"}]},
    "reasoning_last": {"messages": [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4.", "reasoning_content": "Two plus two makes four."}]},
    "think_in_content": {"messages": [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "<think>\nAdd them.\n</think>\n\nIt is 4."},
        {"role": "user", "content": "Thanks"}]},
    "thinking_field": {"messages": [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4.", "thinking": "Simple arithmetic."}]},
    "tools_user": {"tools": TOOLS, "messages": [
        {"role": "user", "content": "What's the weather in Paris?"}]},
    "tools_system_user": {"tools": TOOLS, "messages": [
        {"role": "system", "content": "Use tools when helpful."},
        {"role": "user", "content": "Find docs about streaming."}]},
    "tool_call_roundtrip": {"tools": TOOLS, "messages": [
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": "",
         "tool_calls": [call("call_1", "get_weather", {"location": "Paris", "unit": "celsius"})]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
         "content": "{\"temperature\": 18, \"condition\": \"sunny\"}"}]},
    "tool_call_with_content": {"tools": TOOLS, "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": "Let me check.",
         "tool_calls": [call("call_7", "get_weather", {"location": "Oslo"})]},
        {"role": "tool", "tool_call_id": "call_7", "name": "get_weather", "content": "-3 C, snow"},
        {"role": "assistant", "content": "It is -3 °C and snowing in Oslo."},
        {"role": "user", "content": "Thanks!"}]},
    "parallel_tool_calls": {"tools": TOOLS, "messages": [
        {"role": "user", "content": "Weather in Paris and docs on caching?"},
        {"role": "assistant", "content": None, "tool_calls": [
            call("a", "get_weather", {"location": "Paris"}),
            call("b", "search_docs", {"query": "caching", "top_k": 2, "tags": ["perf", "kv"],
                                      "options": {"lang": "en", "fuzzy": True}, "score": 0.75})]},
        {"role": "tool", "tool_call_id": "a", "name": "get_weather", "content": "18 C"},
        {"role": "tool", "tool_call_id": "b", "name": "search_docs", "content": "[\"kv-cache.md\"]"}]},
    "tool_call_reasoning": {"tools": TOOLS, "messages": [
        {"role": "user", "content": "Weather in Rome?"},
        {"role": "assistant", "content": "", "reasoning_content": "I should call the weather tool.",
         "tool_calls": [call("r1", "get_weather", {"location": "Rome"})]},
        {"role": "tool", "tool_call_id": "r1", "name": "get_weather", "content": "25 C"}]},
    "tool_string_arguments": {"tools": [WEATHER], "messages": [
        {"role": "user", "content": "Weather in Lima?"},
        {"role": "assistant", "content": "",
         "tool_calls": [call("s1", "get_weather", "{\"location\": \"Lima\"}")]},
        {"role": "tool", "tool_call_id": "s1", "content": "20 C"}]},
    "unicode": {"messages": [
        {"role": "system", "content": "Réponds en français. 日本語もOK."},
        {"role": "user", "content": "Grüße! 你好 🌍 \"quotes\" <tags> & \\ back\\slash\ttab\n  indented"}]},
    "whitespace_content": {"messages": [
        {"role": "system", "content": "  padded system  \n"},
        {"role": "user", "content": "\n\n  spaced out  \n\n"}]},
    "content_parts": {"messages": [
        {"role": "user", "content": [{"type": "text", "text": "Describe this picture."}, {"type": "image"}]}]},
    "no_user": {"messages": [{"role": "system", "content": "Only a system message."}]},
}

# Per template: the special tokens its model's tokenizer defines, and extra kwargs it reads.
TEMPLATES = {
    "Qwen-Qwen2.5-7B-Instruct.jinja": {"tokens": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
                                       "extra": []},
    "Qwen-Qwen3-0.6B.jinja": {"tokens": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
                              "extra": [{"enable_thinking": True}, {"enable_thinking": False}]},
    "Qwen3-Coder.jinja": {"tokens": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}, "extra": []},
    "Qwen3.5-4B.jinja": {"tokens": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
                         "extra": [{"enable_thinking": True}, {"enable_thinking": False},
                                   {"add_vision_id": True}]},
    "meta-llama-Llama-3.1-8B-Instruct.jinja": {
        "tokens": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
        "extra": [{"date_string": "01 Jan 2025"}, {"tools_in_user_message": False},
                  {"builtin_tools": ["brave_search", "wolfram_alpha", "code_interpreter"]}]},
    "openai-gpt-oss-120b.jinja": {
        "tokens": {"bos_token": "<|startoftext|>", "eos_token": "<|return|>", "pad_token": "<|endoftext|>"},
        "extra": [{"reasoning_effort": "high"}, {"builtin_tools": ["browser", "python"]},
                  {"model_identity": "You are a test model."}]},
    "google-gemma-4-31B-it.jinja": {"tokens": {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>"},
                                    "extra": [{"enable_thinking": True}, {"enable_thinking": False}]},
}


def describe_error(e):
    return f"{type(e).__name__}: {e}"


def render_template(source, case, add_generation_prompt, tokens, kwargs):
    try:
        rendered, _ = render_jinja_template(
            conversations=[copy.deepcopy(case["messages"])], tools=copy.deepcopy(case.get("tools")),
            chat_template=source, add_generation_prompt=add_generation_prompt,
            **tokens, **kwargs, strftime_now=strftime_now)
        return {"output": rendered[0]}
    except Exception as e:  # the engine must refuse exactly where transformers refuses
        return {"error": describe_error(e)}


# add_generation_prompt=False only changes the tail, so it is checked on the cases where the tail
# differs most; template-specific kwargs are checked on a representative subset.
NO_GENERATION_PROMPT_CASES = ("user_only", "ends_with_assistant", "reasoning_last", "thinking_field",
                              "tool_call_roundtrip", "tool_call_reasoning", "parallel_tool_calls")
EXTRA_KWARGS_CASES = ("user_only", "system_user", "multi_turn", "reasoning_history", "tools_user",
                      "tool_call_roundtrip", "content_parts")


def template_goldens(path, spec):
    with open(path, encoding="utf-8") as f:
        source = f.read()
    renders = []
    for name, case in CASES.items():
        for agp in (True, False):
            if not agp and name not in NO_GENERATION_PROMPT_CASES:
                continue
            renders.append({"case": name, "add_generation_prompt": agp, "kwargs": {},
                            **render_template(source, case, agp, spec["tokens"], {})})
        if name not in EXTRA_KWARGS_CASES:
            continue
        for kwargs in spec["extra"]:
            renders.append({"case": name, "add_generation_prompt": True, "kwargs": kwargs,
                            **render_template(source, case, True, spec["tokens"], kwargs)})
    return {"template": os.path.basename(path), "special_tokens": spec["tokens"], "renders": renders}


# Small templates, one feature each; `vars` are the render variables.
SNIPPETS = [
    # whitespace control
    ("  {% if true %}\n    x\n  {% endif %}\nend", {}),
    ("a  {%- if true -%}  b  {%- endif -%}  c", {}),
    ("line\n  {%+ if true %}kept{% endif %}\n", {}),
    ("{% if true +%}\nkeep newline{% endif %}", {}),
    ("  {{ 'var tags are not lstripped' }}\n  {# comment #}\nafter", {}),
    ("a\n{#- strip before #}\nb {#+ keep #}\nc", {}),
    ("{% raw %}{{ not rendered }}{% endraw %}\n  {%- raw -%}  x  {%- endraw %}", {}),
    ("trailing newline removed\n", {}),
    ("crlf\r\nlines\r\n{% if true %}\r\nx{% endif %}", {}),
    ("{%- for x in [1, 2] %}\n  {{ x }}\n{%- endfor %}\n", {}),
    # literals and operators
    ("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }}", {}),
    ("{{ 2 ** -1 }} {{ 1.5 + 1 }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1.5e-5 }} {{ 1_000 }} {{ 0x1F }} {{ 3.0 }}", {}),
    ("{{ 'a' ~ 1 ~ none ~ true ~ [1, 'b'] }} {{ 'x' * 3 }} {{ [1] * 2 }} {{ -(3) }} {{ +4 }}", {}),
    ("{{ 'a' + 'b' ~ 'c' + 'd' }} {{ 1 ~ (2 + 3) }} {{ 2 * 3 ~ 4 }}", {}),
    ("{{ 1 ~ 2 + 3 }}", {}),
    ("{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' != 'b' }} {{ [1, 2] == [1, 2] }} {{ (1, 2) == [1, 2] }}", {}),
    ("{{ 'ab' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 2 >= 2 }} {{ 1 <= 0 }}", {}),
    ("{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }} {{ 'x' in undefined_var }}", {}),
    ("{{ true and 'yes' }} {{ 0 or 'fallback' }} {{ none or [] }} {{ not none }} {{ not 1 }}", {}),
    ("{{ 'yes' if 1 else 'no' }} {{ 'yes' if 0 else 'no' }}[{{ 'x' if false }}]", {}),
    ("{{ \"it's\" }} {{ 'say \"hi\"' }} {{ 'tab\\tnew\\nline\\\\ \\x41\\u00e9' }} {{ 'a' 'b' }}", {}),
    ("{{ {'a': 1, 'b': [true, none]} }} {{ ('x',) }} {{ () }} {{ [1.0, 'it\\'s', \"q\\\"\"] }}", {}),
    ("{{ none }} {{ true }} {{ false }} {{ True }} {{ None }} {{ undefined_var }}|", {}),
    # attribute and item access
    ("{{ d.a }} {{ d['a'] }} {{ d.missing }}|{{ d['missing'] }}|{{ l[0] }} {{ l[-1] }} {{ l[9] }}|{{ l.0 }}", {"d": {"a": 1}, "l": [1, 2, 3]}),
    ("{{ d.items is defined }} {{ d['items'] }} {{ d.keys()|list }} {{ d.values()|list }}", {"d": {"items": 5, "z": 1}}),
    ("{{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 'dflt') }} {{ d.items()|list }}", {"d": {"a": 1, "b": 2}}),
    ("{{ s[0] }} {{ s[-1] }} {{ s[1:3] }} {{ s[::-1] }} {{ s[:2] }} {{ s[10:] }}| {{ l[1:] }} {{ l[::2] }} {{ l[-2:] }} {{ l[::-1] }}", {"s": "héllo", "l": [1, 2, 3, 4]}),
    ("{{ m.role }} {{ m['content'] }} {{ m.tool_calls is defined }} {{ m.tool_calls|length }}", {"m": {"role": "user", "content": "hi"}}),
    ("{{ x.y }}", {}),
    ("{{ d.a.b }}", {"d": {}}),
    ("{{ none.attr }}|{{ l.count(1) }} {{ l.index(2) }}", {"l": [1, 2, 1]}),
    # tests
    ("{{ x is defined }} {{ y is defined }} {{ y is undefined }} {{ n is none }} {{ n is not none }}", {"x": 1, "n": None}),
    ("{{ 's' is string }} {{ 1 is string }} {{ {} is mapping }} {{ [] is mapping }} {{ 1 is number }} {{ true is number }} {{ 1.5 is number }}", {}),
    ("{{ [] is sequence }} {{ 's' is sequence }} {{ {} is sequence }} {{ 1 is sequence }} {{ u is sequence }} {{ u is iterable }} {{ 1 is iterable }}", {}),
    ("{{ true is true }} {{ 1 is true }} {{ false is false }} {{ 0 is false }} {{ true is boolean }} {{ 1 is integer }} {{ true is integer }} {{ 1.0 is float }}", {}),
    ("{{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(2) }} {{ 1 is eq 1 }} {{ 1 is equalto 2 }} {{ 2 is gt 1 }} {{ 2 is lt 1 }} {{ 2 is ge 2 }} {{ 1 is le 0 }} {{ 1 is ne 2 }}", {}),
    ("{{ 2 is in [1, 2] }} {{ none is sameas none }} {{ false is sameas false }} {{ 'abc' is lower }} {{ 'ABC' is upper }} {{ 'upper' is filter }} {{ 'defined' is test }} {{ 'nope' is filter }}", {}),
    ("{{ range is callable }} {{ 1 is callable }} {{ ('<b>'|safe) is escaped }} {{ '<b>' is escaped }}", {}),
    ("{{ x is not defined and true }} {{ not x is defined }}", {}),
    # filters
    ("{{ '  a b  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ 'hello'|upper }} {{ 'HeLLo'|lower }} {{ 'hello world'|capitalize }} {{ 'hello big-world (x)'|title }}", {}),
    ("{{ [1, 2, 3]|length }} {{ 'héllo'|length }} {{ {'a': 1}|count }} {{ [3, 1]|first }} {{ [3, 1]|last }} {{ 'abc'|first }} {{ []|first }}|", {}),
    ("{{ [1, 'a', none]|join(', ') }} {{ ['a', 'b']|join }} {{ users|join(', ', attribute='name') }}", {"users": [{"name": "ann"}, {"name": "bob"}]}),
    ("{{ undefined_var|default('d') }} {{ none|default('d') }} {{ ''|default('d', true) }} {{ 0|d('z', boolean=true) }} {{ 'v'|default('d') }}", {}),
    ("{{ d|items|list }} {{ d|dictsort }} {{ d|dictsort(reverse=true) }} {{ d|dictsort(by='value') }} {{ u|items|list }}", {"d": {"b": 1, "A": 3, "c": 2}}),
    ("{{ 'abc'|list }} {{ {'k': 1, 'j': 2}|list }} {{ (1, 2)|list }} {{ u|list }}", {}),
    ("{{ 42|string }} {{ none|string }} {{ [1, 'x']|string }} {{ true|string }} {{ 1.0|string }} {{ u|string }}|", {}),
    ("{{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(-1) }} {{ 3.9|int }} {{ true|int }} {{ ' 12 '|int }} {{ '0x1A'|int(base=16) }} {{ none|int }}", {}),
    ("{{ '4.5'|float }} {{ 'x'|float }} {{ 3|float }} {{ '1e3'|float }} {{ none|float(1.5) }}", {}),
    ("{{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 2.1|round(method='ceil') }} {{ 2.9|round(0, 'floor') }} {{ 7|round }} {{ -2.5|round }}", {}),
    ("{{ -3|abs }} {{ -2.5|abs }} {{ [1, 2, 3]|sum }} {{ [1.5, 2]|sum }} {{ users|sum(attribute='age') }} {{ [[1], [2]]|sum(start=[]) }}", {"users": [{"age": 3}, {"age": 4}]}),
    ("{{ [3, 1, 2]|sort }} {{ [3, 1, 2]|sort(reverse=true) }} {{ ['b', 'A', 'a']|sort }} {{ ['b', 'A', 'a']|sort(case_sensitive=true) }} {{ users|sort(attribute='age')|map(attribute='name')|list }}", {"users": [{"name": "x", "age": 3}, {"name": "y", "age": 1}, {"name": "z", "age": 3}]}),
    ("{{ [3, 1, 2]|max }} {{ [3, 1, 2]|min }} {{ ['b', 'A']|max }} {{ []|max }}| {{ users|max(attribute='age') }}", {"users": [{"name": "x", "age": 3}, {"name": "y", "age": 7}]}),
    ("{{ [1, 2, 1, 3]|unique|list }} {{ ['a', 'A', 'b']|unique|list }} {{ [1, 2, 3]|reverse|list }} {{ 'abc'|reverse }}", {}),
    ("{{ ['a', 'b']|map('upper')|list }} {{ users|map(attribute='name')|list }} {{ users|map(attribute='zz', default='?')|list }} {{ [1, 2]|map('string')|join('-') }}", {"users": [{"name": "ann"}, {"name": "bob"}]}),
    ("{{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, 3, 4]|reject('odd')|list }} {{ [0, 1, '', 'a']|select|list }} {{ ['a', 'b']|reject('equalto', 'a')|list }} {{ [1, 5, 9]|select('gt', 4)|list }}", {}),
    ("{{ users|selectattr('admin')|map(attribute='name')|list }} {{ users|rejectattr('admin')|map(attribute='name')|list }} {{ users|selectattr('name', 'equalto', 'bob')|list }} {{ users|selectattr('zz', 'defined')|list }}", {"users": [{"name": "ann", "admin": True}, {"name": "bob", "admin": False}]}),
    ("{{ 'a-b-c'|replace('-', '+') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 'ab'|replace('', '.') }} {{ 5|replace('5', 'five') }}", {}),
    ("{{ 'line1\\nline2\\n\\nline4'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent('> ', blank=true) }}", {}),
    ("{{ [1, 2, 3, 4, 5]|batch(2)|list }} {{ [1, 2, 3]|batch(2, 0)|list }} {{ 'ab'|center(6) }}| {{ 'abc'|center(6) }}|", {}),
    ("{{ '%s is %d years'|format('Ann', 30) }} {{ '%(a)s-%(b)s'|format(a=1, b=2) }} {{ '%5.2f|%-4d|%x|%%'|format(3.14159, 7, 255) }} {{ 'v=%r' % 'x' }} {{ '%s' % none }}", {}),
    ("{{ '<b>'|e }} {{ '<b>'|escape }} {{ ('<b>'|safe)|e }} {{ '\"&\\''|forceescape }}", {}),
    ("{{ '<' ~ ('<b>'|safe) }} {{ '<' + ('<b>'|safe) }} {{ ('<b>'|safe) + '<i>' }} {{ ('<b>'|safe|trim) + '&' }} {{ ('x'|safe) ~ '<' }}", {}),
    ("{{ d|attr('a') }} {{ d|attr('keys') is callable }}", {"d": {"a": 1}}),
    # tojson (transformers' own)
    ("{{ d|tojson }}", {"d": {"z": 1, "a": [1.5, True, None, "é\n\"<>&'\\"], "n": {"k": -0.0, "big": 12345678901234}}}),
    ("{{ d|tojson(indent=2) }}|{{ d|tojson(indent=4) }}|{{ []|tojson(indent=2) }} {{ {}|tojson(indent=2) }}", {"d": {"a": [1, {"b": None}], "c": "x"}}),
    ("{{ d|tojson(sort_keys=true) }} {{ d|tojson(separators=(',', ':')) }} {{ d|tojson(ensure_ascii=true) }}", {"d": {"b": "é😀", "a": [1, 2]}}),
    ("{{ 1e16|tojson }} {{ 0.1|tojson }} {{ 100.0|tojson }} {{ 1e-7|tojson }} {{ 'tab\\t\\x01'|tojson }} {{ (1, 'a')|tojson }} {{ {1: 'int key'}|tojson }}", {}),
    ("{{ x|tojson }}", {}),
    # string methods
    ("{{ s.startswith('ab') }} {{ s.endswith('yz') }} {{ s.startswith(('x', 'a')) }} {{ s.upper() }} {{ s.lower() }} {{ '  pad  '.strip() }}|{{ '--x--'.strip('-') }} {{ '\\n\\nx\\n'.lstrip('\\n') }}|{{ 'x\\n\\n'.rstrip() }}|", {"s": "abcXYz"}),
    ("{{ 'a,b,,c'.split(',') }} {{ ' a  b \\n c '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a b c'.rsplit(' ', 1) }} {{ 'x</think>y</think>z'.split('</think>')[-1] }} {{ 'l1\\nl2\\r\\nl3'.splitlines() }}", {}),
    ("{{ 'hello'.replace('l', 'L') }} {{ 'hello'.replace('l', 'L', 1) }} {{ 'abcabc'.find('c') }} {{ 'héllo'.find('l') }} {{ 'abc'.find('z') }} {{ 'abcabc'.rfind('b') }} {{ 'aaa'.count('a') }} {{ '-'.join(['a', 'b']) }}", {}),
    ("{{ 'hello world'.capitalize() }} {{ 'Ab1'.isalnum() }} {{ '123'.isdigit() }} {{ 'abc'.isalpha() }} {{ '  '.isspace() }} {{ 'abc'.islower() }} {{ 'ABC'.isupper() }} {{ 'pre_x'.removeprefix('pre_') }} {{ 'x.py'.removesuffix('.py') }}", {}),
    ("{{ 'a=b=c'.partition('=') }} {{ 'a=b=c'.rpartition('=') }} {{ 'ab'.ljust(4, '.') }} {{ 'ab'.rjust(4) }} {{ '7'.zfill(3) }} {{ '{} and {}'.format('x', 1) }} {{ '{0}{0}{name}'.format('r', name='n') }}", {}),
    ("{{ 'Grüße ΑΣ ω ﬁ'.upper() }} {{ 'ÀÉÎ ΟΔΟΣ ΣΑΣ Σ'.lower() }} {{ 'ünïcode'|capitalize }} {{ 'straße'|upper }}", {}),
    ("{{ 'x'.pop }}", {}),
    ("{{ l.append }}|{{ d.update }}|", {"l": [], "d": {}}),
    ("{{ l.append(1) }}", {"l": []}),
    # statements
    ("{% if a %}A{% elif b %}B{% else %}C{% endif %}{% if not a and not b %}-none{% endif %}", {"b": 1}),
    ("{% for x in l %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }} {% endfor %}", {"l": ["a", "b", "c"]}),
    ("{% for x in l %}[{{ loop.previtem }}|{{ x }}|{{ loop.nextitem }}]{% endfor %} {% for x in l %}{{ loop.cycle('odd', 'even') }} {% endfor %}{{ loop }}", {"l": [1, 2, 3]}),
    ("{% for x in [] %}never{% else %}empty{% endfor %} {% for x in [1, 2, 3, 4] if x is even %}{{ x }}:{{ loop.index }}/{{ loop.length }} {% else %}none{% endfor %}", {}),
    ("{% for k, v in d|items %}{{ k }}={{ v }};{% endfor %} {% for k in d %}{{ k }}{% endfor %} {% for a, b in [(1, 2), [3, 4]] %}{{ a + b }}{% endfor %} {% for c in 'ab' %}{{ c }}.{% endfor %}", {"d": {"x": 1, "y": 2}}),
    ("{% for i in range(3) %}{{ i }}{% endfor %} {{ range(2, 10, 3)|list }} {{ range(5, 0, -2)|list }} {{ range(0)|list }}", {}),
    ("{% for x in [1, 2, 3, 4, 5] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("{% for row in [[1, 2], [3]] %}{% for x in row %}{{ loop.index }}{{ x }}{% endfor %}|{{ loop.index }};{% endfor %}", {}),
    ("{% set x = 1 %}{% set y, z = 2, 3 %}{% set t = 4, 5 %}{{ x }}{{ y }}{{ z }}{{ t }}{% set block %}  inner {{ x }}  {% endset %}[{{ block }}]", {}),
    ("{% set b | upper | trim %}  shout {{ 1 + 1 }}  {% endset %}[{{ b }}]", {}),
    ("{% set c = 0 %}{% for i in [1, 2, 3] %}{% set c = c + i %}{{ c }}{% endfor %}/{{ c }}", {}),
    ("{% set x = 5 %}{% for i in [1, 2] %}[{{ x }}]{% set x = i %}[{{ x }}]{% endfor %}{{ x }}", {}),
    ("{% for i in [1, 2] %}{% if i == 2 %}[{{ seen }}]{% endif %}{% set seen = i %}{% endfor %}", {}),
    ("{% if true %}{% set y = 3 %}{% endif %}{{ y }}", {}),
    ("{% set ns = namespace(total=0, items=[]) %}{% for i in [1, 2, 3] %}{% set ns.total = ns.total + i %}{% set ns.items = ns.items + [i] %}{% endfor %}{{ ns.total }} {{ ns.items }} {{ ns }}", {}),
    ("{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}{{ ns.c }}|{{ ns.c is defined }}", {}),
    ("{% set d = dict(a=1, b='x') %}{{ d }} {{ dict([('k', 'v')]) }} {{ dict({'m': 1}, n=2) }}", {}),
    ("{% set x = 1 %}{% set x.attr = 2 %}", {}),
    ("{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}{{ greet('Ann') }} {{ greet('Bob', 'Hi') }} {{ greet(greeting='Yo', name='Cy') }} {{ greet() }}", {}),
    ("{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k=4) }} {{ m(1) }}", {}),
    ("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}", {}),
    ("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(b=1) }}", {}),
    ("{% macro m() %}{{ x }}{% endmacro %}{% set x = 1 %}{{ m() }}{% set x = 2 %}{{ m() }}", {}),
    ("{% macro m() %}[{{ i }}]{% endmacro %}{% for i in [1] %}{{ m() }}{% endfor %} {% for i in [7] %}{% macro n() %}[{{ i }}]{% endmacro %}{{ n() }}{% endfor %}", {}),
    ("{% macro m() %}{% set x = 9 %}{{ x }}{% endmacro %}{% set x = 1 %}{{ m() }}{{ x }}", {}),
    ("{% macro m() %}{{ x }}{% set x = 9 %}{{ x }}{% endmacro %}{% set x = 1 %}{{ m() }}", {}),
    ("{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * (fact(n - 1)|int) }}{% endif %}{% endmacro %}{{ fact(5) }}", {}),
    ("{% macro m(x) %}<{{ x }}>{% endmacro %}{{ m('a')|trim|length }} {{ m('b') ~ '!' }} {{ (m('c') + '!') }} {{ m }}", {}),
    ("{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold {{ 1 + 1 }}{% endcall %} {% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(item) each([1, 2]) %}({{ item }}){% endcall %}", {}),
    ("{% filter upper %}shout {{ 'this' }}{% endfilter %} {% filter replace('a', 'o') | trim %}  banana  {% endfilter %}", {}),
    ("{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a }}|", {}),
    ("{% print 'p', 1 %}{% generation %}gen {{ 2 }}{% endgeneration %}", {}),
    ("{% for x in [1, 2] %}{{ x }}{% set loop_var = x %}{% endfor %}{{ loop_var }}|", {}),
    ("{{ strftime_now('%Y-%m-%d %H:%M:%S') }} {{ strftime_now('%d %b %Y') }} {{ strftime_now('%A %B') }}", {}),
    ("{{ raise_exception('custom failure ' ~ 42) }}", {}),
    ("{% if messages[0]['role'] == 'system' %}{{ raise_exception('no system here') }}{% endif %}ok", {"messages": [{"role": "user"}]}),
    ("{% set j = joiner(', ') %}{% for x in [1, 2, 3] %}{{ j() }}{{ x }}{% endfor %}", {}),
    ("{{ messages[::-1]|map(attribute='role')|join(',') }} {{ (messages|length - 1) - 0 }}", {"messages": [{"role": "a"}, {"role": "b"}]}),
    ("{{ 'x' if 'y' in 'xyz' and 1 is odd else 'z' }} {{ [1, 2][1:] + [3] }} {{ (1, 2) + (3,) }} {{ [1] + [2] == [1, 2] }}", {}),
    # precedence, scoping and formatting corners
    ("{% macro m(a, b=a + 1) %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }} {{ m(1, 5) }}", {}),
    ("{% macro m(x) %}{% set x = x * 2 %}{{ x }}{% endmacro %}{% set x = 'outer' %}{{ m(3) }} {{ x }}", {}),
    ("{% for x in [1] %}{% endfor %}[{{ x }}] {% for a in [1, 2] %}{% set outer = loop %}{% for b in [1] %}{{ outer.index }}{{ loop.index }}{% endfor %}{% endfor %}", {}),
    ("  {# lone comment #}\n\t {% if true %}\n\tx\n {% endif %}\n{{- ' y ' -}}\n  z", {}),
    ("{{ [1, 2,] }} {{ {'a': 1,} }} {{ (1,) + (2,) }} {{ 'a' ~ 'b' in 'xab' }} {{ not 1 == 2 }} {{ -2 ** 2 }} {{ 10 - 2 - 3 }} {{ 2 ** 3 ** 2 }}", {}),
    ("{{ 'abc' * 0 }}|{{ 3 * 'ab' }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 7 % -3 }} {{ -7 // -2 }} {{ 1 == true }} {{ [] == [] }} {{ {'a': 1} == {'a': 1} }} {{ 'a' < 'B' }}", {}),
    ("{{ 1.10 }} {{ 123456789.123456789 }} {{ 1e100 }} {{ 5e-324 }} {{ 0.1 * 3 }} {{ 1 / 3 }} {{ 2.0 ** 0.5 }} {{ 10 / 4 }} {{ 1e22|tojson }} {{ 2 ** 62 }} {{ -0.0 }} {{ 1e15 }} {{ 0.0001 }}", {}),
    ("{{ ['\\x00', '\\u200b', 'é', '\\x7f', '\\u00a0', '\\U0001F600', 'a\\\\b', '\\r'] }}", {}),
    ("{{ 'a\\'b' }} {{ '\\U0001F600' }} {{ '\\101\\x42' }} {{ 'no\\qescape' }} {{ \"dq\\\"s\" }}", {}),
    ("{{ x|default(none) is none }} {{ u is defined and u.x }} {% if u %}T{% else %}F{% endif %} {{ 'yes' if u is defined }}|", {}),
    ("{{ (messages|selectattr('role', 'equalto', 'user')|list|last).content }} {{ messages|map(attribute='content')|map('length')|list }} {{ messages|sort(attribute='role,content')|map(attribute='content')|join }}", {"messages": [{"role": "user", "content": "aa"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]}),
    ("{% for k, v in {'x': 1, 'y': 2}.items() %}{{ k }}{{ v }}{% endfor %} {% for p in d.items() %}{{ p[0] }}{% endfor %} {% for k in d if d[k] > 1 %}{{ k }}{% endfor %} {{ {'a': 1}.a }}", {"d": {"p": 1, "q": 2}}),
    ("{{ 'Hello World'|lower|replace('world', 'there')|title }} {{ '\\u3000x\\u3000'|trim }}| {{ 'x'|tojson|safe }} {{ ('<a>'|safe)|tojson }} {{ range(3)|list|tojson }}", {}),
    ("{{ tools is iterable }} {{ tools is not mapping }} {{ tools is none }} {{ tools|length if tools else 0 }}", {"tools": None}),
    ("{{ loop.index if loop is defined else 'no loop' }} {{ x }}\n{{ x }}", {"x": 1}),
    ("{% macro m() -%}\n  body\n{%- endmacro %}[{{- m() -}}] [{{ m() }}]", {}),
    ("{% set counter = namespace(value=0) %}{% macro bump() %}{% set counter.value = counter.value + 1 %}{{ counter.value }}{% endmacro %}{{ bump() }}{{ bump() }}{{ counter.value }}", {}),
    ("{{ ['b', 'A', 'a', 'B']|unique|list }} {{ ['Éb', 'éa']|sort }} {{ {'B': 1, 'a': 2}|dictsort(true) }} {{ [2, 1.5, true]|sort }}", {}),
    ("{{ 'x' is in 'xyz' }} {{ 5 is divisibleby 2.5 }} {{ 4.0 is even }} {{ 1 is odd }} {{ none is string }} {{ 1.5 is integer }} {{ '1' is number }}", {}),
    ("{% set a, b = 'xy' %}{{ b }}{{ a }} {% set t = (1, 2) %}{{ t[0] }}{{ t[-1] }}{{ t|length }}{{ t[1:] }}", {}),
    ("{{ d.tools|length }} {{ d.content is none }} {{ d.content|string }} {{ d.items|length }}", {"d": {"tools": [], "content": None, "items": [1, 2]}}),
    ("{{ '%s|%s' % ('a', 'b') }} {{ '%d%%' % 50 }} {{ '%05.1f' % 3.14159 }} {{ '%-5s|' % 'ab' }} {{ '%+d' % 5 }}", {}),
    ("{{ m.content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}|{{ m.content.split('</think>')[-1].lstrip('\\n') }}", {"m": {"content": "<think>\nreason\n</think>\n\nanswer"}}),
    ("{{ 'a' if true else 'b' if false else 'c' }} {{ 1 if none else 2 if 0 else 3 }} {{ [1, 2] if true }}", {}),
    ("{{ [1, [2, [3, {'k': (4, 5)}]]]|tojson }} {{ {'k': {'n': []}}|tojson(indent=1) }} {{ 'line\\nbreak'|tojson(indent=2) }}", {}),
    ("{% filter upper %}{% for x in ['a', 'b'] %}{{ x }}{% endfor %}{% endfilter %} {% set s %}{% for x in [1, 2] %}{{ x }}{% endfor %}{% endset %}{{ s|length }}", {}),
    ("{{ messages[0].content[0].text }} {{ messages[0].content[1]['type'] }} {{ 'image' in messages[0].content[1] }} {{ 'text' in messages[0].content[1] }}", {"messages": [{"content": [{"type": "text", "text": "hi"}, {"type": "image"}]}]}),
    # errors transformers raises; the engine must raise too
    ("{{ 1 + 'a' }}", {}),
    ("{{ 'a' + 1 }}", {}),
    ("{{ undefined_var + 1 }}", {}),
    ("{{ 1 < 'a' }}", {}),
    ("{{ 1 / 0 }}", {}),
    ("{{ 5 // 0 }}", {}),
    ("{{ {}|items|list }} {{ 'x'|items|list }}", {}),
    ("{{ undefined_var() }}", {}),
    ("{{ 'abc'() }}", {}),
    ("{{ none|length }}", {}),
    ("{% for x in 5 %}{% endfor %}", {}),
    ("{% for a, b in [1] %}{% endfor %}", {}),
    ("{{ range(200000)|length }}", {}),
    ("{{ 'a'.startswith(1) }}", {}),
    ("{{ undefined_var[0] }}", {}),
    ("{{ u.items() }}", {}),
    ("{{ x|dictsort }}", {"x": [1, 2]}),
]


# Templates Python renders but dflash deliberately refuses with an error, because matching would
# need CPython internals; each says why. The test checks that these fail loudly.
REFUSED = [
    ("{{ 'x'.upper }}", {}, "printing a bound method shows a CPython memory address"),
    ("{{ 2 ** 64 }}", {}, "integers beyond 64 bits"),
    ("{{ 'x'|items }}", {}, "printing a generator shows a CPython memory address"),
]


def render_snippet(source, variables):
    try:
        template = _compile_jinja_template(source)
        return {"output": template.render(**copy.deepcopy(variables), strftime_now=strftime_now)}
    except Exception as e:
        return {"error": describe_error(e)}


def tokenizer_goldens(tokenizer_dir):
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    renders = []
    for name in ("user_only", "multi_turn", "reasoning_history", "tool_call_roundtrip", "parallel_tool_calls"):
        case = CASES[name]
        for agp, kwargs in ((True, {}), (False, {}), (True, {"enable_thinking": False})):
            try:
                def apply(tokenize):
                    return tok.apply_chat_template(
                        copy.deepcopy(case["messages"]), tools=copy.deepcopy(case.get("tools")), tokenize=tokenize,
                        add_generation_prompt=agp, **kwargs)
                ids = apply(True)
                result = {"output": apply(False), "ids": list(ids["input_ids"] if hasattr(ids, "keys") else ids)}
            except Exception as e:
                result = {"error": describe_error(e)}
            renders.append({"case": name, "add_generation_prompt": agp, "kwargs": kwargs, **result})
    return {"tokenizer": os.path.basename(os.path.normpath(tokenizer_dir)), "renders": renders}


def write(path, data):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, indent=1)
        f.write("\n")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--templates", default=os.path.join(here, "..", "tests", "data", "templates"))
    ap.add_argument("--tokenizer", default=os.path.join(here, "..", "tests", "data", "tokenizers", "qwen3"))
    ap.add_argument("--pair", default=os.path.join(here, "..", "models", "dflash-pair", "target"))
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "goldens", "templates"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    write(os.path.join(args.out, "cases.json"), {"now": NOW.isoformat(), "cases": CASES})
    for filename, spec in TEMPLATES.items():
        golden = template_goldens(os.path.join(args.templates, filename), spec)
        write(os.path.join(args.out, filename.removesuffix(".jinja") + ".json"), golden)
        errors = sum("error" in r for r in golden["renders"])
        print(f"{filename}: {len(golden['renders'])} renders ({errors} raise)")
    snippets = [{"template": src, "vars": v, **render_snippet(src, v)} for src, v in SNIPPETS]
    snippets += [{"template": src, "vars": v, **render_snippet(src, v), "dflash_refuses": why} for src, v, why in REFUSED]
    write(os.path.join(args.out, "snippets.json"), {"now": NOW.isoformat(), "snippets": snippets})
    print(f"snippets: {len(snippets)} ({sum('error' in s for s in snippets)} raise)")
    write(os.path.join(args.out, "tokenizer_qwen3.json"), tokenizer_goldens(args.tokenizer))
    print("tokenizer_qwen3.json written")
    write(os.path.join(args.out, "tokenizer_pair.json"), tokenizer_goldens(args.pair))
    print("tokenizer_pair.json written")


if __name__ == "__main__":
    main()
