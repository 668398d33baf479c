"""The on-time rule every view uses (timing.py), by hand."""

from andreas.timing import on_time, shown_end

DUE, NOW = 1000.0, 500.0


def test_a_completed_job_is_judged_by_when_it_completed():
    assert on_time(999.0, True, DUE, 5000.0, NOW) is True  # a stale late forecast: ignored
    assert on_time(1004.0, True, DUE, 10.0, NOW) is False  # 4 s late is late
    assert shown_end(1004.0, True, 10.0) == 1004.0


def test_a_job_that_ended_otherwise_has_no_verdict_and_no_end():
    assert on_time(None, True, DUE, 900.0, NOW) is None  # cancelled before it ran
    assert shown_end(None, True, 900.0) is None


def test_a_job_not_done_past_its_due_date_is_late_whatever_the_forecast():
    assert on_time(None, False, DUE, 900.0, now=1001.0) is False
    assert on_time(None, False, DUE, 900.0, NOW) is True
    assert on_time(None, False, DUE, 1100.0, NOW) is False
    assert on_time(None, False, DUE, None, NOW) is None  # not forecast yet
