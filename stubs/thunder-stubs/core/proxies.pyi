# Partial stubs: thunder.core.proxies (lightning-thunder 0.2.4 / 0.2.6).
from collections.abc import Sequence
from typing import Any, TypeVar

from thunder.core import devices, dtypes

_P = TypeVar("_P", bound=Proxy)

def make_proxy_name(*, name: str | None = None, prefix: str | None = None) -> str: ...
def is_proxy_name_available(name: str | None = None) -> bool: ...

class Proxy:
    history: tuple[Any, ...] | None
    def __init__(
        self,
        name: str | None = None,
        *,
        prefix: str | None = None,
        history: tuple[Any, ...] | None = None,
        tags: set[Any] | None = None,
    ) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def tags(self) -> set[Any]: ...
    @property
    def prefix(self) -> str: ...
    def replace(self: _P, **changes: Any) -> _P: ...
    def replace_name(self: _P, name: str | None = None, *, disambiguate: bool = False) -> _P: ...

class Variable:
    proxy: Proxy
    name: str
    def __init__(self, p: Proxy) -> None: ...

def variableify(x: Any) -> Any: ...
def unvariableify(x: Any) -> Any: ...

class TensorProxy(Proxy):
    def __init__(
        self,
        name: str | None = None,
        *,
        like: TensorProxy | None = None,
        shape: Sequence[int] | None = None,
        device: devices.Device | None = None,
        dtype: dtypes.dtype | None = None,
        requires_grad: bool = False,
        grad: TensorProxy | None = None,
        prefix: str | None = None,
        distparallel_type: Any = None,
        history: tuple[Any, ...] | None = None,
        tags: set[Any] | None = None,
        thunder_fsdp_padding_size: int | None = None,
    ) -> None: ...
    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def ndim(self) -> int: ...
    @property
    def device(self) -> devices.Device: ...
    @property
    def dtype(self) -> dtypes.dtype: ...
    @property
    def requires_grad(self) -> bool: ...
    def __getattr__(self, attr: str) -> Any: ...

class NumberProxy(Proxy):
    value: Any
    python_type: type
    def __init__(
        self,
        name: str | None = None,
        value: Any = None,
        *,
        python_type: type,
        history: tuple[Any, ...] | None = None,
        constraint: Any = None,
        tags: set[Any] | None = None,
    ) -> None: ...

class IntegerProxy(NumberProxy):
    def __init__(
        self,
        name: str | None = None,
        value: int | None = None,
        *,
        history: tuple[Any, ...] | None = None,
        constraint: Any = None,
        tags: set[Any] | None = None,
    ) -> None: ...

class FloatProxy(NumberProxy):
    def __init__(
        self,
        name: str | None = None,
        value: float | None = None,
        *,
        history: tuple[Any, ...] | None = None,
        constraint: Any = None,
        tags: set[Any] | None = None,
    ) -> None: ...
