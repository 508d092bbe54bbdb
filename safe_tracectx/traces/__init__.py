"""Reading traces: what a trace defines and uses, its checks, and its fingerprint; never mutating it.

- ``bound_proxies``: the proxies a bound symbol reads and writes;
- ``program``: a trace as the program Thunder will generate (names, definitions, uses);
- ``joint``: a joint forward-backward trace as Thunder's split reads it;
- ``checks``: the trace checks (``check_trace``, ``trace_findings``);
- ``handover``: the forward/backward saved-for-backward hand-over;
- ``flat_args``: the inputs a computation trace's return hands to autograd, against its arguments;
- ``grad_mode``: a symbol called with grad enabled whose output is detached from autograd;
- ``generated_code``: whether a trace's Python compiles and calls only what it defines;
- ``gradients``: a cotangent or gradient whose dtype kind or shape is not its primal's;
- ``torch_values``: Thunder's dtypes and devices that a program about to run hands to Python;
- ``substitution``: a trace substitution that swaps a traced value for a tensor of another dtype;
- ``violations``: ``Violation``, one finding with its names and its fix;
- ``fingerprint``: a trace's content as a hash, to see a pass mutate its input.
"""
