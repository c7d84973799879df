"""Anthropic Messages (/v1/messages) and OpenAI Responses (/v1/responses) on `dflash serve`,
driven by the official `anthropic` client and the `openai` client's Responses API.

Every API goes through one request model, one template rendering and one output parser, so the
checks here compare the new APIs with chat completions (tested against the real template in
test_serve.py): the same conversation gives the same prompt tokens and, under greedy decoding,
the same reply; streamed events add up to the non-streamed reply.
"""
import json
import subprocess
import time

import anthropic
import openai
import pytest

# The same servers as the chat tests: the pair with scripted output allowed, and with Qwen3's
# template for tools and reasoning (pytest runs a module-scoped fixture once per module).
from test_serve import BIN, Server, server, tool_server  # noqa: F401 (fixtures)

USER = "def fibonacci(n):"
TOOL = {"name": "get_weather", "description": "Weather for a city",
        "schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
ANTHROPIC_TOOLS = [{"name": TOOL["name"], "description": TOOL["description"], "input_schema": TOOL["schema"],
                    "cache_control": {"type": "ephemeral"}}]
RESPONSES_TOOLS = [{"type": "function", "name": TOOL["name"], "description": TOOL["description"],
                    "parameters": TOOL["schema"], "strict": False}]
CHAT_TOOLS = [{"type": "function", "function": {"name": TOOL["name"], "description": TOOL["description"],
                                                "parameters": TOOL["schema"]}}]
CALL_SCRIPT = 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


# The anthropic client has no sampling parameters of its own (temperature, top_p, top_k): they
# go in the body as extra fields, which is how agents send them too.
GREEDY = {"temperature": 0}


def claude(s, key="none"):
    return anthropic.Anthropic(base_url=s.url, api_key=key, max_retries=0, timeout=120)


def chat_reference(s, messages, max_tokens, **kw):
    return s.client().chat.completions.create(model="m", messages=messages, max_tokens=max_tokens, temperature=0, **kw)


# -- plain and streamed replies ---------------------------------------------------------------


def test_messages_plain_equals_chat(server):
    ref = chat_reference(server, [{"role": "system", "content": "You write Python."},
                                  {"role": "user", "content": USER}], 32)
    # Ignored fields (cache_control, metadata) and a system prompt given as blocks.
    m = claude(server).messages.create(
        model="claude-whatever", max_tokens=32, metadata={"user_id": "u1"}, extra_body=GREEDY,
        system=[{"type": "text", "text": "You write Python.", "cache_control": {"type": "ephemeral"}}],
        messages=[{"role": "user", "content": [{"type": "text", "text": USER, "cache_control": {"type": "ephemeral"}}]}])
    assert m.type == "message" and m.role == "assistant" and m.model == "claude-whatever"
    assert m.id.startswith("msg_")
    assert [b.type for b in m.content] == ["text"]
    assert m.content[0].text == ref.choices[0].message.content
    assert m.stop_reason == {"stop": "end_turn", "length": "max_tokens"}[ref.choices[0].finish_reason]
    assert m.stop_sequence is None
    u = m.usage
    assert u.input_tokens + u.cache_read_input_tokens == ref.usage.prompt_tokens
    assert u.output_tokens == ref.usage.completion_tokens
    t = m.model_extra["timings"]
    assert t["prompt_n"] == u.input_tokens and t["cache_n"] == u.cache_read_input_tokens
    assert t["predicted_n"] == u.output_tokens and t["mode"] == "dflash"


def test_count_tokens_matches_usage(server):
    c = claude(server)
    kw = dict(model="m", system="You write Python.", messages=[{"role": "user", "content": USER}])
    count = c.messages.count_tokens(**kw)
    m = c.messages.create(max_tokens=4, **kw)
    assert count.input_tokens == m.usage.input_tokens + m.usage.cache_read_input_tokens > 10


def test_responses_plain_equals_chat(server):
    ref = chat_reference(server, [{"role": "system", "content": "Answer in Python."},
                                  {"role": "user", "content": USER}], 32)
    r = server.client().responses.create(
        model="m", instructions="Answer in Python.", input=USER, max_output_tokens=32, temperature=0,
        store=True, include=["reasoning.encrypted_content"], prompt_cache_key="k1", metadata={"a": "b"},
        reasoning={"effort": "low"})  # all accepted, none changes generation here
    assert r.object == "response" and r.id.startswith("resp_")
    assert r.output_text == ref.choices[0].message.content
    assert [o.type for o in r.output] == ["message"]
    if ref.choices[0].finish_reason == "length":
        assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    else:
        assert r.status == "completed" and r.incomplete_details is None
    assert r.usage.input_tokens == ref.usage.prompt_tokens
    assert r.usage.output_tokens == ref.usage.completion_tokens
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    assert r.usage.input_tokens_details.cached_tokens == r.model_extra["timings"]["cache_n"]


def test_streams_add_up_to_plain_replies_for_all_three_apis(server):
    messages = [{"role": "user", "content": "class Stack:"}]
    n = 40
    # chat completions
    plain = chat_reference(server, messages, n)
    chunks = list(server.client().chat.completions.create(model="m", messages=messages, max_tokens=n, temperature=0,
                                                          stream=True))
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == plain.choices[0].message.content
    text = plain.choices[0].message.content
    assert len(text) > 20

    # Anthropic: raw events, then the client's own accumulation of them
    c = claude(server)
    whole = c.messages.create(model="m", max_tokens=n, messages=messages, extra_body=GREEDY)
    assert whole.content[0].text == text
    events = list(c.messages.create(model="m", max_tokens=n, messages=messages, stream=True, extra_body=GREEDY))
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds.count("content_block_start") == kinds.count("content_block_stop") == 1
    deltas = [e.delta.text for e in events if e.type == "content_block_delta"]
    assert len(deltas) > 1 and "".join(deltas) == text
    end = events[-2]
    assert end.delta.stop_reason == whole.stop_reason and end.usage.output_tokens == whole.usage.output_tokens
    with c.messages.stream(model="m", max_tokens=n, messages=messages, extra_body=GREEDY) as s:
        final = s.get_final_message()
    assert final.content[0].text == text and final.stop_reason == whole.stop_reason
    assert final.usage.output_tokens == whole.usage.output_tokens
    assert final.usage.input_tokens + final.usage.cache_read_input_tokens == \
        whole.usage.input_tokens + whole.usage.cache_read_input_tokens

    # Responses: raw events (sequence numbers in order), then the client's stream helper
    o = server.client()
    resp = o.responses.create(model="m", input=messages, max_output_tokens=n, temperature=0)
    assert resp.output_text == text
    events = list(o.responses.create(model="m", input=messages, max_output_tokens=n, temperature=0, stream=True))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == ("response.completed" if resp.status == "completed" else "response.incomplete")
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == text
    done = events[-1].response
    assert done.output_text == text and done.id == events[0].response.id
    assert done.usage.output_tokens == resp.usage.output_tokens
    # The client's stream helper accumulates the events (it wants a response that completed; a
    # reply cut at max_output_tokens ends with response.incomplete, as OpenAI's does).
    script = {"dflash_scripted_output": "def push(self, x):\n    self.items.append(x)"}
    whole = o.responses.create(model="m", input=messages, extra_body=script)
    assert whole.status == "completed"
    with o.responses.stream(model="m", input=messages, extra_body=script) as s:
        helper = s.get_final_response()
    assert helper.output_text == whole.output_text == script["dflash_scripted_output"]


def test_stop_sequences_and_max_tokens(server):
    c = claude(server)
    messages = [{"role": "user", "content": "import os\n"}]
    full = c.messages.create(model="m", max_tokens=40, messages=messages, extra_body={**GREEDY, "ignore_eos": True})
    text = full.content[0].text
    assert full.stop_reason == "max_tokens" and len(text) > 10
    stop = text[5:8]
    # More than OpenAI's limit of four: Anthropic has none.
    cut = c.messages.create(model="m", max_tokens=40, messages=messages,
                            stop_sequences=["\x01", "\x02", "\x03", "\x04", stop], extra_body={**GREEDY, "ignore_eos": True})
    assert cut.content[0].text == text[:text.index(stop)]
    assert cut.stop_reason == "stop_sequence" and cut.stop_sequence == stop
    streamed = list(c.messages.create(model="m", max_tokens=40, messages=messages, stream=True,
                                      stop_sequences=[stop], extra_body={**GREEDY, "ignore_eos": True}))
    assert streamed[-2].delta.stop_reason == "stop_sequence" and streamed[-2].delta.stop_sequence == stop


# -- tools and reasoning through the real template ---------------------------------------------


def test_messages_tool_use_round_trip(tool_server):
    c = claude(tool_server)
    ask = [{"role": "user", "content": "Weather in Paris?"}]
    m = c.messages.create(model="m", max_tokens=64, messages=ask, tools=ANTHROPIC_TOOLS,
                          extra_body={"dflash_scripted_output": CALL_SCRIPT})
    assert m.stop_reason == "tool_use"
    assert [b.type for b in m.content] == ["text", "tool_use"]
    assert m.content[0].text == "Let me check."
    use = m.content[1]
    assert use.name == "get_weather" and use.input == {"city": "Paris"} and use.id

    with c.messages.stream(model="m", max_tokens=64, messages=ask, tools=ANTHROPIC_TOOLS,
                           extra_body={"dflash_scripted_output": CALL_SCRIPT}) as s:
        events = list(s)
        final = s.get_final_message()
    assert [b.type for b in final.content] == ["text", "tool_use"] and final.content[1].input == {"city": "Paris"}
    assert final.stop_reason == "tool_use"
    partial = [e.delta.partial_json for e in events if e.type == "content_block_delta" and e.delta.type == "input_json_delta"]
    assert json.loads("".join(partial)) == {"city": "Paris"}

    # Request side: the assistant's tool_use and the user's tool_result render as the same
    # conversation does through chat completions (whose rendering test_serve checks).
    history = ask + [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in m.content]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                                   "content": [{"type": "text", "text": "sunny, 21C"}]}]}]
    chat_history = ask + [{"role": "assistant", "content": "Let me check.",
                           "tool_calls": [{"id": use.id, "type": "function", "function": {
                               "name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}]},
                          {"role": "tool", "tool_call_id": use.id, "content": "sunny, 21C"}]
    ref = chat_reference(tool_server, chat_history, 8, tools=CHAT_TOOLS)
    count = c.messages.count_tokens(model="m", messages=history, tools=ANTHROPIC_TOOLS)
    assert count.input_tokens == ref.usage.prompt_tokens > 50
    final = c.messages.create(model="m", max_tokens=8, messages=history, tools=ANTHROPIC_TOOLS, extra_body=GREEDY)
    assert final.content[0].text == ref.choices[0].message.content
    without_result = c.messages.count_tokens(model="m", messages=history[:2], tools=ANTHROPIC_TOOLS)
    assert without_result.input_tokens < count.input_tokens


def test_responses_function_call_round_trip(tool_server):
    o = tool_server.client()
    r = o.responses.create(model="m", input="Weather in Paris?", tools=RESPONSES_TOOLS,
                           extra_body={"dflash_scripted_output": CALL_SCRIPT})
    assert r.status == "completed"
    assert [i.type for i in r.output] == ["message", "function_call"]
    assert r.output_text == "Let me check."
    call = r.output[1]
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"} and call.call_id

    events = list(o.responses.create(model="m", input="Weather in Paris?", tools=RESPONSES_TOOLS, stream=True,
                                     extra_body={"dflash_scripted_output": CALL_SCRIPT}))
    args = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    assert json.loads(args) == {"city": "Paris"}
    added = [e.item.id for e in events if e.type == "response.output_item.added"]
    done = [e.item.id for e in events if e.type == "response.output_item.done"]
    assert added == done and len(added) == 2
    assert [i.type for i in events[-1].response.output] == ["message", "function_call"]

    # Request side: the output items go back as input with the call's output.
    items = [{"role": "user", "content": "Weather in Paris?"},
             *[i.model_dump(exclude_none=True) for i in r.output],
             {"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 21C"}]
    chat_history = [{"role": "user", "content": "Weather in Paris?"},
                    {"role": "assistant", "content": "Let me check.",
                     "tool_calls": [{"id": call.call_id, "type": "function",
                                     "function": {"name": "get_weather", "arguments": call.arguments}}]},
                    {"role": "tool", "tool_call_id": call.call_id, "content": "sunny, 21C"}]
    ref = chat_reference(tool_server, chat_history, 8, tools=CHAT_TOOLS)
    again = o.responses.create(model="m", input=items, tools=RESPONSES_TOOLS, max_output_tokens=8, temperature=0)
    assert again.usage.input_tokens == ref.usage.prompt_tokens > 50
    assert again.output_text == ref.choices[0].message.content


def test_forced_tool_choice(tool_server):
    script = {"dflash_scripted_output": '{"city": "Oslo"}}\n</tool_call>'}
    ask = [{"role": "user", "content": "Weather in Oslo?"}]
    m = claude(tool_server).messages.create(model="m", max_tokens=32, messages=ask, tools=ANTHROPIC_TOOLS,
                                            tool_choice={"type": "tool", "name": "get_weather"}, extra_body=script)
    assert [(b.type, b.name, b.input) for b in m.content] == [("tool_use", "get_weather", {"city": "Oslo"})]
    r = tool_server.client().responses.create(model="m", input=ask, tools=RESPONSES_TOOLS, extra_body=script,
                                              tool_choice={"type": "function", "name": "get_weather"})
    assert [(i.type, i.name, json.loads(i.arguments)) for i in r.output] == [("function_call", "get_weather", {"city": "Oslo"})]
    none = claude(tool_server).messages.create(model="m", max_tokens=32, messages=ask, tools=ANTHROPIC_TOOLS,
                                               tool_choice={"type": "none"},
                                               extra_body={"dflash_scripted_output": "<tool_call>x</tool_call>"})
    assert [b.type for b in none.content] == ["text"] and none.stop_reason == "end_turn"


def test_thinking_blocks_and_reasoning_items(tool_server):
    script = {"dflash_scripted_output": "<think>\nsimple sum\n</think>\n\n4"}
    ask = [{"role": "user", "content": "2+2?"}]
    c = claude(tool_server)
    m = c.messages.create(model="m", max_tokens=32, messages=ask, thinking={"type": "enabled", "budget_tokens": 1024},
                          extra_body=script)
    assert [(b.type, getattr(b, "thinking", None) or getattr(b, "text", None)) for b in m.content] == \
        [("thinking", "simple sum"), ("text", "4")]
    with c.messages.stream(model="m", max_tokens=32, messages=ask, extra_body=script) as s:
        final = s.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "text"] and final.content[0].thinking == "simple sum"
    # `thinking` is the template's enable_thinking switch: disabled, the prompt closes <think> itself.
    on = c.messages.count_tokens(model="m", messages=ask, thinking={"type": "enabled", "budget_tokens": 1024})
    off = c.messages.count_tokens(model="m", messages=ask, thinking={"type": "disabled"})
    assert off.input_tokens > on.input_tokens
    # A thinking block sent back renders as the assistant's reasoning, as reasoning_content does.
    history = ask + [{"role": "assistant", "content": [{"type": "thinking", "thinking": "simple sum", "signature": "x"},
                                                       {"type": "text", "text": "4"}]},
                     {"role": "user", "content": "and 3+3?"}]
    chat = ask + [{"role": "assistant", "content": "4", "reasoning_content": "simple sum"},
                  {"role": "user", "content": "and 3+3?"}]
    assert c.messages.count_tokens(model="m", messages=history).input_tokens == \
        chat_reference(tool_server, chat, 1).usage.prompt_tokens

    o = tool_server.client()
    r = o.responses.create(model="m", input=ask, extra_body=script)
    assert [i.type for i in r.output] == ["reasoning", "message"]
    assert r.output[0].content[0].text == "simple sum" and r.output_text == "4"
    events = list(o.responses.create(model="m", input=ask, stream=True, extra_body=script))
    assert "".join(e.delta for e in events if e.type == "response.reasoning_text.delta") == "simple sum"
    items = [*ask, *[i.model_dump(exclude_none=True) for i in r.output], {"role": "user", "content": "and 3+3?"}]
    assert o.responses.create(model="m", input=items, max_output_tokens=1).usage.input_tokens == \
        chat_reference(tool_server, chat, 1).usage.prompt_tokens


# -- errors, auth, model names ----------------------------------------------------------------


def anthropic_error(fn, cls, status):
    with pytest.raises(cls) as e:
        fn()
    assert e.value.status_code == status
    body = e.value.body
    assert body["type"] == "error" and body["error"]["message"], body
    return body["error"]


def test_messages_errors_in_anthropic_format(server):
    c = claude(server)
    ok = dict(model="m", max_tokens=8, messages=[{"role": "user", "content": "hi"}])
    status, body = server.json("POST", "/v1/messages", {"model": "m", "messages": ok["messages"]})
    assert status == 400 and body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error" and "'max_tokens' is required" in body["error"]["message"]
    for bad, needle in [({"max_tokens": 0}, "max_tokens"),
                        ({"tool_choice": {"type": "sometimes"}, "tools": ANTHROPIC_TOOLS}, "tool_choice.type"),
                        ({"messages": [{"role": "user", "content": [{"type": "text"}]}]}, "messages[0].content[0].text"),
                        ({"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
                         "messages[0].content[0].type"),
                        ({"messages": [{"role": "user", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]}]},
                         "messages[0].content[0].type"),
                        ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].role"),
                        ({"tools": [{"name": "f"}]}, "tools[0].input_schema"),
                        ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools[0].type"),
                        ({"thinking": {"type": "maybe"}}, "thinking.type"),
                        ({"temperature": 5}, "temperature")]:
        known = {k: v for k, v in bad.items() if k != "temperature"}
        extra = {k: v for k, v in bad.items() if k == "temperature"}
        err = anthropic_error(lambda: c.messages.create(**{**ok, **known}, extra_body=extra), anthropic.BadRequestError, 400)
        assert err["type"] == "invalid_request_error" and needle in err["message"], (bad, err)
    status, body = server.json("POST", "/v1/messages", "{not json")
    assert status == 400 and body["error"]["type"] == "invalid_request_error"
    # The prompt over --ctx: the same check as chat completions, in Anthropic's format.
    err = anthropic_error(lambda: c.messages.create(**{**ok, "messages": [{"role": "user", "content": "word " * 1500}]}),
                          anthropic.BadRequestError, 400)
    assert "over the context" in err["message"]
    assert server.json("GET", "/health")[0] == 200


def test_responses_errors_in_openai_format(server):
    o = server.client()
    ok = dict(model="m", input="hi", max_output_tokens=8)
    for bad, param in [({"max_output_tokens": 0}, "max_output_tokens"),
                       ({"tool_choice": "sometimes", "tools": RESPONSES_TOOLS}, "tool_choice"),
                       ({"input": [{"type": "function_call", "call_id": "c1", "arguments": "{}"}]}, "input[0].name"),
                       ({"input": [{"type": "function_call", "call_id": "c1", "name": "f", "arguments": "[1"}]},
                        "input[0].arguments"),
                       ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
                        "input[0].content[0].type"),
                       ({"input": [{"type": "web_search_call"}]}, "input[0].type"),
                       ({"tools": [{"type": "web_search"}]}, "tools[0].type"),
                       ({"text": {"format": {"type": "json_object"}}}, "text.format")]:
        with pytest.raises(openai.BadRequestError) as e:
            o.responses.create(**{**ok, **bad})
        assert e.value.status_code == 400 and e.value.param == param, (bad, e.value.body)
        assert e.value.body["type"] == "invalid_request_error"
    with pytest.raises(openai.BadRequestError) as e:
        o.responses.create(**ok, previous_response_id="resp_1")
    assert e.value.param == "previous_response_id" and "does not store responses" in e.value.body["message"]


def test_keys_and_strict_model():
    s = Server("--ctx", "256", "--api-key", "sekrit", "--strict-model", "--alias", "pair")
    try:
        good = claude(s, key="sekrit")  # sent as x-api-key
        ask = dict(max_tokens=4, messages=[{"role": "user", "content": "hi"}])
        assert good.messages.create(model="pair", **ask).usage.output_tokens > 0
        err = anthropic_error(lambda: claude(s, key="wrong").messages.create(model="pair", **ask),
                              anthropic.AuthenticationError, 401)
        assert err["type"] == "authentication_error"
        err = anthropic_error(lambda: good.messages.create(model="claude-3", **ask), anthropic.NotFoundError, 404)
        assert err["type"] == "not_found_error" and "pair" in err["message"]
        # Bearer works on the Anthropic routes too, and x-api-key on OpenAI's.
        status, _ = s.json("POST", "/v1/messages", {"model": "pair", **ask}, headers={"Authorization": "Bearer sekrit"})
        assert status == 200
        assert s.json("GET", "/v1/models", headers={"x-api-key": "sekrit"})[0] == 200
        assert s.json("GET", "/v1/models", headers={"x-api-key": "wrong"})[0] == 401
        r = s.client(key="sekrit").responses.create(model="pair", input="hi", max_output_tokens=4)
        assert r.usage.output_tokens > 0
        with pytest.raises(openai.NotFoundError):
            s.client(key="sekrit").responses.create(model="gpt-5", input="hi", max_output_tokens=4)
    finally:
        s.stop()


def test_beta_query_and_version_header_accepted(server):
    # client.beta.messages adds ?beta=true and anthropic-beta headers.
    m = claude(server).beta.messages.create(model="m", max_tokens=4, messages=[{"role": "user", "content": "hi"}],
                                            betas=["prompt-caching-2024-07-31"])
    assert m.usage.output_tokens > 0
    status, body = server.json("POST", "/v1/messages?beta=true", {"model": "m", "max_tokens": 2,
                                                                  "messages": [{"role": "user", "content": "hi"}]},
                               headers={"anthropic-version": "2023-06-01"})
    assert status == 200 and body["type"] == "message"


def test_metrics_and_diagnostics_name_the_endpoints(tmp_path):
    s = Server("--ctx", "512", "--diagnostics", str(tmp_path))
    try:
        claude(s).messages.create(model="m", max_tokens=4, messages=[{"role": "user", "content": "hi"}])
        s.client().responses.create(model="m", input="hi", max_output_tokens=4)
        assert s.metric('dflash_requests_total{endpoint="messages",status="200"}') == 1
        assert s.metric('dflash_requests_total{endpoint="responses",status="200"}') == 1
        run, = [p for p in tmp_path.iterdir() if p.is_dir()]
        rows = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
        assert [r["endpoint"] for r in rows] == ["messages", "responses"]
        assert all(r["timings"]["predicted_n"] == r["usage"]["completion_tokens"] for r in rows)
    finally:
        s.stop()


# -- trace record / replay ----------------------------------------------------------------------


def test_trace_records_and_replays_the_new_endpoints(server, tmp_path):
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    trace = tmp_path / "trace"
    proxy = subprocess.Popen([BIN, "trace", "record", "--upstream", server.url, "--port", str(port), "--out", str(trace)],
                             stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.time() < deadline and proxy.poll() is None
                time.sleep(0.05)
        via = f"http://127.0.0.1:{port}"
        c = anthropic.Anthropic(base_url=via, api_key="k", max_retries=0)
        o = openai.OpenAI(base_url=via + "/v1", api_key="k", max_retries=0)
        ask = [{"role": "user", "content": USER}]
        c.messages.create(model="m", max_tokens=12, messages=ask, extra_body=GREEDY)
        list(c.messages.create(model="m", max_tokens=12, messages=ask, stream=True, extra_body=GREEDY))
        o.responses.create(model="m", input=ask, max_output_tokens=12, temperature=0)
        list(o.responses.create(model="m", input=ask, max_output_tokens=12, temperature=0, stream=True))
        while len(list(trace.glob("*.json"))) < 4:
            assert time.time() < deadline + 20
            time.sleep(0.05)
    finally:
        proxy.terminate()
        proxy.wait(timeout=10)
    recorded = [json.loads(p.read_text()) for p in sorted(trace.glob("*.json"))]
    assert [(r["path"], r["stream"], r["status"]) for r in recorded] == [
        ("/v1/messages", False, 200), ("/v1/messages", True, 200), ("/v1/responses", False, 200), ("/v1/responses", True, 200)]
    out = tmp_path / "rows.jsonl"
    p = subprocess.run([BIN, "trace", "replay", str(trace), "--url", server.url, "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["status"] for r in rows] == [200] * 4 and not any(r["error"] for r in rows)
    prompt = rows[0]["prompt_tokens"]
    assert prompt > 5 and all(r["prompt_tokens"] == prompt for r in rows)
    assert all(0 < r["completion_tokens"] <= 12 for r in rows)
    assert len({r["completion_tokens"] for r in rows}) == 1  # greedy: the same reply each time
    assert rows[0]["finish_reason"] in ("end_turn", "max_tokens") and rows[1]["finish_reason"] == rows[0]["finish_reason"]
    assert rows[2]["finish_reason"] in ("completed", "incomplete") and rows[3]["finish_reason"] == rows[2]["finish_reason"]
    assert rows[0]["ttft_ms"] == -1 and rows[1]["ttft_ms"] > 0 and rows[3]["ttft_ms"] > 0
    assert all(r["mode"] == "dflash" and r["cache_n"] >= 0 for r in rows)


def test_fuzz_never_crashes(server):
    import random
    rng = random.Random(4321)
    values = [None, True, -1, 0, 2 ** 70, 1.5, "", "x", [], [1, "a"], {}, {"type": "text"}, {"a": {"b": []}},
              [{"type": "text", "text": "t"}], [{"type": "tool_use"}], [{"type": "function_call"}], {"type": "tool"}]
    bodies = {"/v1/messages": {"model": "m", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]},
              "/v1/messages/count_tokens": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
              "/v1/responses": {"model": "m", "max_output_tokens": 2, "input": "hi"}}
    keys = ["messages", "system", "max_tokens", "tools", "tool_choice", "thinking", "stop_sequences", "input",
            "instructions", "max_output_tokens", "reasoning", "text", "temperature", "top_k", "stream", "metadata"]
    for _ in range(150):
        path = rng.choice(list(bodies))
        obj = dict(bodies[path])
        for _ in range(rng.randrange(1, 4)):
            obj[rng.choice(keys)] = rng.choice(values)
        if rng.random() < 0.4:
            block = {"type": rng.choice(["text", "tool_use", "tool_result", "thinking", "image", "x"]),
                     rng.choice(["text", "input", "content", "id", "name"]): rng.choice(values)}
            obj["messages" if "messages" in obj else "input"] = [
                {"role": rng.choice(["user", "assistant", "system", 3]), "content": [block],
                 "type": rng.choice(["message", "function_call", "function_call_output", "reasoning"])}]
        status, text = server.raw("POST", path, json.dumps(obj))
        assert status in (200, 400), (path, obj, status, text)
        if status == 400:
            body = json.loads(text)
            assert body["error"]["message"] and body["error"]["type"] == "invalid_request_error", body
            assert (body.get("type") == "error") == path.startswith("/v1/messages"), body
    assert server.json("GET", "/health")[0] == 200
