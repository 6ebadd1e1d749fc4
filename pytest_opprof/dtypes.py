"""Tensor dtypes as torch.profiler's recorded inputs name them (record_shapes gives the C++ type
names: `float`, `c10::BFloat16`, `long int`), and as Python spells them (`torch.bfloat16`).
Pure: no torch import (a dtype object is read by its name)."""

from __future__ import annotations

# torch's dtype -> the type name record_shapes gives its tensors (torch 2.13 on Linux, measured)
PROFILER_NAMES = {
    "torch.float32": "float",
    "torch.float64": "double",
    "torch.float16": "c10::Half",
    "torch.bfloat16": "c10::BFloat16",
    "torch.int64": "long int",
    "torch.int32": "int",
    "torch.int16": "short int",
    "torch.int8": "signed char",
    "torch.uint8": "unsigned char",
    "torch.uint16": "short unsigned int",
    "torch.uint32": "unsigned int",
    "torch.uint64": "long unsigned int",
    "torch.bool": "bool",
    "torch.complex32": "c10::complex<c10::Half>",
    "torch.complex64": "c10::complex<float>",
    "torch.complex128": "c10::complex<double>",
    "torch.float8_e4m3fn": "c10::Float8_e4m3fn",
    "torch.float8_e4m3fnuz": "c10::Float8_e4m3fnuz",
    "torch.float8_e5m2": "c10::Float8_e5m2",
    "torch.float8_e5m2fnuz": "c10::Float8_e5m2fnuz",
}

# torch's other names of the same dtypes (torch.float is torch.float32)
_ALIASES = {
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "long": "int64",
    "int": "int32",
    "short": "int16",
    "chalf": "complex32",
    "cfloat": "complex64",
    "cdouble": "complex128",
}

_PYTHON_NAMES = {profiler: python for python, profiler in PROFILER_NAMES.items()}


def profiler_dtype(name: str) -> str | None:
    """The type name record_shapes gives tensors of the dtype `name` (`torch.bfloat16`, `bfloat16`,
    `torch.half`, or that type name itself: `c10::BFloat16`); None for no dtype torch has."""
    if name in _PYTHON_NAMES:
        return name
    bare = name.removeprefix("torch.")
    return PROFILER_NAMES.get(f"torch.{_ALIASES.get(bare, bare)}")


def python_dtype(profiler_name: str) -> str:
    """`c10::BFloat16` -> `torch.bfloat16`; a type name it does not know, as it is."""
    return _PYTHON_NAMES.get(profiler_name, profiler_name)


def dtype_words(profiler_name: str) -> str:
    """`c10::BFloat16 (torch.bfloat16)`: as the inputs list it, and as Python spells it; `float
    (torch.float32)`; a name both spell alike once."""
    python = python_dtype(profiler_name)
    return profiler_name if python == profiler_name else f"{profiler_name} ({python})"
