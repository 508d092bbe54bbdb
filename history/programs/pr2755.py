"""#2755: a DTensor made inside the jitted function, with ``cache="symbolic values"``.

``DTensor.from_local(x, mesh, [Shard(0)])`` is traced as the prim ``dtensor_from_local``, whose
meta (``dtensor_from_local_meta``) runs ``DTensor.from_local`` on fake tensors and proxies the
result with ``proxify_dtensor``, which proxies its local tensor with ``proxy(t, history=None)``:
that tensor comes from no input, so it has no provenance. Under symbolic values ``tensorproxy``
(thunder/core/proxies.py) gives each dimension an IntegerProxy whose history is
``LOAD_ATTR(copy.copy(history), "shape")`` even when ``history`` is None, and
ProvenanceRecord asserts that its inputs are ProvenanceRecords: AssertionError while tracing.
Fixed by 879f8bf4, which gives those IntegerProxies history None.

Thunder's test runs on CUDA devices in a multi-process group; the mechanism is the proxy's
provenance, not the device, so here a one-process gloo group on the CPU (an in-memory store,
no network) and a CPU device mesh.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed.tensor import DeviceMesh, DTensor
from torch.distributed.tensor.placement_types import Shard

import thunder


def main() -> None:
    torch.manual_seed(0)
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        mesh = DeviceMesh("cpu", [0])

        def fn(x: torch.Tensor) -> DTensor:
            return DTensor.from_local(x, mesh, [Shard(0)])

        jitted = thunder.jit(fn, cache="symbolic values")
        for size in (8, 16):  # the second size reuses the symbolic-values cache entry
            x = torch.randn(size, size)
            actual = jitted(x)
            expected = DTensor.from_local(x, mesh, [Shard(0)])
            torch.testing.assert_close(actual, expected)
        assert (thunder.cache_misses(jitted), thunder.cache_hits(jitted)) == (1, 1)
    finally:
        dist.destroy_process_group()
    print("ok")


if __name__ == "__main__":
    main()
