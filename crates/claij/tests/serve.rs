//! `claij serve` as a real process on a loopback port, driven with a real HTTP client
//! (reqwest): definitions (registered, refused with every located problem, refused when
//! they would start programs or read files), runs started, listed page by page, shown,
//! answered (a refused answer changes nothing; of two concurrent answers exactly one
//! wins), interrupted, their trails paged and followed live as server-sent events
//! (resumed with `Last-Event-ID`), a restart after `kill -9` continuing the run that was
//! in flight, the API token, body limits, malformed bodies, the OpenAPI description;
//! retried starts under one `Idempotency-Key`; the worker beside a plain server (expiries
//! and published events with no other process); an interrupt or a timeout stopping the
//! embedded model's generation.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test reports failure

mod served;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use claij_testkit::process::which;
use serde_json::{Value, json};
use served::{
    CLAIJ, Reply, Served, Webhooks, approval, client, eventually, get, local_callbacks, places,
    post, repo, secret_file, send,
};

const TOKEN: &str = "0123456789abcdef0123456789abcdef-test-token";

fn assert_problem(reply: &Reply, status: u16) {
    assert_eq!(reply.status, status, "{}", reply.body);
    assert_eq!(
        reply.content_type, "application/problem+json",
        "{}",
        reply.body
    );
    assert_eq!(reply.body["status"], status);
    assert!(
        reply.body["detail"].as_str().is_some_and(|d| !d.is_empty()),
        "{}",
        reply.body
    );
}

fn raw_request() -> Value {
    json!({"id": ["start", "summarise"], "service": "billing", "version": "2.4.1", "changes": 14})
}

/// Starts a human-approval run that suspends, and returns its id.
async fn suspended_run(http: &reqwest::Client, server: &Served) -> String {
    let reply = post(
        http,
        server.url("/runs?wait=30"),
        &json!({"fsm": "human-approval", "input": raw_request()}),
    )
    .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert_eq!(reply.body["status"], "suspended", "{}", reply.body);
    reply.body["id"].as_str().expect("an id").to_owned()
}

#[tokio::test]
async fn a_run_waits_for_a_person_a_refused_answer_changes_nothing_and_a_good_one_completes_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("claij.db");
    let server = Served::start(&store, &[&approval()]);
    let http = client();

    let id = suspended_run(&http, &server).await;
    let shown = get(&http, server.url(&format!("/runs/{id}"))).await;
    assert_eq!(shown.status, 200);
    let run = &shown.body;
    assert_eq!(run["state"], "approve");
    assert_eq!(run["spend"]["calls"], 0, "{run}");
    assert!(run["budget"].is_null(), "none was given: {run}");
    assert_eq!(run["wait"]["state"], "approve");
    let answers = run["wait"]["answers"].as_array().expect("answers");
    let ids: Vec<&Value> = answers.iter().map(|a| &a["id"]).collect();
    assert_eq!(
        ids,
        [
            &json!(["approve", "deploy"]),
            &json!(["approve", "rejected"])
        ]
    );
    assert_eq!(
        answers[0]["schema"]["properties"]["approver"]["minLength"], 2,
        "each answer's schema is shown"
    );
    assert_eq!(run["wait"]["resume_url"], format!("/runs/{id}/resume"));
    let trail_len = run["trail_len"].as_u64().expect("trail_len");

    // A refused answer: placed errors, nothing changed.
    let refused = post(
        &http,
        server.url(&format!("/runs/{id}/resume")),
        &json!({"input": {"id": ["approve", "deploy"], "approver": "x"}}),
    )
    .await;
    assert_problem(&refused, 422);
    assert_eq!(
        places(&refused.body),
        ["$.input.approver"],
        "{}",
        refused.body
    );
    let unknown_route = post(
        &http,
        server.url(&format!("/runs/{id}/resume")),
        &json!({"input": {"id": ["approve", "nowhere"]}}),
    )
    .await;
    assert_problem(&unknown_route, 422);
    assert_eq!(places(&unknown_route.body), ["$.input.id"]);
    let after = get(&http, server.url(&format!("/runs/{id}"))).await.body;
    assert_eq!(after["status"], "suspended");
    assert_eq!(
        after["trail_len"].as_u64(),
        Some(trail_len),
        "nothing was appended"
    );

    // The answer completes it.
    let done = post(
        &http,
        server.url(&format!("/runs/{id}/resume?wait=30")),
        &json!({"input": {"id": ["approve", "deploy"], "approver": "ada"}}),
    )
    .await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert_eq!(done.body["status"], "completed");
    assert_eq!(done.body["state"], "deploy");
    assert_eq!(done.body["result"]["approver"], "ada");

    // Answered once: a second answer is a conflict, and changes nothing.
    let again = post(
        &http,
        server.url(&format!("/runs/{id}/resume")),
        &json!({"input": {"id": ["approve", "rejected"], "reason": "too late"}}),
    )
    .await;
    assert_problem(&again, 409);
    let final_view = get(&http, server.url(&format!("/runs/{id}"))).await.body;
    assert_eq!(final_view["status"], "completed");
    assert_eq!(final_view["result"]["approver"], "ada");

    // The trail, two entries a page.
    let mut from = 0;
    let mut seqs = Vec::new();
    loop {
        let page = get(
            &http,
            server.url(&format!("/runs/{id}/trail?from={from}&limit=2")),
        )
        .await
        .body;
        let entries = page["entries"].as_array().expect("entries");
        assert!(entries.len() <= 2);
        seqs.extend(entries.iter().map(|e| e["seq"].as_u64().expect("seq")));
        match page["next"].as_u64() {
            Some(next) => from = next,
            None => break,
        }
    }
    let total = final_view["trail_len"].as_u64().expect("trail_len");
    assert_eq!(
        seqs,
        (0..total).collect::<Vec<_>>(),
        "every entry once, in order"
    );
}

#[tokio::test]
async fn a_run_forked_over_http_goes_on_from_the_entry_and_a_refused_fork_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(&dir.path().join("claij.db"), &[&approval()]);
    let http = client();
    let id = suspended_run(&http, &server).await;
    let done = post(
        &http,
        server.url(&format!("/runs/{id}/resume?wait=30")),
        &json!({"input": {"id": ["approve", "deploy"], "approver": "ada"}}),
    )
    .await;
    assert_eq!(done.body["status"], "completed", "{}", done.body);
    let original = get(&http, server.url(&format!("/runs/{id}/trail")))
        .await
        .body;
    let fork_url = server.url(&format!("/runs/{id}/fork?wait=30"));

    // The approval replaced by a rejection.
    let rejected = post(
        &http,
        fork_url.clone(),
        &json!({"at": 2, "event": {"id": ["approve", "rejected"], "reason": "a freeze"}}),
    )
    .await;
    assert_eq!(rejected.status, 201, "{}", rejected.body);
    let fork = rejected.body["id"].as_str().expect("an id").to_owned();
    assert_ne!(fork, id);
    assert_eq!(rejected.header("location"), format!("/runs/{fork}"));
    assert_eq!(rejected.body["status"], "completed");
    assert_eq!(rejected.body["state"], "rejected");
    assert_eq!(rejected.body["result"]["reason"], "a freeze");
    assert_eq!(
        rejected.body["forked_from"],
        json!({"run": id, "seq": 2, "edited": true})
    );
    let trail = get(&http, server.url(&format!("/runs/{fork}/trail")))
        .await
        .body;
    let first_two = |page: &Value| page["entries"].as_array().expect("entries")[..2].to_vec();
    assert_eq!(first_two(&trail), first_two(&original));

    // As it was at entry 1: the fork waits for the person, its own resume link given.
    let again = post(&http, fork_url.clone(), &json!({"at": 1})).await;
    assert_eq!(again.status, 201, "{}", again.body);
    assert_eq!(again.body["status"], "suspended");
    let second = again.body["id"].as_str().expect("an id");
    assert_eq!(
        again.body["wait"]["resume_url"],
        format!("/runs/{second}/resume")
    );
    assert_eq!(again.body["forked_from"]["edited"], false);

    // Refused: located problems, and nothing stored.
    let before = run_count(&http, &server).await;
    for (body, status, place) in [
        (json!({"at": 9}), 422, "$.at"),
        (
            json!({"at": 2, "event": {"id": ["approve", "rejected"], "reason": "no"}}),
            422,
            "$.event.reason",
        ),
        (
            json!({"at": 2, "event": {"id": ["summarise", "approve"]}}),
            422,
            "$.event.id",
        ),
        // Bodies this route does not take at all: 400, as for every route.
        (json!({"at": "two"}), 400, "$.at"),
        (json!({"at": 1, "as_node": "approve"}), 400, "$.as_node"),
    ] {
        let refused = post(&http, fork_url.clone(), &body).await;
        assert_problem(&refused, status);
        assert_eq!(places(&refused.body), [place], "{body}: {}", refused.body);
    }
    let missing = post(
        &http,
        server.url("/runs/no-such-run/fork"),
        &json!({"at": 0}),
    )
    .await;
    assert_problem(&missing, 404);
    assert_eq!(run_count(&http, &server).await, before);
    let unchanged = get(&http, server.url(&format!("/runs/{id}/trail")))
        .await
        .body;
    assert_eq!(unchanged, original);
}

#[tokio::test]
async fn a_run_started_with_a_budget_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(&dir.path().join("claij.db"), &[&approval()]);
    let http = client();
    let reply = post(
        &http,
        server.url("/runs?wait=30"),
        &json!({"fsm": "human-approval", "input": raw_request(), "budget": "cost=0.5,calls=3"}),
    )
    .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    let id = reply.body["id"].as_str().expect("an id");
    let run = get(&http, server.url(&format!("/runs/{id}"))).await.body;
    assert_eq!(run["budget"], json!({"cost_usd": 0.5, "calls": 3}), "{run}");
}

#[tokio::test]
async fn of_two_concurrent_answers_exactly_one_wins() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(&dir.path().join("claij.db"), &[&approval()]);
    let http = client();
    for _ in 0..3 {
        let id = suspended_run(&http, &server).await;
        let url = server.url(&format!("/runs/{id}/resume?wait=30"));
        let approve = json!({"input": {"id": ["approve", "deploy"], "approver": "ada"}});
        let reject = json!({"input": {"id": ["approve", "rejected"], "reason": "no way"}});
        let (a, b) = tokio::join!(
            post(&http, url.clone(), &approve),
            post(&http, url.clone(), &reject),
        );
        let mut statuses = [a.status, b.status];
        statuses.sort();
        assert_eq!(statuses, [200, 409], "{} / {}", a.body, b.body);
        let winner = if a.status == 200 { &a.body } else { &b.body };
        let run = get(&http, server.url(&format!("/runs/{id}"))).await.body;
        assert_eq!(
            run["state"], winner["state"],
            "the winner's answer is the one taken"
        );
        assert_eq!(run["status"], "completed");
    }
}

/// A model step that writes for far longer than any test waits: a JSON string of at least
/// 6,000 characters, which the grammar holds the model to.
const ESSAY: &str = r#"
id: essay
states:
  - id: write
    action: llm
    prompts: [Write a very long essay on the history of computing.]
    config: {max_tokens: 4000, max_attempts: 1, timeout: TIMEOUT}
  - {id: done, action: end}
xitions:
  - id: [start, write]
  - id: [write, done]
    schema: {type: object, required: [essay], properties: {essay: {type: string, minLength: 6000}}}
"#;

/// The CPU time the process `pid` has used, in clock ticks (user and system).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    // utime and stime: fields 14 and 15 of the line, 12 and 13 after the name.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// Whether the process `pid` falls idle: within four windows of three seconds, one in
/// which it uses less than a tenth of a core (a generation left running uses a whole one,
/// for longer than that: its 4,000 tokens take the small model over 30 s).
async fn falls_idle(pid: u32) -> bool {
    let ticks_per_second = 100;
    for _ in 0..4 {
        let before = cpu_ticks(pid);
        tokio::time::sleep(Duration::from_secs(3)).await;
        if cpu_ticks(pid) - before < 3 * ticks_per_second / 10 {
            return true;
        }
    }
    false
}

#[tokio::test]
async fn an_interrupt_or_a_timeout_stops_the_embedded_model_and_frees_its_core() {
    let dir = tempfile::tempdir().unwrap();
    let timed = dir.path().join("essay.yaml");
    std::fs::write(&timed, ESSAY.replace("TIMEOUT", "2s")).unwrap();
    let open = dir.path().join("essay-open.yaml");
    std::fs::write(
        &open,
        ESSAY
            .replace("TIMEOUT", "1h")
            .replace("id: essay\n", "id: essay-open\n"),
    )
    .unwrap();
    let server = Served::start_on_embedded_model(
        &dir.path().join("claij.db"),
        &[timed.to_str().unwrap(), open.to_str().unwrap()],
    );
    let http = client();

    // A timeout: the attempt is recorded as timed out, and the generation stops with it.
    let started = post(
        &http,
        server.url("/runs"),
        &json!({"fsm": "essay", "input": {}}),
    )
    .await;
    assert_eq!(started.status, 202, "{}", started.body);
    let id = started.body["id"].as_str().unwrap().to_owned();
    eventually(120, "the attempt times out", || async {
        let run = get(&http, server.url(&format!("/runs/{id}"))).await.body;
        (run["status"] == "failed").then_some(())
    })
    .await;
    let trail = get(&http, server.url(&format!("/runs/{id}/trail")))
        .await
        .body;
    let failure = trail["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|e| e["failure"].as_object().cloned())
        .expect("a failure entry");
    assert_eq!(failure["kind"], "timeout", "{trail}");
    assert!(
        falls_idle(server.pid()).await,
        "the timed-out generation goes on"
    );

    // An interrupt while the model writes: the run is interrupted, the generation stops.
    let started = post(
        &http,
        server.url("/runs"),
        &json!({"fsm": "essay-open", "input": {}}),
    )
    .await;
    assert_eq!(started.status, 202, "{}", started.body);
    let id = started.body["id"].as_str().unwrap().to_owned();
    let mut events = http
        .get(server.url(&format!("/runs/{id}/events")))
        .send()
        .await
        .unwrap();
    let mut buffer = String::new();
    let seen = read_events(&mut events, &mut buffer, |kind, _, _| kind == "token").await;
    assert!(seen.iter().any(|(k, _, _)| k == "token"), "{seen:?}");
    let interrupted = post(
        &http,
        server.url(&format!("/runs/{id}/interrupt")),
        &json!({}),
    )
    .await;
    assert!(interrupted.status < 300, "{}", interrupted.body);
    eventually(60, "the run is interrupted", || async {
        let run = get(&http, server.url(&format!("/runs/{id}"))).await.body;
        (run["status"] == "interrupted").then_some(())
    })
    .await;
    assert!(
        falls_idle(server.pid()).await,
        "the interrupted generation goes on"
    );
}

/// A wait that expires after two seconds, to the `expired` state.
const EXPIRING: &str = r#"
id: expiring
states:
  - id: ask
    action: human
    config: {prompt: "Anyone?", expires: 2s, on_expiry: expired}
  - {id: answered, action: end}
  - {id: expired, action: end}
xitions:
  - id: [start, ask]
  - id: [ask, answered]
    schema: {type: object, required: [who], properties: {who: {type: string}}}
  - id: [ask, expired]
    omit: true
"#;

/// Runs of `fsm` as `GET /runs` lists them.
async fn runs_of(http: &reqwest::Client, server: &Served, fsm: &str) -> Vec<Value> {
    let page = get(http, server.url(&format!("/runs?fsm={fsm}&limit=100")))
        .await
        .body;
    page["runs"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn a_plain_server_fires_expiries_and_dispatches_events_with_no_worker_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let expiring = dir.path().join("expiring.yaml");
    std::fs::write(&expiring, EXPIRING).unwrap();
    let events = repo().join("examples/events");
    let server = Served::start(
        &dir.path().join("claij.db"),
        &[expiring.to_str().unwrap(), events.to_str().unwrap()],
    );
    let http = client();

    // A wait that expires while the server runs is acted on while it runs.
    let started = post(
        &http,
        server.url("/runs?wait=10"),
        &json!({"fsm": "expiring", "input": {}}),
    )
    .await;
    assert_eq!(started.status, 201, "{}", started.body);
    assert_eq!(started.body["status"], "suspended", "{}", started.body);
    let id = started.body["id"].as_str().expect("an id").to_owned();
    let expired = eventually(60, "the expired wait is acted on", || async {
        let run = get(&http, server.url(&format!("/runs/{id}"))).await.body;
        (run["status"] == "completed").then_some(run)
    })
    .await;
    assert_eq!(expired["state"], "expired", "{expired}");

    // A published event starts the runs of the documents that subscribe to its topic.
    let intake = post(
        &http,
        server.url("/runs?wait=10"),
        &json!({"fsm": "order-intake", "input": {"order_id": 42, "items": 13}}),
    )
    .await;
    assert_eq!(intake.status, 201, "{}", intake.body);
    assert_eq!(intake.body["state"], "accepted", "{}", intake.body);
    let shipped = eventually(60, "the published event starts order-shipping", || async {
        let runs = runs_of(&http, &server, "order-shipping").await;
        let done = runs.into_iter().find(|r| r["status"] == "completed")?;
        let id = done["id"].as_str()?.to_owned();
        Some(get(&http, server.url(&format!("/runs/{id}"))).await.body)
    })
    .await;
    assert_eq!(shipped["state"], "shipped", "{shipped}");
    assert_eq!(shipped["result"]["order_id"], 42, "{shipped}");
    assert_eq!(shipped["result"]["parcels"], 2, "{shipped}");
    assert_eq!(runs_of(&http, &server, "order-shipping").await.len(), 1);
}

/// A start with an `Idempotency-Key` header.
async fn keyed_start(http: &reqwest::Client, server: &Served, key: &str, body: &Value) -> Reply {
    send(
        http.post(server.url("/runs?wait=1"))
            .header("idempotency-key", key)
            .header("content-type", "application/json")
            .body(body.to_string()),
    )
    .await
}

/// How many runs the server's store holds.
async fn run_count(http: &reqwest::Client, server: &Served) -> usize {
    let page = get(http, server.url("/runs?limit=100")).await.body;
    page["runs"].as_array().expect("a page of runs").len()
}

#[tokio::test]
async fn a_retried_start_with_one_idempotency_key_makes_one_run() {
    let dir = tempfile::tempdir().unwrap();
    for mode in [&[][..], &["--queue"][..]] {
        let db = dir.path().join(format!("claij{}.db", mode.len()));
        let mut args: Vec<String> = mode.iter().map(|a| a.to_string()).collect();
        args.push(approval());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let server = Served::start(&db, &args);
        let http = client();
        let body = json!({"fsm": "human-approval", "input": raw_request()});
        let first = keyed_start(&http, &server, "deploy-2.4.1", &body).await;
        assert!(
            [201, 202].contains(&first.status),
            "{mode:?}: {}",
            first.body
        );
        let id = first.body["id"].as_str().expect("an id").to_owned();

        // A retry: the same run, 200, nothing new.
        let again = keyed_start(&http, &server, "deploy-2.4.1", &body).await;
        assert_eq!(again.status, 200, "{mode:?}: {}", again.body);
        assert_eq!(again.body["id"], id.as_str(), "{mode:?}");
        // Retried at once, concurrently, under a fresh key: one run between them.
        let (a, b) = tokio::join!(
            keyed_start(&http, &server, "twice-at-once", &body),
            keyed_start(&http, &server, "twice-at-once", &body),
        );
        assert!(
            a.body["id"].is_string() && a.body["id"] == b.body["id"],
            "{mode:?}: {} / {}",
            a.body,
            b.body
        );
        assert_eq!(run_count(&http, &server).await, 2, "{mode:?}");

        // The key of another request: refused, nothing changed.
        let other_input = json!({"fsm": "human-approval", "input": {"id": ["start", "summarise"], "service": "search", "version": "1.0.0", "changes": 2}});
        let reused = keyed_start(&http, &server, "deploy-2.4.1", &other_input).await;
        assert_problem(&reused, 422);
        assert_eq!(
            reused.body["errors"][0]["place"], "$.input",
            "{}",
            reused.body
        );
        // A malformed key: refused with its place.
        let bad = keyed_start(&http, &server, &"k".repeat(300), &body).await;
        assert_problem(&bad, 400);
        assert_eq!(
            bad.body["errors"][0]["place"], "header Idempotency-Key",
            "{}",
            bad.body
        );
        assert_eq!(run_count(&http, &server).await, 2, "{mode:?}");
        // Without a key, each start is a run of its own.
        let unkeyed = post(&http, server.url("/runs"), &body).await;
        assert!([201, 202].contains(&unkeyed.status), "{}", unkeyed.body);
        assert_ne!(unkeyed.body["id"], id.as_str());
        assert_eq!(run_count(&http, &server).await, 3, "{mode:?}");
    }
}

#[tokio::test]
async fn runs_are_listed_newest_first_page_by_page_and_filtered() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(&dir.path().join("claij.db"), &[&approval()]);
    let http = client();
    let mut started = Vec::new();
    for _ in 0..5 {
        started.push(suspended_run(&http, &server).await);
    }
    // Answer the oldest one: it completes.
    let done = post(
        &http,
        server.url(&format!("/runs/{}/resume?wait=30", started[0])),
        &json!({"input": {"id": ["approve", "deploy"], "approver": "ada"}}),
    )
    .await;
    assert_eq!(done.body["status"], "completed");

    let mut listed = Vec::new();
    let mut url = server.url("/runs?limit=2");
    loop {
        let page = get(&http, url.clone()).await;
        assert_eq!(page.status, 200, "{}", page.body);
        let runs = page.body["runs"].as_array().expect("runs").clone();
        assert!(runs.len() <= 2);
        listed.extend(runs.iter().map(|r| r["id"].as_str().unwrap().to_owned()));
        match page.body["next_cursor"].as_str() {
            Some(cursor) => url = server.url(&format!("/runs?limit=2&cursor={cursor}")),
            None => break,
        }
    }
    let newest_first: Vec<String> = started.iter().rev().cloned().collect();
    assert_eq!(listed, newest_first, "every run once, newest first");

    let suspended = get(&http, server.url("/runs?status=suspended")).await.body;
    assert_eq!(suspended["runs"].as_array().map(Vec::len), Some(4));
    let completed = get(
        &http,
        server.url("/runs?status=completed&fsm=human-approval"),
    )
    .await;
    let ids: Vec<&str> = completed.body["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [started[0].as_str()]);
    let other_fsm = get(&http, server.url("/runs?fsm=nothing-like-it"))
        .await
        .body;
    assert_eq!(other_fsm["runs"], json!([]));
    let future = get(&http, server.url("/runs?since=2999-01-01T00:00:00Z"))
        .await
        .body;
    assert_eq!(future["runs"], json!([]));

    let bad_status = get(&http, server.url("/runs?status=sleeping")).await;
    assert_problem(&bad_status, 400);
    assert_eq!(places(&bad_status.body), ["query.status"]);
    let bad_cursor = get(&http, server.url("/runs?cursor=garbage")).await;
    assert_problem(&bad_cursor, 400);
    assert_eq!(places(&bad_cursor.body), ["query.cursor"]);
    let bad_time = get(&http, server.url("/runs?since=yesterday")).await;
    assert_problem(&bad_time, 400);
    assert_eq!(places(&bad_time.body), ["query.since"]);
}

/// The definitions the store holds, by the CLI.
fn stored_definitions(store: &Path) -> String {
    let out = Command::new(CLAIJ)
        .args(["defs", "list", "--store"])
        .arg(store)
        .output()
        .expect("claij defs list");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const PRIVILEGED: &[(&str, &str)] = &[
    (
        r#"{"id": "runs-a-program", "states": [{"id": "go", "action": "command", "config": {"argv": ["touch", "/tmp/claij-pwned"]}}, {"id": "done", "action": "end"}], "xitions": [{"id": ["start", "go"]}, {"id": ["go", "done"]}]}"#,
        "$.states[0].config.argv[0]",
    ),
    (
        r#"{"id": "starts-a-server", "servers": {"sh": {"command": "sh", "args": ["-c", "id"]}}, "states": [{"id": "ask", "action": "llm", "servers": ["sh"]}, {"id": "done", "action": "end"}], "xitions": [{"id": ["start", "ask"]}, {"id": ["ask", "done"]}]}"#,
        "$.servers.sh.command",
    ),
    (
        r#"{"id": "reads-a-file", "states": [{"id": "child", "action": "fsm", "config": {"fsm": "/etc/passwd", "success_to": "done"}}, {"id": "done", "action": "end"}], "xitions": [{"id": ["start", "child"]}, {"id": ["child", "done"]}]}"#,
        "$.states[0].config.fsm",
    ),
];

#[tokio::test]
async fn documents_registered_over_http_are_checked_and_never_start_programs() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("claij.db");
    let server = Served::start(&store, &[&approval()]);
    let http = client();

    // A good one (YAML), served and runnable.
    let yaml = "id: echo\nstates:\n  - id: done\n    action: end\nxitions:\n  - id: [start, done]\n    schema: {type: object, required: [text], properties: {text: {type: string}}}\n";
    let registered = send(
        http.post(server.url("/definitions"))
            .header("content-type", "application/yaml")
            .body(yaml),
    )
    .await;
    assert_eq!(registered.status, 201, "{}", registered.body);
    assert_eq!(registered.body["id"], "echo");
    let listed = get(&http, server.url("/definitions")).await.body;
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["echo", "human-approval"]);
    let run = post(
        &http,
        server.url("/runs?wait=30"),
        &json!({"fsm": "echo", "input": {"text": "hi"}}),
    )
    .await;
    assert_eq!(run.body["status"], "completed", "{}", run.body);
    assert_eq!(run.body["result"]["text"], "hi");
    let shown = get(&http, server.url("/definitions/human-approval"))
        .await
        .body;
    assert!(
        shown["mermaid"]
            .as_str()
            .is_some_and(|m| m.contains("approve"))
    );
    assert_eq!(shown["entries"].as_array().map(Vec::len), Some(2));
    assert_eq!(shown["trusted"], true);

    // A bad one: every problem located, nothing stored.
    let before = stored_definitions(&store);
    let invalid = post(
        &http,
        server.url("/definitions"),
        &json!({"id": "broken", "states": [{"id": "a", "action": "no-such-action"}], "xitions": [{"id": ["start", "b"]}]}),
    )
    .await;
    assert_problem(&invalid, 422);
    let invalid_places = places(&invalid.body);
    assert!(
        invalid_places.contains(&"$.states[0].action".to_owned()),
        "{}",
        invalid.body
    );
    assert!(invalid_places.len() >= 2, "every problem: {}", invalid.body);
    let syntax = send(
        http.post(server.url("/definitions"))
            .header("content-type", "application/yaml")
            .body("id: x\nstates: [\n"),
    )
    .await;
    assert_problem(&syntax, 422);
    assert!(
        syntax.body["errors"][0]["line"].as_u64().is_some(),
        "{}",
        syntax.body
    );

    // What would start a program or read a file: refused, placed, nothing stored or run.
    for (document, place) in PRIVILEGED {
        let refused = send(
            http.post(server.url("/definitions"))
                .header("content-type", "application/json")
                .body(*document),
        )
        .await;
        assert_problem(&refused, 403);
        assert_eq!(places(&refused.body), [*place], "{}", refused.body);
    }
    assert_eq!(stored_definitions(&store), before, "nothing was stored");
    let listed = get(&http, server.url("/definitions")).await.body;
    assert_eq!(listed.as_array().map(Vec::len), Some(2));
    let not_served = post(
        &http,
        server.url("/runs"),
        &json!({"fsm": "runs-a-program", "input": {}}),
    )
    .await;
    assert_problem(&not_served, 404);
    assert!(!Path::new("/tmp/claij-pwned").exists());
    drop(server);

    // Allowed by the operator, by absolute path: accepted.
    let touch = which("touch");
    let allowing = Served::start(&store, &["--allow-program", &touch]);
    let allowed = send(
        http.post(allowing.url("/definitions"))
            .header("content-type", "application/json")
            .body(PRIVILEGED[0].0),
    )
    .await;
    assert_eq!(allowed.status, 201, "{}", allowed.body);
    // The definitions registered before the restart are served again.
    let listed = get(&http, allowing.url("/definitions")).await.body;
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"echo") && ids.contains(&"runs-a-program"),
        "{ids:?}"
    );
}

/// A document calling `url` with `http`, reading `secrets`.
fn calling(url: &str, secrets: &[&str]) -> String {
    json!({
        "id": "calls-out",
        "states": [
            {"id": "call", "action": "http", "config": {"url": url, "secrets": secrets}},
            {"id": "done", "action": "end"}
        ],
        "xitions": [{"id": ["start", "call"]}, {"id": ["call", "done"]}]
    })
    .to_string()
}

#[tokio::test]
async fn a_registered_document_calls_only_hosts_the_operator_allows() {
    use claij_testkit::stub::{Reply, Stub};
    let stub = Stub::start(vec![Reply::json(200, r#"{"ok": true}"#)]);
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("claij.db");
    let server = Served::start(&store, &[]);
    let http = client();
    let register = |server: &Served, document: String| {
        send(
            http.post(server.url("/definitions"))
                .header("content-type", "application/json")
                .body(document),
        )
    };
    // A loopback host nobody allowed, and a variable of the server's environment.
    let url = stub.url("/hook");
    let refused = register(&server, calling(&url, &[])).await;
    assert_problem(&refused, 403);
    assert_eq!(
        places(&refused.body),
        ["$.states[0].config.url"],
        "{}",
        refused.body
    );
    let refused = register(&server, calling(&url, &["HOME"])).await;
    assert_problem(&refused, 403);
    assert!(
        places(&refused.body).contains(&"$.states[0].config.secrets[0]".to_owned()),
        "{}",
        refused.body
    );
    assert!(stub.seen().is_empty(), "nothing was called");
    drop(server);

    // Allowed by the operator: registered, and its run calls the host.
    let host = format!("127.0.0.1:{}", stub.port());
    let allowing = Served::start(&store, &["--allow-connect", &host]);
    let registered = register(&allowing, calling(&url, &[])).await;
    assert_eq!(registered.status, 201, "{}", registered.body);
    let run = post(
        &http,
        allowing.url("/runs?wait=30"),
        &json!({"fsm": "calls-out", "input": {}}),
    )
    .await;
    assert_eq!(run.body["status"], "completed", "{}", run.body);
    assert_eq!(run.body["result"]["body"]["ok"], true, "{}", run.body);
    assert_eq!(stub.seen().len(), 1);
}

#[tokio::test]
async fn a_version_registered_over_http_that_migrates_moves_the_parked_runs_it_can() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("claij.db");
    // The operator lets API clients give new versions of this FSM (without it, its id is
    // the operator's alone: tests/security).
    let server = Served::start(
        &store,
        &[&approval(), "--allow-new-versions", "human-approval"],
    );
    let http = client();
    let long = suspended_run(&http, &server).await;
    // "Deploy ui 2.4.1 (14 changes)": shorter than the 30 characters v2 asks for.
    let mut input = raw_request();
    input["service"] = json!("ui");
    let short = post(
        &http,
        server.url("/runs?wait=30"),
        &json!({"fsm": "human-approval", "input": input}),
    )
    .await;
    let short = short.body["id"].as_str().expect("an id").to_owned();
    let v2 = std::fs::read_to_string(approval())
        .unwrap()
        .replace("version: 1\n", "version: 2\nconfig: {on_new_version: migrate}\n")
        .replace(
            "      required: [service, version, summary]\n  - id: [approve, deploy]",
            "      required: [service, version, summary]\n      properties: {summary: {type: string, minLength: 30}}\n  - id: [approve, deploy]",
        );
    assert!(v2.contains("minLength: 30"), "{v2}");
    let short_before = get(&http, server.url(&format!("/runs/{short}"))).await.body;
    let registered = send(
        http.post(server.url("/definitions"))
            .header("content-type", "application/yaml")
            .body(v2),
    )
    .await;
    assert_eq!(registered.status, 201, "{}", registered.body);
    assert_eq!(
        registered.body["migrated"],
        json!([long]),
        "{}",
        registered.body
    );
    let refused = &registered.body["not_migrated"][0];
    assert_eq!(
        (&refused["run"], &refused["version"]),
        (&json!(short), &json!(1))
    );
    assert_eq!(
        refused["reasons"][0]["at"], "entry 1",
        "{}",
        registered.body
    );
    let moved = get(&http, server.url(&format!("/runs/{long}"))).await.body;
    assert_eq!(moved["version"], 2, "{moved}");
    let stayed = get(&http, server.url(&format!("/runs/{short}"))).await.body;
    assert_eq!(stayed, short_before);
    // The moved run is answered on its new version.
    let answered = post(
        &http,
        server.url(&format!("/runs/{long}/resume?wait=30")),
        &json!({"input": {"id": ["approve", "deploy"], "approver": "ada"}}),
    )
    .await;
    assert_eq!(answered.body["status"], "completed", "{}", answered.body);
}

#[tokio::test]
async fn bad_requests_get_located_problems_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("claij.db");
    let server = Served::start(&store, &[&approval(), "--body-limit", "4096"]);
    let http = client();
    let runs_url = server.url("/runs");

    let malformed = send(
        http.post(runs_url.clone())
            .header("content-type", "application/json")
            .body("{\"fsm\": \"human-approval\",\n \"input\": {oops}}"),
    )
    .await;
    assert_problem(&malformed, 400);
    assert_eq!(malformed.body["errors"][0]["line"], 2, "{}", malformed.body);

    let too_big = post(
        &http,
        runs_url.clone(),
        &json!({"fsm": "human-approval", "input": {"blob": "x".repeat(10_000)}}),
    )
    .await;
    assert_problem(&too_big, 413);

    let deep = format!(
        "{{\"fsm\": \"human-approval\", \"input\": {}{}}}",
        "[".repeat(200),
        "]".repeat(200)
    );
    let deep = send(
        http.post(runs_url.clone())
            .header("content-type", "application/json")
            .body(deep),
    )
    .await;
    assert_problem(&deep, 400);

    let not_json = send(
        http.post(runs_url.clone())
            .header("content-type", "text/plain")
            .body("hi"),
    )
    .await;
    assert_problem(&not_json, 415);

    let unknown_field = post(
        &http,
        runs_url.clone(),
        &json!({"fsm": "human-approval", "input": {}, "colour": "red"}),
    )
    .await;
    assert_problem(&unknown_field, 400);

    let wrong_type = post(&http, runs_url.clone(), &json!({"fsm": 7, "input": {}})).await;
    assert_problem(&wrong_type, 400);
    assert_eq!(places(&wrong_type.body), ["$.fsm"]);

    let bad_input = post(
        &http,
        runs_url.clone(),
        &json!({"fsm": "human-approval", "input": {"id": ["start", "summarise"], "service": "billing", "version": "two", "changes": -1}}),
    )
    .await;
    assert_problem(&bad_input, 422);
    let mut bad_places = places(&bad_input.body);
    bad_places.sort();
    assert_eq!(bad_places, ["$.input.changes", "$.input.version"]);

    let unknown_model = post(
        &http,
        runs_url.clone(),
        &json!({"fsm": "human-approval", "input": raw_request(), "model": "no-such-model"}),
    )
    .await;
    assert_problem(&unknown_model, 422);
    assert_eq!(places(&unknown_model.body), ["$.model"]);

    let bad_deadline = post(
        &http,
        runs_url.clone(),
        &json!({"fsm": "human-approval", "input": raw_request(), "deadline": "soon"}),
    )
    .await;
    assert_problem(&bad_deadline, 422);
    assert_eq!(places(&bad_deadline.body), ["$.deadline"]);

    let bad_budget = post(
        &http,
        runs_url.clone(),
        &json!({"fsm": "human-approval", "input": raw_request(), "budget": "dollars=3"}),
    )
    .await;
    assert_problem(&bad_budget, 422);
    assert_eq!(places(&bad_budget.body), ["$.budget"]);
    assert!(
        bad_budget.body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("dollars")),
        "{}",
        bad_budget.body
    );

    let unknown_fsm = post(
        &http,
        runs_url.clone(),
        &json!({"fsm": "nope", "input": {}}),
    )
    .await;
    assert_problem(&unknown_fsm, 404);

    for path in [
        "/runs/no-such-run",
        "/runs/no-such-run/trail",
        "/runs/no-such-run/events",
        "/definitions/nope",
        "/no/such/route",
    ] {
        assert_problem(&get(&http, server.url(path)).await, 404);
    }
    let resume_unknown = post(
        &http,
        server.url("/runs/no-such-run/resume"),
        &json!({"input": {}}),
    )
    .await;
    assert_problem(&resume_unknown, 404);

    // None of it started or stored a run.
    let runs = get(&http, server.url("/runs")).await.body;
    assert_eq!(runs["runs"], json!([]), "{runs}");
}

#[tokio::test]
async fn a_token_guards_every_route_but_health_and_an_open_address_needs_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("claij.db");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let server = Served::start(
        &store,
        &[&approval(), "--token-file", token_file.to_str().unwrap()],
    );
    let http = client();
    assert_eq!(get(&http, server.url("/health")).await.status, 200);
    for path in ["/runs", "/definitions", "/openapi.json"] {
        let none = get(&http, server.url(path)).await;
        assert_problem(&none, 401);
        let wrong = send(
            http.get(server.url(path))
                .bearer_auth("0123456789abcdef0123456789abcdef-WRONG"),
        )
        .await;
        assert_problem(&wrong, 401);
        let right = send(http.get(server.url(path)).bearer_auth(TOKEN)).await;
        assert_eq!(right.status, 200, "{path}: {}", right.body);
    }
    let mcp = send(
        http.post(server.url("/mcp"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#),
    )
    .await;
    assert_problem(&mcp, 401);
    let said = server.said();
    assert!(!said.contains(TOKEN), "the token is never logged");
    drop(server);

    // An open address without a token is refused at start.
    let out = Command::new(CLAIJ)
        .args(["serve", &approval(), "--bind", "0.0.0.0:0", "--store"])
        .arg(&store)
        .env_remove("CLAIJ_API_TOKEN")
        .output()
        .expect("claij serve");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("without an API token"), "{stderr}");
    // A short token too.
    let out = Command::new(CLAIJ)
        .args(["serve", &approval(), "--bind", "127.0.0.1:0", "--store"])
        .arg(&store)
        .env("CLAIJ_API_TOKEN", "short")
        .output()
        .expect("claij serve");
    assert_eq!(out.status.code(), Some(2));
}

/// Reads server-sent events from `response` until `stop` says so (or 60 s pass).
async fn read_events(
    response: &mut reqwest::Response,
    buffer: &mut String,
    mut stop: impl FnMut(&str, &str, Option<&str>) -> bool,
) -> Vec<(String, String, Option<String>)> {
    let mut events = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let (mut kind, mut data, mut id) = (String::from("message"), String::new(), None);
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    kind = v.trim().to_owned();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.trim_start());
                } else if let Some(v) = line.strip_prefix("id:") {
                    id = Some(v.trim().to_owned());
                }
            }
            if data.is_empty() && kind == "message" {
                continue; // a keep-alive comment
            }
            let done = stop(&kind, &data, id.as_deref());
            events.push((kind, data, id));
            if done {
                return events;
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let chunk = tokio::time::timeout(left, response.chunk())
            .await
            .expect("events within 60 s")
            .expect("the stream reads");
        match chunk {
            Some(bytes) => buffer.push_str(&String::from_utf8_lossy(&bytes)),
            None => return events,
        }
    }
}

#[tokio::test]
async fn events_stream_each_entry_once_and_resume_after_the_last_event_id() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(&dir.path().join("claij.db"), &[&approval()]);
    let http = client();
    let id = suspended_run(&http, &server).await;
    let events_url = server.url(&format!("/runs/{id}/events"));

    let mut first = http.get(events_url.clone()).send().await.unwrap();
    assert_eq!(first.status(), 200);
    assert!(
        first.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let mut buffer = String::new();
    let seen = read_events(&mut first, &mut buffer, |kind, data, _| {
        kind == "status" && data.contains("\"suspended\"")
    })
    .await;
    let entry_ids: Vec<String> = seen
        .iter()
        .filter(|(k, _, _)| k == "entry")
        .map(|(_, _, id)| id.clone().unwrap())
        .collect();
    assert_eq!(entry_ids, ["0", "1"], "{seen:?}");
    drop(first);

    // Reconnect after the first entry: the second comes again, and then the rest live.
    let mut again = http
        .get(events_url.clone())
        .header("Last-Event-ID", "0")
        .send()
        .await
        .unwrap();
    let mut buffer = String::new();
    let replay = read_events(&mut again, &mut buffer, |kind, _, _| kind == "status").await;
    let replayed: Vec<String> = replay
        .iter()
        .filter(|(k, _, _)| k == "entry")
        .map(|(_, _, id)| id.clone().unwrap())
        .collect();
    assert_eq!(replayed, ["1"]);
    let answered = post(
        &http,
        server.url(&format!("/runs/{id}/resume")),
        &json!({"input": {"id": ["approve", "deploy"], "approver": "ada"}}),
    )
    .await;
    assert!(matches!(answered.status, 200 | 202), "{}", answered.body);
    let rest = read_events(&mut again, &mut buffer, |kind, _, _| kind == "end").await;
    let later: Vec<(String, Value)> = rest
        .iter()
        .filter(|(k, _, _)| k == "entry")
        .map(|(_, data, id)| (id.clone().unwrap(), serde_json::from_str(data).unwrap()))
        .collect();
    let later_ids: Vec<&str> = later.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(later_ids, ["2"], "the answer, once: {rest:?}");
    assert_eq!(later[0].1["event"]["approver"], "ada");
    assert_eq!(
        rest.last().map(|(k, d, _)| (k.as_str(), d.as_str())),
        Some(("end", "completed"))
    );

    let bad = get(&http, events_url.clone()).await;
    assert_eq!(
        bad.status, 200,
        "a finished run's stream is its trail and its end"
    );
    let bad_id = send(http.get(events_url).header("Last-Event-ID", "seven")).await;
    assert_problem(&bad_id, 400);
}

#[tokio::test]
async fn a_run_in_flight_when_the_server_is_killed_is_continued_by_the_next_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("claij.db");
    let flow = dir.path().join("slow.yaml");
    std::fs::write(
        &flow,
        "id: slow\nstates:\n  - id: wait\n    action: command\n    config: {argv: [sleep, \"3\"], output: capture, routes: {\"0\": done}}\n  - id: done\n    action: end\nxitions:\n  - id: [start, wait]\n  - id: [wait, done]\n",
    )
    .unwrap();
    let server = Served::start(&store, &[flow.to_str().unwrap()]);
    let http = client();
    let started = post(
        &http,
        server.url("/runs"),
        &json!({"fsm": "slow", "input": {}}),
    )
    .await;
    assert_eq!(started.status, 202, "{}", started.body);
    assert_eq!(started.body["status"], "running");
    let id = started.body["id"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.kill();

    let restarted = Served::start(&store, &[flow.to_str().unwrap()]);
    let url = restarted.url(&format!("/runs/{id}"));
    let run = eventually(60, "the run was not continued", || async {
        let run = get(&http, url.clone()).await.body;
        (run["status"] == "completed").then_some(run)
    })
    .await;
    assert_eq!(run["state"], "done");
}

#[tokio::test]
async fn interrupting_a_waiting_run_stops_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(&dir.path().join("claij.db"), &[&approval()]);
    let http = client();
    let id = suspended_run(&http, &server).await;
    let stopped = post(
        &http,
        server.url(&format!("/runs/{id}/interrupt")),
        &json!({}),
    )
    .await;
    assert_eq!(stopped.status, 202, "{}", stopped.body);
    let run = get(&http, server.url(&format!("/runs/{id}"))).await.body;
    assert_eq!(run["status"], "interrupted");
    let twice = post(
        &http,
        server.url(&format!("/runs/{id}/interrupt")),
        &json!({}),
    )
    .await;
    assert_problem(&twice, 409);
}

#[tokio::test]
async fn the_openapi_description_is_generated_and_lists_every_route() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(&dir.path().join("claij.db"), &[&approval()]);
    let http = client();
    let doc = get(&http, server.url("/openapi.json")).await.body;
    assert!(
        doc["openapi"]
            .as_str()
            .is_some_and(|v| v.starts_with("3.1")),
        "{doc}"
    );
    let paths = doc["paths"].as_object().expect("paths");
    for path in [
        "/definitions",
        "/definitions/{id}",
        "/runs",
        "/runs/{id}",
        "/runs/{id}/trail",
        "/runs/{id}/resume",
        "/runs/{id}/interrupt",
        "/runs/{id}/fork",
        "/runs/{id}/events",
        "/queue",
    ] {
        assert!(paths.contains_key(path), "{path} missing from {paths:?}");
    }
    assert!(doc["components"]["schemas"]["Problem"].is_object());
    assert!(doc["paths"]["/runs"]["post"]["requestBody"].is_object());
}

#[tokio::test]
async fn the_queue_shows_runs_submitted_for_workers_and_the_workers() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("claij.db");
    // With --queue: no worker beside the server takes what is submitted.
    let server = Served::start(&db, &["--queue", &approval()]);
    let http = client();
    let empty = get(&http, server.url("/queue")).await;
    assert_eq!(empty.status, 200, "{}", empty.body);
    assert_eq!(empty.body["queued"], 0);
    let submitted = std::process::Command::new(env!("CARGO_BIN_EXE_claij"))
        .args([
            "run",
            &approval(),
            "--submit",
            "--after",
            "1h",
            "-q",
            "--store",
        ])
        .arg(&db)
        .args(["--input", &raw_request().to_string()])
        .output()
        .unwrap();
    assert!(submitted.status.success(), "{submitted:?}");
    let later = get(&http, server.url("/queue")).await.body;
    assert_eq!(
        (later["queued"].as_u64(), later["scheduled"].as_u64()),
        (Some(0), Some(1)),
        "{later}"
    );
    assert!(later["next_timer"].is_string(), "{later}");
    let now = std::process::Command::new(env!("CARGO_BIN_EXE_claij"))
        .args(["run", &approval(), "--submit", "-q", "--store"])
        .arg(&db)
        .args(["--input", &raw_request().to_string()])
        .output()
        .unwrap();
    assert!(now.status.success(), "{now:?}");
    let queued = get(&http, server.url("/queue")).await.body;
    assert_eq!(queued["queued"], 1, "{queued}");
    assert!(queued["oldest_queued"].is_string(), "{queued}");
    assert_eq!(queued["workers"], json!([]), "no worker runs yet");
}

#[tokio::test]
async fn with_queue_the_server_leaves_its_runs_to_the_workers() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("claij.db");
    let server = Served::start(&db, &["--queue", &approval()]);
    let http = client();
    // No worker yet: the run is queued, not driven; the wait runs out.
    let started = post(
        &http,
        server.url("/runs?wait=1"),
        &json!({"fsm": "human-approval", "input": raw_request()}),
    )
    .await;
    assert_eq!(started.status, 202, "{}", started.body);
    let id = started.body["id"].as_str().expect("an id").to_owned();
    let queued = get(&http, server.url(&format!("/runs/{id}"))).await.body;
    assert_eq!(queued["status"], "running", "{queued}");
    assert_eq!(get(&http, server.url("/queue")).await.body["queued"], 1);
    // A refused input is refused by the server itself, and queues nothing.
    let refused = post(
        &http,
        server.url("/runs"),
        &json!({"fsm": "human-approval", "input": {"id": ["start", "summarise"]}}),
    )
    .await;
    assert_problem(&refused, 422);
    // A worker drives it to the person.
    let mut worker = Command::new(CLAIJ)
        .args(["worker", "--store"])
        .arg(&db)
        .env_remove("CLAIJ_STORE")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let waiting = eventually(30, "a worker drives the queued run", || async {
        let run = get(&http, server.url(&format!("/runs/{id}"))).await.body;
        (run["status"] == "suspended").then_some(run)
    })
    .await;
    assert_eq!(waiting["state"], "approve", "{waiting}");
    // The answer is checked here, queued, and followed until the worker ends the run.
    let answered = post(
        &http,
        server.url(&format!("/runs/{id}/resume?wait=30")),
        &json!({"input": {"id": ["approve", "deploy"], "approver": "ada"}}),
    )
    .await;
    assert_eq!(answered.status, 200, "{}", answered.body);
    assert_eq!(answered.body["status"], "completed", "{}", answered.body);
    assert_eq!(answered.body["state"], "deploy", "{}", answered.body);
    // A fork is checked and stored here, and driven by the worker.
    let refused = post(
        &http,
        server.url(&format!("/runs/{id}/fork")),
        &json!({"at": 2, "event": {"id": ["approve", "rejected"]}}),
    )
    .await;
    assert_problem(&refused, 422);
    assert_eq!(places(&refused.body), ["$.event"], "{}", refused.body);
    let forked = post(
        &http,
        server.url(&format!("/runs/{id}/fork?wait=30")),
        &json!({"at": 2, "event": {"id": ["approve", "rejected"], "reason": "a freeze"}}),
    )
    .await;
    assert_eq!(forked.status, 201, "{}", forked.body);
    assert_eq!(forked.body["state"], "rejected", "{}", forked.body);
    assert_eq!(
        forked.body["forked_from"]["run"],
        json!(id),
        "{}",
        forked.body
    );
    let _ = Command::new("kill")
        .args(["-TERM", &worker.id().to_string()])
        .status();
    assert!(worker.wait().unwrap().success());
}

/// A request with the API token.
fn authed(request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    request.bearer_auth(TOKEN)
}

async fn post_json(request: reqwest::RequestBuilder, body: &Value) -> Reply {
    send(
        request
            .header("content-type", "application/json")
            .body(body.to_string()),
    )
    .await
}

#[tokio::test]
async fn a_resume_link_answers_its_wait_once_with_no_other_credential() {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, TOKEN).unwrap();
    let server = Served::start(
        &dir.path().join("claij.db"),
        &[&approval(), "--token-file", token_file.to_str().unwrap()],
    );
    let http = client();
    let run = json!({"fsm": "human-approval", "input": raw_request()});
    let start = |http: &reqwest::Client| {
        let request = authed(http.post(server.url("/runs?wait=30")));
        let run = &run;
        async move { post_json(request, run).await }
    };
    let a = start(&http).await;
    assert_eq!(a.body["status"], "suspended", "{}", a.body);
    let a_id = a.body["id"].as_str().unwrap().to_owned();
    let link = a.body["wait"]["hook_url"]
        .as_str()
        .expect("a resume link")
        .to_owned();
    let secret = link
        .strip_prefix("/hooks/")
        .expect("/hooks/SECRET")
        .to_owned();
    assert_eq!(secret.len(), 64, "256 bits, hex");
    let b = start(&http).await;
    let b_id = b.body["id"].as_str().unwrap().to_owned();
    let b_link = b.body["wait"]["hook_url"].as_str().unwrap().to_owned();
    assert_ne!(b_link, link);

    // What the link asks, with no token.
    let asked = get(&http, server.url(&link)).await;
    assert_eq!(asked.status, 200, "{}", asked.body);
    assert_eq!(asked.body["state"], "approve");
    assert_eq!(asked.body["answers"].as_array().map(Vec::len), Some(2));

    // A refused answer changes nothing and leaves the link valid.
    let trail_len = |http: reqwest::Client, id: String| {
        let url = server.url(&format!("/runs/{id}"));
        async move {
            send(authed(http.get(url))).await.body["trail_len"]
                .as_u64()
                .unwrap()
        }
    };
    let before = trail_len(http.clone(), a_id.clone()).await;
    let refused = post(
        &http,
        server.url(&link),
        &json!({"id": ["approve", "deploy"], "approver": "x"}),
    )
    .await;
    assert_problem(&refused, 422);
    assert_eq!(places(&refused.body), ["$.approver"]);
    assert_eq!(trail_len(http.clone(), a_id.clone()).await, before);

    // Forged links.
    for forged in [
        "/hooks/".to_owned() + &"0".repeat(64),
        "/hooks/short".into(),
        format!("/hooks/{}", secret.to_uppercase().replace('A', "B")),
    ] {
        assert_problem(
            &post(
                &http,
                server.url(&forged),
                &json!({"id": ["approve", "deploy"], "approver": "eve"}),
            )
            .await,
            404,
        );
    }

    // The answer, with no token.
    let taken = post(
        &http,
        server.url(&format!("{link}?wait=30")),
        &json!({"id": ["approve", "deploy"], "approver": "ada"}),
    )
    .await;
    assert_eq!(taken.status, 200, "{}", taken.body);
    assert_eq!(taken.body["status"], "completed");
    assert!(
        taken.body.get("context").is_none(),
        "a link shows no more than the run's status"
    );

    // Never again; and A's link is no way into B.
    let reused = post(
        &http,
        server.url(&link),
        &json!({"id": ["approve", "rejected"], "reason": "changed my mind"}),
    )
    .await;
    assert_problem(&reused, 410);
    assert_problem(&get(&http, server.url(&link)).await, 410);
    let b_now = send(authed(http.get(server.url(&format!("/runs/{b_id}")))))
        .await
        .body;
    assert_eq!(b_now["status"], "suspended");
    assert_eq!(b_now["trail_len"], b.body["trail_len"]);

    // Another link for B; none for A, which waits for nothing.
    let more = send(authed(
        http.post(server.url(&format!("/runs/{b_id}/hooks"))),
    ))
    .await;
    assert_eq!(more.status, 201, "{}", more.body);
    let b_link2 = more.body["url"].as_str().unwrap().to_owned();
    assert_problem(
        &send(authed(
            http.post(server.url(&format!("/runs/{a_id}/hooks"))),
        ))
        .await,
        409,
    );
    assert_problem(
        &send(http.post(server.url(&format!("/runs/{b_id}/hooks")))).await,
        401,
    );

    // Two answers to B at once, by a link and by the API: exactly one is taken.
    let by_link = json!({"id": ["approve", "deploy"], "approver": "bob"});
    let by_api = json!({"input": {"id": ["approve", "rejected"], "reason": "not today"}});
    let (x, y) = tokio::join!(
        post(&http, server.url(&format!("{b_link2}?wait=30")), &by_link),
        post_json(
            authed(http.post(server.url(&format!("/runs/{b_id}/resume?wait=30")))),
            &by_api
        ),
    );
    // The loser is refused as a conflict, or — a link that looks after the winner moved
    // the run on — as gone.
    let mut statuses = [x.status, y.status];
    statuses.sort();
    assert!(
        statuses == [200, 409] || (statuses == [200, 410] && x.status == 410),
        "exactly one answer is taken: link {} {} / API {} {}",
        x.status,
        x.body,
        y.status,
        y.body
    );
    // Both of B's links are spent now.
    for l in [&b_link, &b_link2] {
        assert_problem(&post(&http, server.url(l), &by_link).await, 410);
    }
    assert!(
        !server.said().contains(&secret),
        "a link's secret is never logged"
    );
}

#[tokio::test]
async fn a_link_to_an_expired_wait_answers_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let flow = dir.path().join("brief.yaml");
    std::fs::write(
        &flow,
        "id: brief\nstates:\n  - id: ask\n    action: human\n    config: {prompt: Quick?, expires: 1s}\n  - id: done\n    action: end\nxitions:\n  - id: [start, ask]\n  - id: [ask, done]\n    schema: {type: object, required: [ok], properties: {ok: {type: boolean}}}\n",
    )
    .unwrap();
    let server = Served::start(&dir.path().join("claij.db"), &[flow.to_str().unwrap()]);
    let http = client();
    let started = post(
        &http,
        server.url("/runs?wait=30"),
        &json!({"fsm": "brief", "input": {}}),
    )
    .await;
    assert_eq!(started.body["status"], "suspended", "{}", started.body);
    let link = started.body["wait"]["hook_url"]
        .as_str()
        .unwrap()
        .to_owned();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let late = post(
        &http,
        server.url(&link),
        &json!({"id": ["ask", "done"], "ok": true}),
    )
    .await;
    assert_problem(&late, 410);
    // Expired and not acted on yet, or acted on already by the worker beside the server
    // (the run failed at `ask`, having no `on_expiry`).
    let detail = late.body["detail"].as_str().unwrap();
    assert!(
        detail.contains("expired") || detail.contains("the run is failed in `ask`"),
        "{}",
        late.body
    );
    let id = started.body["id"].as_str().unwrap();
    let run = eventually(30, "the expired wait is acted on", || async {
        let run = get(&http, server.url(&format!("/runs/{id}"))).await.body;
        (run["status"] == "failed").then_some(run)
    })
    .await;
    assert_eq!(run["state"], "ask", "{run}");
}

#[tokio::test]
async fn callbacks_are_signed_retried_recorded_and_carry_a_resume_link() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Webhooks::start(dir.path(), "r", &["--plan", "500,503"]);
    let secret = secret_file(dir.path());
    // The receiver is on loopback: callbacks go there only where the operator allows.
    let server = Served::start(
        &dir.path().join("claij.db"),
        &local_callbacks(&approval(), &secret),
    );
    let http = client();
    let started = post(
        &http,
        server.url("/runs?wait=30"),
        &json!({"fsm": "human-approval", "input": raw_request(), "webhook": receiver.url}),
    )
    .await;
    assert_eq!(started.body["status"], "suspended", "{}", started.body);
    let id = started.body["id"].as_str().unwrap().to_owned();

    // Refused twice, taken the third time (1 s, then 5 s later): one event, three attempts.
    let got = receiver.wait_for(3).await;
    for request in &got {
        assert_eq!(request["verified"], true, "{request}");
        assert_eq!(request["id"], got[0]["id"], "the same event each time");
    }
    let answered: Vec<u64> = got
        .iter()
        .map(|r| r["answered"].as_u64().unwrap())
        .collect();
    assert_eq!(answered, [500, 503, 204]);
    let event = &got[2]["payload"];
    assert_eq!(event["type"], "run.suspended");
    assert_eq!(event["data"]["run"], id.as_str());
    assert_eq!(event["data"]["wait"]["state"], "approve");
    let link = event["data"]["wait"]["hook_url"]
        .as_str()
        .expect("a resume link")
        .to_owned();
    assert!(
        link.starts_with(&format!("{}/hooks/", server.base)),
        "{link}"
    );
    // The receiver logs before it answers: the third attempt's outcome is kept just after.
    let url = server.url(&format!("/runs/{id}/deliveries"));
    let deliveries = eventually(30, "the delivery stays pending", || async {
        let found = get(&http, url.clone()).await.body;
        (found[0]["status"] != "pending").then_some(found)
    })
    .await;
    assert_eq!(deliveries.as_array().map(Vec::len), Some(1), "{deliveries}");
    assert_eq!(deliveries[0]["status"], "delivered");
    assert_eq!(deliveries[0]["attempts"], 3);
    assert_eq!(deliveries[0]["last_status"], 204);

    // The person answers through the link; the end is called back too.
    let taken = post(
        &http,
        link,
        &json!({"id": ["approve", "deploy"], "approver": "ada"}),
    )
    .await;
    assert!(matches!(taken.status, 200 | 202), "{}", taken.body);
    let got = receiver.wait_for(4).await;
    assert_eq!(got[3]["verified"], true);
    assert_ne!(got[3]["id"], got[0]["id"]);
    assert_eq!(got[3]["payload"]["type"], "run.completed");
    assert_eq!(got[3]["payload"]["data"]["result"]["approver"], "ada");
    let deliveries = get(&http, server.url(&format!("/runs/{id}/deliveries")))
        .await
        .body;
    assert_eq!(deliveries.as_array().map(Vec::len), Some(2));
}

#[tokio::test]
async fn a_slow_receiver_never_slows_a_run_and_a_pending_callback_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("claij.db");
    let flow = dir.path().join("echo.yaml");
    std::fs::write(
        &flow,
        "id: echo\nstates:\n  - id: done\n    action: end\nxitions:\n  - id: [start, done]\n",
    )
    .unwrap();
    // Takes 30 s to answer anything.
    let slow = Webhooks::start(dir.path(), "slow", &["--delay", "30"]);
    let secret = secret_file(dir.path());
    let args = local_callbacks(flow.to_str().unwrap(), &secret);
    let server = Served::start(&store, &args);
    let http = client();
    let done = post(
        &http,
        server.url("/runs?wait=30"),
        &json!({"fsm": "echo", "input": {"x": 1}, "webhook": slow.url}),
    )
    .await;
    assert_eq!(done.status, 201, "{}", done.body);
    assert_eq!(
        done.body["status"], "completed",
        "the run did not wait for the receiver"
    );
    let id = done.body["id"].as_str().unwrap().to_owned();
    assert!(
        slow.received().is_empty(),
        "the receiver has not answered yet"
    );
    // The delivery is queued (in the store) as the run ends, on a task of its own.
    let url = server.url(&format!("/runs/{id}/deliveries"));
    let pending = eventually(30, "no delivery queued", || async {
        let found = get(&http, url.clone()).await.body;
        found
            .as_array()
            .is_some_and(|d| !d.is_empty())
            .then_some(found)
    })
    .await;
    assert_eq!(pending[0]["status"], "pending", "{pending}");

    // Killed while the delivery waits on the slow receiver; a receiver comes back at the
    // same address, and the next server delivers it there.
    server.kill();
    let port = slow
        .url
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches("/hook")
        .to_owned();
    drop(slow);
    let back = Webhooks::start(dir.path(), "back", &["--port", &port]);
    assert_eq!(back.url, slow_url(&port));
    let _restarted = Served::start(&store, &args);
    let got = back.wait_for(1).await;
    assert_eq!(got[0]["verified"], true, "{got:?}");
    assert_eq!(got[0]["payload"]["type"], "run.completed");
    assert_eq!(got[0]["payload"]["data"]["run"], id.as_str());
}

fn slow_url(port: &str) -> String {
    format!("http://127.0.0.1:{port}/hook")
}

#[tokio::test]
async fn a_callback_needs_a_secret_and_an_http_url_and_a_refusal_starts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let no_secret = Served::start(&dir.path().join("a.db"), &[&approval()]);
    let http = client();
    let refused = post(
        &http,
        no_secret.url("/runs"),
        &json!({"fsm": "human-approval", "input": raw_request(), "webhook": "http://127.0.0.1:9/hook"}),
    )
    .await;
    assert_problem(&refused, 422);
    assert_eq!(places(&refused.body), ["$.webhook"]);
    let secret = secret_file(dir.path());
    let with_secret = Served::start(
        &dir.path().join("b.db"),
        &[&approval(), "--webhook-secret-file", &secret],
    );
    for bad in ["file:///etc/passwd", "not a url", "ftp://example.com/x"] {
        let refused = post(
            &http,
            with_secret.url("/runs"),
            &json!({"fsm": "human-approval", "input": raw_request(), "webhook": bad}),
        )
        .await;
        assert_problem(&refused, 422);
        assert_eq!(places(&refused.body), ["$.webhook"], "{bad}");
    }
    for server in [&no_secret, &with_secret] {
        let runs = get(&http, server.url("/runs")).await.body;
        assert_eq!(runs["runs"], json!([]), "nothing started");
    }
    // A malformed secret stops the server at start.
    let bad_secret = dir.path().join("bad-secret");
    std::fs::write(&bad_secret, "whsec_short").unwrap();
    let out = Command::new(CLAIJ)
        .args([
            "serve",
            &approval(),
            "--bind",
            "127.0.0.1:0",
            "--webhook-secret-file",
        ])
        .arg(&bad_secret)
        .arg("--store")
        .arg(dir.path().join("c.db"))
        .output()
        .expect("claij serve");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("webhook secret"));
}

#[tokio::test]
async fn the_official_openai_client_calls_a_workflow_as_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let flow = dir.path().join("greet.yaml");
    std::fs::write(
        &flow,
        "id: greet\nstates:\n  - id: hello\n    action: transform\n    config:\n      template: '{\"id\": [\"hello\", \"done\"], \"reply\": {{ (\"Hello, \" ~ event.text ~ \"! You said \" ~ (event.messages | length) ~ \" things.\") | tojson }}}'\n  - id: done\n    action: end\nxitions:\n  - id: [start, hello]\n    schema: {type: object, required: [text], properties: {text: {type: string}, name: {type: string}}}\n  - id: [hello, done]\n    schema: {type: object, required: [reply], properties: {reply: {type: string}}}\n",
    )
    .unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, TOKEN).unwrap();
    let server = Served::start(
        &dir.path().join("claij.db"),
        &[
            flow.to_str().unwrap(),
            &approval(),
            "--token-file",
            token_file.to_str().unwrap(),
        ],
    );
    let out = Command::new(claij_testkit::cache::http_clients_python())
        .arg(repo().join("tests/http-clients/openai_chat.py"))
        .args([&server.base, TOKEN, "fsm:greet"])
        .output()
        .expect("the openai client runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).expect("a JSON summary");
    assert_eq!(seen["models"], json!(["fsm:greet", "fsm:human-approval"]));
    let said = "Hello, Ada! You said 2 things.";
    assert_eq!(seen["plain"]["content"], said, "{seen}");
    assert_eq!(seen["plain"]["role"], "assistant");
    assert_eq!(seen["plain"]["finish_reason"], "stop");
    assert_eq!(seen["plain"]["model"], "fsm:greet");
    assert_eq!(seen["stream"]["content"], said, "{seen}");
    assert!(
        seen["stream"]["chunks"].as_u64().unwrap() > 1,
        "streamed in pieces: {seen}"
    );
    assert_eq!(seen["stream"]["finish_reason"], "stop");
    assert_eq!(seen["unknown"]["status"], 404);
    assert_eq!(seen["refused"]["status"], 422, "{seen}");
    assert!(
        seen["refused"]["message"]
            .as_str()
            .unwrap()
            .contains("text"),
        "the refusal names what is missing: {seen}"
    );
    assert_eq!(seen["wrong_key"]["status"], 401);
    // Each completion was a run, kept like any other.
    let runs = send(authed(client().get(server.url("/runs?fsm=greet"))))
        .await
        .body;
    assert_eq!(runs["runs"].as_array().map(Vec::len), Some(2), "{runs}");
}

#[tokio::test]
async fn an_sse_client_gets_every_entry_once_across_a_kill_and_restart_of_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("claij.db");
    let flow = dir.path().join("steps.yaml");
    let mut yaml = String::from("id: steps\nstates:\n");
    for i in 1..=6 {
        let next = if i == 6 {
            "done".to_owned()
        } else {
            format!("s{}", i + 1)
        };
        yaml.push_str(&format!(
            "  - id: s{i}\n    action: command\n    config: {{argv: [sleep, \"0.7\"], output: capture, routes: {{\"0\": {next}}}}}\n"
        ));
    }
    yaml.push_str("  - id: done\n    action: end\nxitions:\n  - id: [start, s1]\n");
    for i in 1..=6 {
        let next = if i == 6 {
            "done".to_owned()
        } else {
            format!("s{}", i + 1)
        };
        yaml.push_str(&format!("  - id: [s{i}, {next}]\n"));
    }
    std::fs::write(&flow, yaml).unwrap();
    // A fixed port, so that the client finds the restarted server where it was.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let bind = format!("127.0.0.1:{port}");
    let args = [flow.to_str().unwrap()];
    let server = Served::start_at(&store, &args, &[], &bind);
    let http = client();
    let started = post(
        &http,
        server.url("/runs"),
        &json!({"fsm": "steps", "input": {}}),
    )
    .await;
    assert_eq!(started.status, 202, "{}", started.body);
    let id = started.body["id"].as_str().unwrap().to_owned();

    let mut follower = Command::new(claij_testkit::cache::http_clients_python())
        .arg(repo().join("tests/http-clients/sse_follow.py"))
        .arg(server.url(&format!("/runs/{id}/events")))
        .stdout(Stdio::piped())
        .spawn()
        .expect("the SSE client starts");
    let stdout = follower.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // Two entries in: kill -9 the server mid-run, and start it again.
    let mut seen = 0;
    while seen < 2 {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("entries arrive");
        if line.starts_with("entry ") {
            seen += 1;
        }
    }
    server.kill();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let restarted = Served::start_at(&store, &args, &[], &bind);
    let summary = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(120))
            .expect("the client ends");
        if line.starts_with('{') {
            break serde_json::from_str::<Value>(&line).unwrap();
        }
    };
    let _ = follower.wait();
    assert_eq!(summary["end"], "completed", "{summary}");
    assert!(summary["reconnects"].as_u64().unwrap() >= 1, "{summary}");
    let run = get(&http, restarted.url(&format!("/runs/{id}"))).await.body;
    let total = run["trail_len"].as_u64().unwrap();
    let seqs: Vec<u64> = summary["seqs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_u64().unwrap())
        .collect();
    assert_eq!(
        seqs,
        (0..total).collect::<Vec<_>>(),
        "every entry exactly once, in order"
    );
}

#[tokio::test]
async fn a_model_steps_tokens_reach_the_event_stream_as_it_runs_on_the_embedded_model() {
    let dir = tempfile::tempdir().unwrap();
    let flow = dir.path().join("greet.yaml");
    // A second of waiting first: the event stream is connected before the model speaks.
    std::fs::write(
        &flow,
        "id: greet-model\nstates:\n  - id: pause\n    action: command\n    config: {argv: [sleep, \"1\"], output: capture, routes: {\"0\": answer}}\n  - id: answer\n    action: llm\n    prompts: [Greet the person by name, in a few words.]\n  - id: done\n    action: end\nxitions:\n  - id: [start, pause]\n    schema: {type: object, required: [name], properties: {name: {type: string}}}\n  - id: [pause, answer]\n  - id: [answer, done]\n    schema: {type: object, required: [greeting], properties: {greeting: {type: string, maxLength: 80}}}\n",
    )
    .unwrap();
    let server =
        Served::start_on_embedded_model(&dir.path().join("claij.db"), &[flow.to_str().unwrap()]);
    let http = client();
    let started = post(
        &http,
        server.url("/runs"),
        &json!({"fsm": "greet-model", "input": {"name": "Ada"}}),
    )
    .await;
    assert_eq!(started.status, 202, "{}", started.body);
    let id = started.body["id"].as_str().unwrap().to_owned();
    let mut events = http
        .get(server.url(&format!("/runs/{id}/events")))
        .send()
        .await
        .unwrap();
    let mut buffer = String::new();
    let seen = read_events(&mut events, &mut buffer, |kind, _, _| kind == "end").await;
    let tokens: Vec<String> = seen
        .iter()
        .filter(|(k, _, _)| k == "token")
        .map(|(_, data, _)| serde_json::from_str::<Value>(data).unwrap())
        .filter(|t| t["state"] == "answer")
        .map(|t| t["text"].as_str().unwrap().to_owned())
        .collect();
    assert!(tokens.len() > 3, "the answer came in pieces: {seen:?}");
    let answer = seen
        .iter()
        .filter(|(k, _, _)| k == "entry")
        .map(|(_, data, _)| serde_json::from_str::<Value>(data).unwrap())
        .find(|e| e["from"] == "answer")
        .expect("the model's entry");
    let streamed: Value =
        serde_json::from_str(&tokens.concat()).expect("the tokens make the answer");
    assert_eq!(
        streamed, answer["event"],
        "the tokens are the answer the trail keeps"
    );
    assert_eq!(
        seen.last().map(|(k, d, _)| (k.as_str(), d.as_str())),
        Some(("end", "completed"))
    );
}

#[tokio::test]
async fn a_run_stopped_for_an_mcp_servers_question_is_answered_over_http() {
    // `ask`'s server (server-everything, on PATH) asks a person a question during the run.
    claij_testkit::cache::mcp_server_bin("mcp-server-everything");
    let path = format!(
        "{}:{}",
        claij_testkit::cache::mcp_server_bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("claij.db");
    let ask = repo()
        .join("tests/mcp-clients/ask.yaml")
        .display()
        .to_string();
    let server = Served::start_env(&store, &[&ask], &[("PATH", &path)]);
    let http = client();

    let reply = post(
        &http,
        server.url("/runs?wait=30"),
        &json!({"fsm": "ask", "input": {}}),
    )
    .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert_eq!(reply.body["status"], "suspended", "{}", reply.body);
    let id = reply.body["id"].as_str().expect("an id").to_owned();
    let shown = get(&http, server.url(&format!("/runs/{id}"))).await;
    let wait = &shown.body["wait"];
    assert_eq!(wait["question"]["server"], "ev", "{wait}");
    assert_eq!(wait["schema"]["required"], json!(["name"]), "{wait}");
    let trail_len = shown.body["trail_len"].clone();

    // Refused: the problem names the field; nothing changed.
    let refused = post(
        &http,
        server.url(&format!("/runs/{id}/resume")),
        &json!({"input": {"name": 5}}),
    )
    .await;
    assert_problem(&refused, 422);
    assert!(
        refused.body.to_string().contains("/name"),
        "{}",
        refused.body
    );
    let again = get(&http, server.url(&format!("/runs/{id}"))).await;
    assert_eq!(again.body["trail_len"], trail_len);
    assert_eq!(again.body["status"], "suspended");

    // The answer: the call is made again and the server gets it.
    let done = post(
        &http,
        server.url(&format!("/runs/{id}/resume?wait=30")),
        &json!({"input": {"name": "Lin"}}),
    )
    .await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert_eq!(done.body["status"], "completed", "{}", done.body);
    assert!(
        done.body["result"]["said"]
            .as_str()
            .unwrap_or_default()
            .contains("Name: Lin"),
        "{}",
        done.body
    );
}

#[tokio::test]
async fn an_answer_over_http_goes_straight_back_to_a_question_held_open() {
    // asker.py (the official Python SDK's server) asks for a name; the start answers as
    // soon as the run waits on the question (its request held open by the server), and
    // the answer, posted later, reaches the tool in that same call: it runs once.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("asker.log");
    let python = claij_testkit::cache::mcp_sdk_python();
    let script = repo().join("tests/mcp-clients/asker.py");
    let asker = repo()
        .join("tests/mcp-clients/asker.yaml")
        .display()
        .to_string();
    let (python, script, log_path) = (
        python.display().to_string(),
        script.display().to_string(),
        log.display().to_string(),
    );
    let server = Served::start_env(
        &dir.path().join("claij.db"),
        &[&asker],
        &[
            ("ASKER_PYTHON", &python),
            ("ASKER_SCRIPT", &script),
            ("ASKER_LOG", &log_path),
        ],
    );
    let http = client();
    let reply = post(
        &http,
        server.url("/runs?wait=60"),
        &json!({"fsm": "asker", "input": {}}),
    )
    .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert_eq!(reply.body["status"], "suspended", "{}", reply.body);
    let wait = &reply.body["wait"];
    assert_eq!(wait["question"]["server"], "asker", "{wait}");
    assert!(wait["held_until"].is_string(), "{wait}");
    assert!(wait["hook_url"].is_string(), "{wait}");
    let id = reply.body["id"].as_str().unwrap().to_owned();

    let done = post(
        &http,
        server.url(&format!("/runs/{id}/resume?wait=30")),
        &json!({"input": {"name": "Lin"}}),
    )
    .await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert_eq!(done.body["status"], "completed", "{}", done.body);
    assert_eq!(done.body["result"]["said"], "Hello, Lin!", "{}", done.body);
    let calls = std::fs::read_to_string(&log).unwrap();
    assert_eq!(calls.lines().count(), 1, "the tool ran once: {calls}");
}
