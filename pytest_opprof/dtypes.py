"""Tensor dtypes as torch.profiler's recorded inputs name them (record_shapes gives the C++ type
names: `float`, `c10::BFloat16`, `long int`), and as Python spells them (`torch.bfloat16`).
Pure: no torch import (a dtype object is read by its name)."""

from __future__ import annotations

# torch's dtype -> the type names record_shapes gives its tensors: first as torch 2.13 on Linux
# gives it (measured for every dtype torch has), then how other compilers spell the same C++
# type (clang's `long`, MSVC's `__int64`): a spelling missed would let an absence pass
PROFILER_NAMES: dict[str, tuple[str, ...]] = {
    "torch.float32": ("float",),
    "torch.float64": ("double",),
    "torch.float16": ("c10::Half",),
    "torch.bfloat16": ("c10::BFloat16",),
    "torch.int64": ("long int", "long", "long long", "long long int", "__int64", "int64_t"),
    "torch.int32": ("int",),
    "torch.int16": ("short int", "short"),
    "torch.int8": ("signed char",),
    "torch.uint8": ("unsigned char",),
    "torch.uint16": ("short unsigned int", "unsigned short", "unsigned short int"),
    "torch.uint32": ("unsigned int",),
    "torch.uint64": (
        "long unsigned int",
        "unsigned long",
        "unsigned long long",
        "long long unsigned int",
        "unsigned __int64",
    ),
    "torch.bool": ("bool",),
    "torch.complex32": ("c10::complex<c10::Half>",),
    "torch.complex64": ("c10::complex<float>",),
    "torch.complex128": ("c10::complex<double>",),
    "torch.float8_e4m3fn": ("c10::Float8_e4m3fn",),
    "torch.float8_e4m3fnuz": ("c10::Float8_e4m3fnuz",),
    "torch.float8_e5m2": ("c10::Float8_e5m2",),
    "torch.float8_e5m2fnuz": ("c10::Float8_e5m2fnuz",),
    "torch.float8_e8m0fnu": ("c10::Float8_e8m0fnu",),
    "torch.float4_e2m1fn_x2": ("c10::Float4_e2m1fn_x2",),
    "torch.qint8": ("c10::qint8",),
    "torch.qint32": ("c10::qint32",),
    "torch.quint8": ("c10::quint8",),
    "torch.quint4x2": ("c10::quint4x2",),
    "torch.quint2x4": ("c10::quint2x4",),
    "torch.bits8": ("c10::bits8",),
    "torch.bits16": ("c10::bits16",),
    "torch.bits1x8": ("c10::bits1x8",),
    "torch.bits2x4": ("c10::bits2x4",),
    "torch.bits4x2": ("c10::bits4x2",),
    **{f"torch.int{n}": (f"c10::dummy_int1_7_t<{n}>",) for n in range(1, 8)},
    **{f"torch.uint{n}": (f"c10::dummy_uint1_7_t<{n}>",) for n in range(1, 8)},
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

_PYTHON_NAMES = {spelling: python for python, names in PROFILER_NAMES.items() for spelling in names}


def profiler_dtype(name: str) -> tuple[str, ...] | None:
    """The type names record_shapes gives tensors of the dtype `name` (`torch.bfloat16`,
    `bfloat16`, `torch.half`, or a type name itself: `c10::BFloat16`, `long int`), the Linux one
    first; None for a dtype opprof does not know."""
    if name in _PYTHON_NAMES:
        return PROFILER_NAMES[_PYTHON_NAMES[name]]
    bare = name.removeprefix("torch.")
    return PROFILER_NAMES.get(f"torch.{_ALIASES.get(bare, bare)}")


def python_dtype(profiler_name: str) -> str:
    """`c10::BFloat16` -> `torch.bfloat16`; a type name it does not know, as it is."""
    return _PYTHON_NAMES.get(profiler_name, profiler_name)


def dtype_words(profiler_name: str) -> str:
    """`c10::BFloat16 (torch.bfloat16)`: as the inputs list it, and as Python spells it; a name
    both spell alike once."""
    python = python_dtype(profiler_name)
    return profiler_name if python == profiler_name else f"{profiler_name} ({python})"
