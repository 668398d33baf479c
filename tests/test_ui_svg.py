"""The dashboard's SVG charts, by hand: what is drawn where, what is marked, what is left out."""

import re

from andreas.ui.svg import Bar, gantt, job_colour, step_chart


def test_gantt_draws_each_bar_in_the_window_on_its_lane_with_its_marks():
    lanes = ["n1/0", "n1/1"]
    bars = [Bar("n1/0", 0.0, 50.0, "a", job_colour(0), job_id="a", run_id=1),
            Bar("n1/1", 50.0, 100.0, "b", job_colour(1), "forecast", late=True, job_id="b"),
            Bar("n1/1", 200.0, 300.0, "c", job_colour(2), job_id="c"),  # after the window
            Bar("n9/0", 0.0, 10.0, "d", job_colour(3), job_id="d"),  # on no lane shown
            Bar("n1/0", 60.0, 90.0, "busy", "", "busy")]
    svg = gantt(lanes, bars, 0.0, 100.0, 50.0, width=1110, label_w=100)
    assert svg.count('<g class="bar') == 3
    assert 'data-job="a" data-kind="run" data-run="1"' in svg
    assert 'class="bar forecast late"' in svg and "b LATE" in svg
    assert 'stroke-dasharray="5 3"' in svg  # the forecast stretch is dashed
    assert 'data-kind="busy"' in svg and 'fill="#9aa0a6"' in svg
    # x = 100 + t / 100 * (1110 - 100 - 10): a at [100, 600], the now line at 600
    assert re.search(r'<rect x="100.0" y="\d+" width="500.0"', svg)
    assert '<line class="now" x1="600.0"' in svg


def test_job_colours_differ_in_hue_and_alternate_in_lightness():
    colours = [job_colour(i) for i in range(12)]
    assert len(set(colours)) == 12
    lightness = [c.split()[0] for c in colours]
    assert all(a != b for a, b in zip(lightness, lightness[1:]))


def test_step_chart_draws_the_series_or_says_there_is_none():
    svg = step_chart([0.0, 10.0, 20.0], [100.0, 300.0], unit="W", title="power")
    points = re.search(r'points="([^"]+)"', svg).group(1).split()
    assert len(points) == 4  # two steps, two ends each
    assert "300 W" in svg and "<title>power</title>" in svg
    assert "no data yet" in step_chart([0.0], [], unit="W", title="power")


def test_step_chart_labels_its_axis_and_draws_the_reference():
    svg = step_chart([0.0, 10.0, 20.0], [1000.0, 1200.0], unit="", title="predicted end",
                     label=lambda v: f"t{v:.0f}", reference=(1100.0, "due"), floor=None)
    assert '<line class="reference"' in svg and ">due</text>" in svg
    # the axis spans the data and the reference, padded by 5 %: 990 to 1210
    assert ">t990</text>" in svg and ">t1210</text>" in svg
