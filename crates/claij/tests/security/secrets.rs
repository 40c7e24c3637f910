//! Finding 10: a `run.suspended` callback's body, kept in the store for its retries,
//! carried the resume link with its secret, so a copy of the store answered the wait
//! (the docs said a copy gives no link away). Now nothing stored makes a working link:
//! the link sent is made again at each attempt from a key the server holds and never
//! stores.

use std::collections::BTreeSet;

use serde_json::json;

use crate::served::{
    Served, Webhooks, approval, client, eventually, get, local_callbacks, secret_file, send,
};

/// Every string in `bytes` that could be a link's secret: what follows `/hooks/`, and
/// every 64 hex digits in a row.
fn candidates(bytes: &[u8]) -> BTreeSet<String> {
    let text = String::from_utf8_lossy(bytes);
    let mut found = BTreeSet::new();
    for (at, _) in text.match_indices("/hooks/") {
        let rest = &text[at + "/hooks/".len()..];
        let secret: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
            .collect();
        if !secret.is_empty() {
            found.insert(secret);
        }
    }
    let hex: Vec<bool> = bytes.iter().map(u8::is_ascii_hexdigit).collect();
    let mut start = 0;
    while start < bytes.len() {
        if !hex[start] {
            start += 1;
            continue;
        }
        let end = (start..bytes.len())
            .find(|&i| !hex[i])
            .unwrap_or(bytes.len());
        for window in start..=end.saturating_sub(64) {
            if end - window >= 64 {
                found.insert(String::from_utf8_lossy(&bytes[window..window + 64]).into_owned());
            }
        }
        start = end;
    }
    found
}

#[tokio::test]
async fn a_copy_of_the_store_answers_no_wait() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("claij.db");
    let secret = secret_file(dir.path());
    let receiver = Webhooks::start(dir.path(), "r", &[]);
    let server = Served::start(&store, &local_callbacks(&approval(), &secret));
    let http = client();
    let started = send(http.post(server.url("/runs?wait=30")).json(&json!({
        "fsm": "human-approval",
        "input": {"id": ["start", "summarise"], "service": "billing", "version": "2.4.1", "changes": 14},
        "webhook": receiver.url,
    })))
    .await;
    assert_eq!(started.body["status"], "suspended", "{}", started.body);
    let id = started.body["id"].as_str().unwrap().to_owned();
    let got = receiver.wait_for(1).await;
    let link = got[0]["payload"]["data"]["wait"]["hook_url"]
        .as_str()
        .expect("the callback carries a link")
        .to_owned();
    let secret_sent = link.rsplit('/').next().unwrap().to_owned();
    // Its delivery is recorded (the body kept for retries).
    let url = server.url(&format!("/runs/{id}/deliveries"));
    eventually(30, "the delivery is recorded", || async {
        let found = get(&http, url.clone()).await.body;
        (found[0]["status"] == "delivered").then_some(())
    })
    .await;

    // A copy of the store: the database and its write-ahead log.
    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("claij.db") {
            bytes.extend(std::fs::read(&path).unwrap());
        }
    }
    assert!(!bytes.is_empty());
    assert!(
        !bytes
            .windows(secret_sent.len())
            .any(|w| w == secret_sent.as_bytes()),
        "the link's secret is in the store"
    );
    let tried = candidates(&bytes);
    assert!(
        !tried.is_empty(),
        "the store holds the links' hashes at least"
    );
    for candidate in &tried {
        let answer = send(
            http.get(server.url(&format!("/hooks/{candidate}")))
                .header("accept", "application/json"),
        )
        .await;
        assert!(
            matches!(answer.status, 401 | 404),
            "`{candidate}` from the store answers the wait: {} {}",
            answer.status,
            answer.body
        );
    }
    // The link the receiver was sent works.
    let shown = send(http.get(&link).header("accept", "application/json")).await;
    assert_eq!(shown.status, 200, "{}", shown.body);
    assert_eq!(shown.body["state"], "approve");
}
