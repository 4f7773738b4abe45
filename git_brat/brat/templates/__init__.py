"""Workflow templates shipped with git-brat (feature, code-review, fix-bug)."""
