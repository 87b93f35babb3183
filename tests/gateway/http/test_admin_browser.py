"""The admin page in a real headless browser: Debian's chromium driven by chromedriver (selenium).

A gateway with an admin key serves over loopback, in front of the session federation's real sites
(in-process transport: signed requests, verified responses). A client asks it questions over HTTP
— one of them carrying markup — then the browser is refused without the key, logs in with it,
and must show every site with its key id and the recent queries with their traces, with the
markup shown as text and never run. A screenshot of the page is saved in the test's tmp dir and
its path printed (and recorded as the test's `screenshot` property).

A missing browser or driver fails the test (scripts/test installs both with apt-get)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

import pytest
import requests
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from hansa.core.serving import BackgroundServer
from hansa.gateway.trust.apikeys import API_KEYS_FILE, ApiKeyStore
from hansa.gateway.http.app import create_gateway_app
from hansa.sync.httpsig import QUERY_ID_HEADER
from hansa.sync.keys import SiteIdentity

pytestmark = pytest.mark.slow
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ADMIN_KEY = "browser-test-admin-key-0123456789abcdef"
QUESTION = "What does FEMA do after a disaster?"
HOSTILE = "Who pays? <script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">"


@pytest.fixture()
def browser() -> Iterator[Any]:
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    assert not missing, f"{missing} missing: scripts/test installs Debian's chromium and chromium-driver"
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1800", "--disable-extensions", "--no-first-run"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture()
def served(in_process_gateway, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A gateway with an admin key, serving over loopback, and a client's API key."""
    keys = ApiKeyStore(tmp_path / API_KEYS_FILE)
    api_key = keys.create("browser-client")
    gateway = in_process_gateway(keys, admin_key=ADMIN_KEY, top_k_sites=2)
    try:
        with BackgroundServer(create_gateway_app(gateway)) as server:
            yield {"url": server.url, "api_key": api_key, "gateway": gateway}
    finally:
        gateway.close()


def _replaced(button: Any) -> Any:
    """A wait condition: the button's page is gone. Chromium 156 sometimes answers a node of the
    page being replaced with "Node with given id does not belong to the document" rather than a
    stale-element error (seen in CI); both mean the old page is gone, anything else is raised."""
    def gone(_: Any) -> bool:
        try:
            button.is_enabled()
        except StaleElementReferenceException:
            return True
        except WebDriverException as exc:
            if "does not belong to the document" in str(exc):
                return True
            raise
        return False

    return gone


def submit(browser: Any, button_id: str) -> None:
    """Click a form's button and wait until the page it leads to has replaced this one."""
    button = browser.find_element(By.ID, button_id)
    button.click()
    WebDriverWait(browser, 60).until(_replaced(button))
    WebDriverWait(browser, 60).until(lambda b: b.execute_script("return document.readyState") == "complete")


def ask(served: dict[str, Any], body: dict[str, Any]) -> str:
    resp = requests.post(f"{served['url']}/v1/query", json=body, timeout=300,
                         headers={"Authorization": f"Bearer {served['api_key']}"})
    assert resp.status_code == 200, resp.text
    return resp.headers[QUERY_ID_HEADER]


def test_the_admin_page_in_a_browser(served, browser, federation, tmp_path: Path, record_property) -> None:
    url = served["url"]
    sites = sorted(federation.sites)
    first = ask(served, {"question": QUESTION, "sites": sites})  # every site is called
    hostile = ask(served, {"question": HOSTILE})

    # Refused without the key: the JSON with a 401, the page with the login form and nothing else.
    assert requests.get(f"{url}/admin/api/state", timeout=30).status_code == 401
    assert requests.get(f"{url}/admin/api/state", timeout=30,
                        headers={"Authorization": f"Bearer {served['api_key']}"}).status_code == 401  # a client key
    assert requests.get(f"{url}/admin", timeout=30).status_code == 401
    browser.get(f"{url}/admin")
    assert browser.find_elements(By.ID, "key") and not browser.find_elements(By.CSS_SELECTOR, "tr.site")
    assert QUESTION not in browser.page_source
    browser.find_element(By.ID, "key").send_keys("not-the-admin-key-not-the-admin-key")
    submit(browser, "login")
    assert "not the admin key" in browser.find_element(By.ID, "login-error").text
    assert not browser.find_elements(By.CSS_SELECTOR, "tr.site")

    # With the key: the sites and the recent queries.
    browser.find_element(By.ID, "key").send_keys(ADMIN_KEY)
    submit(browser, "login")
    rows = {row.get_attribute("data-site-id"): row for row in browser.find_elements(By.CSS_SELECTOR, "tr.site")}
    assert sorted(rows) == sites
    for site_id, row in rows.items():
        def cell(name: str) -> str:
            return row.find_element(By.CSS_SELECTOR, f"td.{name}").text

        assert SiteIdentity.load(federation.sites[site_id].ctx.identity_dir).keyid in cell("keys")
        assert cell("status").endswith("routable") and "not routable" not in cell("status")
        assert re.search(r"\d+[smh]( \d+[smh])? ago · seq \d+", cell("published")), cell("published")  # freshness
        assert re.search(r"in 6d 23h|in 7d", cell("expires")), cell("expires")  # the federation's 168 h TTL
        assert cell("last-call").startswith("ok")  # reachability
        # a record only once something confirmed or caught the site (issue 32: answering alone earns nothing)
        assert (re.fullmatch(r"0\.\d{3}\n[\d.]+ ✓ / [\d.]+ ✗", cell("reliability"))
                or cell("reliability") == "no evidence"), cell("reliability")
        assert re.match(r"routed \d+% of recent questions\nclaim gap [+-]\d\.\d\d", cell("conduct")), cell("conduct")
        badges = [b.text for b in row.find_elements(By.CSS_SELECTOR, "td.recent .badge")]
        assert "ok" in badges, f"{site_id}: no recent ok call in {badges}"  # called by the first query

    queries = {q.get_attribute("data-query-id"): q for q in browser.find_elements(By.CSS_SELECTOR, ".query")}
    assert list(queries)[:2] == [hostile, first]  # newest first
    shown = queries[first]
    assert QUESTION in shown.find_element(By.CSS_SELECTOR, ".question").text
    trace = shown.find_element(By.CSS_SELECTOR, "pre.trace")
    assert not trace.is_displayed()
    shown.find_element(By.TAG_NAME, "summary").click()  # open the trace
    assert trace.is_displayed() and first in trace.text and "stages_ms" in trace.text
    for site_id in sites:
        assert f"{site_id}: ok" in shown.text

    # The question with markup is shown as text and nothing of it ran.
    assert queries[hostile].find_element(By.CSS_SELECTOR, ".question").text == HOSTILE
    assert browser.title == "hansa gateway admin" and not browser.find_elements(By.CSS_SELECTOR, "#queries img")

    # The JSON twin says the same.
    state = requests.get(f"{url}/admin/api/state", timeout=30, headers={"Authorization": f"Bearer {ADMIN_KEY}"}).json()
    assert [s["site_id"] for s in state["sites"]] == sites
    assert [q["query_id"] for q in state["recent_queries"][:2]] == [hostile, first]

    browser.set_window_size(1400, max(1800, int(browser.execute_script("return document.body.scrollHeight"))))
    screenshot = tmp_path / "admin-page.png"
    assert browser.save_screenshot(str(screenshot)) and screenshot.stat().st_size > 10_000
    record_property("screenshot", str(screenshot))
    print(f"admin page screenshot: {screenshot}")

    submit(browser, "logout")
    browser.get(f"{url}/admin")
    assert not browser.find_elements(By.CSS_SELECTOR, "tr.site")
