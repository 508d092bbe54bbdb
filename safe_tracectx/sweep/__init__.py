"""``safe-tracectx sweep``: run a program once per injection point with a fault there, and report what leaked.

- ``runner``: the counting run, the faulted runs and their findings;
- ``findings``: what one run found, in fields (leaked, left active, masked ...), and the sentences made from them;
- ``run_outcome``: how one faulted run ended;
- ``text``: the sweep's text report;
- ``pytest_runs``: the sweep of a pytest node id, each run a fresh pytest.
"""
