"""Compare two pytest JUnit XML reports test by test.

    python scripts/compare_outcomes.py plain.xml strict.xml

Prints each run's counts and every test whose outcome differs; exits 1 if any does.
"""

from __future__ import annotations

import collections
import sys
import xml.etree.ElementTree as ET


def outcomes(path: str) -> dict[str, str]:
    """test id -> passed / failed / error / skipped / xfailed (JUnit XML counts an xpass as passed)."""
    result: dict[str, str] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        test_id = f"{case.get('classname')}::{case.get('name')}"
        kinds = {child.tag: child for child in case}
        outcome = next((k for k in ("failure", "error", "skipped") if k in kinds), "passed")
        if outcome == "skipped" and kinds["skipped"].get("type") == "pytest.xfail":
            outcome = "xfailed"
        result[test_id] = {"failure": "failed"}.get(outcome, outcome)
    return result


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    first, second = (outcomes(path) for path in argv)
    for label, run in zip(argv, (first, second)):
        counts = collections.Counter(run.values())
        print(f"{label}: {len(run)} tests: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    differences = sorted(
        (test, first.get(test, "absent"), second.get(test, "absent"))
        for test in first.keys() | second.keys()
        if first.get(test) != second.get(test)
    )
    for test, a, b in differences:
        print(f"DIFFERENT {test}: {a} -> {b}")
    print(f"{len(differences)} test(s) with a different outcome")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
