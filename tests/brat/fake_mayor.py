"""A fake mayor engine: `fake_mayor.py MODE RECORD_DIR [--resume ID] PROMPT` prints one answer.

Every run records its argv and prompt as RECORD_DIR/run-<k>.json, so tests can see what the
mayor passed (the resume id above all).
"""

import json
import os
import sys
import time

PLAN = {"convoy": {"title": "Fix the parser", "body": "Bugs found in src/."},
        "tasks": [{"key": "tabs", "title": "Parser chokes on tabs", "body": "Handle \\t.",
                   "paths": ["src/parser.py"], "priority": 1},
                  {"key": "tests", "title": "Regression tests for tabs", "needs": ["tabs"],
                   "paths": ["tests/test_parser.py"]},
                  {"key": "docs", "title": "Document tab handling", "needs": ["tabs", "tests"],
                   "priority": 3}]}


def plan_with(**task_changes) -> dict:
    plan = json.loads(json.dumps(PLAN))
    for key, change in task_changes.items():
        for t in plan["tasks"]:
            if t["key"] == key:
                t.update(change)
    return plan


def answer(mode: str) -> str:
    bare = json.dumps(PLAN)
    return {
        "plan": bare,
        "prose": "I read src/ and found two bugs.\nHere is the plan: " + bare
                 + "\nThe {tabs} task comes first.",
        "fenced": "Here is what I suggest:\n\n```json\n" + json.dumps(PLAN, indent=2)
                  + "\n```\n\nEach task is small.",
        "malformed": '{"convoy": {"title": "Broken"}, "tasks": [{"key": "a", "title": }]}',
        "cycle": json.dumps(plan_with(tabs={"needs": ["docs"]})),
        "unknown-need": json.dumps(plan_with(tests={"needs": ["nosuch"]})),
        "empty-title": json.dumps(plan_with(tests={"title": "  "})),
        "priority": json.dumps(plan_with(docs={"priority": 9})),
        "many": json.dumps({"convoy": {"title": "Too much"},
                            "tasks": [{"key": f"t{i}", "title": f"Task {i}"} for i in range(1, 6)]}),
        "workflow": 'Use the shipped one: {"workflow": "fix-bug", "vars": {"bug": "Tabs crash"}}',
        "no-workflow": '{"workflow": "nosuch", "vars": {}}',
        "prose-only": "I could not find anything worth a task.",
    }[mode]


def main() -> int:
    mode, record = sys.argv[1], sys.argv[2]
    os.makedirs(record, exist_ok=True)
    k = len(os.listdir(record)) + 1
    prompt = sys.stdin.read() if mode == "stdin" else sys.argv[-1]
    with open(os.path.join(record, f"run-{k}.json"), "w") as f:
        json.dump({"argv": sys.argv[1:], "cwd": os.getcwd(), "prompt": prompt,
                   "pid": os.getpid()}, f)
    mode = "plan" if mode == "stdin" else mode
    if mode == "hang":
        print("thinking...", flush=True)
        time.sleep(600)
        return 0
    if mode == "edit":          # disobeys: writes a file, then answers
        with open("scratch.txt", "w") as f:
            f.write("notes\n")
        mode = "plan"
    if mode == "fail":
        print("model unavailable", flush=True)
        return 3
    if mode == "claude-json":   # the shape `claude -p --output-format json` prints
        resumed = "--resume" in sys.argv
        sid = sys.argv[sys.argv.index("--resume") + 1] if resumed else f"sess-{k}"
        print(json.dumps({"type": "result", "is_error": False, "session_id": sid,
                          "result": answer("prose")}))
        return 0
    if mode == "gemini-stream":  # stream-json: the prompt echoed, then the answer in pieces
        text = answer("prose")
        lines = [{"type": "init", "session_id": "g-1"},
                 {"type": "message", "role": "user", "content": prompt}]
        lines += [{"type": "message", "role": "assistant", "content": text[i:i + 40],
                   "delta": True} for i in range(0, len(text), 40)]
        lines.append({"type": "result", "status": "success"})
        print("\n".join(json.dumps(line) for line in lines))
        return 0
    if mode == "echo":          # prints the prompt back, and no plan of its own
        print(prompt)
        return 0
    if mode == "claude-error":  # what claude prints when the model API keeps failing
        print(json.dumps({"type": "result", "is_error": True, "session_id": "sess-x",
                          "result": "API Error: 529 overloaded"}))
        return 0
    print(answer(mode))
    return 0


if __name__ == "__main__":
    sys.exit(main())
