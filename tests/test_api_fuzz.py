"""Schemathesis reads the service's own OpenAPI document and throws generated requests at the
real application (SQLite, no scheduler thread: nothing it submits runs): no answer may be a
500, and every answer must be one the document lists, with the body it describes. The
reliability issue's non-finite numbers, lone surrogates and engine-dependent 500s were found
this way; this keeps them found."""

import pytest
import schemathesis
from conftest import write_service_files
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

from andreas.service.api import create_app
from andreas.service.config import read_service_config

TOKEN = "fuzz-admin-token"
USER_TOKEN: dict[str, str] = {}  # made once the app exists


@pytest.fixture(scope="module")
def fuzz_app(tmp_path_factory):
    directory = tmp_path_factory.mktemp("fuzz")
    # refused tokens are part of the fuzzing: no rate limit on them here
    config = read_service_config(write_service_files(
        directory, extra="auth_max_failures: 1000000\n"))
    app = create_app(config, admin_token=TOKEN, run_scheduler=False)
    _, USER_TOKEN["token"] = app.state.store.create_token("fuzz-user", "user")
    return app


schema = schemathesis.pytest.from_fixture("fuzz_schema")


@pytest.fixture(scope="module")
def fuzz_schema(fuzz_app):
    return schemathesis.openapi.from_asgi("/openapi.json", fuzz_app)


@schema.parametrize()
@settings(max_examples=40, deadline=None, derandomize=True,  # seeded: the same requests each run
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.function_scoped_fixture])
def test_the_api_answers_every_generated_request_as_documented(case):
    # Each generated request is sent with an admin's token and again with a user's (about
    # 2,800 requests in all, in 20 s here). Two of schemathesis's checks are left out, each
    # for a rule the document cannot state: "give exactly one of command or script" (a
    # schema-valid body gets the documented 400 with that sentence), and unknown query
    # parameters, ignored as HTTP allows.
    for token in (TOKEN, USER_TOKEN["token"]):
        case.call_and_validate(headers={"Authorization": f"Bearer {token}"},
                               excluded_checks=[positive_data_acceptance,
                                                negative_data_rejection])
