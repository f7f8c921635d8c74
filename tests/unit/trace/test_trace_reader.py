"""The streaming trace reader: the same events as json.load, at any chunk size, and faults named by line."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from diagnose.trace import reader
from diagnose.trace.reader import TraceFormatError, TraceReader
from tests.support.paths import FIXTURES

TRACES = FIXTURES / "traces"
CPU_TRACE = TRACES / "cpu" / "healthy_rank0.json.gz"
GPU_TRACE = TRACES / "public" / "hta_ddp_allreduce_rank0.json.gz"


def _whole(path: Path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()))


@pytest.mark.parametrize("path", [CPU_TRACE, GPU_TRACE], ids=["cpu", "gpu"])
def test_events_and_meta_match_json_load(path: Path) -> None:
    whole = _whole(path)
    trace = TraceReader(path)
    assert list(trace.events()) == whole["traceEvents"]
    assert trace.meta == {k: v for k, v in whole.items() if k != "traceEvents"}


def test_plain_json_and_a_tiny_read_window_give_the_same_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Events straddling every chunk boundary (64-byte reads) still decode whole, numbers included."""
    plain = tmp_path / "rank0.json"
    plain.write_bytes(gzip.decompress(CPU_TRACE.read_bytes()))
    monkeypatch.setattr(reader, "_CHUNK_BYTES", 64)
    trace = TraceReader(plain)
    assert list(trace.events()) == _whole(CPU_TRACE)["traceEvents"]
    assert trace.meta["distributedInfo"]["rank"] == 0


def test_chrome_array_format_without_closing_bracket(tmp_path: Path) -> None:
    path = tmp_path / "array.json"
    path.write_text('[{"ph": "X", "ts": 1, "dur": 2},\n {"ph": "X", "ts": 3, "dur": 1},\n')
    assert [e["ts"] for e in TraceReader(path).events()] == [1, 3]


def _fault(tmp_path: Path, text: str, name: str = "t.json") -> TraceFormatError:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(TraceFormatError) as caught:
        list(TraceReader(path).events())
    return caught.value


def test_faults_name_file_line_and_column(tmp_path: Path) -> None:
    fault = _fault(tmp_path, '{"traceEvents": [\n  {"ph": "X", "ts": 1},\n  {"ph": "X" "ts": 2}\n]}')
    assert (fault.line, fault.column) == (3, 14)
    assert str(fault).startswith(f"{tmp_path / 't.json'}:3:14: ")
    truncated = _fault(tmp_path, '{"traceEvents": [\n  {"ph": "X", "ts": 1},\n  {"ph": "X", "ts')
    assert truncated.line == 3
    assert "expected a JSON object" in str(_fault(tmp_path, "hello"))
    assert "not a JSON object" in str(_fault(tmp_path, '{"traceEvents": [1, 2]}'))
    assert "after the end" in str(_fault(tmp_path, '{"traceEvents": []} trailing'))


def test_faults_of_the_file_itself(tmp_path: Path) -> None:
    broken = tmp_path / "cut.json.gz"
    broken.write_bytes(CPU_TRACE.read_bytes()[:5000])
    with pytest.raises(TraceFormatError, match="cannot read"):
        list(TraceReader(broken).events())
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"traceEvents": [{"name": "caf\xe9"}]}')
    with pytest.raises(TraceFormatError, match="not UTF-8 text near byte 30"):
        list(TraceReader(latin).events())
    with pytest.raises(TraceFormatError, match="cannot open"):
        list(TraceReader(tmp_path / "missing.json").events())
