# Partial stubs: thunder.core.symbol (lightning-thunder 0.2.1 to main): precise types for what safe-tracectx
# touches, Any for the rest (module and class __getattr__), so no code Thunder accepts is rejected.
# Every class of the module is here, with Thunder's bases (a BoundSymbol is a BoundSymbolInterface) and a class
# __getattr__; Symbol, BoundSymbol and BoundSymbolRHS are dataclasses there, so dataclasses.replace/fields take them.
from collections.abc import Callable, Sequence
from dataclasses import Field
from typing import Any, ClassVar

from thunder.core.baseutils import BoundSymbolInterface, TagBase
from thunder.core.proxies import Proxy, Variable
from thunder.core.trace import VariableInterface
from thunder.core.trace import get_tracectx as get_tracectx  # Symbol.__call__ reads it here

class Symbol:
    def __getattr__(self, name: str) -> Any: ...  # the rest of the class, as Thunder types it
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]
    name: str
    meta: Callable[..., Any] | None
    id: Any
    is_prim: bool
    is_fusion: bool
    executor: Any
    def __init__(
        self,
        name: str,
        meta: Callable[..., Any] | None = None,
        id: Any = None,
        is_prim: bool = False,
        tags: Sequence[Any] | None = None,
        is_fusion: bool = False,
        python_printer: Callable[..., Any] | None = None,
        _module: Any = None,
        _hash: int | None = None,
        _bind_postprocess: Callable[..., Any] | None = None,
        _phantom: bool = False,
        _print_as_impl: bool = False,
        executor: Any = None,
        python_impl: Callable[..., Any] | None = None,
        **fields: Any,  # the fields of other Thunder versions
    ) -> None: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...
    def bind(self, *args: Any, output: Any, subsymbols: Sequence[BoundSymbol] = (), **kwargs: Any) -> BoundSymbol: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

class BoundSymbol(BoundSymbolInterface):
    def __getattr__(self, name: str) -> Any: ...  # the rest of the class, as Thunder types it
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]
    sym: Symbol  # type: ignore[assignment]  # as in Thunder: its Symbol is not a SymbolInterface
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    output: Any
    subsymbols: Sequence[BoundSymbol]
    tags: set[Any]
    _call_ctx: dict[str, Any] | None
    def __init__(
        self,
        sym: Symbol,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        output: Any,
        subsymbols: Sequence[BoundSymbol] = (),
        header: str | list[str] = "",
        source_filename: str | None = None,
        source_positions: Any = None,
        tags: set[Any] = ...,
        _call_ctx: dict[str, Any] | None = None,
        _import_ctx: dict[str, Any] = ...,
        _object_ctx: dict[str, Any] = ...,
        _executor: Any = None,
        _line_no: int | None = None,
        **fields: Any,  # the fields of other Thunder versions
    ) -> None: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...
    # Cached properties: the first read stores them in the instance's __dict__.
    @property
    def flat_proxy_args(self) -> tuple[Proxy, ...]: ...
    @property
    def flat_proxy_outs(self) -> tuple[Proxy, ...]: ...
    @property
    def flat_args(self) -> list[Any]: ...
    @property
    def flat_outs(self) -> list[Any]: ...
    def from_bsym(self, **kwargs: Any) -> BoundSymbol: ...
    def from_bsym_swap_proxies(
        self,
        swap_map: dict[Variable, Proxy] | dict[VariableInterface, Proxy],
        skip_inputs: bool = False,
        skip_output: bool = False,
        skip_subsymbols: bool = False,
    ) -> BoundSymbol: ...

def default_python_printer(
    bsym: BoundSymbol, out_printables: Any, arg_printables: Sequence[Any], kwarg_printables: dict[str, Any]
) -> str | Sequence[str]: ...

class BoundSymbolTag(TagBase):
    BACKWARD: BoundSymbolTag
    RECOMPUTE_IN_BACKWARD: BoundSymbolTag
    def __getattr__(self, name: str) -> Any: ...

class BoundSymbolRHS:
    def __getattr__(self, name: str) -> Any: ...
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]
    sym: Symbol
    args: tuple[Any, ...]
    kwargs: Any
    backward: bool
    def __init__(self, sym: Symbol, args: tuple[Any, ...], kwargs: Any, backward: bool) -> None: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

# The rest of the module: whatever these stubs do not spell out has the type Thunder gives it, never an error.
def __getattr__(name: str) -> Any: ...
