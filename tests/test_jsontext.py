"""The JSON text opprof writes (baseline files, `--json` output, the JSON report): the document
json.dumps gives, indented two spaces with sorted keys, and a list of plain values on one line."""

from __future__ import annotations

import json
import math

import pytest

from pytest_opprof.jsontext import json_text


def test_a_series_of_plain_values_is_one_line_and_objects_are_indented():
    """Numbers, texts, nulls and lists of them stay on their line; an object or a list holding
    one opens lines, keys sorted, two spaces a level."""
    data = {"b": {"samples": [1, 2.5, None], "shape": [[2, 3], [4]]}, "a": [{"x": 1}, 2], "c": [], "d": {}}
    assert json_text(data) == (
        "{\n"
        '  "a": [\n'
        "    {\n"
        '      "x": 1\n'
        "    },\n"
        "    2\n"
        "  ],\n"
        '  "b": {\n'
        '    "samples": [1, 2.5, null],\n'
        '    "shape": [[2, 3], [4]]\n'
        "  },\n"
        '  "c": [],\n'
        '  "d": {}\n'
        "}"
    )


@pytest.mark.parametrize(
    "value",
    [
        5,
        't\u00e9\n"x"',
        [],
        {},
        [{}],
        ({"a": (1, 2)},),
        {"k": [1e300, -0.0, 10**20, True, False]},
        {"nested": [[{"deep": [1]}], "x"]},
        {"\u00e9": "\u20ac"},
    ],
)
def test_it_reads_back_as_the_document_json_dumps_writes(value):
    """Whatever the layout, the text holds what json.dumps's does (tuples as lists, escapes,
    numbers), in both character modes."""
    for ascii_only in (True, False):
        text = json_text(value, ensure_ascii=ascii_only)
        assert json.loads(text) == json.loads(json.dumps(value))
        assert text.isascii() or not ascii_only


def test_keys_that_are_no_text_are_written_as_json_writes_them_and_bad_values_refused():
    """An int, bool or null key becomes its JSON text as json.dumps makes it; NaN is written as json
    writes it; an object JSON cannot hold is a TypeError, as from json.dumps."""
    assert json.loads(json_text({2: "x", 1: "y"})) == {"1": "y", "2": "x"}
    assert json_text({None: [math.nan]}) == '{\n  "null": [NaN]\n}'
    with pytest.raises(TypeError):
        json_text({"a": object()})


def test_a_large_profiles_series_take_a_line_each():
    """A 1,000-step series is one line: the document has a line per key, not per number."""
    data = {"ops": [{"name": f"aten::op{i}", "per_step": {"samples": list(range(1000))}} for i in range(8)]}
    text = json_text(data)
    assert len(text.splitlines()) < 60
    assert json.loads(text) == data
