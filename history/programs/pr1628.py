"""#1628: trace_with_replaced_proxy_metadata leaves the old proxies in the subsymbols.

A user transform (``transform_traces_pre_prologue``) switches a half-precision
computation from float16 to bfloat16: it rewrites ``y = x.to(torch.float16)`` into
a conversion to bfloat16 and then, as Thunder's quantization transforms do, calls
``thunder.transforms.utils.trace_with_replaced_proxy_metadata`` to give the outputs
that change (y and its transpose) their new dtype. At the parent that
helper returns the *old* proxy whenever it meets a name it has already replaced,
which is what happens for the subsymbols (``y = prims.convert_element_type(x, ...)``
inside ``y = ltorch.to(x, ...)``): the new trace's subsymbols still hold the old
trace's proxies, with the old dtype (float16), under the same names as the new
top-level bfloat16 proxies. Fixed by 57e95630, which returns the replaced proxy.

Thunder's values and gradients are right at the parent (it runs the top-level
symbols), so the program checks them against eager PyTorch (under the same policy)
and then the property Thunder's own test_buffer_dtype_casting (added by #1632, four days
later, with a transform of the same shape) checks: every tensor proxy of a name
the transform retyped, in the symbols and their subsymbols, has the new dtype.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import executors, same_as_eager  # noqa: E402

import thunder  # noqa: E402
from thunder.core.transform_common import Transform  # noqa: E402
from thunder.transforms.utils import trace_with_replaced_proxy_metadata  # noqa: E402

PROVENANCE = "bf16 policy"


class Float16ToBFloat16(Transform):
    """Every ``to(float16)`` becomes ``to(bfloat16)``; the dtype of what it feeds follows."""

    def __init__(self) -> None:
        self.retyped: set[str] = set()

    def transform_traces_pre_prologue(self, prologue_trace, computation_trace, epilogue_trace, **kwargs):
        bf16 = thunder.dtypes.bfloat16
        new_metadata: dict[str, dict] = {}
        new_bsyms = []
        for bsym in computation_trace.bound_symbols:
            out = bsym.output
            if bsym.sym == thunder.torch.to and isinstance(out, thunder.TensorProxy) and out.dtype == thunder.dtypes.float16:
                (sub,) = bsym.subsymbols
                assert sub.sym == thunder.core.prims.convert_element_type, sub
                inp = bsym.args[0]
                new_metadata[out.name] = dict(dtype=bf16)
                new_bsyms.append(
                    bsym.from_bsym(args=(inp, bf16, *bsym.args[2:]), subsymbols=[sub.from_bsym(args=(inp, bf16))])
                )
                continue
            if (
                bsym.sym.id != thunder.core.prims.PrimIDs.RETURN
                and isinstance(out, thunder.TensorProxy)
                and any(isinstance(a, thunder.Proxy) and a.name in new_metadata for a in bsym.flat_args)
            ):
                new_metadata[out.name] = dict(dtype=bf16)
            new_bsyms.append(bsym.from_bsym())
        new_trace = thunder.core.trace.from_trace(computation_trace)
        new_trace.bound_symbols = new_bsyms
        new_trace = trace_with_replaced_proxy_metadata(new_trace, new_metadata)
        new_trace.set_provenance(thunder.core.trace.TraceProvenance(PROVENANCE))
        self.retyped = set(new_metadata)
        return prologue_trace, new_trace, epilogue_trace


def f(x: torch.Tensor) -> torch.Tensor:
    y = x.to(torch.float16)
    return y.t()


def f_policy(x: torch.Tensor) -> torch.Tensor:
    y = x.to(torch.bfloat16)
    return y.t()


def check_retyped(trace, retyped: set[str]) -> None:
    def check(bsym, where: str) -> None:
        for p in (*bsym.flat_args, *bsym.flat_outs):
            if isinstance(p, thunder.TensorProxy) and p.name in retyped:
                assert p.dtype == thunder.dtypes.bfloat16, f"{p.name} is {p.dtype} in {where}: {bsym}"
        for sub in bsym.subsymbols:
            check(sub, f"a subsymbol of {bsym.sym.name}")

    for bsym in trace.bound_symbols:
        check(bsym, "the trace")


def main() -> None:
    torch.manual_seed(0)
    transform = Float16ToBFloat16()
    jitted = thunder.jit(f, transforms=[transform], executors=executors())
    x = torch.randn(3, 4, requires_grad=True)
    got = same_as_eager(f_policy, jitted, x)
    assert got.dtype == torch.bfloat16, got.dtype
    assert transform.retyped, "the transform retyped nothing"
    (policy_trace,) = [t for t in thunder.last_traces(jitted) if PROVENANCE in str(t.get_provenance())]
    print(policy_trace)
    check_retyped(policy_trace, transform.retyped)
    print("ok")


if __name__ == "__main__":
    main()
