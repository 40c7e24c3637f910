//! Finding "a concurrent answer leaves a run stuck in `running`" (issue 35, Medium): a
//! run that waits again right after it is answered — a `human` state looping on itself,
//! then two `human` states one after the other — answered many times at once through
//! resume links (`POST /runs/{id}/hooks`, then `POST /hooks/{secret}`) and the API
//! (`POST /runs/{id}/resume` with the `trail_len` it answers) of the real `claij serve`, on a SQLite file and on the real
//! PostgreSQL server. Of the answers to each wait exactly one is taken (the others get 409,
//! or 410 once the link's wait is over), the answer taken is one made for that wait, and
//! the run never stays claimed: it waits again at once, and ends.

use std::path::Path;

use serde_json::{Value, json};

use crate::served::{Served, client, eventually, get, post, send};

/// `ask` answers itself for the first [`LOOPS`] waits, then `ask` and `check` wait one
/// after the other; `check` ends the run at the last of [`WAITS`] waits.
const LOOPING: &str = include_str!("../../../../tests/security/looping.yaml");

/// Waits answered by the self-loop `[ask, ask]`.
const LOOPS: u64 = 8;
/// Waits in all.
const WAITS: u64 = 20;
/// Links made for each wait, each answered once, at the same time.
const LINKS: usize = 6;
/// Answers through the API to each wait, at the same time as the links'.
const API_ANSWERS: usize = 2;

/// The transition that answers wait `k` in `state`.
fn answer_for(state: &str, k: u64) -> [&'static str; 2] {
    match state {
        "ask" if k < LOOPS => ["ask", "ask"],
        "ask" => ["ask", "check"],
        _ if k + 1 >= WAITS => ["check", "done"],
        _ => ["check", "ask"],
    }
}

/// Answers every wait of a run of [`LOOPING`] served on `store`, [`LINKS`] +
/// [`API_ANSWERS`] answers at once each time.
async fn answer_each_wait_many_times(store: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let document = dir.path().join("looping.yaml");
    std::fs::write(&document, LOOPING).unwrap();
    let server = Served::start(store, &[document.to_str().unwrap()]);
    let http = client();
    let started = post(
        &http,
        server.url("/runs?wait=30"),
        &json!({"fsm": "looping", "input": {}}),
    )
    .await;
    assert_eq!(started.status, 201, "{}", started.body);
    assert_eq!(started.body["status"], "suspended", "{}", started.body);
    let id = started.body["id"].as_str().unwrap().to_owned();
    let run_url = server.url(&format!("/runs/{id}"));
    let mut winners = Vec::new();
    for k in 0..WAITS {
        let run = get(&http, run_url.clone()).await.body;
        assert_eq!(run["status"], "suspended", "wait {k}: {run}");
        assert_eq!(run["trail_len"], k + 1, "wait {k}: {run}");
        let state = run["state"].as_str().unwrap().to_owned();
        let mut links = Vec::new();
        for _ in 0..LINKS {
            let made = send(
                http.post(server.url(&format!("/runs/{id}/hooks")))
                    .header("content-type", "application/json"),
            )
            .await;
            assert_eq!(made.status, 201, "{}", made.body);
            links.push(made.body["url"].as_str().unwrap().to_owned());
        }
        let input = |by: String| json!({"id": answer_for(&state, k), "by": by, "wait": k});
        let mut answers = Vec::new();
        for (i, link) in links.iter().enumerate() {
            let (http, url, body) = (http.clone(), server.url(link), input(format!("link-{i}")));
            answers.push(tokio::spawn(async move {
                (format!("link-{i}"), post(&http, url, &body).await)
            }));
        }
        for i in 0..API_ANSWERS {
            let (http, url) = (http.clone(), server.url(&format!("/runs/{id}/resume")));
            // The wait it is for, as the run's view showed it.
            let body = json!({"input": input(format!("api-{i}")), "trail_len": k + 1});
            answers.push(tokio::spawn(async move {
                (format!("api-{i}"), post(&http, url, &body).await)
            }));
        }
        let mut taken = Vec::new();
        for answer in answers {
            let (by, reply) = answer.await.unwrap();
            // Another answer was taken first: refused as a conflict, or, at a link whose
            // wait is seen over, as gone — or unknown, once a link to the next wait was
            // made (the winner's reply makes one) and the old ones forgotten.
            let refused = matches!(reply.status, 409 | 410)
                || (reply.status == 404 && by.starts_with("link"));
            match reply.status {
                200 | 202 => taken.push(by),
                _ if refused => assert_eq!(
                    reply.content_type, "application/problem+json",
                    "{}",
                    reply.body
                ),
                other => panic!("wait {k}, {by}: {other} {}", reply.body),
            }
        }
        assert_eq!(
            taken.len(),
            1,
            "wait {k}: exactly one answer taken, not {taken:?}"
        );
        winners.push(taken.remove(0));
        // Never left claimed: the run waits again (or ends) at once.
        let what = format!("wait {k}: the run to wait again after its answer");
        eventually(20, &what, || {
            let (http, url) = (http.clone(), run_url.clone());
            async move {
                let run = get(&http, url).await.body;
                let moved = run["trail_len"] == k + 2;
                match run["status"].as_str() {
                    Some("suspended") if moved && k + 1 < WAITS => Some(()),
                    Some("completed") if moved && k + 1 == WAITS => Some(()),
                    _ => None,
                }
            }
        })
        .await;
    }
    let trail = get(&http, server.url(&format!("/runs/{id}/trail?limit=1000"))).await;
    assert_eq!(trail.status, 200, "{}", trail.body);
    let entries = trail.body["entries"].as_array().unwrap();
    assert_eq!(entries.len() as u64, WAITS + 1);
    for (k, entry) in entries[1..].iter().enumerate() {
        let event: &Value = &entry["event"];
        assert_eq!(
            event["wait"], k as u64,
            "wait {k} took an answer made for it: {entry}"
        );
        assert_eq!(event["by"], winners[k].as_str(), "wait {k}: {entry}");
    }
    let run = get(&http, run_url).await.body;
    assert_eq!(run["status"], "completed", "{run}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_answers_through_links_take_one_per_wait_and_never_leave_a_run_claimed_on_sqlite()
 {
    let dir = tempfile::tempdir().unwrap();
    answer_each_wait_many_times(&dir.path().join("claij.db")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_answers_through_links_take_one_per_wait_and_never_leave_a_run_claimed_on_postgres()
 {
    let db = claij_testkit::postgres::database();
    answer_each_wait_many_times(Path::new(&db.url())).await;
}
