//! Finding "a template stalls the server" (issue 35, Medium): a document registered over
//! the network whose `transform` template loops for minutes (two nested loops of 100,000),
//! run on the real `claij serve`. The server answers `/health` while such renders go on,
//! the render ends when its fuel runs out (the run fails saying so, naming its state), a
//! state's timeout and an interrupt end a long render's attempt at once, and a server
//! restarted after a crash in the middle of renders answers while it takes them up again.

use std::time::Duration;

use serde_json::{Value, json};

use crate::served::{Reply, Served, client, eventually, get, post};

/// A template that runs 10^10 loop iterations: minutes, or hours, of one core.
const SPIN: &str = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{\"id\": [\"spin\", \"done\"]}";

/// The document `id` whose `spin` state renders [`SPIN`], with `config` added to the state's.
fn spinner(id: &str, config: Value) -> Value {
    let mut state_config = json!({"template": SPIN});
    if let (Some(map), Value::Object(more)) = (state_config.as_object_mut(), config) {
        map.extend(more);
    }
    json!({
        "id": id,
        "states": [
            {"id": "spin", "action": "transform", "config": state_config},
            {"id": "done", "action": "end"},
        ],
        "xitions": [{"id": ["start", "spin"]}, {"id": ["spin", "done"]}],
    })
}

/// A request that must be answered within `seconds` (a stalled server fails the test
/// rather than hanging it).
async fn within<T>(seconds: u64, what: &str, request: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(seconds), request)
        .await
        .unwrap_or_else(|_| panic!("{what}: not answered within {seconds} s"))
}

/// Registers `document` on `server`.
async fn register(http: &reqwest::Client, server: &Served, document: &Value) {
    let reply = within(
        10,
        "registering",
        post(http, server.url("/definitions"), document),
    )
    .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
}

/// Starts a run of `fsm` without waiting for it; its id.
async fn start(http: &reqwest::Client, server: &Served, fsm: &str) -> String {
    let body = json!({"fsm": fsm, "input": {}});
    let reply = within(10, "starting a run", post(http, server.url("/runs"), &body)).await;
    assert!(matches!(reply.status, 201 | 202), "{}", reply.body);
    reply.body["id"].as_str().unwrap().to_owned()
}

/// `/health` answers, within 5 s (while a render would take minutes).
async fn healthy(http: &reqwest::Client, server: &Served) {
    let reply: Reply = within(5, "/health", get(http, server.url("/health"))).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["status"], "ok");
}

/// The run once it has ended (within `seconds`), and its last trail entry.
async fn ended(http: &reqwest::Client, server: &Served, id: &str, seconds: u64) -> (Value, Value) {
    let url = server.url(&format!("/runs/{id}"));
    let run = eventually(seconds, &format!("run {id} to end"), || {
        let (http, url) = (http.clone(), url.clone());
        async move {
            let run = get(&http, url).await.body;
            matches!(
                run["status"].as_str(),
                Some("failed" | "interrupted" | "completed")
            )
            .then_some(run)
        }
    })
    .await;
    let last = run["trail_len"].as_u64().unwrap() - 1;
    let page = get(http, server.url(&format!("/runs/{id}/trail?from={last}"))).await;
    (run, page.body["entries"][0].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_looping_template_leaves_the_server_answering_and_fails_when_its_fuel_runs_out() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(&dir.path().join("claij.db"), &[]);
    let http = client();
    register(&http, &server, &spinner("spin", json!({}))).await;
    // More renders than the server has cores.
    let mut runs = Vec::new();
    for _ in 0..4 {
        runs.push(start(&http, &server, "spin").await);
        healthy(&http, &server).await;
    }
    for _ in 0..5 {
        healthy(&http, &server).await;
    }
    for id in &runs {
        let (run, last) = ended(&http, &server, id, 60).await;
        assert_eq!(run["status"], "failed", "{run}");
        let failure = &last["failure"];
        assert_eq!(failure["kind"], "action", "{last}");
        let message = failure["message"].as_str().unwrap();
        assert!(
            message.contains("template of state `spin` ran out of fuel"),
            "{message}"
        );
        assert_eq!(run["trail_len"], 2, "not tried again: {run}");
    }
    healthy(&http, &server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_states_timeout_and_an_interrupt_end_a_long_render_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(&dir.path().join("claij.db"), &[]);
    let http = client();
    // Fuel for far longer than the test waits.
    let fuel = json!({"fuel": 1_000_000_000});
    let mut timed = spinner("timed", fuel.clone());
    timed["states"][0]["config"]["timeout"] = json!("1s");
    timed["states"][0]["config"]["max_attempts"] = json!(1);
    register(&http, &server, &timed).await;
    register(&http, &server, &spinner("endless", fuel)).await;

    let timed = start(&http, &server, "timed").await;
    let endless = start(&http, &server, "endless").await;
    healthy(&http, &server).await;
    let (run, last) = ended(&http, &server, &timed, 20).await;
    assert_eq!(run["status"], "failed", "{run}");
    assert_eq!(last["failure"]["kind"], "timeout", "{last}");
    assert!(
        last["failure"]["message"]
            .as_str()
            .unwrap()
            .contains("did not finish within its timeout of 1s"),
        "{last}"
    );

    // The endless one renders still; an interrupt ends it.
    let now = get(&http, server.url(&format!("/runs/{endless}")))
        .await
        .body;
    assert_eq!(now["status"], "running", "{now}");
    let interrupted = within(
        5,
        "the interrupt",
        post(
            &http,
            server.url(&format!("/runs/{endless}/interrupt")),
            &json!({}),
        ),
    )
    .await;
    assert_eq!(interrupted.status, 202, "{}", interrupted.body);
    let (run, last) = ended(&http, &server, &endless, 10).await;
    assert_eq!(run["status"], "interrupted", "{run}");
    assert_eq!(last["failure"]["kind"], "interrupted", "{last}");
    healthy(&http, &server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_restarted_during_renders_answers_while_it_takes_them_up() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("claij.db");
    let server = Served::start(&store, &[]);
    let http = client();
    let mut slow = spinner("slow", json!({"fuel": 1_000_000_000}));
    slow["states"][0]["config"]["timeout"] = json!("3s");
    slow["states"][0]["config"]["max_attempts"] = json!(1);
    register(&http, &server, &slow).await;
    let mut runs = Vec::new();
    for _ in 0..3 {
        runs.push(start(&http, &server, "slow").await);
    }
    healthy(&http, &server).await;
    server.kill();

    // Taken up again at start: the server answers all the same.
    let server = Served::start(&store, &[]);
    healthy(&http, &server).await;
    for id in &runs {
        let (run, last) = ended(&http, &server, id, 30).await;
        assert_eq!(run["status"], "failed", "{run}");
        assert_eq!(last["failure"]["kind"], "timeout", "{last}");
        healthy(&http, &server).await;
    }
}
