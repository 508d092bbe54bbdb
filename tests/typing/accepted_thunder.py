# Thunder code the stubs (stubs/thunder-stubs) must accept: names they leave out, operators, Thunder's own base
# classes and dataclasses. tests/test_typing.py runs mypy --strict on it twice: with the stubs (the N: comments are
# the revealed types there) and with Thunder's inline types alone, where it must pass too (it is valid Thunder code).
import dataclasses
from typing import Any

from thunder.core import proxies
from thunder.core.baseutils import BoundSymbolInterface, ProxyInterface, TensorProxyInterface
from thunder.core.devices import cpu
from thunder.core.dtypes import float32
from thunder.core.proxies import (
    CONSTRAINT,
    AnyProxy,
    CollectionProxy,
    ComplexProxy,
    DictProxy,
    DistParallelType,
    FutureTensorProxy,
    IntegerProxy,
    ListProxy,
    NumberProxy,
    Proxy,
    ProxyTag,
    StringProxy,
    TensorProxy,
    TupleProxy,
    Variable,
    proxy,
    pyval,
    pytype,
)
from thunder.core.symbol import BoundSymbol, BoundSymbolRHS, Symbol, has_tags
from thunder.core.trace import TraceCtx, TraceResults, TraceTag, VariableInterface, wrap_in_trace_variable
from thunder.dev_utils.check_trace import CheckedListOfTraces, check_subsymbols

# Names the stubs leave out: the module and class __getattr__ give them, never an error.
number = proxy(3, name="n")
value = pyval(IntegerProxy(name="i", value=1))
kind = pytype(number)
tensor = TensorProxy(shape=(2, 3), device=cpu, dtype=float32, distparallel_type=DistParallelType.FULLY_SHARDED)
future = FutureTensorProxy(like=tensor)
TensorProxy(like=future)
collection = CollectionProxy([tensor], name="c")
items: list[Any] = [collection.collection(), TupleProxy((1, 2)), ListProxy([1]), DictProxy({}), StringProxy("s")]
items += [AnyProxy(object()), ComplexProxy(value=1j), CONSTRAINT.STATIC, isinstance(number, ProxyTag | TraceTag)]
symbol = Symbol("mine", meta=None, python_impl=None)
bsym = symbol.bind(tensor, output=tensor)
rhs = bsym.rhs
reveal_type(rhs)  # N: Revealed type is "Any"
items += [bsym.header, bsym.source_filename, bsym.python(0), symbol.python_printer, has_tags(bsym, set())]
trace = TraceCtx()
items += [trace.output, wrap_in_trace_variable, CheckedListOfTraces, check_subsymbols]  # untyped in Thunder
results = TraceResults(trace, trace, None, [])
checked: TraceCtx = results.computation_trace
with_rhs: BoundSymbolRHS = rhs

# Operators: mypy looks them up on the class, never through __getattr__.
items += [tensor + tensor, tensor * 2, 1 - tensor, -tensor, abs(tensor), tensor @ tensor, tensor**2, ~tensor]
items += [tensor > 0, tensor == tensor, tensor[0], len(tensor), [row for row in tensor], hash(tensor)]
index = IntegerProxy(name="j", value=1)
items += [index + 1, 2 * index, [1, 2, 3][index], int(index), float(index), round(index), index < 2]
scalar: NumberProxy = index
items += [scalar / 2, scalar // 2, scalar % 2, bool(scalar)]

# Thunder's base classes, as its own annotations name them.
def takes_proxy(p: ProxyInterface, t: TensorProxyInterface, v: VariableInterface) -> None: ...
def takes_bsym(b: BoundSymbolInterface) -> None: ...

takes_proxy(tensor, future, tensor)
takes_bsym(bsym)
variable = Variable(collection)
interfaces: list[BoundSymbolInterface] = [bsym]
trace.bound_symbols = interfaces
trace.add_bound_symbol(bsym)
trace.push_scope([])
swap: dict[VariableInterface, Proxy] = {}
bsym.from_bsym_swap_proxies(swap)
reveal_type(trace.bound_symbols)  # N: Revealed type is "list[thunder.core.symbol.BoundSymbol]"

# Thunder's dataclasses, and its classes subclassed (--strict refuses to subclass an Any).
items += [dataclasses.replace(bsym, args=()), dataclasses.fields(symbol), dataclasses.replace(symbol, name="x")]


class MyCollection(CollectionProxy):
    pass


class MyTensor(TensorProxy):
    pass


class MyProxies(proxies.NumberProxy):
    pass


def widen(f: FutureTensorProxy) -> TensorProxyInterface:
    return f
