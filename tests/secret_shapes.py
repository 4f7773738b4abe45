"""Credentials as tools print them (each line, and the secret in it that must never sync), and
ordinary output that must come through redaction unchanged. All of them made up."""

from __future__ import annotations

PEM_BODY = ("b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
            "QyNTUxOQAAACDxQ9Yf1kFjW8cB0n5zq7p0vT3mGkRrL2hXyZ9aUuVbEwAAAJg3kz2fN5M9\n")
PEM = ("-----BEGIN OPENSSH PRIVATE KEY-----\n" + PEM_BODY + "-----END OPENSSH PRIVATE KEY-----")

# (a line as printed, the secret in it)
SHAPES = [
    ('{"api_key": "live-4f9a8b7c6d5e4f3a2b1c"}', "live-4f9a8b7c6d5e4f3a2b1c"),
    ("password: hunter2-prod", "hunter2-prod"),
    ("  db_password: 'correct horse battery'", "correct horse battery"),
    ('"client_secret" => "Zm9vYmFyYmF6cXV4"', "Zm9vYmFyYmF6cXV4"),
    ("my_password := opensesame42", "opensesame42"),
    ("DATABASE_URL=postgres://admin:S3cretPassw0rd@db.internal/prod", "S3cretPassw0rd"),
    ("remote: https://deploy:glpat_shortTok3n@gitlab.example.com/x.git", "glpat_shortTok3n"),
    ("Authorization: Basic ZGVwbG95OnMzY3JldA==", "ZGVwbG95OnMzY3JldA=="),
    ("curl -H 'Authorization: Bearer abcdefgh1234wxyz' https://api", "abcdefgh1234wxyz"),
    ("HF_TOKEN hf_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef", "hf_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef"),
    ("npm notice npm_abcdefghijklmnopqrstuvwxyz0123456789",
     "npm_abcdefghijklmnopqrstuvwxyz0123456789"),
    ("stripe sk_live_51Habcdefghijklmnop", "sk_live_51Habcdefghijklmnop"),
    ("restricted rk_live_51Hzyxwvutsrqponmlk", "rk_live_51Hzyxwvutsrqponmlk"),
    ("aws id AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("gh auth: ghp_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5", "ghp_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5"),
    ("oauth gho_Zy9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa", "gho_Zy9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa"),
    ("pat github_pat_11ABCDEFG0123456789_abcdefXYZabcdefXYZ",
     "github_pat_11ABCDEFG0123456789_abcdefXYZabcdefXYZ"),
    ("slack xoxb-123456789012-1234567890123-AbCdEfGhIjKl", "xoxb-123456789012-1234567890123-AbCdEfGhIjKl"),
    ("gitlab glpat-Xy7Zq2Wv9Lm4Np8Rt3Ks", "glpat-Xy7Zq2Wv9Lm4Np8Rt3Ks"),
    ("maps AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
     "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"),
    ("error: 401 for key sk-ant-api03-AbCdEf123456GhIjKl", "sk-ant-api03-AbCdEf123456GhIjKl"),
    ("OPENAI sk-proj-AbCdEf1234567890XyZw", "sk-proj-AbCdEf1234567890XyZw"),
    ("openai sk-Qw3rTy7uIoP1aSdF5gHjKl9zXcV", "sk-Qw3rTy7uIoP1aSdF5gHjKl9zXcV"),
    ("SESSION_SIGNING=aZ3kP9qR7sT2vW5xY8bC1dE4fG6hJ0", "aZ3kP9qR7sT2vW5xY8bC1dE4fG6hJ0"),
    ("STRIPE_KEY=q8Xm2Lp0Zr5Tv", "q8Xm2Lp0Zr5Tv"),
    ("hook https://hooks.slack.com/services/T0AAAAAAA/B0BBBBBBB/XxXxXxXxXxXxXxXxXxXxXxXx",
     "XxXxXxXxXxXxXxXxXxXxXxXx"),
    ("sendgrid SG.aBcDeFgHiJkLmNoPqRsTuV.wXyZ0123456789aBcDeFgHiJkLmNoPqRsTuVwXyZ01234",
     "wXyZ0123456789aBcDeFgHiJkLmNoPqRsTuVwXyZ01234"),
    ("twilio SK0123456789abcdef0123456789abcdef", "SK0123456789abcdef0123456789abcdef"),
    ("bot 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ", "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ"),
    ("mailchimp 0123456789abcdef0123456789abcdef-us12", "0123456789abcdef0123456789abcdef-us12"),
    ("azure DefaultEndpointsProtocol=https;AccountKey=" + "aB3d" * 22 + ";", "aB3d" * 22),
    (PEM, PEM_BODY.splitlines()[1]),
]

# What must come through unchanged: code, commit ids, UUIDs, paths, test and git output.
ORDINARY = [
    "3 passed, 1 failed in tests/test_parser.py\nmonkey business; the token is valid\n",
    "commit 3f2a91c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6\nMerge: 3f2a91c 0d1e2f3\n",
    "sha256=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "session 123e4567-e89b-12d3-a456-426614174000 uuid=123e4567-e89b-12d3-a456-426614174000",
    "tests/test_parse.py::test_parse_v2_handles_utf8 PASSED                   [ 42%]",
    '  File "/home/ci/src/git_brat/brat/refinery/outcomes.py", line 103, in failed',
    "E   KeyError: 'api_key'\n    key = self._key(item)\n    sort_key = name.lower()",
    "    token = get_token(session)\n    password = os.environ['DB_PASSWORD']",
    "primary_key = True; max_tokens: 4096; token_count = 12",
    "the token generation failed; basic functionality works; bearer of bad news",
    "see https://github.com/org/repo/blob/main/README.md#install and git@github.com:org/repo.git",
    "branch brat/0123456789abcdef0123456789abcdef, PATH=/usr/local/bin:/usr/bin",
]
