"""``[tool.safe-tracectx]`` in ``pyproject.toml``: found by walking up from the current folder, like ruff.

    [tool.safe-tracectx]
    select = ["STC0"]                 # codes or prefixes (default: all but STC100)
    ignore = ["STC003"]
    exclude = [".*", "build"]         # replaces the default excludes
    extend-exclude = ["generated"]    # adds to them
    per-file-ignores = { "tests/*" = ["STC001"] }

Globs are taken relative to the folder of that ``pyproject.toml``. The command line overrides
each key it gives. A bad value raises :class:`ConfigError` naming the file and the key:

    >>> settings_from({"select": "STC001"}, Path("pyproject.toml"))
    Traceback (most recent call last):
    ...
    safe_tracectx.lint.config.ConfigError: pyproject.toml: [tool.safe-tracectx] select: expected a list of strings such as ["STC001"], got 'STC001'
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from safe_tracectx.lint.runner import PerFileIgnore, parse_codes

__all__ = ["ConfigError", "KEYS", "Settings", "find_pyproject", "load_settings", "parse_per_file_ignores", "settings_from"]

SECTION: Final = "safe-tracectx"
KEYS: Final = ("select", "ignore", "exclude", "extend-exclude", "per-file-ignores")


class ConfigError(ValueError):
    """A ``[tool.safe-tracectx]`` section that cannot be used; the message names the file and key."""


@dataclasses.dataclass(frozen=True)
class Settings:
    """What a ``[tool.safe-tracectx]`` section says; None where it says nothing."""

    path: Path | None = None  # the pyproject.toml it came from
    select: frozenset[str] | None = None
    ignore: frozenset[str] | None = None
    exclude: tuple[str, ...] | None = None
    extend_exclude: tuple[str, ...] | None = None
    per_file_ignores: tuple[PerFileIgnore, ...] | None = None

    @property
    def root(self) -> Path | None:
        """The folder relative globs are taken from."""
        return self.path.parent if self.path is not None else None


def find_pyproject(start: Path) -> tuple[Path, dict[str, object]] | None:
    """The nearest ``pyproject.toml`` at or above ``start`` with a ``[tool.safe-tracectx]`` section."""
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if not candidate.is_file():
            continue
        try:
            text = candidate.read_text(encoding="utf-8")
        except (OSError, UnicodeError) as error:
            raise ConfigError(f"{candidate}: cannot read it ({error})") from None
        if SECTION not in text:
            continue  # cannot hold the section: do not make its TOML our problem
        try:
            document = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise ConfigError(f"{candidate}: not valid TOML ({error}); fix it or run with --isolated") from None
        tool = document.get("tool")
        section = tool.get(SECTION) if isinstance(tool, dict) else None
        if section is not None:
            if not isinstance(section, dict):
                raise ConfigError(f"{candidate}: [tool.{SECTION}] must be a table, got {section!r}")
            return candidate, section
    return None


def load_settings(start: Path | None = None) -> Settings:
    """The settings of the nearest ``[tool.safe-tracectx]`` (default: from the current folder up)."""
    found = find_pyproject((start or Path.cwd()).resolve())
    return settings_from(found[1], found[0]) if found else Settings()


def _strings(path: Path, key: str, value: object, example: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{path}: [tool.{SECTION}] {key}: expected a list of strings such as {example}, got {value!r}")
    return tuple(value)


def _codes(path: Path, key: str, value: object) -> frozenset[str]:
    items = _strings(path, key, value, '["STC001"]')
    try:
        return parse_codes(",".join(items), option=f"{path}: [tool.{SECTION}] {key}")
    except ValueError as error:
        raise ConfigError(str(error)) from None


def settings_from(section: Mapping[str, object], path: Path) -> Settings:
    """Validate a ``[tool.safe-tracectx]`` table read from ``path``."""
    unknown = sorted(set(section) - set(KEYS))
    if unknown:
        raise ConfigError(f"{path}: [tool.{SECTION}] unknown key {unknown[0]!r}; the keys are: {', '.join(KEYS)}")
    per_file: tuple[PerFileIgnore, ...] | None = None
    if "per-file-ignores" in section:
        table = section["per-file-ignores"]
        if not isinstance(table, dict):
            raise ConfigError(
                f"{path}: [tool.{SECTION}] per-file-ignores: expected a table such as "
                f'{{ "tests/*" = ["STC001"] }}, got {table!r}'
            )
        per_file = tuple((str(glob), _codes(path, f"per-file-ignores {glob!r}", codes)) for glob, codes in table.items())
    ignore = section.get("ignore")
    return Settings(
        path=path,
        select=_codes(path, "select", section["select"]) if "select" in section else None,
        ignore=(_codes(path, "ignore", ignore) if ignore != [] else frozenset()) if "ignore" in section else None,
        exclude=_strings(path, "exclude", section["exclude"], '["build"]') if "exclude" in section else None,
        extend_exclude=(
            _strings(path, "extend-exclude", section["extend-exclude"], '["generated"]') if "extend-exclude" in section else None
        ),
        per_file_ignores=per_file,
    )


def parse_per_file_ignores(values: list[str]) -> tuple[PerFileIgnore, ...]:
    """``--per-file-ignores "tests/*:STC001 docs/*.py:STC0"`` (entries split by spaces, or the option repeated).

        >>> [(glob, sorted(codes)) for glob, codes in parse_per_file_ignores(["tests/*:STC001,STC002 x.py:STC0"])]
        [('tests/*', ['STC001', 'STC002']), ('x.py', ['STC001', 'STC002', 'STC003'])]
    """
    entries: list[PerFileIgnore] = []
    for value in values:
        for entry in value.split():
            glob, colon, codes = entry.rpartition(":")
            if not colon or not glob:
                raise ValueError(f"--per-file-ignores {entry!r}: expected GLOB:CODES such as tests/*:STC001")
            entries.append((glob, parse_codes(codes, option=f"--per-file-ignores {entry!r}")))
    if not entries:
        raise ValueError("--per-file-ignores names no GLOB:CODES entry, such as tests/*:STC001")
    return tuple(entries)
