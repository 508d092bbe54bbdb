"""Case files of the linter's eval-file tests (data, never imported by the tests)."""
