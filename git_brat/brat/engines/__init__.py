"""Engines as data: presets, the argv and env of one run, what is installed, and the runner.

The public face: `engines.resolve(name, cfg.engines)`, `engines.invocation`, `engines.info`.
"""

from git_brat.brat.engines.invoke import (EngineResult, Invocation, invocation, json_objects,
                                          read_result, resolve, resume_id_ok,
                                          shown_argv)
from git_brat.brat.engines.presets import PRESET_NAMES, PRESETS, Preset, all_names
from git_brat.brat.engines.probe import EngineInfo, info, repository_dirs, version_of

__all__ = ["Preset", "PRESETS", "PRESET_NAMES", "Invocation", "EngineResult", "EngineInfo",
           "resolve", "resume_id_ok", "invocation", "read_result", "json_objects", "shown_argv", "info",
           "version_of", "repository_dirs", "all_names"]
