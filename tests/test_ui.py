"""The web dashboard in a real headless Chromium (Debian's, driven by Playwright) against a real
`andreas serve` with real jobs: sign-in, a job's reason and live progress, cancel, the Gantt
chart's bars, privacy between users, CSRF, the submit form's forecast, and the headers.

Chromium comes from the project's setup (`make install-browser`, run by `make test`); a
machine without it fails here with that instruction, as the PostgreSQL tests need their
server."""

import shutil

import httpx
import pytest
from conftest import TRAIN, train_job, wait_for, write_service_files
from test_service_durability import TOKEN, Service, free_port

from andreas.service.sandbox import HEADLESS_CHROMIUM_ARGS

# real services, engines or processes: make test runs these, make test-fast does not
pytestmark = pytest.mark.service

NODES = ("nodes:\n  - {name: n1, gpu_type: fast, gpus: 2}\n"
         "  - {name: n2, gpu_type: slow, gpus: 1}\n")


def chromium_path() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail("Debian's chromium is not installed: run `make install-browser` "
                    "(make test does)")
    return path


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ui")
    config = write_service_files(tmp, nodes=NODES,
                                 extra="public_url: http://127.0.0.1:{port}\n")
    port = free_port()
    config.write_text(config.read_text().replace("{port}", str(port)))
    svc = Service(config, port)
    svc.start()
    admin = {"Authorization": f"Bearer {TOKEN}"}
    svc.tokens = {name: httpx.post(f"{svc.url}/tokens", headers=admin, json={"user": name},
                                   timeout=10).json()["token"] for name in ("alice", "bob")}
    yield svc
    for job in httpx.get(f"{svc.url}/jobs", headers=admin, timeout=10).json():
        if job["state"] in ("queued", "running", "paused"):
            httpx.post(f"{svc.url}/jobs/{job['id']}/cancel", headers=admin, timeout=10)
    wait_for(lambda: all(j["state"] not in ("running", "paused", "queued") for j in
                         httpx.get(f"{svc.url}/jobs", headers=admin, timeout=10).json()),
             timeout=60, what="every job to stop")
    svc.stop()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium_path(), args=HEADLESS_CHROMIUM_ARGS)
        yield b
        b.close()


def submit(service, user, body):
    r = httpx.post(f"{service.url}/jobs", json=body, timeout=30,
                   headers={"Authorization": f"Bearer {service.tokens[user]}"})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def api(service, path, user="admin"):
    token = TOKEN if user == "admin" else service.tokens[user]
    return httpx.get(f"{service.url}{path}", headers={"Authorization": f"Bearer {token}"},
                     timeout=10).json()


def sign_in(browser, service, user):
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(f"{service.url}/ui/")
    assert "/ui/login" in page.url  # not signed in: sent to sign-in
    page.fill("#token", service.tokens[user])
    page.click("button[type=submit]")
    page.wait_for_url(f"{service.url}/ui/")
    return page


@pytest.fixture(scope="module")
def alice_jobs(service):
    """Three long jobs of alice's that fill the three GPUs (profile 'one': one GPU each), and a
    fourth that must wait for a GPU, with its reason."""
    running = [submit(service, "alice", train_job(400, deadline_s=3600, profile="one",
                                                  samples=60000)) for _ in range(3)]
    wait_for(lambda: all(api(service, f"/jobs/{j}")["state"] == "running" for j in running),
             timeout=120, what="three jobs running")
    waiting = submit(service, "alice", {**train_job(5, deadline_s=7200, profile="one"),
                                        "name": "waiter"})
    wait_for(lambda: api(service, f"/jobs/{waiting}")["reason"] not in (None, "not planned yet"),
             timeout=60, what="the fourth job's reason")
    return running, waiting


def test_sign_in_refuses_a_wrong_token_and_sign_out_ends_the_session(browser, service):
    page = browser.new_page()
    page.goto(f"{service.url}/ui/login")
    page.fill("#token", "not-a-token")
    page.click("button[type=submit]")
    assert "unknown, revoked or expired token" in page.inner_text("[role=alert]")
    page.close()
    page = sign_in(browser, service, "alice")
    cookie = next(c for c in page.context.cookies() if c["name"] == "andreas_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    page.click("text=Sign out")
    page.wait_for_url("**/ui/login")
    page.goto(f"{service.url}/ui/plan")
    assert "/ui/login" in page.url
    page.close()


def test_jobs_show_their_reason_and_live_progress_and_cancel_from_the_ui(browser, service,
                                                                         alice_jobs):
    running, waiting = alice_jobs
    page = sign_in(browser, service, "alice")
    row = page.locator(f"tr[data-job='{waiting}']")
    assert "no capacity" in row.locator("td.reason").inner_text()
    # progress moves without reloading the page (the table refreshes itself)
    first = running[0]
    bar = f"tr[data-job='{first}'] progress"
    before = float(page.get_attribute(bar, "value"))
    page.wait_for_function(
        f"() => Number(document.querySelector(\"{bar}\").value) > {before}", timeout=60000)
    # cancel the waiting job from its page
    page.click(f"tr[data-job='{waiting}'] a")
    page.wait_for_url(f"**/ui/jobs/{waiting}")
    page.click("text=Cancel this job")
    page.wait_for_url(f"**/ui/jobs/{waiting}")
    assert "cancelled" in page.inner_text(".state")
    assert api(service, f"/jobs/{waiting}")["state"] == "cancelled"
    page.close()


def test_the_gantt_chart_draws_every_run(browser, service, alice_jobs):
    running, _ = alice_jobs
    page = sign_in(browser, service, "alice")
    page.goto(f"{service.url}/ui/plan")
    runs = {r["id"] for j in running for r in api(service, f"/jobs/{j}/runs")}
    drawn = {int(x) for x in page.eval_on_selector_all(
        "svg.gantt g.bar.run[data-run]", "els => els.map(e => e.dataset.run)")}
    assert runs <= drawn, (runs, drawn)  # one bar (per GPU lane) for each run
    assert page.locator("svg.gantt line.now").count() == 1
    # a running job's page charts its forecasts over time against its due date
    page.goto(f"{service.url}/ui/jobs/{running[0]}")
    assert page.locator("svg.chart").count() == 2
    assert page.locator("svg.chart line.reference").count() >= 1
    page.close()


def test_a_user_sees_no_other_users_job(browser, service, alice_jobs):
    running, _ = alice_jobs
    page = sign_in(browser, service, "bob")
    text = page.content()
    assert not any(j in text for j in running)
    assert "No jobs of yours" in page.inner_text("main")
    page.goto(f"{service.url}/ui/jobs/{running[0]}")
    assert "belongs to another user" in page.inner_text("[role=alert]")
    page.goto(f"{service.url}/ui/plan")
    assert not any(j in page.content() for j in running)
    assert page.locator("svg.gantt g.bar.busy").count() >= 3  # alice's runs, unnamed
    page.goto(f"{service.url}/ui/cluster")
    assert not any(j in page.content() for j in running)
    page.close()


def test_a_form_without_the_csrf_token_is_refused(browser, service, alice_jobs):
    running, _ = alice_jobs
    page = sign_in(browser, service, "alice")
    target = running[2]
    # the browser sends the session cookie, but the form lacks the token: refused
    r = page.request.post(f"{service.url}/ui/jobs/{target}/cancel", form={})
    assert r.status == 403 and "CSRF" in r.text()
    r = page.request.post(f"{service.url}/ui/jobs/{target}/cancel", form={"csrf": "0" * 32})
    assert r.status == 403
    r = page.request.post(f"{service.url}/ui/logout", form={})
    assert r.status == 403
    assert api(service, f"/jobs/{target}")["state"] == "running"
    page.close()


def test_the_submit_form_shows_the_forecast_before_submitting(browser, service):
    page = sign_in(browser, service, "bob")
    page.goto(f"{service.url}/ui/submit")
    page.fill("#program", f"{TRAIN} --samples 20000")
    page.fill("#epochs", "2")
    page.fill("#deadline", "30m")
    page.select_option("#profile", "mlp")
    page.click("text=Show the forecast")
    forecast = page.inner_text(".forecast")
    assert "Start" in forecast and "cost" in forecast and "on time" in forecast
    assert "end between" in forecast  # its range: the jobs faster, or slower with arrivals
    page.click("text=Submit the job")
    page.wait_for_url("**/ui/jobs/job-*")
    job_id = page.url.rsplit("/", 1)[1]
    assert api(service, f"/jobs/{job_id}", "bob")["owner"] == "bob"
    page.goto(f"{service.url}/ui/submit")
    page.fill("#program", "true")
    page.fill("#epochs", "1")
    page.fill("#deadline", "soon")
    page.click("text=Show the forecast")
    assert "deadline: expected a duration" in page.inner_text("[role=alert]")
    page.close()


def test_pages_load_only_their_own_files(browser, service):
    page = sign_in(browser, service, "alice")
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    for path in ("/ui/", "/ui/plan", "/ui/cluster", "/ui/submit"):
        response = page.goto(f"{service.url}{path}")
        csp = response.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "default-src 'none'" in csp
        assert page.locator("h1").count() == 1
    # the API's docs too: Swagger UI renders from the service's own files (no CDN)
    page.goto(f"{service.url}/docs")
    page.wait_for_selector(".swagger-ui .info .title", timeout=30000)
    assert "ANDREAS" in page.inner_text(".swagger-ui .info .title")
    assert all(u.startswith(service.url) or u.startswith("data:") for u in requests), requests
    page.close()
