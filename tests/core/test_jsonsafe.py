import pytest

from hansa.core.errors import InputError
from hansa.core.jsonsafe import dumps, loads_strict


@pytest.mark.parametrize(
    "raw, message",
    [
        ("[" * 100_000 + "]" * 100_000, "nested deeper"),
        ('{"a": 1, "a": 2}', "duplicate key"),
        ("[NaN]", "NaN"),
        ("[Infinity]", "Infinity"),
        ("[-Infinity]", "Infinity"),
        ("{bad", "invalid JSON"),
        (b"\xff\xfe", "not UTF-8"),
        ("[" + "9" * 5000 + "]", "invalid JSON"),
        ("[1e400]", "out of range"),
        ('{"q": "\\ud800"}', "lone surrogate"),
        ('{"\\udfff": 1}', "lone surrogate"),
        ('["ok", "\\ud800"]', "lone surrogate"),
    ],
)
def test_hostile_json_is_refused(raw, message) -> None:
    with pytest.raises(InputError, match=message):
        loads_strict(raw)


def test_brackets_inside_strings_do_not_count_as_depth() -> None:
    assert loads_strict('{"a": "' + "[" * 1000 + '"}') == {"a": "[" * 1000}


def test_round_trip_and_no_nan_out() -> None:
    assert loads_strict(dumps({"x": [1, 2.5, "é"]})) == {"x": [1, 2.5, "é"]}
    with pytest.raises(ValueError):
        dumps({"x": float("nan")})
