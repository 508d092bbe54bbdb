"""``safe-tracectx sweep``: run a program once per injection point with a fault there, and report what leaked.

- ``runner``: the counting run, the faulted runs and their findings;
- ``run_outcome``: how one faulted run ended;
- ``pytest_runs``: the sweep of a pytest node id, each run a fresh pytest.
"""
