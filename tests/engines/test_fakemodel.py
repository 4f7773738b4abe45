"""The fake model server itself, spoken to over HTTP on 127.0.0.1 in each API shape it serves."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from fakemodel import FakeModel
from helpers import make_repo

OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))   # 127.0.0.1 directly
TASK = "Greet\n\nFAKE-EDIT: greeting.txt: hello there\nFAKE-COMMIT: say hello\n"


@pytest.fixture
def fake():
    with FakeModel() as fm:
        yield fm


@pytest.fixture
def wt(tmp_path):
    return make_repo(tmp_path / "repo")


def post(fake, path, body, stream=False):
    req = urllib.request.Request(fake.url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with OPENER.open(req, timeout=10) as resp:
        text = resp.read().decode()
    if not stream:
        return json.loads(text)
    return [json.loads(line[6:]) for line in text.splitlines()
            if line.startswith("data: ") and line[6:] != "[DONE]"]


def schema(*props):
    return {"type": "object", "properties": {p: {"type": "string"} for p in props},
            "required": list(props)}


def test_anthropic_messages_step_through_read_write_commit_done(fake, wt):
    tools = [{"name": "Read", "input_schema": schema("file_path")},
             {"name": "Write", "input_schema": schema("file_path", "content")},
             {"name": "Bash", "input_schema": schema("command", "description")}]
    system = f"Primary working directory: {wt}"
    msgs = [{"role": "user", "content": [{"type": "text", "text": TASK}]}]
    seen = []
    for _ in range(4):
        reply = post(fake, "/v1/messages?beta=true",
                     {"model": "m", "system": system, "tools": tools, "messages": msgs})
        block = reply["content"][0]
        seen.append(block.get("name") or block["text"])
        if block["type"] != "tool_use":
            break
        msgs += [{"role": "assistant", "content": [block]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": block["id"],
                                               "content": "ok"}]}]
        if block["name"] == "Write":
            assert block["input"] == {"file_path": str(wt / "greeting.txt"),
                                      "content": "hello there\n"}
        if block["name"] == "Bash":
            assert "git add -A && git commit -m 'say hello'" in block["input"]["command"]
    assert seen == ["Read", "Write", "Bash", "FAKE-DONE: wrote greeting.txt and committed it."]


def test_anthropic_streams_a_tool_call_as_json_deltas(fake, wt):
    events = post(fake, "/v1/messages", {"stream": True, "system": str(wt), "messages": [
        {"role": "user", "content": TASK}], "tools": [
        {"name": "Read", "input_schema": schema("file_path")}]}, stream=True)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    delta = next(e for e in events if e["type"] == "content_block_delta")["delta"]
    assert json.loads(delta["partial_json"]) == {"file_path": str(wt / "greeting.txt")}


def test_chat_completions_stream_and_plain(fake, wt):
    tools = [{"type": "function", "function": {"name": "bash", "parameters": schema("command")}}]
    body = {"model": "m", "messages": [{"role": "system", "content": f"cwd {wt}"},
                                       {"role": "user", "content": TASK}], "tools": tools}
    plain = post(fake, "/v1/chat/completions", body)
    call = plain["choices"][0]["message"]["tool_calls"][0]
    assert call["function"]["name"] == "bash"
    assert "cat greeting.txt" in json.loads(call["function"]["arguments"])["command"]
    chunks = post(fake, "/v1/chat/completions", {**body, "stream": True,
                                                 "stream_options": {"include_usage": True}},
                  stream=True)
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls" and chunks[-1]["usage"]


def test_responses_api_streams_a_function_call_then_completes(fake, wt):
    tools = [{"type": "function", "name": "exec_command", "parameters": schema("cmd")}]
    items = [{"type": "message", "role": "user", "content": [{"type": "input_text",
                                                              "text": f"<cwd>{wt}</cwd>"}]},
             {"type": "message", "role": "user", "content": [{"type": "input_text",
                                                              "text": TASK}]},
             {"type": "function_call", "call_id": "c1", "name": "exec_command",
              "arguments": "{}"},
             {"type": "function_call_output", "call_id": "c1", "output": "ok"}]
    events = post(fake, "/v1/responses", {"model": "m", "stream": True, "tools": tools,
                                          "input": items}, stream=True)
    assert events[0]["type"] == "response.created"
    done = events[-1]
    assert done["type"] == "response.completed"
    item = done["response"]["output"][0]
    assert item["type"] == "function_call"
    assert "printf" in json.loads(item["arguments"])["cmd"]      # turn 2: the write


def test_gemini_generate_content_and_the_json_side_requests(fake, wt):
    tools = [{"functionDeclarations": [
        {"name": "read_file", "parametersJsonSchema": schema("file_path")}]}]
    body = {"contents": [{"role": "user", "parts": [{"text": f"I work in {wt}. {TASK}"}]}],
            "tools": tools}
    reply = post(fake, "/v1beta/models/gemini-2.5-flash:generateContent", body)
    part = reply["candidates"][0]["content"]["parts"][0]
    assert part["functionCall"] == {"name": "read_file",
                                    "args": {"file_path": str(wt / "greeting.txt")}}
    [event] = post(fake, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
                   {**body, "generationConfig": {"responseMimeType": "application/json"}},
                   stream=True)
    text = event["candidates"][0]["content"]["parts"][0]["text"]
    assert json.loads(text)["next_speaker"] == "user"


def test_aider_gets_a_search_replace_block(fake, wt):
    body = {"model": "m", "messages": [
        {"role": "system", "content": "Use *SEARCH/REPLACE* blocks."},
        {"role": "user", "content": TASK}]}
    text = post(fake, "/v1/chat/completions", body)["choices"][0]["message"]["content"]
    assert "greeting.txt\n```\n<<<<<<< SEARCH\n=======\nhello there\n>>>>>>> REPLACE" in text


def test_refusal_head_models_and_the_log(fake, tmp_path):
    with pytest.raises(urllib.error.HTTPError) as err:
        post(fake, "/v1/messages", {"messages": [{"role": "user", "content": "FAKE-FAIL"}]})
    assert err.value.code == 400
    req = urllib.request.Request(fake.url + "/", method="HEAD")
    assert OPENER.open(req, timeout=10).status == 200
    with OPENER.open(fake.url + "/v1/models", timeout=10) as resp:
        assert "fake-model" in [m["id"] for m in json.loads(resp.read())["data"]]
    assert [r["kind"] for r in fake.requests] == ["refused", "other", "other"]
    log = tmp_path / "log.jsonl"
    with FakeModel(log_path=str(log)) as other:
        post(other, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]})
    [entry] = [json.loads(line) for line in log.read_text().splitlines()]
    assert entry["kind"] == "chat" and entry["body"]["messages"][0]["content"] == "hi"
