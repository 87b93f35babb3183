"""Wycheproof's Ed25519 verification vectors through our verification path.

Vectors: Project Wycheproof (github.com/C2SP/wycheproof, testvectors_v1/ed25519_test.json),
licensed Apache-2.0 (see shared/vectors/wycheproof/LICENSE). They cover malleable S (s + L),
truncated and padded signatures, non-canonical R encodings and special values of r and s; every
`invalid` case must be refused and every `valid` one accepted, by the same functions a DSSE
envelope goes through: `load_public_key` for the enrolled key and `verify_signature` for PAE bytes.
"""
from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from hansa.sync.keys import load_public_key, verify_signature

_RELATIVE = Path("shared") / "vectors" / "wycheproof" / "ed25519_test.json"


def _vector_file() -> Path:
    """The file lives in the workspace's shared/ folder beside the repository: look upward."""
    here = Path(__file__).resolve()
    for folder in here.parents:
        for candidate in (folder / _RELATIVE, folder / ".." / _RELATIVE):
            if candidate.is_file():
                return candidate
    raise FileNotFoundError(f"cannot find {_RELATIVE} in any parent of {here}")


def _cases() -> list[Any]:
    data = json.loads(_vector_file().read_text(encoding="utf-8"))
    assert data["algorithm"] == "EDDSA"
    cases = [
        pytest.param(group["publicKey"]["pk"], test, id=f"tc{test['tcId']}-{test['result']}")
        for group in data["testGroups"]
        for test in group["tests"]
    ]
    assert len(cases) == data["numberOfTests"] == 151
    return cases


CASES = _cases()


@pytest.mark.parametrize(("pk_hex", "case"), CASES)
def test_wycheproof_case(pk_hex: str, case: dict[str, Any]) -> None:
    assert case["result"] in ("valid", "invalid"), case  # no "acceptable" cases in this file
    key = load_public_key(base64.b64encode(bytes.fromhex(pk_hex)).decode())
    accepted = verify_signature(key, bytes.fromhex(case["sig"]), bytes.fromhex(case["msg"]))
    assert accepted == (case["result"] == "valid"), (case["tcId"], case["comment"], case["flags"])


def test_both_outcomes_are_exercised() -> None:
    results = [p.values[1]["result"] for p in CASES]
    assert results.count("valid") > 40 and results.count("invalid") > 40
