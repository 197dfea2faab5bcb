"""Errors that name the culprit and the fix. Each is also a builtin exception type."""

from __future__ import annotations


class NtkpipeError(Exception):
    """Base class of every error ntkpipe raises on purpose."""


class SpecError(NtkpipeError, ValueError):
    """A study spec is invalid. ``problems`` lists one formatted line per problem."""

    def __init__(self, path: str, problems: list[str]):
        self.path = str(path)
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{self.path}: {len(self.problems)} problem(s) in the study spec:\n{lines}")

    def __reduce__(self):
        """Pickled as its path and problems (a job in a worker process sends its errors back)."""
        return type(self), (self.path, self.problems)


class ConfigError(NtkpipeError, ValueError):
    """A setting outside the spec (a Snakemake ``--config`` value, an environment variable, the
    specs or results directory) is unusable."""


class DataFileError(NtkpipeError, FileNotFoundError):
    """A local data file is missing, truncated or not in the expected format."""


class DivergenceError(NtkpipeError, FloatingPointError):
    """Training produced a non-finite loss where the caller asked for a hard failure."""


class ResultError(NtkpipeError, RuntimeError):
    """A result store is missing, incomplete, or was made from a different config."""
