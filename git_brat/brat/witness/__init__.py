"""The witness: claims ready tasks, runs one engine session each in its own work tree, supervises, recovers."""

from __future__ import annotations

from git_brat.brat.witness.loop import LiveRow, Options, SessionEnd, Summary, Witness, options
from git_brat.brat.witness.recover import Recovered, recover
from git_brat.brat.witness.session import agent_env, salvage

__all__ = ["Witness", "Options", "Summary", "SessionEnd", "LiveRow", "Recovered", "options",
           "recover", "salvage", "agent_env"]
