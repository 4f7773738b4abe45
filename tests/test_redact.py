"""What the log may record of engine and check output: every credential shape redacted."""

from __future__ import annotations

import pytest

from git_brat import redact


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


def test_ordinary_output_is_left_alone():
    text = "3 passed, 1 failed in tests/test_parser.py\nmonkey business; the token is valid\n"
    assert redact.text(text) == text


def test_an_argv_loses_the_value_after_a_secret_option_and_every_key_inside_an_argument():
    argv = ["agent", "--api-key", "plain-value", "--model", "opus", "-c",
            "curl -H 'Authorization: Bearer abcdefgh1234' x", "{prompt}"]
    assert redact.argv(argv) == ["agent", "--api-key", "[redacted]", "--model", "opus", "-c",
                                 "curl -H 'Authorization: Bearer [redacted]' x", "{prompt}"]


def test_a_tail_is_redacted_before_it_is_cut():
    secret = "sk-ant-api03-" + "Z" * 40
    out = redact.tail("x" * 100 + " " + secret, 30)
    assert len(out) <= 30 and "ZZZZ" not in out
