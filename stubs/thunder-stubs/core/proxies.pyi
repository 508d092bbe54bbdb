# Partial stubs: thunder.core.proxies (lightning-thunder 0.2.1 to main): precise types for what safe-tracectx
# touches, Any for the rest (module and class __getattr__), so no code Thunder accepts is rejected.
from collections.abc import Sequence
from typing import Any, TypeVar

from thunder.core import devices, dtypes

_P = TypeVar("_P", bound=Proxy)

def make_proxy_name(*, name: str | None = None, prefix: str | None = None) -> str: ...
def is_proxy_name_available(name: str | None = None) -> bool: ...

class Proxy:
    def __getattr__(self, name: str) -> Any: ...  # the rest of the class, as Thunder types it
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
    def __getattr__(self, name: str) -> Any: ...  # the rest of the class, as Thunder types it
    proxy: Proxy
    name: str
    def __init__(self, p: Proxy) -> None: ...

def variableify(x: Any) -> Any: ...
def unvariableify(x: Any) -> Any: ...

class TensorProxy(Proxy):
    def __getattr__(self, name: str) -> Any: ...  # the rest of the class, as Thunder types it
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

class NumberProxy(Proxy):
    def __getattr__(self, name: str) -> Any: ...  # the rest of the class, as Thunder types it
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

# The rest of the module: whatever these stubs do not spell out has the type Thunder gives it, never an error.
def __getattr__(name: str) -> Any: ...
