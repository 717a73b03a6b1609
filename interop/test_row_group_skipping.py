"""Theirs → ours, row group statistics: a table delta-rs wrote in many row groups of one
file, laid out by a string column whose statistics it cut to a few bytes (a shorter min, a
max cut and raised), is read by our reader with string predicates: exactly the rows a
filter in this test selects, with row groups skipped by those statistics where they can
be."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import WriterProperties, write_deltalake

_TAIL = "é" * 12
_LONG = "x" * 70


def _strings(n: int) -> list[str]:
    # Distinct short prefixes (each row group its own range), long values sharing a prefix
    # past the cut (their row groups' cut statistics are equal), and values of the largest
    # code point, whose cut max cannot be raised.
    out = [f"{i:05d}-{_TAIL}" for i in range(n)]
    out += [f"{_LONG}{i:05d}" for i in range(n // 4)]
    out += ["\U0010ffff" * (1 + i % 20) + str(i) for i in range(n // 10)]
    return sorted(out)


def test_delta_rs_row_group_string_stats(deltatool, tmp_path):
    path = str(tmp_path / "t")
    strings = _strings(2000)
    data = pa.table({"id": pa.array(range(len(strings)), pa.int64()), "s": pa.array(strings, pa.string())})
    props = WriterProperties(max_row_group_size=100, statistics_truncate_length=8)
    write_deltalake(path, data, writer_properties=props, target_file_size=1 << 30)
    files = list((tmp_path / "t").glob("*.parquet"))
    assert len(files) == 1, files
    md = pq.ParquetFile(files[0]).metadata
    assert md.num_row_groups >= 20, md.num_row_groups
    stats = md.row_group(3).column(1).statistics
    assert len(stats.max) <= 8 and len(stats.min) <= 8, (stats.min, stats.max)  # cut by the writer

    cases = {
        "s = '00042-" + _TAIL + "'": lambda s: s == f"00042-{_TAIL}",
        "s < '00150'": lambda s: s < "00150",
        "s >= '01990'": lambda s: s >= "01990",
        "s > '" + _LONG + "00100'": lambda s: s > f"{_LONG}00100",
        "s IN ('00007-" + _TAIL + "', '01500-" + _TAIL + "', '" + _LONG + "00003')": lambda s: s
        in (f"00007-{_TAIL}", f"01500-{_TAIL}", f"{_LONG}00003"),
        "s >= '\U0010ffff\U0010ffff'": lambda s: s >= "\U0010ffff\U0010ffff",
        "s = '\U0010ffff5'": lambda s: s == "\U0010ffff5",
        "s < '0'": lambda s: s < "0",
    }
    pruned = {}
    for where, keep in cases.items():
        got, counts = deltatool.read_where(path, where)
        want = sorted(i for i, s in enumerate(strings) if keep(s))
        assert sorted(got.column("id").to_pylist()) == want, where
        pruned[where] = counts["rowGroupsPruned"]
    # The predicates on the short prefixes skip most of the file's row groups.
    assert pruned["s < '00150'"] >= md.num_row_groups // 2, pruned
    assert pruned["s >= '01990'"] >= md.num_row_groups // 2, pruned
