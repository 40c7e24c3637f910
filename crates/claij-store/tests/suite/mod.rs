//! The store test suite, written once against `Arc<dyn Store>` (every role) and run on every
//! backend: `store_suite!(harness)` makes one test per function here.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use claij_core::budget::{Budget, PendingCalls, Spend};
use claij_core::store::{
    Checkpoint, ClaimFrom, Definition, Durability, EventStatus, Heartbeat, Lease, Migration,
    Notice, Published, RunCursor, RunFilter, RunRecord, RunStatus, StoreError, Subscription, Wait,
    content_hash,
};
use claij_core::trail::{Failure, FailureKind, TrailEntry, Usage};
use claij_store::roles::{Delivery, DeliveryStatus, Hook, Store, WorkerRecord};
use serde_json::{Value, json};

use crate::support::{Backend, Harness};

/// Makes one `#[tokio::test]` per suite function, each on a fresh store from `$harness`.
macro_rules! store_suite {
    ($harness:expr) => {
        store_suite!(@tests $harness; tokio::test;
            definitions_round_trip,
            a_definition_becomes_the_operators_and_never_a_clients,
            create_commit_and_read_back,
            a_trail_is_read_a_page_at_a_time,
            a_commit_by_another_owner_loses_the_lease,
            entries_out_of_sequence_are_refused_and_nothing_is_written,
            creating_checks_the_run,
            interrupts_are_flagged_on_runs_that_are_not_over,
            heartbeats_renew_only_the_holders_lease,
            listing_filters_and_orders_newest_first,
            prune_removes_only_final_runs_and_their_trails,
            resume_links_are_kept_by_hash_and_forgotten,
            callbacks_and_deliveries_are_kept_and_pruned,
            storage_grows_linearly,
            a_reopened_store_sees_everything,
            migrations_apply_once,
            closing_after_commits_returns,
            a_newer_database_is_refused,
            durability_settings_reach_the_database,
            unreadable_rows_are_reported_as_corrupt,
            descriptions_are_plain,
            due_says_what_needs_a_worker_and_when,
            leases_are_renewed_together_and_runs_handed_back,
            idempotency_keys_find_the_first_run,
            a_parent_is_due_once_a_child_ends,
            published_events_are_written_with_their_checkpoint,
            a_commits_spend_is_written_in_place_and_summed_over_its_tree,
            budgets_are_set_changed_and_removed,
            pending_calls_are_noted_by_the_holder_and_forgotten_by_the_next_commit,
            older_runs_get_their_spend_from_their_trails,
            a_run_moves_to_another_definition_only_as_it_was_found,
            a_forks_origin_is_kept_with_it
        );
        // These race spawned tasks against each other (claims, recoveries, commits that
        // group): two worker threads make the tasks run in parallel, not only take turns
        // on one thread, on any machine.
        store_suite!(@tests $harness; tokio::test(flavor = "multi_thread", worker_threads = 2);
            one_of_eight_concurrent_claims_wins,
            a_claim_of_a_wait_the_run_moved_past_is_refused,
            the_queue_gives_each_due_run_to_one_worker,
            stale_claims_respect_leases_and_dead_owners,
            concurrent_commits_are_grouped,
            a_refused_commit_does_not_fail_its_group,
            a_failing_statement_does_not_fail_its_group
        );
    };
    (@tests $harness:expr; $runtime:meta; $($name:ident),*) => {
        $(
            #[$runtime]
            async fn $name() {
                suite::$name($harness).await;
            }
        )*
    };
}

/// A fixed time (µs since the epoch) the tests build on.
const T0: i64 = 1_750_000_000_000_000;

/// `micros` µs after the epoch.
fn at(micros: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_micros(micros as u64)
}

fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// An hour from now, to the microsecond (so that it reads back equal).
fn in_an_hour() -> SystemTime {
    at(now_micros() + 3_600_000_000)
}

fn an_hour_ago() -> SystemTime {
    at(now_micros() - 3_600_000_000)
}

fn definition(fsm: &str, version: u32, created: i64) -> Definition {
    let document = json!({
        "id": fsm,
        "version": version,
        "states": [{"id": "a", "action": "llm"}, {"id": "end", "action": "end"}],
        "xitions": [{"id": ["start", "a"]}, {"id": ["a", "end"]}],
    });
    Definition {
        fsm_id: fsm.into(),
        version,
        hash: content_hash(&document),
        document,
        created_at: at(created),
        owner: claij_core::Owner::Operator,
    }
}

/// An entry; every third one is a failed attempt with usage, to cover every field.
fn entry(seq: u64, event: Value) -> TrailEntry {
    let failed = seq % 3 == 2;
    TrailEntry {
        seq,
        fsm: "review".into(),
        version: 1,
        from: "a".into(),
        to: (!failed).then(|| "b".into()),
        event,
        at: at(T0 + seq as i64 * 1_000_001),
        attempt: 1 + (seq % 2) as u32,
        model: failed.then(|| "smollm2".into()),
        usage: failed.then(|| {
            Box::new(Usage {
                input_tokens: 120,
                output_tokens: 7,
                cached_tokens: Some(3),
                cost_usd: Some(0.000_125),
                ..Usage::default()
            })
        }),
        enforce: None,
        summary: None,
        votes: None,
        duration_ms: Some(seq * 7),
        failure: failed.then(|| {
            Box::new(Failure {
                kind: FailureKind::Validation,
                message: "missing `verdict`".into(),
                errors: vec![],
                attempt: 1,
            })
        }),
    }
}

/// An event whose keys are not in alphabetical order (they must read back as written).
fn event(n: u64) -> Value {
    json!({"zeta": n, "alpha": {"y": [1, 2.5, null], "b": "text ünïcödé"}, "mid": true})
}

fn entries(from: u64, to: u64) -> Vec<TrailEntry> {
    (from..to).map(|seq| entry(seq, event(seq))).collect()
}

fn record(
    id: &str,
    def: &Definition,
    status: RunStatus,
    owner: Option<&str>,
    created: i64,
) -> RunRecord {
    RunRecord {
        id: id.into(),
        fsm_id: def.fsm_id.clone(),
        version: def.version,
        hash: def.hash.clone(),
        parent: None,
        status,
        state: "a".into(),
        context: json!({"topic": "stores", "n": 0}),
        trail_len: 0,
        wait: None,
        lease: owner.map(|owner| Lease {
            owner: owner.into(),
            until: in_an_hour(),
        }),
        interrupt_requested: false,
        not_before: None,
        idempotency_key: None,
        spend: Spend::default(),
        budget: None,
        pending: None,
        forked_from: None,
        created_at: at(created),
        updated_at: at(created),
    }
}

fn a_wait() -> Wait {
    Wait {
        state: "human".into(),
        transitions: vec![("human".into(), "end".into())],
        schema: json!({"type": "object", "required": ["ok"]}),
        expires_at: Some(at(T0 + 86_400_000_000) + Duration::from_nanos(123)),
        on_expiry: Some("human-end".into()),
        prompt: Some("Approve?".into()),
        children: vec!["r-child.1".into()],
        deadline_at: None,
        budget: None,
        // Stored and read back like the rest (a wait has one or the other in use).
        question: Some(Box::new(claij_core::Question {
            server: "forms".into(),
            message: "Who are you?".into(),
            schema: json!({"type": "object", "required": ["name"]}),
        })),
        held: Some(claij_core::store::Lease {
            owner: "host:1:2".into(),
            until: at(T0 + 30_000_000),
        }),
    }
}

/// Stores the definition and a run with `n` entries (held by `owner` while running).
async fn create(
    store: &Arc<dyn Store>,
    id: &str,
    status: RunStatus,
    owner: Option<&str>,
    n: u64,
) -> RunRecord {
    let def = definition("review", 1, T0);
    store.put_definition(&def).await.expect("put definition");
    let mut run = record(id, &def, status, owner, T0);
    if status == RunStatus::Suspended {
        run.wait = Some(a_wait());
    }
    run.trail_len = n;
    store
        .create_run(&run, &entries(0, n))
        .await
        .unwrap_or_else(|e| panic!("create {id}: {e}"));
    run
}

fn checkpoint(run: &str, owner: &str, entries: Vec<TrailEntry>) -> Checkpoint {
    Checkpoint {
        run_id: run.into(),
        owner: owner.into(),
        entries,
        status: RunStatus::Running,
        state: "b".into(),
        context: None,
        wait: None,
        lease_until: Some(in_an_hour()),
        published: Vec::new(),
        spend: Spend::default(),
    }
}

fn json_text(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).expect("json")
}

/// A client's definition stored again by the operator becomes the operator's; the
/// operator's stored again as a client's stays the operator's (issue 35: definitions
/// have owners).
pub(crate) async fn a_definition_becomes_the_operators_and_never_a_clients(h: Harness) {
    use claij_core::Owner;
    let store = h.open().await;
    let mut theirs = definition("theirs", 1, T0);
    theirs.owner = Owner::Client;
    store.put_definition(&theirs).await.expect("put");
    let read = |id: &'static str| {
        let store = store.clone();
        async move { store.definition(id, 1, None).await.expect("read").owner }
    };
    assert_eq!(read("theirs").await, Owner::Client);
    let mut adopted = theirs.clone();
    adopted.owner = Owner::Operator;
    store.put_definition(&adopted).await.expect("put again");
    assert_eq!(read("theirs").await, Owner::Operator);

    let ours = definition("ours", 1, T0);
    store.put_definition(&ours).await.expect("put");
    let mut claimed = ours.clone();
    claimed.owner = Owner::Client;
    store.put_definition(&claimed).await.expect("put again");
    assert_eq!(read("ours").await, Owner::Operator);
    let listed = store.definitions().await.expect("list");
    assert!(
        listed.iter().all(|d| d.owner == Owner::Operator),
        "{listed:?}"
    );
}

pub(crate) async fn definitions_round_trip(h: Harness) {
    let store = h.open().await;
    let v1 = definition("review", 1, T0);
    let v2 = definition("review", 2, T0 + 10);
    let mut v1b = definition("review", 1, T0 + 20);
    v1b.document["description"] = json!("changed without a new version");
    v1b.hash = content_hash(&v1b.document);
    for def in [&v1, &v2, &v1b, &v1] {
        store.put_definition(def).await.expect("put definition");
    }
    let back = store
        .definition("review", 1, Some(&v1.hash))
        .await
        .expect("v1");
    assert_eq!(back, v1);
    assert_eq!(json_text(&back.document), json_text(&v1.document));
    assert_eq!(
        store
            .definition("review", 1, None)
            .await
            .expect("newest v1"),
        v1b
    );
    assert_eq!(store.definition("review", 2, None).await.expect("v2"), v2);
    assert_eq!(
        store.definitions().await.expect("definitions"),
        vec![v1b.clone(), v2.clone(), v1.clone()]
    );
    for missing in [
        store.definition("review", 3, None).await,
        store.definition("review", 1, Some("0000")).await,
        store.definition("other", 1, None).await,
    ] {
        assert!(
            matches!(
                missing,
                Err(StoreError::NotFound {
                    what: "definition",
                    ..
                })
            ),
            "{missing:?}"
        );
    }
}

pub(crate) async fn create_commit_and_read_back(h: Harness) {
    let store = h.open().await;
    let created = create(&store, "r1", RunStatus::Running, Some("w1"), 2).await;
    assert_eq!(store.run("r1").await.expect("run"), created);
    assert_eq!(store.trail("r1", 0).await.expect("trail"), entries(0, 2));

    let until = in_an_hour();
    let mut step = checkpoint("r1", "w1", entries(2, 5));
    step.context = Some(json!({"topic": "stores", "n": 3, "notes": ["a", "b"]}));
    step.lease_until = Some(until);
    store.commit(step.clone()).await.expect("commit");
    let trail = store.trail("r1", 0).await.expect("trail");
    assert_eq!(trail, entries(0, 5));
    for (back, sent) in trail.iter().zip(entries(0, 5)) {
        assert_eq!(
            json_text(back),
            json_text(&sent),
            "entries read back as written"
        );
    }
    assert_eq!(store.trail("r1", 3).await.expect("tail"), entries(3, 5));
    assert_eq!(store.trail("r1", 9).await.expect("past the end"), vec![]);
    let run = store.run("r1").await.expect("run");
    assert_eq!(run.status, RunStatus::Running);
    assert_eq!(run.state, "b");
    assert_eq!(
        run.context,
        json!({"topic": "stores", "n": 3, "notes": ["a", "b"]})
    );
    assert_eq!(run.trail_len, 5);
    assert_eq!(
        run.lease,
        Some(Lease {
            owner: "w1".into(),
            until
        })
    );
    assert_eq!(run.created_at, created.created_at);
    assert!(run.updated_at > created.updated_at);

    // Suspending: the wait is kept, the lease released, the context left as it was.
    let mut suspend = checkpoint("r1", "w1", entries(5, 6));
    suspend.status = RunStatus::Suspended;
    suspend.state = "human".into();
    suspend.wait = Some(a_wait());
    suspend.lease_until = None;
    store.commit(suspend).await.expect("suspend");
    let run = store.run("r1").await.expect("run");
    assert_eq!(run.status, RunStatus::Suspended);
    assert_eq!(run.wait, Some(a_wait()));
    assert_eq!(run.lease, None);
    assert_eq!(run.context["n"], 3);
    assert_eq!(run.trail_len, 6);

    // A claim keeps the wait (for a claimer that dies before using it) until the
    // claimer's first commit; finishing clears it and releases the lease.
    let claimed = store
        .claim("r1", ClaimFrom::Suspended { trail_len: 6 }, "w2", until)
        .await
        .expect("claim");
    assert_eq!(claimed.status, RunStatus::Running);
    assert_eq!(claimed.wait, Some(a_wait()));
    let mut finish = checkpoint("r1", "w2", entries(6, 7));
    finish.status = RunStatus::Completed;
    finish.state = "end".into();
    finish.lease_until = None;
    store.commit(finish).await.expect("finish");
    let run = store.run("r1").await.expect("run");
    assert_eq!(
        (run.status, run.state.as_str(), run.lease, run.wait),
        (RunStatus::Completed, "end", None, None)
    );
    assert_eq!(store.trail("r1", 0).await.expect("trail"), entries(0, 7));

    // A commit of no entries moves the run without touching the trail.
    let other = create(&store, "r2", RunStatus::Running, Some("w1"), 1).await;
    let mut renew = checkpoint("r2", "w1", vec![]);
    renew.state = other.state.clone();
    store.commit(renew).await.expect("renew");
    assert_eq!(store.run("r2").await.expect("run").trail_len, 1);
}

pub(crate) async fn a_commit_by_another_owner_loses_the_lease(h: Harness) {
    let store = h.open().await;
    create(&store, "r1", RunStatus::Running, Some("w1"), 1).await;
    let before = store.run("r1").await.expect("run");
    let err = store.commit(checkpoint("r1", "w2", entries(1, 2))).await;
    assert_eq!(err, Err(StoreError::LostLease { run: "r1".into() }));
    // Even out of sequence, another owner's commit is a lost lease.
    let err = store.commit(checkpoint("r1", "w2", entries(7, 8))).await;
    assert_eq!(err, Err(StoreError::LostLease { run: "r1".into() }));
    assert_eq!(store.run("r1").await.expect("run"), before);
    assert_eq!(store.trail("r1", 0).await.expect("trail").len(), 1);

    let err = store.commit(checkpoint("nope", "w1", entries(0, 1))).await;
    assert_eq!(
        err,
        Err(StoreError::NotFound {
            what: "run",
            id: "nope".into()
        })
    );

    // A released lease is lost too.
    let mut release = checkpoint("r1", "w1", entries(1, 2));
    release.status = RunStatus::Failed;
    release.lease_until = None;
    store.commit(release).await.expect("fail the run");
    let err = store.commit(checkpoint("r1", "w1", entries(2, 3))).await;
    assert_eq!(err, Err(StoreError::LostLease { run: "r1".into() }));
}

pub(crate) async fn entries_out_of_sequence_are_refused_and_nothing_is_written(h: Harness) {
    let store = h.open().await;
    create(&store, "r1", RunStatus::Running, Some("w1"), 2).await;
    let before = store.run("r1").await.expect("run");
    let sequence = |seq, stored| {
        Err(StoreError::Sequence {
            run: "r1".into(),
            seq,
            stored,
        })
    };

    // A gap after the stored trail, a duplicate, a gap inside the delta, a disorder.
    assert_eq!(
        store.commit(checkpoint("r1", "w1", entries(5, 6))).await,
        sequence(5, 2)
    );
    assert_eq!(
        store.commit(checkpoint("r1", "w1", entries(1, 3))).await,
        sequence(1, 2)
    );
    let gap = vec![entry(2, event(2)), entry(4, event(4))];
    assert_eq!(
        store.commit(checkpoint("r1", "w1", gap)).await,
        sequence(4, 2)
    );
    let swapped = vec![entry(3, event(3)), entry(2, event(2))];
    assert_eq!(
        store.commit(checkpoint("r1", "w1", swapped)).await,
        sequence(3, 2)
    );

    assert_eq!(
        store.run("r1").await.expect("run"),
        before,
        "nothing written"
    );
    assert_eq!(store.trail("r1", 0).await.expect("trail"), entries(0, 2));
    store
        .commit(checkpoint("r1", "w1", entries(2, 3)))
        .await
        .expect("the right next entry");
}

pub(crate) async fn creating_checks_the_run(h: Harness) {
    let store = h.open().await;
    create(&store, "r1", RunStatus::Running, Some("w1"), 1).await;
    let def = definition("review", 1, T0);
    let mut again = record("r1", &def, RunStatus::Running, Some("w1"), T0);
    again.trail_len = 1;
    let err = store.create_run(&again, &entries(0, 1)).await;
    assert!(
        matches!(&err, Err(StoreError::Conflict { reason, .. }) if reason.contains("already exists")),
        "{err:?}"
    );

    let unknown = Definition {
        hash: "feed".into(),
        ..def.clone()
    };
    let orphan = record("r2", &unknown, RunStatus::Running, Some("w1"), T0);
    let err = store.create_run(&orphan, &[]).await;
    assert!(
        matches!(
            &err,
            Err(StoreError::NotFound {
                what: "definition",
                ..
            })
        ),
        "{err:?}"
    );

    let mut skewed = record("r3", &def, RunStatus::Running, Some("w1"), T0);
    skewed.trail_len = 2;
    let err = store
        .create_run(&skewed, &[entry(0, event(0)), entry(2, event(2))])
        .await;
    assert_eq!(
        err,
        Err(StoreError::Sequence {
            run: "r3".into(),
            seq: 2,
            stored: 0
        })
    );
    assert!(matches!(
        store.run("r3").await,
        Err(StoreError::NotFound { .. })
    ));
}

pub(crate) async fn a_trail_is_read_a_page_at_a_time(h: Harness) {
    let store = h.open().await;
    create(&store, "r1", RunStatus::Running, Some("w1"), 2).await;
    store
        .commit(checkpoint("r1", "w1", entries(2, 250)))
        .await
        .expect("commit");
    // Another run's entries are never in r1's pages.
    create(&store, "r2", RunStatus::Running, Some("w1"), 3).await;
    let mut read = Vec::new();
    let mut from = 0;
    loop {
        let page = store.trail_page("r1", from, 100).await.expect("page");
        assert!(page.len() <= 100, "a page holds at most its limit");
        assert_eq!(page, entries(from, (from + 100).min(250)), "from {from}");
        if page.is_empty() {
            break;
        }
        from += page.len() as u64;
        read.extend(page);
    }
    assert_eq!(from, 250);
    assert_eq!(read, store.trail("r1", 0).await.expect("trail"));
    assert_eq!(
        store.trail_page("r1", 249, 100).await.expect("tail"),
        entries(249, 250),
        "the last entry alone"
    );
    assert_eq!(
        store.trail_page("r1", 7, 1).await.expect("one"),
        entries(7, 8)
    );
    assert_eq!(
        store.trail_page("r1", 0, 0).await.expect("none"),
        Vec::new()
    );
    assert_eq!(
        store.trail_page("r1", 250, 10).await.expect("past"),
        Vec::new()
    );
    assert_eq!(
        store.trail_page("r2", 0, 100).await.expect("r2"),
        entries(0, 3)
    );
    assert!(matches!(
        store.trail_page("nope", 0, 10).await,
        Err(StoreError::NotFound { what: "run", .. })
    ));
}

pub(crate) async fn one_of_eight_concurrent_claims_wins(h: Harness) {
    let store = h.open().await;
    create(&store, "r1", RunStatus::Suspended, None, 3).await;
    let until = in_an_hour();
    let claims = (0..8).map(|i| {
        let store = store.clone();
        tokio::spawn(async move {
            let owner = format!("w{i}");
            (
                owner.clone(),
                store
                    .claim("r1", ClaimFrom::Suspended { trail_len: 3 }, &owner, until)
                    .await,
            )
        })
    });
    let mut winners = Vec::new();
    for claim in claims.collect::<Vec<_>>() {
        let (owner, result) = claim.await.expect("join");
        match result {
            Ok(record) => {
                assert_eq!(record.lease.as_ref().map(|l| &l.owner), Some(&owner));
                winners.push(owner);
            }
            Err(StoreError::Conflict { reason, .. }) => {
                assert_eq!(reason, "is running, not suspended")
            }
            Err(other) => panic!("unexpected {other}"),
        }
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
    let run = store.run("r1").await.expect("run");
    assert_eq!(run.status, RunStatus::Running);
    assert_eq!(
        run.wait,
        Some(a_wait()),
        "kept until the winner's first commit"
    );
    assert_eq!(
        run.lease,
        Some(Lease {
            owner: winners[0].clone(),
            until
        })
    );

    create(&store, "done", RunStatus::Completed, None, 1).await;
    let done = ClaimFrom::Suspended { trail_len: 1 };
    let err = store.claim("done", done.clone(), "w1", until).await;
    assert!(
        matches!(&err, Err(StoreError::Conflict { reason, .. }) if reason == "is completed, not suspended"),
        "{err:?}"
    );
    let err = store.claim("nope", done, "w1", until).await;
    assert!(matches!(err, Err(StoreError::NotFound { what: "run", .. })));
}

pub(crate) async fn a_claim_of_a_wait_the_run_moved_past_is_refused(h: Harness) {
    let store = h.open().await;
    let found = create(&store, "r1", RunStatus::Suspended, None, 3).await;
    let until = in_an_hour();
    let wait_at = |trail_len| ClaimFrom::Suspended { trail_len };
    // A claim made from a reading of another wait changes nothing.
    for stale in [2, 4] {
        let err = store.claim("r1", wait_at(stale), "w1", until).await;
        assert!(
            matches!(&err, Err(StoreError::Conflict { reason, .. }) if reason.contains("not in the wait this claim was made for")),
            "{err:?}"
        );
        assert_eq!(store.run("r1").await.expect("run"), found);
    }
    assert_eq!(ClaimFrom::wait_of(&found), wait_at(3));
    store
        .claim("r1", ClaimFrom::wait_of(&found), "w1", until)
        .await
        .expect("the wait it was found in");
    // Answered, and waiting again: a claim of the wait it was found in fails.
    let mut again = checkpoint("r1", "w1", entries(3, 4));
    again.status = RunStatus::Suspended;
    again.wait = Some(a_wait());
    again.lease_until = None;
    store.commit(again).await.expect("waits again");
    let before = store.run("r1").await.expect("run");
    let err = store
        .claim("r1", ClaimFrom::wait_of(&found), "w2", until)
        .await;
    assert!(matches!(err, Err(StoreError::Conflict { .. })), "{err:?}");
    assert_eq!(
        store.run("r1").await.expect("run"),
        before,
        "nothing changed"
    );
    let claimed = store
        .claim("r1", ClaimFrom::wait_of(&before), "w2", until)
        .await
        .expect("the new wait");
    assert_eq!(claimed.trail_len, 4);
    assert_eq!(claimed.lease.map(|l| l.owner), Some("w2".to_owned()));
}

pub(crate) async fn stale_claims_respect_leases_and_dead_owners(h: Harness) {
    let store = h.open().await;
    let until = in_an_hour();
    let stale = |dead: &[&str]| ClaimFrom::Stale {
        dead_owners: dead.iter().map(|d| d.to_string()).collect(),
    };

    // An expired lease is anyone's.
    let mut expired = create(&store, "expired", RunStatus::Running, Some("w-old"), 1).await;
    let mut renew = checkpoint("expired", "w-old", vec![]);
    renew.state = expired.state.clone();
    renew.lease_until = Some(an_hour_ago());
    store.commit(renew).await.expect("let the lease lapse");
    let claimed = store
        .claim("expired", stale(&[]), "w-new", until)
        .await
        .expect("stale claim");
    assert_eq!(
        claimed.lease,
        Some(Lease {
            owner: "w-new".into(),
            until
        })
    );
    assert_eq!(claimed.status, RunStatus::Running);
    let late = store
        .commit(checkpoint("expired", "w-old", entries(1, 2)))
        .await;
    assert_eq!(
        late,
        Err(StoreError::LostLease {
            run: "expired".into()
        })
    );
    expired.lease = claimed.lease.clone();

    // A live lease is kept, unless its owner is known dead.
    create(&store, "live", RunStatus::Running, Some("w-live"), 1).await;
    for dead in [&[][..], &["w-other"][..]] {
        let err = store.claim("live", stale(dead), "w-new", until).await;
        assert!(
            matches!(&err, Err(StoreError::Conflict { reason, .. }) if reason.contains("w-live")),
            "{err:?}"
        );
    }
    let claimed = store
        .claim("live", stale(&["w-x", "w-live"]), "w-new", until)
        .await
        .expect("the owner is dead");
    assert_eq!(claimed.lease.map(|l| l.owner), Some("w-new".into()));

    // Only running runs are stale.
    create(&store, "waiting", RunStatus::Suspended, None, 1).await;
    let err = store.claim("waiting", stale(&[]), "w-new", until).await;
    assert!(
        matches!(&err, Err(StoreError::Conflict { reason, .. }) if reason == "is suspended, not running"),
        "{err:?}"
    );

    // Exactly one of concurrent recoverers wins.
    create(&store, "crashed", RunStatus::Running, Some("w-dead"), 1).await;
    let claims: Vec<_> = (0..8)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                let dead = ClaimFrom::Stale {
                    dead_owners: vec!["w-dead".into()],
                };
                store.claim("crashed", dead, &format!("w{i}"), until).await
            })
        })
        .collect();
    let mut won = 0;
    for claim in claims {
        won += usize::from(claim.await.expect("join").is_ok());
    }
    assert_eq!(won, 1);
}

pub(crate) async fn interrupts_are_flagged_on_runs_that_are_not_over(h: Harness) {
    let store = h.open().await;
    create(&store, "running", RunStatus::Running, Some("w1"), 1).await;
    create(&store, "waiting", RunStatus::Suspended, None, 1).await;
    create(&store, "done", RunStatus::Completed, None, 1).await;
    for id in ["running", "waiting"] {
        let record = store.request_interrupt(id).await.expect("interrupt");
        assert!(record.interrupt_requested);
        assert!(store.run(id).await.expect("run").interrupt_requested);
    }
    assert!(!store.run("done").await.expect("run").interrupt_requested);
    let err = store.request_interrupt("done").await;
    assert!(
        matches!(&err, Err(StoreError::Conflict { reason, .. }) if reason.contains("is completed")),
        "{err:?}"
    );
    let err = store.request_interrupt("nope").await;
    assert!(matches!(err, Err(StoreError::NotFound { what: "run", .. })));
    // The flag stays while the run goes on.
    store
        .commit(checkpoint("running", "w1", entries(1, 2)))
        .await
        .expect("commit");
    assert!(store.run("running").await.expect("run").interrupt_requested);
}

pub(crate) async fn heartbeats_renew_only_the_holders_lease(h: Harness) {
    let store = h.open().await;
    let created = create(&store, "r1", RunStatus::Running, Some("w1"), 1).await;
    let later = at(now_micros() + 7_200_000_000);
    let beat = store
        .heartbeat("r1", "w1", Some(later))
        .await
        .expect("heartbeat");
    assert_eq!(
        beat,
        Heartbeat {
            held: true,
            interrupt_requested: false
        }
    );
    let run = store.run("r1").await.expect("run");
    assert_eq!(
        run.lease,
        Some(Lease {
            owner: "w1".into(),
            until: later
        })
    );
    assert_eq!(run.updated_at, created.updated_at, "nothing else changes");

    store.request_interrupt("r1").await.expect("interrupt");
    let beat = store.heartbeat("r1", "w1", None).await.expect("heartbeat");
    assert_eq!(
        beat,
        Heartbeat {
            held: true,
            interrupt_requested: true
        }
    );

    let beat = store
        .heartbeat("r1", "w2", Some(in_an_hour()))
        .await
        .expect("heartbeat");
    assert_eq!(
        beat,
        Heartbeat {
            held: false,
            interrupt_requested: true
        }
    );
    assert_eq!(
        store.run("r1").await.expect("run").lease.map(|l| l.until),
        Some(later)
    );

    let err = store.heartbeat("nope", "w1", Some(later)).await;
    assert!(
        matches!(err, Err(StoreError::NotFound { what: "run", .. })),
        "{err:?}"
    );
}

pub(crate) async fn listing_filters_and_orders_newest_first(h: Harness) {
    let store = h.open().await;
    let a = definition("alpha", 1, T0);
    let b = definition("beta", 1, T0);
    store.put_definition(&a).await.expect("a");
    store.put_definition(&b).await.expect("b");
    let mut made = Vec::new();
    for (i, (def, status)) in [
        (&a, RunStatus::Completed),
        (&b, RunStatus::Running),
        (&a, RunStatus::Suspended),
        (&a, RunStatus::Failed),
    ]
    .into_iter()
    .enumerate()
    {
        let owner = (status == RunStatus::Running).then_some("w1");
        let mut run = record(
            &format!("r{}", i + 1),
            def,
            status,
            owner,
            T0 + i as i64 + 1,
        );
        if status == RunStatus::Suspended {
            run.wait = Some(a_wait());
        }
        run.parent = (i == 3).then(|| "r1".to_string());
        store.create_run(&run, &[]).await.expect("create");
        made.push(run);
    }
    let ids = |runs: Vec<RunRecord>| runs.into_iter().map(|r| r.id).collect::<Vec<_>>();
    let list = |filter: RunFilter| {
        let store = store.clone();
        async move { store.runs(&filter).await.expect("runs") }
    };
    let all = list(RunFilter::default()).await;
    assert_eq!(
        all,
        made.iter().rev().cloned().collect::<Vec<_>>(),
        "records read back exactly"
    );
    let finals = RunFilter {
        statuses: vec![RunStatus::Completed, RunStatus::Failed],
        ..Default::default()
    };
    assert_eq!(ids(list(finals).await), ["r4", "r1"]);
    let alpha = RunFilter {
        fsm_id: Some("alpha".into()),
        ..Default::default()
    };
    assert_eq!(ids(list(alpha).await), ["r4", "r3", "r1"]);
    let old = RunFilter {
        updated_before: Some(at(T0 + 3)),
        ..Default::default()
    };
    assert_eq!(ids(list(old).await), ["r2", "r1"]);
    let newest = RunFilter {
        limit: Some(2),
        ..Default::default()
    };
    assert_eq!(ids(list(newest).await), ["r4", "r3"]);
    let all_of_it = RunFilter {
        statuses: vec![RunStatus::Completed, RunStatus::Suspended],
        fsm_id: Some("alpha".into()),
        updated_before: Some(at(T0 + 10)),
        limit: Some(1),
        ..Default::default()
    };
    assert_eq!(ids(list(all_of_it).await), ["r3"]);
    // Created r1 at T0+1 … r4 at T0+4.
    let window = RunFilter {
        created_since: Some(at(T0 + 2)),
        created_before: Some(at(T0 + 4)),
        ..Default::default()
    };
    assert_eq!(ids(list(window).await), ["r3", "r2"]);
    // Pages of two, each continuing after the last run of the one before.
    let first = list(RunFilter {
        limit: Some(2),
        ..Default::default()
    })
    .await;
    assert_eq!(ids(first.clone()), ["r4", "r3"]);
    let second = list(RunFilter {
        limit: Some(2),
        after: first.last().map(RunCursor::after),
        ..Default::default()
    })
    .await;
    assert_eq!(ids(second.clone()), ["r2", "r1"]);
    let past_the_end = RunFilter {
        after: second.last().map(RunCursor::after),
        ..Default::default()
    };
    assert_eq!(list(past_the_end).await, vec![]);
    // Same creation time: the id breaks the tie, so no run is skipped or repeated.
    let mut twin = record("r0", &a, RunStatus::Completed, None, T0 + 4);
    twin.parent = None;
    store.create_run(&twin, &[]).await.expect("create");
    let after_r4 = RunFilter {
        after: Some(RunCursor::after(&made[3])),
        ..Default::default()
    };
    assert_eq!(ids(list(after_r4).await), ["r0", "r3", "r2", "r1"]);
    let none = RunFilter {
        fsm_id: Some("gamma".into()),
        ..Default::default()
    };
    assert_eq!(list(none).await, vec![]);
}

pub(crate) async fn resume_links_are_kept_by_hash_and_forgotten(h: Harness) {
    let store = h.open().await;
    let def = definition("approval", 1, T0);
    store.put_definition(&def).await.expect("definition");
    for id in ["waiting", "other"] {
        let mut run = record(id, &def, RunStatus::Completed, None, T0);
        run.trail_len = 2;
        store
            .create_run(&run, &entries(0, 2))
            .await
            .expect("create");
    }
    let hook = |run: &str, seq: u64| Hook {
        run_id: run.into(),
        wait_seq: seq,
        created_at: at(T0 + seq as i64),
    };
    store
        .put_hook("h-old", &hook("waiting", 2))
        .await
        .expect("put");
    store
        .put_hook("h-new", &hook("waiting", 5))
        .await
        .expect("put");
    store
        .put_hook("h-other", &hook("other", 2))
        .await
        .expect("put");
    assert_eq!(
        store.hook("h-new").await.expect("read"),
        Some(hook("waiting", 5))
    );
    assert_eq!(store.hook("nothing").await.expect("read"), None);
    // The same hash twice is refused (a secret is never reused).
    assert!(store.put_hook("h-new", &hook("other", 9)).await.is_err());
    // Links to waits before 5 go; the newer one and the other run's stay.
    assert_eq!(store.delete_hooks("waiting", 5).await.expect("delete"), 1);
    assert_eq!(store.hook("h-old").await.expect("read"), None);
    assert!(store.hook("h-new").await.expect("read").is_some());
    assert!(store.hook("h-other").await.expect("read").is_some());
    // Pruning a run forgets its links.
    assert_eq!(store.prune(&RunFilter::default()).await.expect("prune"), 2);
    assert_eq!(store.hook("h-new").await.expect("read"), None);
    assert_eq!(store.hook("h-other").await.expect("read"), None);
}

pub(crate) async fn callbacks_and_deliveries_are_kept_and_pruned(h: Harness) {
    let store = h.open().await;
    // A callback is kept before its run exists.
    store
        .put_callback("later", "http://127.0.0.1:9/hook")
        .await
        .expect("put");
    assert_eq!(
        store.callback("later").await.expect("read").as_deref(),
        Some("http://127.0.0.1:9/hook")
    );
    assert_eq!(store.callback("nothing").await.expect("read"), None);
    let def = definition("approval", 1, T0);
    store.put_definition(&def).await.expect("definition");
    let run = record("later", &def, RunStatus::Completed, None, T0);
    store.create_run(&run, &[]).await.expect("create");
    let delivery = |id: &str, n: i64| Delivery {
        id: id.into(),
        run_id: "later".into(),
        url: "http://127.0.0.1:9/hook".into(),
        kind: "run.completed".into(),
        payload: serde_json::json!({"type": "run.completed", "data": {"n": n}}),
        attempts: 0,
        status: DeliveryStatus::Pending,
        last_status: None,
        last_error: None,
        next_at: Some(at(T0 + n)),
        created_at: at(T0 + n),
        updated_at: at(T0 + n),
    };
    let mut first = delivery("d1", 1);
    store.put_delivery(&first).await.expect("put");
    store.put_delivery(&delivery("d2", 2)).await.expect("put");
    // An attempt's outcome replaces the state kept, by id.
    first.attempts = 3;
    first.status = DeliveryStatus::Delivered;
    first.last_status = Some(204);
    first.next_at = None;
    first.updated_at = at(T0 + 10);
    store.put_delivery(&first).await.expect("update");
    let kept = store.deliveries("later").await.expect("read");
    assert_eq!(kept, vec![first.clone(), delivery("d2", 2)]);
    let pending = store.pending_deliveries().await.expect("pending");
    assert_eq!(pending, vec![delivery("d2", 2)]);
    assert_eq!(store.prune(&RunFilter::default()).await.expect("prune"), 1);
    assert_eq!(store.deliveries("later").await.expect("read"), vec![]);
    assert_eq!(store.callback("later").await.expect("read"), None);
}

pub(crate) async fn prune_removes_only_final_runs_and_their_trails(h: Harness) {
    let store = h.open().await;
    let def = definition("review", 1, T0);
    store.put_definition(&def).await.expect("definition");
    let recent = now_micros();
    for (id, status, updated) in [
        ("old-completed", RunStatus::Completed, T0),
        ("old-interrupted", RunStatus::Interrupted, T0 + 1),
        ("new-failed", RunStatus::Failed, recent),
        ("old-running", RunStatus::Running, T0),
        ("old-suspended", RunStatus::Suspended, T0),
    ] {
        let owner = (status == RunStatus::Running).then_some("w1");
        let mut run = record(id, &def, status, owner, updated);
        run.trail_len = 3;
        store
            .create_run(&run, &entries(0, 3))
            .await
            .expect("create");
    }
    let prune = |filter: RunFilter| {
        let store = store.clone();
        async move { store.prune(&filter).await.expect("prune") }
    };
    let non_final = RunFilter {
        statuses: vec![RunStatus::Running, RunStatus::Suspended],
        ..Default::default()
    };
    assert_eq!(prune(non_final).await, 0);
    let elsewhere = RunFilter {
        fsm_id: Some("other".into()),
        ..Default::default()
    };
    assert_eq!(prune(elsewhere).await, 0);
    let old = RunFilter {
        updated_before: Some(at(T0 + 1_000_000)),
        ..Default::default()
    };
    assert_eq!(prune(old).await, 2);
    for gone in ["old-completed", "old-interrupted"] {
        assert!(matches!(
            store.run(gone).await,
            Err(StoreError::NotFound { .. })
        ));
        assert!(matches!(
            store.trail(gone, 0).await,
            Err(StoreError::NotFound { .. })
        ));
    }
    for kept in ["new-failed", "old-running", "old-suspended"] {
        assert_eq!(store.trail(kept, 0).await.expect("kept").len(), 3, "{kept}");
    }
    assert_eq!(prune(RunFilter::default()).await, 1);
    let left: Vec<String> = store
        .runs(&RunFilter::default())
        .await
        .expect("runs")
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(left, ["old-suspended", "old-running"]);
    // No trail row outlived its run: the id can be used again from entry 0.
    let mut again = record("old-completed", &def, RunStatus::Running, Some("w1"), T0);
    again.trail_len = 1;
    store
        .create_run(&again, &entries(0, 1))
        .await
        .expect("a new run under the old id");
    assert_eq!(
        store.trail("old-completed", 0).await.expect("trail"),
        entries(0, 1)
    );
}

pub(crate) async fn storage_grows_linearly(h: Harness) {
    let store = h.open().await;
    create(&store, "long", RunStatus::Running, Some("w1"), 0).await;
    let start = store.run_bytes("long").await.expect("bytes");
    let text = "0123456789abcdef".repeat(64); // 1 KiB
    let mut at_400 = 0;
    for seq in 0..800u64 {
        let mut step = checkpoint(
            "long",
            "w1",
            vec![entry(seq, json!({"seq": seq, "text": text}))],
        );
        step.context = Some(json!({"steps": seq}));
        store.commit(step).await.expect("commit");
        if seq + 1 == 400 {
            at_400 = store.run_bytes("long").await.expect("bytes");
        }
    }
    let at_800 = store.run_bytes("long").await.expect("bytes");
    let ratio = (at_800 - start) as f64 / (at_400 - start) as f64;
    assert!(
        (1.8..=2.2).contains(&ratio),
        "{start} → {at_400} → {at_800} bytes: ratio {ratio}"
    );
    // Each entry is stored once: about its own size, never a copy of the history.
    let per_entry = (at_800 - start) / 800;
    assert!(
        (1024..1500).contains(&per_entry),
        "{per_entry} bytes per entry"
    );
    assert!(matches!(
        store.run_bytes("nope").await,
        Err(StoreError::NotFound { .. })
    ));
}

pub(crate) async fn a_reopened_store_sees_everything(h: Harness) {
    let (definitions, runs, trail) = {
        let store = h.open().await;
        create(&store, "r1", RunStatus::Running, Some("w1"), 2).await;
        create(&store, "r2", RunStatus::Suspended, None, 1).await;
        store
            .commit(checkpoint("r1", "w1", entries(2, 4)))
            .await
            .expect("commit");
        (
            store.definitions().await.expect("definitions"),
            store.runs(&RunFilter::default()).await.expect("runs"),
            store.trail("r1", 0).await.expect("trail"),
        )
    };
    let store = h.open().await;
    assert_eq!(store.definitions().await.expect("definitions"), definitions);
    assert_eq!(store.runs(&RunFilter::default()).await.expect("runs"), runs);
    assert_eq!(store.trail("r1", 0).await.expect("trail"), trail);
    assert_eq!(trail.len(), 4);
    store
        .commit(checkpoint("r1", "w1", entries(4, 5)))
        .await
        .expect("commit after reopening");
}

pub(crate) async fn migrations_apply_once(h: Harness) {
    let first = h.open_concrete(Durability::Normal).await;
    let applied = first.applied_migrations().await;
    assert_eq!(
        (applied[0].version, applied[0].name.as_str()),
        (1, "initial")
    );
    let versions: Vec<i64> = applied.iter().map(|m| m.version).collect();
    let expected: Vec<i64> = (1..=applied.len() as i64).collect();
    assert_eq!(versions, expected, "each migration once, in order");
    // Several openers at once, then again: nothing is applied twice.
    let opens: Vec<_> = (0..4).map(|_| h.try_open(Durability::Normal)).collect();
    for open in opens {
        open.await.expect("open again");
    }
    let again = h.open_concrete(Durability::Strict).await;
    assert_eq!(again.applied_migrations().await, applied);
}

/// A forked run's origin is stored with it and read back; other runs have none.
pub(crate) async fn a_forks_origin_is_kept_with_it(h: Harness) {
    let store = h.open().await;
    let original = create(&store, "r1", RunStatus::Completed, None, 3).await;
    assert_eq!(original.forked_from, None);
    let mut fork = record(
        "r2",
        &definition("review", 1, T0),
        RunStatus::Running,
        Some("w1"),
        T0 + 1,
    );
    fork.forked_from = Some(claij_core::store::ForkPoint {
        run: "r1".into(),
        seq: 1,
        edited: true,
    });
    fork.trail_len = 2;
    store
        .create_run(&fork, &entries(0, 2))
        .await
        .expect("create the fork");
    assert_eq!(store.run("r2").await.expect("fork"), fork);
    assert_eq!(store.run("r1").await.expect("original"), original);
    let listed = store.runs(&RunFilter::default()).await.expect("list");
    assert_eq!(listed.len(), 2);
    assert!(listed.contains(&fork), "{listed:?}");
}

/// Closing waits for the connections in use, the writer's included: it must give
/// its connection back rather than hold it forever.
pub(crate) async fn closing_after_commits_returns(h: Harness) {
    let concrete = h.open_concrete(Durability::Normal).await;
    let store = concrete.store();
    create(&store, "r1", RunStatus::Running, Some("w1"), 1).await;
    store
        .commit(checkpoint("r1", "w1", entries(1, 3)))
        .await
        .expect("commit");
    tokio::time::timeout(Duration::from_secs(30), concrete.close())
        .await
        .expect("close returns once the runs are idle");
    let after = store.commit(checkpoint("r1", "w1", entries(3, 4))).await;
    assert!(after.is_err(), "a closed store commits nothing: {after:?}");
}

/// Not async: a store dropped outside any runtime (after the runtime's last `block_on`)
/// lets its connections go without panicking, the one the writer holds included.
pub(crate) fn a_store_dropped_outside_its_runtime_lets_go_quietly(h: Harness) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let store = runtime.block_on(async {
        let store = h.open().await;
        create(&store, "r1", RunStatus::Running, Some("w1"), 1).await;
        store
            .commit(checkpoint("r1", "w1", entries(1, 2)))
            .await
            .expect("commit");
        store
    });
    drop(store);
    drop(runtime);
    let reopened = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(async { h.open().await.run("r1").await.expect("run").trail_len });
    assert_eq!(reopened, 2);
}

/// SQLite only: a file written before migration 2 (no one-statement checkpoint, no resume
/// links) is upgraded when opened, and its runs go on where they were.
pub(crate) async fn a_sqlite_file_of_schema_1_is_upgraded(h: Harness) {
    let before = {
        let store = h.open().await;
        create(&store, "r1", RunStatus::Running, Some("w1"), 2).await;
        store.trail("r1", 0).await.expect("trail")
    };
    h.execute(
        "DROP TRIGGER checkpoint_write; DROP VIEW checkpoint_writes; DROP TABLE hooks; DROP TABLE callbacks; DROP TABLE deliveries; \
         DROP TABLE events; DROP TABLE subscriptions; \
         DROP TABLE workers; DROP INDEX runs_idempotency_key; DROP INDEX runs_wake; DROP INDEX runs_queued; \
         DROP INDEX runs_parent; DROP INDEX runs_lease_owner; \
         ALTER TABLE runs DROP COLUMN wake_at; ALTER TABLE runs DROP COLUMN idempotency_key; \
         ALTER TABLE runs DROP COLUMN input_tokens; ALTER TABLE runs DROP COLUMN output_tokens; \
         ALTER TABLE runs DROP COLUMN cost_usd; ALTER TABLE runs DROP COLUMN calls; \
         ALTER TABLE runs DROP COLUMN time_ms; ALTER TABLE runs DROP COLUMN waiting_ms; \
         ALTER TABLE runs DROP COLUMN budget; ALTER TABLE runs DROP COLUMN pending; \
         ALTER TABLE runs DROP COLUMN forked_from; \
         ALTER TABLE definitions DROP COLUMN owner; \
         DELETE FROM claij_migrations WHERE version >= 2",
    )
    .await;
    let upgraded = h.open_concrete(Durability::Normal).await;
    let applied: Vec<(i64, String)> = upgraded
        .applied_migrations()
        .await
        .into_iter()
        .map(|m| (m.version, m.name))
        .collect();
    assert_eq!(
        applied,
        [
            (1, "initial".into()),
            (2, "checkpoint_statement".into()),
            (3, "server".into()),
            (4, "workers".into()),
            (5, "events".into()),
            (6, "spend".into()),
            (7, "owners".into()),
            (8, "forks".into())
        ]
    );
    let store = upgraded.store();
    // Who stored a definition before owners were kept is not known: a client, the safe
    // guess (docs/SECURITY.md).
    let definitions = store.definitions().await.expect("definitions");
    assert!(!definitions.is_empty());
    assert!(
        definitions
            .iter()
            .all(|d| d.owner == claij_core::Owner::Client),
        "{definitions:?}"
    );
    store
        .commit(checkpoint("r1", "w1", entries(2, 4)))
        .await
        .expect("commit after the upgrade");
    let after = store.trail("r1", 0).await.expect("trail");
    assert_eq!(after[..2], before[..]);
    assert_eq!(after[2..], entries(2, 4)[..]);
    assert_eq!(store.run("r1").await.expect("run").trail_len, 4);
}

pub(crate) async fn a_newer_database_is_refused(h: Harness) {
    drop(h.open().await);
    h.execute("INSERT INTO claij_migrations (version, name, applied_at) VALUES (999, 'from-the-future', 0)")
        .await;
    let err = h
        .try_open(Durability::Normal)
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("schema version 999"), "{err}");
    assert!(err.contains("upgrade claij"), "{err}");
}

/// Creates `n` running runs `{prefix}{i}` with one entry each, held by `w1`.
async fn many_runs(store: &Arc<dyn Store>, prefix: &str, n: usize) {
    for i in 0..n {
        create(
            store,
            &format!("{prefix}{i}"),
            RunStatus::Running,
            Some("w1"),
            1,
        )
        .await;
    }
}

/// Commits concurrently (one task per checkpoint); the outcomes in order.
async fn commit_all(
    store: &Arc<dyn Store>,
    checkpoints: Vec<Checkpoint>,
) -> Vec<Result<(), StoreError>> {
    let tasks: Vec<_> = checkpoints
        .into_iter()
        .map(|cp| {
            let store = store.clone();
            tokio::spawn(async move { store.commit(cp).await })
        })
        .collect();
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.expect("join"));
    }
    results
}

pub(crate) async fn concurrent_commits_are_grouped(h: Harness) {
    let concrete = h.open_concrete(Durability::Strict).await;
    let store = concrete.store();
    many_runs(&store, "g", 100).await;
    let before = concrete.stats();
    let checkpoints = (0..100)
        .map(|i| checkpoint(&format!("g{i}"), "w1", entries(1, 3)))
        .collect();
    let results = commit_all(&store, checkpoints).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    let after = concrete.stats();
    let transactions = after.transactions - before.transactions;
    eprintln!(
        "{:?} backend: 100 concurrent commits in {transactions} transactions (largest group {})",
        h.backend(),
        after.largest_group
    );
    assert_eq!(after.commits - before.commits, 100);
    assert!(
        transactions <= 25,
        "100 concurrent commits took {transactions} transactions"
    );
    assert!(after.largest_group >= 4, "{after:?}");
    for i in 0..100 {
        let run = store.run(&format!("g{i}")).await.expect("run");
        assert_eq!((run.trail_len, run.state.as_str()), (3, "b"));
    }
}

pub(crate) async fn a_refused_commit_does_not_fail_its_group(h: Harness) {
    let store = h.open().await;
    many_runs(&store, "m", 40).await;
    let checkpoints = (0..40)
        .map(|i| {
            let owner = if i % 2 == 0 { "w1" } else { "intruder" };
            checkpoint(&format!("m{i}"), owner, entries(1, 2))
        })
        .collect();
    let results = commit_all(&store, checkpoints).await;
    for (i, result) in results.into_iter().enumerate() {
        let run = store.run(&format!("m{i}")).await.expect("run");
        if i % 2 == 0 {
            assert_eq!(result, Ok(()));
            assert_eq!(run.trail_len, 2);
        } else {
            assert_eq!(
                result,
                Err(StoreError::LostLease {
                    run: format!("m{i}")
                })
            );
            assert_eq!(run.trail_len, 1);
            assert_eq!(store.trail(&run.id, 0).await.expect("trail").len(), 1);
        }
    }
}

pub(crate) async fn a_failing_statement_does_not_fail_its_group(h: Harness) {
    let store = h.open().await;
    many_runs(&store, "s", 20).await;
    // A stray row where s7's next entry goes: inserting it fails inside the group.
    h.execute("INSERT INTO trail (run_id, seq, entry) VALUES ('s7', 1, '{}')")
        .await;
    let before = store.run("s7").await.expect("run");
    let checkpoints = (0..20)
        .map(|i| checkpoint(&format!("s{i}"), "w1", entries(1, 2)))
        .collect();
    let results = commit_all(&store, checkpoints).await;
    for (i, result) in results.into_iter().enumerate() {
        if i == 7 {
            assert!(matches!(&result, Err(StoreError::Backend(_))), "{result:?}");
        } else {
            assert_eq!(result, Ok(()), "s{i}");
            assert_eq!(store.run(&format!("s{i}")).await.expect("run").trail_len, 2);
        }
    }
    assert_eq!(
        store.run("s7").await.expect("run"),
        before,
        "s7 was rolled back"
    );
}

pub(crate) async fn durability_settings_reach_the_database(h: Harness) {
    let expected = match h.backend() {
        Backend::Sqlite => [
            "journal_mode=wal synchronous=normal",
            "journal_mode=wal synchronous=full",
        ],
        Backend::Postgres => ["synchronous_commit=off", "synchronous_commit=on"],
    };
    for (durability, expected) in [Durability::Normal, Durability::Strict]
        .into_iter()
        .zip(expected)
    {
        let store = h.open_concrete(durability).await;
        assert_eq!(
            store.durability_settings().await,
            expected,
            "{durability:?}"
        );
    }
}

pub(crate) async fn unreadable_rows_are_reported_as_corrupt(h: Harness) {
    let store = h.open().await;
    create(&store, "r1", RunStatus::Running, Some("w1"), 3).await;
    h.execute("UPDATE trail SET entry = '{\"seq\": 1, \"fsm\":' WHERE run_id = 'r1' AND seq = 1")
        .await;
    let err = store.trail("r1", 0).await;
    assert!(
        matches!(&err, Err(StoreError::Corrupt { what, .. }) if what == "run `r1` trail entry 1"),
        "{err:?}"
    );
    assert_eq!(store.trail("r1", 2).await.expect("the rest reads").len(), 1);
    h.execute("UPDATE runs SET context = 'not json' WHERE id = 'r1'")
        .await;
    let err = store.run("r1").await;
    assert!(
        matches!(&err, Err(StoreError::Corrupt { what, .. }) if what == "run `r1` context"),
        "{err:?}"
    );
}

pub(crate) async fn descriptions_are_plain(h: Harness) {
    let store = h.open().await;
    let description = store.describe();
    match h.backend() {
        Backend::Sqlite => {
            assert!(description.starts_with("sqlite:/"), "{description}");
            assert!(description.ends_with("/data/claij.db"), "{description}");
        }
        Backend::Postgres => {
            let with_password = h.url_with_password("hunter2").expect("postgres url");
            let store = claij_store::open(&with_password, Durability::Normal)
                .await
                .expect("open");
            let description = store.describe();
            assert!(!description.contains("hunter2"), "{description}");
            assert!(
                description.starts_with("postgres://claij@127.0.0.1:"),
                "{description}"
            );
        }
    }
}

/// A run for the queue tests: `status`, held by `owner` until `until`, with `wait`.
async fn queued(
    store: &Arc<dyn Store>,
    id: &str,
    status: RunStatus,
    lease: Option<(&str, SystemTime)>,
    wait: Option<Wait>,
) {
    let def = definition("review", 1, T0);
    store.put_definition(&def).await.expect("put definition");
    let mut run = record(id, &def, status, None, T0);
    run.lease = lease.map(|(owner, until)| Lease {
        owner: owner.into(),
        until,
    });
    run.wait = wait;
    run.trail_len = 1;
    store
        .create_run(&run, &entries(0, 1))
        .await
        .unwrap_or_else(|e| panic!("create {id}: {e}"));
}

/// A wait for a person, expiring at `expires_at`.
fn wait_until(expires_at: Option<SystemTime>) -> Wait {
    Wait {
        children: Vec::new(),
        expires_at,
        ..a_wait()
    }
}

pub(crate) async fn the_queue_gives_each_due_run_to_one_worker(h: Harness) {
    let store = h.open().await;
    let mut due = std::collections::BTreeSet::new();
    for i in 0..24 {
        let id = format!("q{i:02}");
        queued(&store, &id, RunStatus::Running, None, None).await;
        due.insert(id);
    }
    // Left by a dead owner (lease over), and a wait that expired: due.
    queued(
        &store,
        "stale",
        RunStatus::Running,
        Some(("gone", an_hour_ago())),
        None,
    )
    .await;
    due.insert("stale".to_owned());
    let expired = wait_until(Some(an_hour_ago()));
    queued(
        &store,
        "expired",
        RunStatus::Suspended,
        None,
        Some(expired.clone()),
    )
    .await;
    due.insert("expired".to_owned());
    // Not due: held by a live owner, waiting for a person, scheduled for later, a child
    // whose parent is running.
    queued(
        &store,
        "held",
        RunStatus::Running,
        Some(("alive", in_an_hour())),
        None,
    )
    .await;
    queued(
        &store,
        "waiting",
        RunStatus::Suspended,
        None,
        Some(wait_until(Some(in_an_hour()))),
    )
    .await;
    let def = definition("review", 1, T0);
    let mut later = record("later", &def, RunStatus::Running, None, T0);
    later.not_before = Some(in_an_hour());
    later.trail_len = 1;
    store
        .create_run(&later, &entries(0, 1))
        .await
        .expect("create later");
    let mut child = record("held.1", &def, RunStatus::Running, None, T0);
    child.parent = Some("held".into());
    child.trail_len = 1;
    store
        .create_run(&child, &entries(0, 1))
        .await
        .expect("create child");

    // Four workers claim three at a time, at once, until nothing is left.
    let claimers: Vec<_> = (0..4)
        .map(|w| {
            let store = store.clone();
            tokio::spawn(async move {
                let owner = format!("worker-{w}");
                let mut got = Vec::new();
                loop {
                    let claimed = store
                        .claim_due(&owner, in_an_hour(), 3, &[])
                        .await
                        .expect("claim");
                    if claimed.is_empty() && !store.due().await.expect("due").now {
                        return (owner, got);
                    }
                    got.extend(claimed);
                }
            })
        })
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    for claimer in claimers {
        let (owner, got) = claimer.await.expect("claimer");
        for before in got {
            assert!(
                seen.insert(before.id.clone()),
                "{} claimed twice",
                before.id
            );
            let now = store.run(&before.id).await.expect("run");
            assert_eq!(now.status, RunStatus::Running);
            assert_eq!(now.lease.map(|l| l.owner), Some(owner.clone()));
            assert_eq!(
                now.wait, before.wait,
                "kept until the claimer's first commit"
            );
            if before.id == "expired" {
                // Returned as it was: the worker needs the wait to follow its expiry.
                assert_eq!(before.status, RunStatus::Suspended);
                assert_eq!(before.wait.as_ref(), Some(&expired));
            }
        }
    }
    assert_eq!(seen, due);
    // The child of a live parent is left to its parent; the others are where they were.
    assert_eq!(store.run("held.1").await.expect("child").lease, None);
    assert_eq!(
        store.run("waiting").await.expect("waiting").status,
        RunStatus::Suspended
    );
    let later = store.run("later").await.expect("later");
    assert_eq!(later.lease, None);
    assert!(later.not_before.is_some(), "the scheduled start is kept");
    // A dead owner named in the claim is taken over before its lease ends.
    let claimed = store
        .claim_due("worker-9", in_an_hour(), 10, &["alive".to_owned()])
        .await
        .expect("claim the dead owner's");
    let ids: Vec<&str> = claimed.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["held"], "the parent only; its child waits for it");
}

pub(crate) async fn due_says_what_needs_a_worker_and_when(h: Harness) {
    let store = h.open().await;
    let due = store.due().await.expect("due");
    assert!(!due.now);
    assert_eq!(due.next, None);
    let at_micros = now_micros() + 600_000_000;
    queued(
        &store,
        "waiting",
        RunStatus::Suspended,
        None,
        Some(wait_until(Some(at(at_micros)))),
    )
    .await;
    let due = store.due().await.expect("due");
    assert!(!due.now);
    assert_eq!(
        due.next,
        Some(at(at_micros)),
        "the wait's expiry is the next timer"
    );
    let queue = store.queue().await.expect("queue");
    assert_eq!(
        (queue.queued, queue.timers_pending, queue.timers_due),
        (0, 1, 0)
    );
    assert_eq!(queue.next_timer, Some(at(at_micros)));
    queued(&store, "queued", RunStatus::Running, None, None).await;
    assert!(store.due().await.expect("due").now);
    let queue = store.queue().await.expect("queue");
    assert_eq!(queue.queued, 1);
    assert_eq!(queue.oldest_queued, Some(at(T0)));
}

pub(crate) async fn leases_are_renewed_together_and_runs_handed_back(h: Harness) {
    let store = h.open().await;
    let now = SystemTime::now();
    let worker = WorkerRecord {
        id: "host:1:1".into(),
        host: "host".into(),
        concurrency: 4,
        holding: 0,
        started_at: at(now_micros()),
        renewed_at: at(now_micros()),
    };
    store.put_worker(&worker).await.expect("put worker");
    for id in ["r1", "r2", "r3"] {
        queued(&store, id, RunStatus::Running, None, None).await;
    }
    let claimed = store
        .claim_due(&worker.id, now + Duration::from_secs(5), 2, &[])
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 2);
    store
        .request_interrupt(&claimed[0].id)
        .await
        .expect("interrupt");
    let until = in_an_hour();
    let claimed_ids: Vec<String> = claimed.iter().map(|r| r.id.clone()).collect();
    let mut held = store
        .renew_leases(&worker.id, until, &claimed_ids)
        .await
        .expect("renew");
    held.sort_by(|a, b| a.run_id.cmp(&b.run_id));
    let ids: Vec<(&str, bool)> = held
        .iter()
        .map(|h| (h.run_id.as_str(), h.interrupt_requested))
        .collect();
    assert_eq!(
        ids,
        [
            (claimed[0].id.as_str(), true),
            (claimed[1].id.as_str(), false)
        ]
    );
    for run in &claimed {
        let lease = store.run(&run.id).await.expect("run").lease.expect("held");
        assert_eq!(lease.until, at(rows_micros(until)), "renewed");
    }
    let workers = store.workers().await.expect("workers");
    assert_eq!(workers.len(), 1);
    assert_eq!(workers[0].holding, 2);
    assert!(workers[0].renewed_at >= worker.renewed_at);
    // Handed back: held by no one, and due again at once.
    assert!(
        store
            .release(&claimed[1].id, &worker.id)
            .await
            .expect("release")
    );
    assert!(
        !store
            .release(&claimed[1].id, &worker.id)
            .await
            .expect("again"),
        "not held any more"
    );
    assert_eq!(store.run(&claimed[1].id).await.expect("run").lease, None);
    let again = store
        .claim_due("other", in_an_hour(), 5, &[])
        .await
        .expect("claim");
    let mut again: Vec<String> = again.into_iter().map(|r| r.id).collect();
    again.sort();
    // The one never claimed, and the one handed back; not the one still held.
    let mut want: Vec<String> = ["r1", "r2", "r3"]
        .iter()
        .map(|s| s.to_string())
        .filter(|id| *id != claimed[0].id)
        .collect();
    want.sort();
    assert_eq!(again, want);
    // The renewal no longer finds the run it lost.
    let held = store
        .renew_leases(&worker.id, until, &claimed_ids)
        .await
        .expect("renew");
    assert_eq!(held.len(), 1);
    // A run held but not named (no longer driven) is not renewed: its lease runs out.
    let before = store
        .run(&claimed[0].id)
        .await
        .expect("run")
        .lease
        .expect("held")
        .until;
    let later = until + Duration::from_secs(60);
    assert!(
        store
            .renew_leases(&worker.id, later, &[])
            .await
            .expect("renew")
            .is_empty()
    );
    let after = store
        .run(&claimed[0].id)
        .await
        .expect("run")
        .lease
        .expect("held")
        .until;
    assert_eq!(after, before);
    assert_eq!(store.workers().await.expect("workers")[0].holding, 0);
    assert!(store.remove_worker(&worker.id).await.expect("remove"));
    assert!(store.workers().await.expect("workers").is_empty());
    // Notices are best effort, and never fail on a store without them.
    store
        .notify(&Notice::Work { at: None })
        .await
        .expect("notify");
}

/// Microseconds as stored (times are kept to the microsecond).
fn rows_micros(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .expect("after the epoch")
        .as_micros() as i64
}

pub(crate) async fn idempotency_keys_find_the_first_run(h: Harness) {
    let store = h.open().await;
    let def = definition("review", 1, T0);
    store.put_definition(&def).await.expect("put definition");
    let mut first = record("first", &def, RunStatus::Running, None, T0);
    first.idempotency_key = Some("order-7".into());
    store.create_run(&first, &[]).await.expect("create");
    assert_eq!(store.run_by_key("order-8").await.expect("by key"), None);
    let mut second = record("second", &def, RunStatus::Running, None, T0);
    second.idempotency_key = Some("order-7".into());
    let refused = store.create_run(&second, &[]).await;
    assert!(
        matches!(&refused, Err(StoreError::Conflict { reason, .. }) if reason.contains("order-7")),
        "{refused:?}"
    );
    assert!(matches!(
        store.run("second").await,
        Err(StoreError::NotFound { .. })
    ));
    let found = store
        .run_by_key("order-7")
        .await
        .expect("by key")
        .expect("found");
    assert_eq!(found.id, "first");
    assert_eq!(found.idempotency_key.as_deref(), Some("order-7"));
}

pub(crate) async fn a_parent_is_due_once_a_child_ends(h: Harness) {
    let store = h.open().await;
    let waits_for_child = Wait {
        children: vec!["p.1".into()],
        expires_at: None,
        ..a_wait()
    };
    queued(
        &store,
        "p",
        RunStatus::Suspended,
        None,
        Some(waits_for_child),
    )
    .await;
    let def = definition("review", 1, T0);
    let mut child = record("p.1", &def, RunStatus::Running, Some("w1"), T0);
    child.parent = Some("p".into());
    child.trail_len = 1;
    store
        .create_run(&child, &entries(0, 1))
        .await
        .expect("create child");
    assert!(
        !store.due().await.expect("due").now,
        "the child is still running"
    );
    let mut done = checkpoint("p.1", "w1", entries(1, 2));
    done.status = RunStatus::Completed;
    done.lease_until = None;
    store.commit(done).await.expect("commit the child's end");
    assert!(
        store.due().await.expect("due").now,
        "its parent can continue"
    );
    let claimed = store
        .claim_due("w2", in_an_hour(), 5, &[])
        .await
        .expect("claim");
    let ids: Vec<&str> = claimed.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["p"]);
}

pub(crate) async fn published_events_are_written_with_their_checkpoint(h: Harness) {
    let store = h.open().await;
    create(&store, "pub", RunStatus::Running, Some("w1"), 2).await;
    let event = |n: u64| Published {
        id: format!("pub:{n}"),
        topic: "orders.created".into(),
        event: json!({"order_id": n, "zeta": 1, "alpha": 2}),
    };
    // A checkpoint refused (another owner) writes no event either: one transaction.
    let mut refused = checkpoint("pub", "w2", entries(2, 3));
    refused.published = vec![event(2)];
    assert!(matches!(
        store.commit(refused).await,
        Err(StoreError::LostLease { .. })
    ));
    assert!(store.events(None).await.expect("events").is_empty());
    assert!(!store.due().await.expect("due").now);
    let mut written = checkpoint("pub", "w1", entries(2, 3));
    written.published = vec![event(2)];
    store.commit(written).await.expect("commit");
    let pending = store
        .events(Some(EventStatus::Pending))
        .await
        .expect("events");
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].id, "pub:2");
    assert_eq!(pending[0].run_id, "pub");
    assert_eq!(
        serde_json::to_string(&pending[0].event).expect("json"),
        r#"{"order_id":2,"zeta":1,"alpha":2}"#,
        "read back as written"
    );
    assert!(
        store.due().await.expect("due").now,
        "a pending event is work"
    );
    // One claimer gets it; the other finds nothing until the claim ends.
    let first = store
        .claim_events("w1", in_an_hour(), 10, &[])
        .await
        .expect("claim");
    let second = store
        .claim_events("w2", in_an_hour(), 10, &[])
        .await
        .expect("claim");
    assert_eq!((first.len(), second.len()), (1, 0));
    // Claimed: not due now, but when the claim ends; a dead claimer's is taken over.
    let due = store.due().await.expect("due");
    assert!(!due.now && due.next.is_some(), "{due:?}");
    let taken = store
        .claim_events("w3", in_an_hour(), 10, &["w1".to_owned()])
        .await
        .expect("claim");
    assert_eq!(taken.len(), 1, "w1 is dead: its claim is taken over");
    store
        .settle_event(
            "pub:2",
            EventStatus::Unmatched,
            &[],
            Some("no FSM subscribes"),
        )
        .await
        .expect("settle");
    let unmatched = store
        .events(Some(EventStatus::Unmatched))
        .await
        .expect("events");
    assert_eq!(unmatched[0].note.as_deref(), Some("no FSM subscribes"));
    assert!(unmatched[0].settled_at.is_some());
    assert!(
        store
            .claim_events("w1", in_an_hour(), 10, &[])
            .await
            .expect("claim")
            .is_empty()
    );
    // Subscriptions: the newest definition of an FSM replaces the older one.
    for (version, hash) in [(1, "h1"), (2, "h2")] {
        store
            .put_subscription(&Subscription {
                topic: "orders.created".into(),
                fsm_id: "shipping".into(),
                version,
                hash: hash.into(),
            })
            .await
            .expect("subscribe");
    }
    let subs = store
        .subscriptions("orders.created")
        .await
        .expect("subscriptions");
    assert_eq!(subs.len(), 1);
    assert_eq!((subs[0].version, subs[0].hash.as_str()), (2, "h2"));
    assert!(
        store
            .subscriptions("other")
            .await
            .expect("subscriptions")
            .is_empty()
    );
}

/// A spend with every field set, `n` (1 or more) making each differ. The costs are
/// binary fractions, so that their sums are exact in any order.
fn spent(n: u64) -> Spend {
    Spend {
        input_tokens: 1000 * n + 1,
        output_tokens: 100 * n + 2,
        cost_usd: 0.5_f64.powi(n as i32),
        calls: n,
        time_ms: 1500 * n,
        waiting_ms: 60_000 * n + 3,
    }
}

/// A tree's spend: the tokens, cost and calls of all its runs, the times of its top run
/// (the first) alone — children run within it.
fn total(spends: &[Spend]) -> Spend {
    spends.iter().fold(
        Spend {
            time_ms: spends[0].time_ms,
            waiting_ms: spends[0].waiting_ms,
            ..Spend::default()
        },
        |mut sum, s| {
            sum.add_calls(s);
            sum
        },
    )
}

/// Creates a running run held by `w1`, with no entries, below `parent`.
async fn create_child(store: &Arc<dyn Store>, id: &str, parent: Option<&str>) {
    let def = definition("review", 1, T0);
    store.put_definition(&def).await.expect("put definition");
    let mut run = record(id, &def, RunStatus::Running, Some("w1"), T0);
    run.parent = parent.map(str::to_owned);
    store
        .create_run(&run, &[])
        .await
        .unwrap_or_else(|e| panic!("create {id}: {e}"));
}

/// A checkpoint of no entries that writes `spend`.
fn spending(run: &str, owner: &str, spend: Spend) -> Checkpoint {
    let mut cp = checkpoint(run, owner, vec![]);
    cp.state = "a".into();
    cp.spend = spend;
    cp
}

pub(crate) async fn a_commits_spend_is_written_in_place_and_summed_over_its_tree(h: Harness) {
    let store = h.open().await;
    // Created with a spend, a budget and pending calls: all read back.
    let def = definition("review", 1, T0);
    store.put_definition(&def).await.expect("put definition");
    let mut root = record("p", &def, RunStatus::Running, Some("w1"), T0);
    root.spend = spent(1);
    root.budget = Some(Budget {
        tokens: Some(50_000),
        ..Budget::default()
    });
    root.pending = Some(PendingCalls {
        models: vec!["smollm2".into()],
        at_most: spent(2),
        intents: Vec::new(),
    });
    store.create_run(&root, &[]).await.expect("create p");
    assert_eq!(store.run("p").await.expect("run"), root);

    // A lone commit's spend is read back exactly (a cost that is no binary fraction
    // included), and the next commit's replaces it: the totals are not added up.
    let odd = Spend {
        cost_usd: 0.1 + 0.2,
        ..spent(3)
    };
    let mut step = spending("p", "w1", odd);
    step.entries = entries(0, 2);
    store.commit(step).await.expect("commit");
    let run = store.run("p").await.expect("run");
    assert_eq!(run.spend, odd);
    assert_eq!(run.spend.cost_usd.to_bits(), (0.1_f64 + 0.2).to_bits());
    assert_eq!(run.pending, None, "a commit forgets the pending calls");
    assert_eq!(run.budget, root.budget, "a commit keeps the budget");
    store
        .commit(spending("p", "w1", spent(4)))
        .await
        .expect("commit");
    assert_eq!(store.run("p").await.expect("run").spend, spent(4));
    // A refused commit writes no spend.
    let refused = store.commit(spending("p", "intruder", spent(9))).await;
    assert_eq!(refused, Err(StoreError::LostLease { run: "p".into() }));
    assert_eq!(store.run("p").await.expect("run").spend, spent(4));

    // Two children, a grandchild, and a tree beside it; their commits together (grouped
    // where they meet).
    for (id, parent) in [
        ("p.1", Some("p")),
        ("p.2", Some("p")),
        ("p.1.1", Some("p.1")),
        ("q", None),
        ("q.1", Some("q")),
    ] {
        create_child(&store, id, parent).await;
    }
    let spends = [("p.1", 5), ("p.2", 6), ("p.1.1", 7), ("q", 8), ("q.1", 9)];
    let results = commit_all(
        &store,
        spends
            .iter()
            .map(|(id, n)| spending(id, "w1", spent(*n)))
            .collect(),
    )
    .await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    for (id, n) in spends {
        assert_eq!(store.run(id).await.expect("run").spend, spent(n), "{id}");
    }
    let tree = |id: &'static str| {
        let store = store.clone();
        async move { store.tree_spend(id).await.expect("tree spend") }
    };
    assert_eq!(
        tree("p").await,
        total(&[spent(4), spent(5), spent(6), spent(7)])
    );
    assert_eq!(tree("p.1").await, total(&[spent(5), spent(7)]));
    assert_eq!(tree("p.1.1").await, spent(7));
    assert_eq!(tree("q").await, total(&[spent(8), spent(9)]));
    assert_eq!(
        store.tree_spend("nope").await,
        Err(StoreError::NotFound {
            what: "run",
            id: "nope".into()
        })
    );
    // A run that spent nothing yet.
    create_child(&store, "r", None).await;
    assert_eq!(tree("r").await, Spend::default());
}

pub(crate) async fn budgets_are_set_changed_and_removed(h: Harness) {
    let store = h.open().await;
    create(&store, "r1", RunStatus::Suspended, None, 1).await;
    let before = store.run("r1").await.expect("run");
    let budget = Budget {
        tokens: Some(200_000),
        cost_usd: Some(0.35),
        calls: Some(20),
        time_ms: Some(600_000),
    };
    store
        .set_budget("r1", Some(&budget))
        .await
        .expect("set a budget");
    let after = store.run("r1").await.expect("run");
    assert_eq!(after.budget, Some(budget));
    assert_eq!(
        RunRecord {
            budget: None,
            ..after
        },
        before,
        "nothing else changes, the update time included"
    );
    let raised = Budget {
        cost_usd: Some(1.0),
        ..Budget::default()
    };
    store.set_budget("r1", Some(&raised)).await.expect("raise");
    assert_eq!(store.run("r1").await.expect("run").budget, Some(raised));
    store.set_budget("r1", None).await.expect("remove");
    assert_eq!(store.run("r1").await.expect("run"), before);

    // Any status: a finished run's budget is still what it was given.
    create(&store, "r2", RunStatus::Running, Some("w1"), 1).await;
    let mut finish = checkpoint("r2", "w1", entries(1, 2));
    finish.status = RunStatus::Completed;
    finish.lease_until = None;
    store.commit(finish).await.expect("finish");
    store.set_budget("r2", Some(&raised)).await.expect("set");
    let done = store.run("r2").await.expect("run");
    assert_eq!(
        (done.status, done.budget),
        (RunStatus::Completed, Some(raised))
    );

    assert_eq!(
        store.set_budget("nope", Some(&raised)).await,
        Err(StoreError::NotFound {
            what: "run",
            id: "nope".into()
        })
    );
}

pub(crate) async fn pending_calls_are_noted_by_the_holder_and_forgotten_by_the_next_commit(
    h: Harness,
) {
    let store = h.open().await;
    create(&store, "r1", RunStatus::Running, Some("w1"), 1).await;
    let calls = PendingCalls {
        models: vec!["smollm2".into(), "qwen2.5".into()],
        at_most: Spend {
            input_tokens: 900,
            output_tokens: 1024,
            cost_usd: 0.0125,
            calls: 2,
            ..Spend::default()
        },
        intents: vec![claij_core::Intent {
            kind: claij_core::IntentKind::Program,
            name: "sh".into(),
            server: None,
            key: "r1:1".into(),
        }],
    };
    store
        .note_pending("r1", "w1", &calls)
        .await
        .expect("note pending calls");
    let before = store.run("r1").await.expect("run");
    assert_eq!(before.pending, Some(calls.clone()));

    // Only the holder notes them.
    assert_eq!(
        store
            .note_pending("r1", "w2", &PendingCalls::default())
            .await,
        Err(StoreError::LostLease { run: "r1".into() })
    );
    assert_eq!(store.run("r1").await.expect("run"), before);
    assert_eq!(
        store.note_pending("nope", "w1", &calls).await,
        Err(StoreError::NotFound {
            what: "run",
            id: "nope".into()
        })
    );

    // Its holder died: the run taken over shows them, and the new holder's first commit
    // records them as spent and forgets them.
    let claimed = store
        .claim(
            "r1",
            ClaimFrom::Stale {
                dead_owners: vec!["w1".into()],
            },
            "w2",
            in_an_hour(),
        )
        .await
        .expect("take over");
    assert_eq!(claimed.pending, Some(calls.clone()));
    let mut recover = checkpoint("r1", "w2", entries(1, 2));
    recover.spend = calls.at_most;
    store.commit(recover).await.expect("commit");
    let run = store.run("r1").await.expect("run");
    assert_eq!((run.pending, run.spend), (None, calls.at_most));

    // A suspended run has no holder.
    let mut suspend = checkpoint("r1", "w2", entries(2, 3));
    suspend.status = RunStatus::Suspended;
    suspend.wait = Some(a_wait());
    suspend.lease_until = None;
    store.commit(suspend).await.expect("suspend");
    assert_eq!(
        store.note_pending("r1", "w2", &calls).await,
        Err(StoreError::LostLease { run: "r1".into() })
    );

    // Commits written together forget them too.
    many_runs(&store, "g", 12).await;
    for i in 0..12 {
        store
            .note_pending(&format!("g{i}"), "w1", &calls)
            .await
            .expect("note");
    }
    let results = commit_all(
        &store,
        (0..12)
            .map(|i| spending(&format!("g{i}"), "w1", spent(i + 1)))
            .collect(),
    )
    .await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    for i in 0..12 {
        let run = store.run(&format!("g{i}")).await.expect("run");
        assert_eq!((run.pending, run.spend), (None, spent(i + 1)), "g{i}");
    }
}

/// The spend columns of migration `spend` (SQLite 6, PostgreSQL 5).
const SPEND_COLUMNS: [&str; 8] = [
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "calls",
    "time_ms",
    "waiting_ms",
    "budget",
    "pending",
];

/// SQLite's checkpoint statement as migration 4 left it (migration 6 replaces it).
const SQLITE_CHECKPOINT_OF_SCHEMA_5: &str = "
CREATE VIEW checkpoint_writes (
    run_id, owner, first_seq, status, state, context, wait, lease_until, updated_at, entries,
    wake_at
) AS SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL WHERE 0;
CREATE TRIGGER checkpoint_write INSTEAD OF INSERT ON checkpoint_writes
BEGIN
    UPDATE runs SET
        status = NEW.status,
        state = NEW.state,
        context = COALESCE(NEW.context, context),
        wait = NEW.wait,
        lease_owner = CASE WHEN NEW.lease_until IS NULL THEN NULL ELSE lease_owner END,
        lease_until = NEW.lease_until,
        trail_len = trail_len + json_array_length(NEW.entries),
        updated_at = NEW.updated_at,
        wake_at = NEW.wake_at
    WHERE id = NEW.run_id AND lease_owner = NEW.owner
        AND (NEW.first_seq IS NULL OR trail_len = NEW.first_seq);
    SELECT RAISE(ABORT, 'claij: checkpoint refused') WHERE changes() = 0;
    INSERT INTO trail (run_id, seq, entry)
        SELECT NEW.run_id, json_extract(value, '$[0]'), json_extract(value, '$[1]')
        FROM json_each(NEW.entries);
END;";

/// Takes the database back to the schema before migration `spend`: its columns dropped
/// (and on SQLite the checkpoint statement of migration 4 put back), its record removed.
async fn rewind_to_before_spend(h: &Harness) -> (i64, String) {
    match h.backend() {
        Backend::Sqlite => {
            let drops: String = SPEND_COLUMNS
                .iter()
                .map(|c| format!("ALTER TABLE runs DROP COLUMN {c};\n"))
                .collect();
            h.execute(&format!(
                "DROP TRIGGER checkpoint_write; DROP VIEW checkpoint_writes;\n{drops}\
                 {SQLITE_CHECKPOINT_OF_SCHEMA_5}\n\
                 ALTER TABLE definitions DROP COLUMN owner;\n\
                 ALTER TABLE runs DROP COLUMN forked_from;\n\
                 DELETE FROM claij_migrations WHERE version >= 6"
            ))
            .await;
            (6, "spend".into())
        }
        Backend::Postgres => {
            let drops: Vec<String> = SPEND_COLUMNS
                .iter()
                .map(|c| format!("DROP COLUMN {c}"))
                .collect();
            h.execute(&format!(
                "ALTER TABLE runs {}, DROP COLUMN forked_from; \
                 ALTER TABLE definitions DROP COLUMN owner; \
                 DELETE FROM claij_migrations WHERE version >= 5",
                drops.join(", ")
            ))
            .await;
            (5, "spend".into())
        }
    }
}

/// Entries covering what `Spend::of_entry` tells apart: after `entries(0, 6)` (two failed
/// attempts with usage and a model), an entry naming a model without usage (one call, no
/// tokens), usage of three calls without a cost, and usage without a model.
fn entries_with_calls() -> Vec<TrailEntry> {
    let mut all = entries(0, 9);
    all[6].model = Some("smollm2".into());
    all[6].usage = None;
    all[7].model = Some("qwen2.5".into());
    all[7].usage = Some(Box::new(Usage {
        input_tokens: 2000,
        output_tokens: 300,
        calls: Some(3),
        ..Usage::default()
    }));
    all[8].model = None;
    all[8].usage = Some(Box::new(Usage {
        input_tokens: 40,
        output_tokens: 5,
        cost_usd: Some(0.25),
        ..Usage::default()
    }));
    all
}

pub(crate) async fn older_runs_get_their_spend_from_their_trails(h: Harness) {
    let calls = entries_with_calls();
    {
        let store = h.open().await;
        let def = definition("review", 1, T0);
        store.put_definition(&def).await.expect("put definition");
        for (id, parent, trail) in [
            ("old", None, calls.clone()),
            ("old.1", Some("old"), entries(0, 4)),
            ("quiet", None, entries(0, 2)),
            ("damaged", None, entries(0, 3)),
        ] {
            let mut run = record(id, &def, RunStatus::Running, Some("w1"), T0);
            run.parent = parent.map(str::to_owned);
            run.trail_len = trail.len() as u64;
            store.create_run(&run, &trail).await.expect("create");
        }
    }
    // An entry that is not JSON any more (it names a model, so PostgreSQL tries to parse
    // it): it counts nothing, and does not stop the migration.
    h.execute(
        "UPDATE trail SET entry = '{\"seq\": 1, \"model\": \"x\", \"usage\": {' \
         WHERE run_id = 'damaged' AND seq = 1",
    )
    .await;
    let migration = rewind_to_before_spend(&h).await;

    let upgraded = h.open_concrete(Durability::Normal).await;
    let applied = upgraded.applied_migrations().await;
    let spend = applied.iter().find(|m| m.name == "spend");
    assert_eq!(spend.map(|m| (m.version, m.name.clone())), Some(migration));
    let store = upgraded.store();
    let expected = |trail: &[TrailEntry]| Spend::of_entries(trail);
    let mut damaged = entries(0, 3);
    damaged.remove(1);
    for (id, want) in [
        ("old", expected(&calls)),
        ("old.1", expected(&entries(0, 4))),
        ("quiet", Spend::default()),
        ("damaged", expected(&damaged)),
    ] {
        let run = store.run(id).await.expect("run");
        let got = run.spend;
        assert!(
            (got.cost_usd - want.cost_usd).abs() < 1e-12,
            "{id}: {got:?} {want:?}"
        );
        assert_eq!(
            Spend {
                cost_usd: want.cost_usd,
                ..got
            },
            want,
            "{id}"
        );
        assert_eq!((run.budget, run.pending), (None, None), "{id}");
    }
    // What the entries of `entries_with_calls` count, spelled out: two usages of 120 in,
    // 7 out, $0.000125; one call with no usage; three calls of 2000 in, 300 out; one
    // usage of 40 in, 5 out, $0.25.
    let old = store.run("old").await.expect("run").spend;
    assert_eq!(
        (old.input_tokens, old.output_tokens, old.calls),
        (2 * 120 + 2000 + 40, 2 * 7 + 300 + 5, 2 + 1 + 3 + 1)
    );
    assert!((old.cost_usd - (2.0 * 0.000_125 + 0.25)).abs() < 1e-12);
    assert_eq!((old.time_ms, old.waiting_ms), (0, 0));
    let tree = store.tree_spend("old").await.expect("tree");
    assert_eq!(tree.calls, old.calls + 1);

    // The runs go on, and their commits write their spend.
    let mut step = spending("old", "w1", spent(2));
    step.entries = entries(9, 10);
    store.commit(step).await.expect("commit after the upgrade");
    let run = store.run("old").await.expect("run");
    assert_eq!((run.trail_len, run.spend), (10, spent(2)));
}

/// What a store holds of a run, for before-and-after comparisons.
async fn run_as_stored(store: &Arc<dyn Store>, id: &str) -> (RunRecord, Vec<TrailEntry>) {
    (
        store.run(id).await.expect("run"),
        store.trail(id, 0).await.expect("trail"),
    )
}

pub(crate) async fn a_run_moves_to_another_definition_only_as_it_was_found(h: Harness) {
    let store = h.open().await;
    let found = create(&store, "parked", RunStatus::Suspended, None, 3).await;
    let found = store.run(&found.id).await.expect("run");
    let v2 = definition("review", 2, T0 + 1);
    store.put_definition(&v2).await.expect("definition");
    store
        .put_hook(
            "h-wait",
            &Hook {
                run_id: "parked".into(),
                wait_seq: 3,
                created_at: at(T0),
            },
        )
        .await
        .expect("hook");
    let mut wait = a_wait();
    wait.state = "b".into();
    wait.transitions = vec![("b".into(), "end".into())];
    let mut moved = entry(3, json!({"from": {"version": 1}, "to": {"version": 2}}));
    moved.version = 2;
    moved.to = None;
    let migration = Migration {
        found: found.clone(),
        version: 2,
        hash: v2.hash.clone(),
        state: "b".into(),
        wait: Some(wait.clone()),
        entry: moved.clone(),
    };
    // To a definition that is not stored: refused, nothing written.
    let missing = Migration {
        hash: "0".repeat(64),
        ..migration.clone()
    };
    let before = run_as_stored(&store, "parked").await;
    match store.migrate_run(&missing).await {
        Err(StoreError::NotFound { what, .. }) => assert_eq!(what, "definition"),
        other => panic!("expected a missing definition, got {other:?}"),
    }
    assert_eq!(run_as_stored(&store, "parked").await, before);

    store.migrate_run(&migration).await.expect("migrate");
    let (run, trail) = run_as_stored(&store, "parked").await;
    assert_eq!((run.version, run.hash.as_str()), (2, v2.hash.as_str()));
    assert_eq!((run.state.as_str(), run.trail_len), ("b", 4));
    assert_eq!(run.status, RunStatus::Suspended);
    assert_eq!(run.wait, Some(wait));
    assert_eq!(
        &trail[..3],
        &before.1[..],
        "the entries before the move stay"
    );
    assert_eq!(trail[3], moved);
    // The wait's resume link answers the new wait.
    assert_eq!(
        store
            .hook("h-wait")
            .await
            .expect("hook")
            .map(|h| h.wait_seq),
        Some(4)
    );

    // The same move again: the run is no longer as it was found; nothing changes.
    let after = run_as_stored(&store, "parked").await;
    match store.migrate_run(&migration).await {
        Err(StoreError::Conflict { reason, .. }) => {
            assert!(reason.contains("not moved"), "{reason}")
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(run_as_stored(&store, "parked").await, after);

    // A running run whose holder renewed its lease since the plan: refused.
    let held = create(&store, "held", RunStatus::Running, Some("host:1:1"), 2).await;
    let held = store.run(&held.id).await.expect("run");
    let beat = store
        .heartbeat("held", "host:1:1", Some(at(now_micros() + 7_200_000_000)))
        .await
        .expect("heartbeat");
    assert!(beat.held);
    let before = run_as_stored(&store, "held").await;
    let mut entry = entry(2, json!({}));
    entry.to = None;
    let refused = store
        .migrate_run(&Migration {
            found: held,
            version: 2,
            hash: v2.hash.clone(),
            state: "a".into(),
            wait: None,
            entry,
        })
        .await;
    assert!(
        matches!(refused, Err(StoreError::Conflict { .. })),
        "{refused:?}"
    );
    assert_eq!(run_as_stored(&store, "held").await, before);
}
