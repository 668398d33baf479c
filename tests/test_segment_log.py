"""The simulator's columnar record of segments (sim/segment_log.py) reads back as Segments."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from andreas.model import Segment
from andreas.sim.segment_log import SegmentLog

NODES = [("v100-000", "V100"), ("k80-000", "K80"), ("k80-001", "K80")]
JOBS = ["a", "b", "job-7"]

seconds = st.floats(0.0, 1e9, allow_nan=False)
segment = st.tuples(st.integers(0, len(JOBS) - 1), st.integers(0, len(NODES) - 1),
                    st.integers(1, 8), seconds, seconds, st.floats(0.0, 1e6),
                    st.sampled_from(["run", "restart"]),
                    st.none() | st.floats(50.0, 400.0), st.floats(0.0, 3000.0))


@settings(max_examples=80, deadline=None)
@given(st.lists(segment, max_size=30))
def test_the_log_reads_back_every_segment_as_written(rows):
    log = SegmentLog(JOBS, NODES)
    expected = []
    for job, node, gpus, start, end, epochs, phase, limit, saved in rows:
        log.append(job, node, gpus, start, end, epochs, phase, limit, saved)
        expected.append(Segment(JOBS[job], *NODES[node], gpus, start, end, epochs, phase, limit,
                                saved))
    assert len(log) == len(expected)
    assert list(log) == expected and log == expected
    assert log[1:-1] == expected[1:-1]
    if expected:
        assert log[-1] == expected[-1] and log[0] == expected[0]
        assert log != expected[:-1]
    with pytest.raises(IndexError):
        log[len(expected)]
