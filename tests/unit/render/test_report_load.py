"""Cleaning of hostile strings and reading of evidence excerpts (diagnose.render.load)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagnose.render.load import (
    MAX_FIELD_CHARS,
    clean_in_place,
    clean_text,
    clean_tree,
    normalize,
    read_cleaned,
    read_excerpt,
    read_results,
)
from tests.support.paths import FIXTURES


def test_bytes_that_were_not_utf8_show_as_hex_escapes() -> None:
    raw = b"port \xff\xfe down"
    assert clean_text(raw.decode("utf-8", errors="surrogateescape")) == "port \\xff\\xfe down"


def test_control_characters_become_visible_and_newlines_stay() -> None:
    assert clean_text("a\x1b[31mred\x00\tb\nc\r\n") == "a\\x1b[31mred\\x00\tb\nc\r\n"


def test_other_lone_surrogates_and_xml_nonchars_are_replaced() -> None:
    assert clean_text("x\ud800y\uffffz") == "x\ufffdy\ufffdz"


def test_long_fields_are_cut_with_a_note() -> None:
    out = clean_text("x" * 50, limit=10)
    assert out.startswith("x" * 10)
    assert "[cut: 40 more characters]" in out


def test_clean_tree_cleans_keys_and_nested_values() -> None:
    tree = {"k\x00": [{"v": "\udcff"}, 3, None]}
    assert clean_tree(tree) == {"k\\x00": [{"v": "\\xff"}, 3, None]}


def test_clean_in_place_cleans_as_clean_tree_does_without_copying_and_shares_equal_strings() -> None:
    long = "y" * (MAX_FIELD_CHARS + 5)
    text = json.dumps(
        {
            "k\x00": [{"v": "\udcff"}, 3, None],
            "rows": [{"status": "PASS", "fix": "reseat"}, {"status": "PASS", "fix": "reseat"}],
            "long": [long, long],
            "clean": {"a": "b"},
        }
    )
    tree, expected = json.loads(text), clean_tree(json.loads(text))
    untouched = tree["rows"]
    assert untouched[0]["fix"] is not untouched[1]["fix"]  # decoded apart, as from results.json
    cleaned = clean_in_place(tree)
    assert cleaned == expected
    assert cleaned["rows"] is untouched  # the same list and dicts, cleaned where they are
    first, second = cleaned["rows"]
    assert first["fix"] is second["fix"] and first["status"] is second["status"]
    assert cleaned["long"][0].endswith("[cut: 5 more characters]")


def test_read_cleaned_gives_what_clean_tree_gives_and_shares_equal_strings(tmp_path: Path) -> None:
    long = "y" * (MAX_FIELD_CHARS + 5)
    document = {
        "k\x00": [{"v": "\udcff", "w\x1b": ["a\x07", ["deep\x00", 4]]}, 3, None, "top\x01"],
        "rows": [{"status": "PASS", "fix": "reseat"}, {"status": "PASS", "fix": "reseat"}],
        "long": [long, {"text": long}],
        "clean": {"a": "b", "n": [1.5, True]},
    }
    path = tmp_path / "results.json"
    path.write_bytes(
        json.dumps(document).encode("utf-8", errors="surrogateescape")[:-1] + b', "raw": "n\xe9"}'
    )
    cleaned = read_cleaned(path)
    assert cleaned == clean_tree(read_results(path))
    assert cleaned["raw"] == "n\\xe9" and cleaned["k\\x00"][0]["w\\x1b"] == ["a\\x07", ["deep\\x00", 4]]
    first, second = cleaned["rows"]
    assert first["fix"] is second["fix"] and first["status"] is second["status"]
    assert cleaned["long"][1]["text"].endswith("[cut: 5 more characters]")


def test_read_cleaned_refuses_a_file_that_is_not_an_object(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="must hold a JSON object"):
        read_cleaned(path)


def test_normalize_shares_the_rows_it_keeps_and_copies_the_one_it_changes() -> None:
    kept, odd = {"id": "a", "status": "PASS"}, {"id": "b", "status": "MAYBE"}
    out = normalize({"checks": [kept, odd]})
    assert out["checks"][0] is kept
    assert odd["status"] == "MAYBE" and out["checks"][1]["status"] == "ERROR"


def test_read_results_accepts_raw_non_utf8_bytes(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_bytes(b'{"schema": 1, "hosts": [{"name": "n\xe9"}]}')
    assert clean_tree(read_results(path))["hosts"][0]["name"] == "n\\xe9"


def test_normalize_turns_unknown_statuses_into_error_never_pass() -> None:
    out = normalize({"checks": [{"id": "x", "status": "MAYBE", "message": "m"}, "junk"], "hosts": None})
    assert out["checks"] == [
        {"id": "x", "status": "ERROR", "message": "[status 'MAYBE' not understood by this report] m"}
    ]
    assert out["hosts"] == [] and out["benchmarks"] == [] and out["run"] == {}


def test_excerpt_of_a_missing_file_is_a_note(tmp_path: Path) -> None:
    excerpt = read_excerpt(tmp_path, "raw/node1/ibstat.txt")
    assert excerpt.text is None
    assert "not found" in (excerpt.note or "")


def test_excerpt_never_reads_outside_the_results_folder(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("TOP SECRET")
    base = tmp_path / "run"
    base.mkdir()
    for rel in ("../secret.txt", str(tmp_path / "secret.txt"), "raw/../../secret.txt", "file:secret.txt"):
        excerpt = read_excerpt(base, rel)
        assert excerpt.text is None, rel
        assert "leaves the results folder" in (excerpt.note or "")


def test_long_evidence_is_cut_by_lines_and_line_length_with_a_note(tmp_path: Path) -> None:
    raw = tmp_path / "raw" / "h"
    raw.mkdir(parents=True)
    (raw / "out.txt").write_bytes(b"A" * 5000 + b"\n" + b"line\xff\n" * 500)
    excerpt = read_excerpt(tmp_path, "raw/h/out.txt", max_lines=20, max_line=100)
    assert excerpt.text is not None
    lines = excerpt.text.splitlines()
    assert len(lines) == 20
    assert lines[0].startswith("A" * 100) and "[line cut: 4900 more characters]" in lines[0]
    assert lines[1] == "line\\xff"
    assert excerpt.note is not None and "raw/h/out.txt" in excerpt.note


def test_short_evidence_is_quoted_whole_without_note(tmp_path: Path) -> None:
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "x.txt").write_text("State: Active\r\nRate: 400\n")
    excerpt = read_excerpt(tmp_path, "raw/x.txt")
    assert excerpt.text == "State: Active\nRate: 400"
    assert excerpt.note is None


def test_fixtures_are_schema_1() -> None:
    for path in (FIXTURES / "results").glob("*.json"):
        data = json.loads(path.read_text())
        assert data["schema"] == 1, path
        assert {"run", "hosts", "checks", "benchmarks", "verdict"} <= set(data), path
