// What the Anthropic Messages and OpenAI Responses translators share: both turn their API's
// request into a chat-completions body (messages, tools, tool_choice, sampling) that
// ParseChatRequest then checks and types, so every API runs through one request model.
#pragma once

#include <functional>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>

#include "serve/json_fields.h"

namespace dflash::serve {

using OJson = nlohmann::ordered_json;

// A chat body with the fields whose names and meaning every API shares (model, stream,
// temperature, top_p, top_k) and this server's extensions (seed, min_p, spec_sampling,
// ignore_eos, chat_template_kwargs, ...), copied from `body` unchanged; the rest is the caller's.
OJson ChatBodyFrom(const OJson& body);

// Sets chat_template_kwargs[name] (enable_thinking, reasoning_effort): a variable the chat
// template reads if it has such a switch, and ignores otherwise.
void SetTemplateVariable(OJson& chat, const char* name, OJson value);

// The text of an array of blocks {"type": one of `types`, "text": "..."}, joined by `separator`;
// a 400 naming `where` for anything else.
std::string JoinedText(const OJson& blocks, const std::string& where, std::initializer_list<const char*> types,
                       const char* separator);

// An API's `tools` array in chat's shape, {"type": "function", "function": {"name",
// "description", "parameters"}}: `parameters` checks one tool's API-specific fields and returns
// its parameters schema (or null); name and description are read here.
OJson ChatTools(const OJson& tools, const std::function<OJson(const Fields& tool)>& parameters);

// Adds a tool call ({"id", "type": "function", "function": {"name", "arguments"}}) to the
// conversation: to the last message when it is the assistant's (text and calls of one turn stay
// one message, as the model wrote them), else as a new assistant message.
void AddToolCall(OJson& messages, OJson call);

}  // namespace dflash::serve
