"""What the log may record of engine and check output: every credential shape redacted."""

from __future__ import annotations

import pytest

from git_brat import redact
from secret_shapes import ORDINARY, PEM, PEM_BODY, SHAPES


@pytest.mark.parametrize("raw,kept", [
    ("error: 401 for key sk-ant-api03-AbCdEf123456", "error: 401 for key "),
    ("OPENAI: sk-proj-AbCdEf1234567890", "OPENAI: "),
    ("token ghp_abcdefghijklmnopqrstuvwxyz0123", "token "),
    ("github_pat_11ABCDEFG0123456789_abcdefXYZ", ""),
    ("slack xoxb-123456789012-abcdefABCDEF", "slack "),
    ("id AKIAIOSFODNN7EXAMPLE", "id "),
    ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc", "Authorization: Bearer "),
    ("run --api-key s3cr3t-value now", "run --api-key "),
    ("run --token=s3cr3t-value", "run --token="),
    ("ANTHROPIC_API_KEY=anything-at-all", "ANTHROPIC_API_KEY="),
    ("export GITHUB_TOKEN='a b c'", "export GITHUB_TOKEN="),
    ("AWS_SECRET=xyz", "AWS_SECRET="),
    ("DB_PASSWORD=hunter2", "DB_PASSWORD="),
    ("aws_secret_access_key = wJalrXUtnFEMI", "aws_secret_access_key = "),
])
def test_each_credential_shape_is_redacted_and_its_label_kept(raw, kept):
    out = redact.text(raw)
    assert out.startswith(kept) and redact.MARK in out
    assert raw[len(kept):].strip("'") not in out


@pytest.mark.parametrize("line,secret", SHAPES, ids=[s[:24] for s, _ in SHAPES])
def test_every_shape_of_credential_tools_print_is_redacted(line, secret):
    out = redact.text(line)
    assert secret not in out and redact.MARK in out


@pytest.mark.parametrize("line,secret", SHAPES, ids=[s[:24] for s, _ in SHAPES])
def test_a_credential_amid_ordinary_output_is_redacted_and_the_output_kept(line, secret):
    text = "\n".join(ORDINARY) + "\n" + line + "\n" + "\n".join(ORDINARY)
    out = redact.text(text)
    assert secret not in out
    assert out.startswith("\n".join(ORDINARY)) and out.endswith("\n".join(ORDINARY))


@pytest.mark.parametrize("line,secret", SHAPES, ids=[s[:24] for s, _ in SHAPES])
def test_text_redacted_twice_reads_as_redacted_once(line, secret):
    once = redact.text(line)
    assert redact.text(once) == once


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_output_is_left_alone(text):
    assert redact.text(text) == text


def test_a_private_key_cut_off_at_its_start_or_its_end_is_redacted_all_the_same():
    end_only = PEM[PEM.index("\n") + 1:] + "\nnext line"
    assert redact.text(end_only) == "[redacted]\nnext line"
    start_only = "before\n" + PEM[:PEM.index("-----END")]
    assert redact.text(start_only) == "before\n[redacted]"
    assert not any(line in redact.text(PEM) for line in PEM_BODY.splitlines())


def test_a_secret_looking_name_hides_any_value_but_code_and_placeholders_stay():
    assert redact.text("password: x") == "password: [redacted]"
    assert redact.text('{"token": "abc"}') == '{"token": [redacted]}'
    for code in ("password = getpass()", "token: ${GITHUB_TOKEN}", "secret: None"):
        assert redact.text(code) == code


def test_a_field_value_has_every_text_in_it_redacted_and_nothing_else_changed():
    v = {"a": ["ok", "password: x", 3, None], "b": {"c": "AKIAIOSFODNN7EXAMPLE"}, "d": True}
    assert redact.value(v) == {"a": ["ok", "password: [redacted]", 3, None],
                               "b": {"c": "[redacted]"}, "d": True}


def test_an_argv_loses_the_value_after_a_secret_option_and_every_key_inside_an_argument():
    argv = ["agent", "--api-key", "plain-value", "--model", "opus", "-c",
            "curl -H 'Authorization: Bearer abcdefgh1234' x", "{prompt}"]
    assert redact.argv(argv) == ["agent", "--api-key", "[redacted]", "--model", "opus", "-c",
                                 "curl -H 'Authorization: Bearer [redacted]' x", "{prompt}"]


def test_a_tail_is_redacted_before_it_is_cut():
    secret = "sk-ant-api03-" + "Z" * 40
    out = redact.tail("x" * 100 + " " + secret, 30)
    assert len(out) <= 30 and "ZZZZ" not in out
