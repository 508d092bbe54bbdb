"""The bottom layer: what every other layer shares, importing nothing of the package above it.

- ``callsite``: where a call came from (the user's frame, not the library's);
- ``labels``: a trace's or proxy's short description in messages;
- ``extras``: the optional Thunder/torch extra, the supported range and its install hint;
- ``events``: the audit's event records;
- ``pass_catalog``: the table of Thunder's passes and steps, with their kinds;
- ``arguments``: the checks and conversions of Thunder-facing arguments.
"""
