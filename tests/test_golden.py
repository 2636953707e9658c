"""Every built-in's output as users get it (``throttlelab.run``, the bytes that
``throttlelab run NAME --json`` prints) against tests/golden/NAME.json, byte for
byte, the ``engine`` timing block aside.

crates/throttlelab-core/tests/golden.rs checks the core's output against the same
files (and the bandwidth trace's digest); this checks that the binding hands the
user exactly those bytes. The files store the output pretty-printed (serde_json),
then a line of digests; the native output is compact, so the stored output's
whitespace outside strings is dropped before comparing. A change meant to alter
results regenerates the files: ``bash scripts/bless_golden.sh``.

The built-ins take about 35 s of CPU in all, run here on 2 threads (the core
releases the GIL while it simulates).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from throttlelab import _native
from throttlelab.scenarios import builtin_names, load_scenario_text

GOLDEN = Path(__file__).parent / "golden"


def compact(pretty: str) -> str:
    """``pretty`` JSON with the whitespace outside strings removed."""
    out, in_string, escaped = [], False, False
    for c in pretty:
        if in_string:
            out.append(c)
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            out.append(c)
            in_string = True
        elif not c.isspace():
            out.append(c)
    return "".join(out)


def stored_output(name: str) -> str:
    """The stored output of built-in ``name``, compact (the file's last line is the digests)."""
    text = (GOLDEN / f"{name}.json").read_text()
    output, _, digests = text.rstrip("\n").rpartition("\n")
    assert "output_fnv1a64" not in output, f"{name}: stored as its digest only; golden.rs checks it"
    assert set(json.loads(digests)) >= {"output_bytes", "trace_fnv1a64"}
    return compact(output)


@pytest.fixture(scope="module")
def outputs() -> dict[str, str]:
    """Every built-in's native output JSON, simulated now."""
    names = builtin_names()
    with ThreadPoolExecutor(2) as pool:
        return dict(zip(names, pool.map(lambda n: _native.run(load_scenario_text(n)[0]), names)))


@pytest.mark.parametrize("name", builtin_names())
def test_builtin_matches_golden(outputs: dict[str, str], name: str) -> None:
    got, want = outputs[name], stored_output(name)
    # The engine block is the output's last key: everything before it, byte for byte.
    head, sep, engine = got.rpartition(',"engine":')
    assert sep and isinstance(json.loads(engine[:-1]), dict), "no engine block last"
    assert head + "}" == want, (
        f"{name}: output differs from tests/golden/{name}.json; if intended, regenerate with "
        "bash scripts/bless_golden.sh and review the diff"
    )


def test_compact_keeps_strings_whole() -> None:
    assert compact('{\n  "a b": "x \\" y",\n  "c": [\n    1,\n    2.5\n  ]\n}') == '{"a b":"x \\" y","c":[1,2.5]}'


def test_a_changed_value_is_caught(outputs: dict[str, str]) -> None:
    """One digit changed in an output does not compare equal (the check can fail)."""
    head = outputs["two-spinners"].rpartition(',"engine":')[0] + "}"
    changed = head.replace('"usage_usec":', '"usage_usec":1', 1)
    assert changed != head and changed != stored_output("two-spinners")
    assert head == stored_output("two-spinners")
