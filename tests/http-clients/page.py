"""Drives `claij serve`'s web page in headless Chromium with Selenium (WebDriver).

    page.py BASE_URL RUN_ID ARTIFACTS_DIR
    page.py --hook LINK_URL ARTIFACTS_DIR

RUN_ID is a human-approval run that waits in `approve`. The script opens the runs list,
finds the run, opens it, checks its graph (the `approve` node lit) and its trail, answers
the form with an answer the validator refuses (approver "x") and checks the message shows
by the approver field, then with a good one (approver "ada"), and waits for the run to
complete live: the status `completed`, the answer's entry appended to the trail by the
event stream (the page is never reloaded), the graph's light moved to `deploy`.
Screenshots go to ARTIFACTS_DIR (page-1-list.png … page-4-completed.png). Prints one JSON
line summarising what it saw; exits non-zero (with the reason on stderr) when a check
fails. chromedriver comes from PATH, else /usr/bin/chromedriver (Debian's
chromium-driver: scripts/setup/chromium).

With --hook, LINK_URL is a resume link (BASE_URL/hooks/SECRET) to the `approve` wait of a
human-approval run, opened as a person who got it by mail would (no API token): the form
shows the prompt and both answers; an answer the validator refuses (approver "x") shows
the message by the approver field; a good one (approver "ada") shows the thank-you with
the run's status; the page reloaded says the link no longer answers; a forged link (one
digit changed) says it is not valid. Screenshots: page-5-link.png … page-8-link-used.png.

    page.py --question ACCEPT_LINK DECLINE_LINK ARTIFACTS_DIR

Two resume links to runs stopped for an MCP server's question (tests/mcp-clients/ask.yaml):
the first shows who asks, the question's fields (no choice of transition) and the decline
and cancel buttons; it is answered with a name ("Lin"); the second is declined. Each shows
the thank-you with the run's status. Screenshots: page-9-question.png, page-10-answered.png.
"""

import json
import os
import shutil
import sys
import tempfile
import time

from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

TIMEOUT = 30


def chromium_binary():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("page.py: Chromium is missing: run scripts/setup/chromium")


def chromedriver_binary():
    path = shutil.which("chromedriver")
    if path:
        return path
    if os.access("/usr/bin/chromedriver", os.X_OK):
        return "/usr/bin/chromedriver"
    sys.exit("page.py: chromedriver is missing: run scripts/setup/chromium")


def start_driver(profile):
    options = webdriver.ChromeOptions()
    options.binary_location = chromium_binary()
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-quic",
        "--force-device-scale-factor=1",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(arg)
    # The browser's console: a script error or a refusal by the content security policy
    # shows there.
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(executable_path=chromedriver_binary()))


class Browser:
    """A headless Chromium with a fresh profile, the summary being built, and the step."""

    def __init__(self, artifacts, summary):
        self.artifacts = artifacts
        self.summary = summary
        # A fresh profile, at a plain path (Chromium cannot start with `..` in it).
        self.profile = tempfile.mkdtemp(prefix="claij-page-")
        self.driver = start_driver(self.profile)
        self.wait = WebDriverWait(self.driver, TIMEOUT, poll_frequency=0.1)
        self.step = "start"

    def shot(self, name):
        path = os.path.join(self.artifacts, name)
        self.driver.save_screenshot(path)
        self.summary["screenshots"].append(path)

    def js(self, script, *args):
        return self.driver.execute_script(script, *args)

    def until(self, what, condition):
        self.step = what
        return self.wait.until(lambda d: condition())

    def severe_logs(self):
        """The console's errors: a script error, a refusal by the content security policy."""
        return [entry["message"] for entry in self.driver.get_log("browser") if entry.get("level") == "SEVERE"]

    def quit(self):
        self.driver.quit()
        shutil.rmtree(self.profile, ignore_errors=True)


def drive_run(b, base, run_id):
    """The runs list, the run, a refused answer, a good one, the run completing live."""
    driver, summary, until, js, shot = b.driver, b.summary, b.until, b.js, b.shot

    def lit():
        return js(
            "const n = document.querySelector('#graph svg g.node.current title');"
            "return n ? n.textContent.trim() : null;"
        )

    def trail():
        return js(
            "return [...document.querySelectorAll('#trail [data-testid=trail-entry]')]"
            ".map(r => [Number(r.dataset.seq), r.dataset.from, r.dataset.to]);"
        )

    def status():
        return js("const s = document.getElementById('run-status'); return s ? s.dataset.status || null : null;")

    # 1. The runs list: the run is there, waiting.
    driver.get(f"{base}/#/")
    row_css = f'[data-testid="run-row"][data-run-id="{run_id}"]'
    row = until("the run is listed", lambda: driver.find_elements(By.CSS_SELECTOR, row_css) or None)[0]
    summary["listed_status"] = row.get_attribute("data-status")
    summary["list_title"] = driver.title
    until("the list is drawn", lambda: driver.find_element(By.ID, "status-filter").is_displayed())
    until("the workflows are listed", lambda: driver.find_elements(By.CSS_SELECTOR, '[data-testid="definition"][data-fsm="human-approval"]') or None)
    shot("page-1-list.png")

    # 2. The run: graph with `approve` lit, the trail so far, the form.
    row.find_element(By.CSS_SELECTOR, '[data-testid="run-link"]').click()
    until("the run opens", lambda: driver.current_url.endswith(f"#/runs/{run_id}"))
    until("the run's status shows", lambda: status() == "suspended")
    until("the graph is drawn with `approve` lit", lambda: lit() == "approve")
    until("the live stream connects", lambda: driver.find_element(By.ID, "live-state").get_attribute("data-state") == "live")
    until("the trail shows the entries so far", lambda: len(trail()) >= 2)
    until("the answer form shows", lambda: driver.find_element(By.ID, "answer-form").is_displayed())
    # A mark on the window: gone if the page were reloaded.
    js("window.__claijMark = 'kept';")
    summary["state_before"] = driver.find_element(By.ID, "run-state").text
    summary["lit_before"] = lit()
    summary["trail_before"] = trail()
    summary["graph_nodes"] = js(
        "return [...document.querySelectorAll('#graph svg g.node title')].map(t => t.textContent.trim());"
    )
    answers = Select(driver.find_element(By.ID, "answer-select"))
    summary["answers"] = [o.text for o in answers.options]
    summary["interrupt_shown"] = driver.find_element(By.ID, "interrupt-button").is_displayed()
    summary["prompt"] = driver.find_element(By.ID, "wait-prompt").text
    shot("page-2-run.png")

    # 3. A refused answer: the validator's message by the approver field.
    answers.select_by_value("0")
    until("the form is for approve -> deploy", lambda: driver.find_element(By.ID, "answer-form").get_attribute("data-transition") == "approve->deploy")
    approver = driver.find_element(By.ID, "field-approver")
    summary["approver_required"] = approver.get_attribute("aria-required") == "true"
    approver.clear()
    approver.send_keys("x")
    driver.find_element(By.ID, "answer-submit").click()
    error = until(
        "the refusal shows by the approver field",
        lambda: (lambda e: e if e.is_displayed() and e.text.strip() else None)(driver.find_element(By.ID, "error-approver")),
    )
    summary["refused_message"] = error.text.strip()
    summary["refused_field_invalid"] = approver.get_attribute("aria-invalid") == "true"
    summary["general_error_shown"] = driver.find_element(By.ID, "form-error").is_displayed()
    summary["status_after_refusal"] = status()
    summary["trail_after_refusal"] = len(trail())
    shot("page-3-refused.png")

    # 4. A good answer: the run completes, live.
    approver = driver.find_element(By.ID, "field-approver")
    approver.clear()
    approver.send_keys("ada")
    driver.find_element(By.ID, "answer-submit").click()
    until("the status becomes completed", lambda: status() == "completed")
    until("the answer's entry arrives in the trail", lambda: any(e[1] == "approve" and e[2] == "deploy" for e in trail()))
    until("the light moves to deploy", lambda: lit() == "deploy")
    until("the form is gone", lambda: not driver.find_elements(By.ID, "answer-form"))
    until("the stream ends", lambda: driver.find_element(By.ID, "live-state").get_attribute("data-state") == "ended")
    until("the result shows", lambda: driver.find_elements(By.ID, "run-result") or None)
    summary["status_after"] = status()
    summary["state_after"] = driver.find_element(By.ID, "run-state").text
    summary["lit_after"] = lit()
    summary["trail_after"] = trail()
    summary["answer_event"] = json.loads(
        js(
            "const r = document.querySelector('#trail [data-from=approve][data-to=deploy] pre');"
            "return r ? r.textContent : 'null';"
        )
    )
    summary["result"] = json.loads(driver.find_element(By.ID, "run-result").get_attribute("textContent"))
    summary["interrupt_shown_after"] = driver.find_element(By.ID, "interrupt-button").is_displayed()
    summary["not_reloaded"] = js("return window.__claijMark === 'kept';")
    shot("page-4-completed.png")

    # 5. Fork from the answer's entry (time travel): refused by the schema first (the page
    # stays, saying why), then as a rejection: the new run opens, saying where it came from.
    driver.find_element(By.CSS_SELECTOR, '#trail [data-testid="fork-button"][data-seq="2"]').click()
    event = until("the fork form opens", lambda: driver.find_elements(By.ID, "fork-event") or None)[0]
    summary["fork_form_seq"] = driver.find_element(By.ID, "fork-form").get_attribute("data-seq")
    summary["fork_form_event"] = json.loads(event.get_attribute("value"))
    event.clear()
    event.send_keys('{"id": ["approve", "rejected"], "reason": "no"}')
    driver.find_element(By.ID, "fork-submit").click()
    refused = until(
        "the refused fork says why",
        lambda: (lambda e: e if e.is_displayed() and e.text.strip() else None)(driver.find_element(By.ID, "fork-error")),
    )
    summary["fork_refused"] = refused.text
    summary["fork_refused_stayed"] = driver.current_url.endswith(f"#/runs/{run_id}")
    event.clear()
    event.send_keys('{"id": ["approve", "rejected"], "reason": "a freeze"}')
    driver.find_element(By.ID, "fork-submit").click()
    until("the fork opens", lambda: "#/runs/" in driver.current_url and not driver.current_url.endswith(f"#/runs/{run_id}"))
    summary["fork_id"] = driver.current_url.split("#/runs/", 1)[1]
    until("the fork's status shows", lambda: status() == "completed")
    forked = until("the fork says where it came from", lambda: driver.find_elements(By.ID, "forked-from") or None)[0]
    summary["fork_from"] = [forked.get_attribute("data-run"), forked.get_attribute("data-seq"), forked.text]
    summary["fork_state"] = driver.find_element(By.ID, "run-state").text
    until("the fork's trail shows", lambda: len(trail()) >= 3)
    summary["fork_trail"] = trail()
    shot("page-5-fork.png")

    # The console: no script error, nothing refused by the content security policy.
    # (Chromium logs the refused answer's and fork's 422 as failed loads: expected, set apart.)
    severe = b.severe_logs()
    summary["refusals_logged"] = [m for m in severe if ("/resume" in m or "/fork" in m) and "422" in m]
    summary["console_errors"] = [m for m in severe if m not in summary["refusals_logged"]]


def link_state(b):
    """The link view's state (loading, open, answered, …), as a function."""
    return lambda: b.js("const v = document.getElementById('link-view'); return v ? v.dataset.state : null;")


def shown_in(driver):
    """Whether the element with an id is on the page and displayed, as a function."""

    def shown(element_id):
        found = driver.find_elements(By.ID, element_id)
        return bool(found) and found[0].is_displayed()

    return shown


def drive_link(b, link):
    """A resume link opened in a browser: its form, a refused answer, a good one, the link
    used."""
    driver, summary, until, js, shot = b.driver, b.summary, b.until, b.js, b.shot

    state, shown = link_state(b), shown_in(driver)

    # 1. The link: the question, its prompt, both answers; no token asked, no runs list.
    driver.get(link)
    until("the link's form shows", lambda: state() == "open" and shown("answer-form"))
    summary["title"] = driver.find_element(By.ID, "link-title").text
    summary["page_title"] = driver.title
    summary["state"] = driver.find_element(By.ID, "link-state").text
    summary["prompt"] = driver.find_element(By.ID, "wait-prompt").text
    answers = Select(driver.find_element(By.ID, "answer-select"))
    summary["answers"] = [o.text for o in answers.options]
    summary["token_asked"] = js("return document.getElementById('token-dialog').open;")
    summary["nav_shown"] = shown("nav-runs")
    # Links to the runs a person could follow (the person has no token).
    summary["runs_links_shown"] = js(
        "return [...document.querySelectorAll('a[href^=\"#/\"]')].filter(a => a.offsetParent !== null).length;"
    )
    shot("page-5-link.png")

    # 2. A refused answer: the validator's message by the approver field; the form stays.
    answers.select_by_value("0")
    until("the form is for approve -> deploy", lambda: driver.find_element(By.ID, "answer-form").get_attribute("data-transition") == "approve->deploy")
    approver = driver.find_element(By.ID, "field-approver")
    summary["approver_required"] = approver.get_attribute("aria-required") == "true"
    approver.clear()
    approver.send_keys("x")
    driver.find_element(By.ID, "answer-submit").click()
    error = until(
        "the refusal shows by the approver field",
        lambda: (lambda e: e if e.is_displayed() and e.text.strip() else None)(driver.find_element(By.ID, "error-approver")),
    )
    summary["refused_message"] = error.text.strip()
    summary["refused_field_invalid"] = approver.get_attribute("aria-invalid") == "true"
    summary["general_error_shown"] = shown("form-error")
    summary["state_after_refusal"] = state()
    shot("page-6-link-refused.png")

    # 3. A good answer: the thank-you, with the run's status.
    approver = driver.find_element(By.ID, "field-approver")
    approver.clear()
    approver.send_keys("ada")
    driver.find_element(By.ID, "answer-submit").click()
    until("the thank-you shows", lambda: state() == "answered" and shown("link-done"))
    done = driver.find_element(By.ID, "link-done")
    summary["done_text"] = done.text
    summary["done_status"] = done.get_attribute("data-status")
    summary["done_next"] = driver.find_element(By.ID, "link-run-next").text
    summary["form_gone"] = not driver.find_elements(By.ID, "answer-form")
    shot("page-7-link-done.png")

    # 4. The link again: it no longer answers.
    driver.refresh()
    until("the reloaded link says it no longer answers", lambda: state() == "used" and shown("link-message"))
    summary["used_reason"] = driver.find_element(By.ID, "link-message").get_attribute("data-reason")
    summary["used_message"] = driver.find_element(By.ID, "link-message-title").text
    summary["form_after_reload"] = bool(driver.find_elements(By.ID, "answer-form"))
    shot("page-8-link-used.png")

    # 5. A forged link (one digit changed): not valid.
    forged = link[:-1] + ("1" if link.endswith("0") else "0")
    driver.get(forged)
    until("the forged link says it is not valid", lambda: state() == "invalid" and shown("link-message"))
    summary["forged_message"] = driver.find_element(By.ID, "link-message-title").text

    # The console: no script error, nothing refused by the content security policy.
    # (Chromium logs the link's 422, 410 and 404 answers as failed loads: expected, set
    # apart.)
    severe = b.severe_logs()
    summary["refusals_logged"] = [m for m in severe if "/hooks/" in m and any(f" {c} " in m for c in ("422", "410", "404"))]
    summary["console_errors"] = [m for m in severe if m not in summary["refusals_logged"]]


def drive_question(b, accept_link, decline_link):
    """Resume links to runs stopped for an MCP server's question: the form of its schema,
    accepted on one, declined on the other."""
    driver, summary, until, js, shot = b.driver, b.summary, b.until, b.js, b.shot

    state, shown = link_state(b), shown_in(driver)

    def done():
        until("the thank-you shows", lambda: state() == "answered" and shown("link-done"))
        return driver.find_element(By.ID, "link-done").get_attribute("data-status")

    driver.get(accept_link)
    until("the question's form shows", lambda: state() == "open" and shown("answer-form"))
    form = driver.find_element(By.ID, "answer-form")
    summary["asker"] = driver.find_element(By.ID, "answer-asker").text
    summary["question_server"] = form.get_attribute("data-question")
    summary["prompt"] = driver.find_element(By.ID, "wait-prompt").text
    summary["select_shown"] = shown("answer-select")
    summary["fields"] = [e.get_attribute("data-field") for e in driver.find_elements(By.CSS_SELECTOR, "#answer-form [data-field]")]
    summary["buttons"] = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#answer-form .actions button")]
    name = driver.find_element(By.ID, "field-name")
    name.clear()
    name.send_keys("Lin")
    shot("page-9-question.png")
    driver.find_element(By.ID, "answer-submit").click()
    summary["accepted_status"] = done()
    shot("page-10-answered.png")

    driver.get(decline_link)
    until("the second question's form shows", lambda: state() == "open" and shown("answer-decline"))
    driver.find_element(By.ID, "answer-decline").click()
    summary["declined_status"] = done()

    severe = b.severe_logs()
    summary["console_errors"] = severe


def main():
    args = sys.argv[1:]
    if len(args) == 3 and args[0] == "--hook":
        mode, link, artifacts = "link", args[1], args[2]
        summary = {"link": link, "screenshots": []}
    elif len(args) == 4 and args[0] == "--question":
        mode, link, decline, artifacts = "question", args[1], args[2], args[3]
        summary = {"link": link, "screenshots": []}
    elif len(args) == 3:
        mode, base, run_id, artifacts = "run", args[0].rstrip("/"), args[1], args[2]
        summary = {"run": run_id, "screenshots": []}
    else:
        sys.exit(
            "usage: page.py BASE_URL RUN_ID ARTIFACTS_DIR | page.py --hook LINK_URL ARTIFACTS_DIR"
            " | page.py --question ACCEPT_LINK DECLINE_LINK ARTIFACTS_DIR"
        )
    artifacts = os.path.realpath(artifacts)
    os.makedirs(artifacts, exist_ok=True)
    b = Browser(artifacts, summary)
    try:
        if mode == "link":
            drive_link(b, link)
        elif mode == "question":
            drive_question(b, link, decline)
        else:
            drive_run(b, base, run_id)
    except TimeoutException:
        summary["failed_at"] = b.step
        try:
            b.shot("page-failure.png")
            summary["console"] = [entry["message"] for entry in b.driver.get_log("browser")]
            summary["body"] = b.driver.find_element(By.TAG_NAME, "body").text[:2000]
        except Exception as e:  # noqa: BLE001 - the report matters more than this
            summary["report_error"] = str(e)
        print(json.dumps(summary), flush=True)
        print(f"page.py: timed out waiting: {b.step}", file=sys.stderr)
        sys.exit(1)
    finally:
        b.quit()
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    started = time.monotonic()
    main()
    print(f"page.py: done in {time.monotonic() - started:.1f} s", file=sys.stderr)
