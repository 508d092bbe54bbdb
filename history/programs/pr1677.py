"""#1677: a jitted function that returns a dataclass whose __post_init__ inspects its fields (the pattern of
transformers' ModelOutput, which the fix's test returns) fails while Thunder traces it.

The interpreter records the construction of the returned dataclass as prims.python_dataclass_new (thunder/core/prims.py).
At the parent that symbol's meta, python_dataclass_new_meta, builds its value by calling the user's dataclass on the
proxies, ``AnyProxy(typ(**kwargs))``, outside the interpreter: __post_init__ runs on the TensorProxy x, finds it is not a
torch.Tensor, iterates it (ModelOutput's reading of a first field given as an iterable of key/value pairs), and the proxy
has no unbind (AttributeError: Unknown attribute unbind). Eager returns the dataclass holding x. The fix makes the meta
return ``AnyProxy(None)``, so the dataclass is built only by the epilogue, on real tensors.

The fix's test (test_specific_dataclass_returns) returns transformers.modeling_outputs.BaseModelOutputWithPast; transformers
is not installed here, so the dataclass below copies the part of ModelOutput.__post_init__ that matters."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, fields

import torch

import thunder


class ModelOutput(OrderedDict):
    def __post_init__(self) -> None:
        class_fields = fields(self)
        first = getattr(self, class_fields[0].name)
        others_none = all(getattr(self, field.name) is None for field in class_fields[1:])
        if others_none and not isinstance(first, torch.Tensor):
            try:
                pairs = iter(first)
            except TypeError:
                pairs = None
            if pairs is not None:
                for index, element in enumerate(pairs):
                    if not isinstance(element, (list, tuple)) or len(element) != 2 or not isinstance(element[0], str):
                        if index == 0:
                            self[class_fields[0].name] = first
                            break
                        raise ValueError(f"cannot set key/value for {element}")
                    setattr(self, element[0], element[1])
                    if element[1] is not None:
                        self[element[0]] = element[1]
            elif first is not None:
                self[class_fields[0].name] = first
        else:
            for field in class_fields:
                value = getattr(self, field.name)
                if value is not None:
                    self[field.name] = value


@dataclass
class Output(ModelOutput):
    last_hidden_state: torch.Tensor | None = None
    past_key_values: tuple | None = None


def f(x: torch.Tensor) -> Output:
    return Output(last_hidden_state=x)


def main() -> None:
    x = torch.randn(2, 2)
    expected = f(x)
    actual = thunder.jit(f)(x)
    assert type(actual) is Output, type(actual)
    assert expected.last_hidden_state is x
    assert actual.last_hidden_state is x, type(actual.last_hidden_state)
    assert list(actual.keys()) == list(expected.keys()), (list(actual.keys()), list(expected.keys()))
    print("ok")


if __name__ == "__main__":
    main()
