"""The case files here are data for tests/test_lint_cases.py, not modules to import or collect."""

collect_ignore_glob = ["*.py"]
