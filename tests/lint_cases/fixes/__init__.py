"""Input and expected output of `safe-tracectx lint --fix` (data for tests/test_lint_fix.py)."""
