"""``docs/rules.md``, generated: how to run the linter (options from the parser itself) and every rule.

    $ python -m safe_tracectx.lint.docs > docs/rules.md

    >>> render().splitlines()[0]
    '# safe-tracectx lint rules'
"""

from __future__ import annotations

import argparse

from safe_tracectx.lint.files import DEFAULT_EXCLUDE
from safe_tracectx.lint.rules import RULES

__all__ = ["render"]

_RUNNING = """\
## Running it

```
safe-tracectx lint [options] [PATH ...]      # default PATH: .
safe-tracectx lint --explain STC001          # what a rule reports, why, an example, the fix
cat f.py | safe-tracectx lint - --stdin-filename src/f.py
```

| exit status | when |
| --- | --- |
| 0 (`ExitStatus.OK`) | no findings (or `--exit-zero`); with `--list-proxy-sites`, every listed call is guarded |
| 1 (`ExitStatus.FINDINGS`) | findings: every code but a guarded `STC100` site, which is informational |
| 2 (`ExitStatus.USAGE_ERROR`) | a bad option or `[tool.safe-tracectx]` value (the message names it), a path that does not exist, an output that cannot be written |
| 130 (`ExitStatus.INTERRUPTED`) | Ctrl-C |

**Files.** Each regular `.py` file under the given folders is read; a file named on the command line is
read even if excluded, unless `--force-exclude` (as ruff's; on in the pre-commit hook) applies the excludes
to named files and folders too. Folders and files matching an exclude glob are not walked: by default {excludes}.
`--exclude` replaces these, `--extend-exclude` adds to them. A glob without `/` matches any name below the
given folder; one with `/` matches the path relative to the `pyproject.toml` folder (or the current one).
What is not a regular file (a FIFO, a socket, a broken symbolic link) is skipped with a message on
standard error and does not change the exit status. A file that cannot be decoded (STC902), parsed
(STC901) or checked (STC903) is a finding for that file; the other files are still checked.

**Suppressing.** `# noqa: STC001` on the finding's line (a bare `# noqa` suppresses every code);
`--per-file-ignores "tests/*:STC001"`; `--ignore STC003`.

**Configuration.** The nearest `pyproject.toml` at or above the current folder that has this section
(`--isolated` ignores it); each option given on the command line overrides its key:

```toml
[tool.safe-tracectx]
select = ["STC0"]                    # codes or prefixes (default: all but STC100)
ignore = ["STC003"]
exclude = [".*", "build"]            # replaces the default excludes
extend-exclude = ["generated"]       # adds to them
per-file-ignores = {{ "tests/*" = ["STC001"] }}
```

**Fixing.** `--fix` rewrites the files (libcst: `pip install 'libcst>=1.1'`), `--diff` prints the
same edits as a unified diff and changes nothing (exit 1 when there is something to fix). STC001 and
STC003: the statements from the set to its one reset in the same block go into `try:`, the reset into
`finally:`. STC002: a set that opens a `try` whose `finally` resets it moves to the line before `try:`.
Where no fix is certainly right (the token is returned, stored or discarded; resets on several paths;
an early `return`, `break` or `continue` or a rebinding of the token in between; statements before the
set inside the `try`), the code stays and `not fixed: <reason>` is printed on standard error. Fixing
twice changes nothing more; comments, the encoding and the line endings are kept.

**flake8 and pre-commit.** The rules also run as a flake8 plugin (`flake8 --select STC`, default rules
only) and as the pre-commit hook `safe-tracectx-lint` of this repository.

### Options

| option | what it does |
| --- | --- |
{options}
"""


def _options() -> str:
    from safe_tracectx.lint.command import PROG, add_arguments

    parser = argparse.ArgumentParser(prog=PROG)
    add_arguments(parser)
    rows = []
    for action in parser._actions:  # the parser's own list: the only public view of every option
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
            continue
        names = ", ".join(action.option_strings) or "PATH ..."
        metavar = "" if action.nargs == 0 or not action.option_strings else f" {action.metavar or action.dest.upper()}"
        if action.choices and action.option_strings:
            metavar = " {" + ",".join(map(str, action.choices)) + "}"
        rows.append(f"| `{names}{metavar}` | {str(action.help).replace('|', '/')} |")
    return "\n".join(rows)


def _sentence(text: str) -> str:
    """Capitalized, unless it starts with code such as ``set_tracectx()`` or ``@contextmanager``."""
    return text[0].upper() + text[1:] if text.split()[0].isalpha() else text


def render() -> str:
    """The whole page: running the linter, then each rule with why, fix and wrong/right example."""
    out = [
        "# safe-tracectx lint rules",
        "",
        "Generated from `safe_tracectx/lint/` (`python -m safe_tracectx.lint.docs`); the tests check that this page",
        "is up to date and lint both examples of each rule (but STC902's and STC903's, which cannot be shown as text).",
        "`STC100` runs only with `--list-proxy-sites`.",
        "",
        _RUNNING.format(excludes=", ".join(f"`{g}`" for g in DEFAULT_EXCLUDE), options=_options()).rstrip("\n"),
        "",
        "## Rules",
        "",
    ]
    for rule in RULES.values():
        out += [
            f"### {rule.code} `{rule.name}`",
            "",
            f"{_sentence(rule.summary)}.",
            "",
            f"**Why:** {_sentence(rule.why)}.",
            "",
            f"**Fix:** {_sentence(rule.fix)}.",
            "",
        ]
        for title, example in (("Wrong", rule.wrong), ("Right", rule.right)):
            out += [f"{title}:", "", "```python", example.rstrip("\n"), "```", ""]
    return "\n".join(out)


if __name__ == "__main__":
    print(render(), end="")
