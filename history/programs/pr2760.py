"""#2760: aliased inputs that are views of different numel, with ``cache="symbolic values"``.

``f(x, y, z)`` gets ``a``, ``a[0, :]`` and ``a[1, :]``: three inputs sharing one storage, ``y``
updated in place. The alias-update pass (``insert_alias_updates`` in
``thunder/core/update_aliases.py``) first calls ``replace_args_with_alias_map``, which at the
parent compares ``arg.numel != arg_to_replace.numel`` on the computation trace's input proxies.
With symbolic values ``numel`` is a traced symbol (``ltorch.numel``), and the pass runs outside
any trace context, so Thunder raises NotImplementedError ("Attempting to execute symbol numel
outside of a tracing context"). Fixed by ec21d730, which computes the numel without tracing
(``_numel()``) and groups the views of different numel so their alias updates are inserted.
"""

from __future__ import annotations

import torch

import thunder


def f(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x + 2, y.add_(z)


def main() -> None:
    torch.manual_seed(0)
    a = torch.randn(2, 3)
    b, c = a[0, :], a[1, :]
    a_ = a.clone()
    b_, c_ = a_[0, :], a_[1, :]
    jitted = thunder.jit(f, cache="symbolic values")
    actual = jitted(a, b, c)
    expected = f(a_, b_, c_)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(a, a_)
    torch.testing.assert_close(b, b_)
    torch.testing.assert_close(c, c_)
    print("ok")


if __name__ == "__main__":
    main()
