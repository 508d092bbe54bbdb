"""The reports of audit documents: text, per rank, ThunderFX, the pytest plugin's document, and HTML.

- ``text``: the text report of one document;
- ``sections``: the text sections the reports share (passes, balance, violations, child processes);
- ``ranks``: the combined report of a distributed launch, rank by rank;
- ``thunderfx``: the ThunderFX section (what the splitter made of each FX graph);
- ``pytest_document``: the pytest plugin's report, one section per test;
- ``html``: the HTML report, a page per pass run.
"""
