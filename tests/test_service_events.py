"""The service logs each decision it carries out as one key=value line (logger
andreas.events): what started where, what stopped and why, how each run ended."""

import logging

import pytest
from conftest import scheduler_with_queued_jobs, write_service_files

from andreas.service.config import read_service_config
from andreas.service.db import RunRow
from andreas.service.events import event

# real services, engines or processes: make test runs these, make test-fast does not
pytestmark = pytest.mark.service


def test_a_start_a_stop_and_an_end_are_each_one_line(tmp_path, caplog):
    config = read_service_config(write_service_files(tmp_path, extra="decide_in: thread\n"))
    scheduler = scheduler_with_queued_jobs(config, ["a"])
    with caplog.at_level(logging.INFO, logger="andreas.events"):
        try:
            scheduler.tick()
        finally:
            scheduler.shutdown(stop_jobs=True)
    lines = [r.getMessage() for r in caplog.records if r.name == "andreas.events"]
    with scheduler.store.session() as s:
        run = s.get(RunRow, 1)
        where = f"node={run.node} gpus={len(run.gpu_indices)} gpu_type={run.gpu_type}"
        # the job may end on its own SIGTERM handler (0) or be gone before its wrapper records
        # an exit (-): which depends on the machine's load; the line says what the run recorded
        code = "-" if run.exit_code is None else run.exit_code
    assert code in ("-", 0)
    # jobs_as_service_user here: the OS account is the service's (user=-)
    assert lines == [f"start job=a run=1 {where} user=-", "stop job=a run=1 reason=shutdown",
                     f"end job=a run=1 state=paused exit={code} reason=shutdown epochs=0"], lines


def test_values_with_spaces_are_quoted(caplog):
    with caplog.at_level(logging.INFO, logger="andreas.events"):
        event("unplannable", "job-1", error="ZeroDivisionError: float division by zero",
              node=None)
    assert caplog.records[-1].getMessage() == (
        'unplannable job=job-1 error="ZeroDivisionError: float division by zero" node=-')
