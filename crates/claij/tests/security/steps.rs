//! Finding "nothing bounds a run's steps or trail" (issue 35, Medium), on the real `claij
//! serve`: a run that loops for ever ends at its step limit (`config.max_steps`, 10,000 by
//! default) with a failure of its own kind, `steps`; and the views of a run with a long
//! trail read it a page at a time — `GET /runs/{id}` reads none of it (32 views at once
//! leave the server's peak memory where it was), `GET /runs/{id}/trail` gives pages of at
//! most 1,000 entries, the live events catch up a page at a time — and every entry is
//! there, once, in order.

use serde_json::{Value, json};

use crate::served::{Served, client, get, post};

/// A transform looping on itself for ever (`[tick, done]` is never taken), its config's
/// `max_steps` set to `max_steps` when given.
fn forever(id: &str, max_steps: Option<u64>) -> Value {
    let mut document = json!({
        "id": id,
        "states": [
            {"id": "tick", "action": "transform",
             "config": {"template": "{\"id\": [\"tick\", \"tick\"], \"n\": {{ event.n + 1 }}}"}},
            {"id": "done", "action": "end"},
        ],
        "xitions": [{"id": ["start", "tick"]}, {"id": ["tick", "tick"]}, {"id": ["tick", "done"]}],
    });
    if let Some(max) = max_steps {
        document["config"] = json!({"max_steps": max});
    }
    document
}

/// Registers `document` and runs it from `input` until it ends; the run's view.
async fn run_to_its_end(
    http: &reqwest::Client,
    server: &Served,
    document: &Value,
    input: Value,
) -> Value {
    let registered = post(http, server.url("/definitions"), document).await;
    assert_eq!(registered.status, 201, "{}", registered.body);
    let body = json!({"fsm": document["id"], "input": input});
    let started = post(http, server.url("/runs?wait=120"), &body).await;
    assert_eq!(started.status, 201, "{}", started.body);
    started.body
}

/// The last entry of run `id`'s trail.
async fn last_entry(http: &reqwest::Client, server: &Served, id: &str, trail_len: u64) -> Value {
    let url = server.url(&format!("/runs/{id}/trail?from={}", trail_len - 1));
    let page = get(http, url).await.body;
    assert_eq!(page["entries"].as_array().map(Vec::len), Some(1), "{page}");
    page["entries"][0].clone()
}

#[tokio::test]
async fn a_run_that_loops_for_ever_ends_at_its_step_limit_with_a_steps_failure() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(&dir.path().join("claij.db"), &[]);
    let http = client();
    for (document, limit) in [
        (forever("fifty", Some(50)), 50_u64),
        (forever("unbounded", None), 10_000),
    ] {
        let run = run_to_its_end(&http, &server, &document, json!({"n": 0})).await;
        assert_eq!(run["status"], "failed", "{run}");
        assert_eq!(run["state"], "tick");
        // `limit` transitions (the input's entry included), then the failure.
        assert_eq!(run["trail_len"], limit + 1, "{run}");
        let id = run["id"].as_str().unwrap();
        let last = last_entry(&http, &server, id, limit + 1).await;
        assert_eq!(last["failure"]["kind"], "steps", "{last}");
        assert_eq!(last["from"], "tick");
        assert!(last.get("to").is_none(), "{last}");
        let message = last["failure"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("the run took {limit} steps"))
                && message.contains(&format!("config.max_steps: {limit}")),
            "{message}"
        );
        let before = get(
            &http,
            server.url(&format!("/runs/{id}/trail?from={}", limit - 1)),
        )
        .await
        .body;
        assert_eq!(
            before["entries"][0]["event"]["n"],
            limit - 1,
            "every step before was taken"
        );
    }
}

/// The peak resident memory of process `pid` (`VmHWM`), in kB.
fn peak_memory_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Loops of the long run.
const LOOPS: u64 = 12_000;

/// A transform counting to [`LOOPS`] and then done: `LOOPS + 2` entries, more than the
/// default step limit allows (raised in its config).
fn counter() -> Value {
    let template = format!(
        "{{% if event.n >= {LOOPS} %}}{{\"id\": [\"tick\", \"done\"], \"n\": {{{{ event.n }}}}, \"pad\": {{{{ event.pad | tojson }}}}}}\
         {{% else %}}{{\"id\": [\"tick\", \"tick\"], \"n\": {{{{ event.n + 1 }}}}, \"pad\": {{{{ event.pad | tojson }}}}}}{{% endif %}}"
    );
    json!({
        "id": "counter",
        "config": {"max_steps": 20_000},
        "states": [
            {"id": "tick", "action": "transform", "config": {"template": template}},
            {"id": "done", "action": "end"},
        ],
        "xitions": [{"id": ["start", "tick"]}, {"id": ["tick", "tick"]}, {"id": ["tick", "done"]}],
    })
}

#[tokio::test]
async fn a_long_trail_is_shown_and_sent_a_page_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(&dir.path().join("claij.db"), &[]);
    let http = client();
    let pad = "x".repeat(512);
    let run = run_to_its_end(&http, &server, &counter(), json!({"n": 0, "pad": pad})).await;
    assert_eq!(run["status"], "completed", "{}", run["status"]);
    let id = run["id"].as_str().unwrap().to_owned();
    let total = LOOPS + 2;

    // The run's view: its result from the trail's end, no trail in it.
    let shown = get(&http, server.url(&format!("/runs/{id}"))).await;
    assert_eq!(shown.status, 200, "{}", shown.body);
    assert_eq!(shown.body["trail_len"], total);
    assert_eq!(shown.body["result"]["id"], json!(["tick", "done"]));
    assert_eq!(shown.body["result"]["n"], LOOPS);
    assert!(shown.body.get("trail").is_none());
    assert!(
        shown.text.len() < 4096,
        "a run's view is small, whatever its trail: {} bytes",
        shown.text.len()
    );
    // Views of it, many at once, read none of its trail: the server's peak memory stays.
    let peak = || peak_memory_kb(server.pid());
    let before = peak();
    for _ in 0..4 {
        let views: Vec<_> = (0..8)
            .map(|_| {
                let (http, url) = (http.clone(), server.url(&format!("/runs/{id}")));
                tokio::spawn(async move { get(&http, url).await.status })
            })
            .collect();
        for view in views {
            assert_eq!(view.await.unwrap(), 200);
        }
    }
    // (Reading the whole trail for each view, 32 views of this one add about 100 MB.)
    let grown = peak().saturating_sub(before);
    assert!(
        grown < 32 * 1024,
        "the server's peak memory grew by {grown} kB for 32 views of one run"
    );

    // Trail pages: 100 by default, 1,000 at most.
    let page = |query: String| {
        let (http, url) = (
            http.clone(),
            server.url(&format!("/runs/{id}/trail{query}")),
        );
        async move {
            let reply = get(&http, url).await;
            assert_eq!(reply.status, 200, "{}", reply.body);
            reply.body
        }
    };
    let first = page(String::new()).await;
    assert_eq!(first["entries"].as_array().unwrap().len(), 100);
    assert_eq!(first["next"], 100);
    let capped = page("?limit=100000".into()).await;
    assert_eq!(capped["entries"].as_array().unwrap().len(), 1000);
    assert_eq!(capped["next"], 1000);
    let tail = page(format!("?from={}", total - 5)).await;
    assert_eq!(tail["entries"].as_array().unwrap().len(), 5);
    assert!(tail.get("next").is_none(), "{}", tail["next"]);
    // Every entry, once, in order, a page at a time.
    let mut from = 0;
    while from < total {
        let body = page(format!("?from={from}&limit=1000")).await;
        let entries = body["entries"].as_array().unwrap();
        assert!(!entries.is_empty() && entries.len() <= 1000);
        for entry in entries {
            assert_eq!(entry["seq"], from);
            assert_eq!(entry["event"]["n"], from.min(LOOPS));
            from += 1;
        }
        match body.get("next") {
            Some(next) => assert_eq!(next, from),
            None => assert_eq!(from, total),
        }
    }

    // The live events of the finished run: every entry, in order, then its end.
    let events = get(&http, server.url(&format!("/runs/{id}/events"))).await;
    assert_eq!(events.status, 200);
    let ids: Vec<u64> = events
        .text
        .lines()
        .filter_map(|l| l.strip_prefix("id:"))
        .map(|n| n.trim().parse().unwrap())
        .collect();
    assert_eq!(ids, (0..total).collect::<Vec<_>>());
    assert!(events.text.contains("event: end"), "the stream ends");
}
