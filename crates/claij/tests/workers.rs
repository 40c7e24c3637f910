//! `claij worker` processes sharing one store's queue, killed and stopped under load.
//!
//! `workers_share_the_queue_under_kills` (PostgreSQL: 4 workers, [`PG_RUNS`] runs, at
//! least [`PG_MIN_KILLS`] kills; SQLite: 3 workers, [`SQLITE_RUNS`] runs, at least
//! [`SQLITE_MIN_KILLS`] kills) submits runs of [`MIX`] — four fifths before the workers
//! start, so that they are busy from the start, the rest while they work — in batches,
//! each one `claij run mix.yaml --submit --inputs FILE` process, and kills a worker with
//! SIGKILL at random points (a killed worker is started again at once, and the new one
//! takes over the dead one's runs; the runs it held when it died are counted from the
//! store). The input decides each run's path, about 20 trail entries of `transform`
//! states in all: straight through; through a `human` wait that the test answers from
//! another process (`claij runs resume RUN --input … --submit`) as soon as `claij runs
//! list --status suspended` shows it; through a `human` wait that nobody answers, which
//! expires after 2 s and follows `on_expiry` (a timer a worker acts on); through a `fork`
//! of two or three branches (child runs); through a `publish` state, whose event starts
//! runs of the FSMs subscribed to its topic. Every worker is given the two subscribers'
//! documents (`claij worker job-ledger.yaml job-review.yaml`): an event on `mix.jobs`
//! starts a run of [`JOB_LEDGER`], and one of [`JOB_REVIEW`] too when its `len` is 14 or
//! more; an event on `mix.shelved`, where only [`JOB_REVIEW`] subscribes and only to
//! urgent ones, matches no trigger. A few runs are submitted alone, twice, under the same
//! idempotency key. Once every run is final and no event is pending, the workers are
//! stopped with SIGTERM (each must exit 0), and:
//!
//! - the store holds exactly the runs submitted, their branches and the subscribers'
//!   runs, every one `completed` and held by no one; `claij workers list` shows no worker
//!   and an empty queue;
//! - every trail (`claij runs trail RUN --json`, a few processes at a time) of a submitted
//!   run or a branch equals that of an uninterrupted reference run of the same input
//!   (plain `claij run` on another store, its waits answered with `claij runs resume RUN
//!   --input …` or, for the expiring one, resumed once the wait expired) — the sequence
//!   numbers without gap or duplicate, and per entry the states, event, attempt and
//!   failure, not times or durations, run ids made neutral; each expiring wait expired
//!   exactly once, each answered wait was answered once and took its answer once;
//! - `claij events list --json` shows exactly one event per `publish` run, with the topic,
//!   event and publisher its trail says, none pending: each on `mix.jobs` dispatched,
//!   having started exactly one run of each subscriber whose trigger it satisfies and none
//!   of the other; each on `mix.shelved` unmatched, its note naming the subscriber and
//!   the field it refused. Every subscriber run was started by exactly one event (none
//!   twice, whatever the kills interrupted), and its trail is the one its event makes:
//!   the event as its input, then the subscriber's transforms.
//!
//! `sigterm_drains_with_nothing_lost` (both backends): runs of [`SLOW`] (three `command`
//! naps of 1 s) are driven by one worker stopped with SIGTERM while they are under way.
//! With a short grace it exits 0, hands the runs back (none is left held), leaves `claij
//! workers list`, and a second worker finishes them with the reference trail; with a long
//! grace it finishes the runs it holds, claims nothing more meanwhile, and exits 0.
//!
//! Seeds are printed; `CLAIJ_WORKERS_SEED=N` replays one (the kill points, not the
//! machine's timing). When a check fails, the workers' logs (their stderr, run with
//! `RUST_LOG=info`; `claij worker` itself prints warnings and up) are kept: the failure
//! message says where, and quotes the lines that name the run or event.
//!
//! `the_comparison_catches_…` and `the_event_checks_catch_…` check the checks. The
//! processes, the store read back and the trail comparison are in `worker_support/`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

mod worker_support;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use claij_testkit::{Backend, Rng, TestStore};
use serde_json::{Value, json};
use worker_support::{
    Problems, Worker, Workspace, attempts, compare, count, held_by, in_parallel, list_events,
    list_runs, list_workers, normalized, stdout_of, stop_report, stored_trail, stored_trails,
    wait_completed, wait_for,
};

/// Runs submitted on PostgreSQL, as the issue asks. Measured on 2 cores, debug build, the
/// machine shared with another job's tests (load 1 to 9). Before (750 runs, a `claij run
/// --submit` process per run, a `claij runs trail` process per trail, 3 at a time, one
/// thread answering waits): 97 s alone — the backlog of 600 took 26 s, the workers' part
/// 35 s, 1120 trails 27 s — and 173 s beside this file's other tests (the whole file:
/// 175 s). Now (1000 runs, the backlog of 800 in two `--inputs` processes, trails read and
/// waits answered a few processes at a time): 83 to 97 s alone — references 5 s, backlog
/// 2 to 3 s, the workers' part 35 s, some 1550 trails 39 to 53 s — and 104 to 149 s beside
/// the other tests (the whole file: 104 to 149 s), of which 47 to 80 s reading trails,
/// now the largest part: the command line reads one trail per process.
const PG_RUNS: usize = 1000;
/// Worker processes on PostgreSQL.
const PG_WORKERS: usize = 4;
/// Kills that must land on PostgreSQL while runs are unfinished.
const PG_MIN_KILLS: usize = 50;
/// Runs submitted on SQLite (enough for the kills to find workers holding runs: 19 to
/// 21 s alone, 48 to 58 s beside the other tests; 35 s and 60 to 100 s before).
const SQLITE_RUNS: usize = 250;
/// Worker processes on SQLite.
const SQLITE_WORKERS: usize = 3;
/// Kills that must land on SQLite while runs are unfinished.
const SQLITE_MIN_KILLS: usize = 20;
/// Runs per `claij run --submit --inputs` process once the workers run (the backlog
/// before them is one process per submitter).
const BATCH: usize = 25;
/// How many waits are answered at once (one `claij runs resume` process each).
const ANSWERERS: usize = 3;
/// How many reference runs are made at once.
const REFERENCE_RUNNERS: usize = 4;
/// How long the runs may take to end once the last one is submitted, at most (a hang
/// guard, not a timing: the runs take a few seconds).
const SETTLE: Duration = Duration::from_secs(150);

/// The workflow under test: the input's `kind` picks a path, its `len` the number of
/// `step`s. Every path ends with `check`, which fails validation twice and follows
/// `on_failure`, and `finish`, whose event names the run. 18 to 22 entries for a `len`
/// of 11 to 15 (the expiring and publishing paths always step 9 times). `fork`'s branches
/// (two or three: `len % 2 + 2`) run [`BRANCH`], found relative to the working directory
/// when a worker continues the run (the stored definition has no path). The publishing
/// path publishes `{acc, len, by}` (`by`: the run's id) on `mix.jobs` from `announce`,
/// or, for a `len` of 11, `{acc, len, by, urgent: false}` on `mix.shelved` from `shelve`;
/// `announce` names its `next` state, since it has two ways out.
const MIX: &str = r##"
id: worker-mix
version: 1
description: Paths decided by the input, for the workers test.
schemas:
  job:
    type: object
    required: [n, acc, len]
    properties:
      n: {type: integer, minimum: 0}
      acc: {type: integer, minimum: 0}
      len: {type: integer, minimum: 1}
states:
  - id: intake
    action: transform
    config:
      template: '{"id": ["intake", "route"], "kind": {{ event.kind | tojson }}, "len": {{ event.len }}, "acc": {{ event.len * 31 + 7 }}}'
  - id: route
    action: transform
    config:
      template: |
        {% if event.kind == "ask" %}{"id": ["route", "ask"], "n": 0, "acc": {{ event.acc }}, "len": {{ event.len }}}
        {% elif event.kind == "expire" %}{"id": ["route", "linger"], "n": 0, "acc": {{ event.acc }}, "len": {{ event.len }}}
        {% elif event.kind == "fork" %}{"id": ["route", "fan"], "len": {{ event.len }}, "items": [{% for i in range(event.len % 2 + 2) %}{"i": {{ i }}, "acc": {{ event.acc + i }}}{{ "," if not loop.last }}{% endfor %}]}
        {% elif event.kind == "publish" and event.len == 11 %}{"id": ["route", "shelve"], "acc": {{ event.acc }}, "len": {{ event.len }}, "by": {{ run_id | tojson }}, "urgent": false}
        {% elif event.kind == "publish" %}{"id": ["route", "announce"], "acc": {{ event.acc }}, "len": {{ event.len }}, "by": {{ run_id | tojson }}}
        {% else %}{"id": ["route", "step"], "n": 0, "acc": {{ event.acc }}, "len": {{ event.len }}}{% endif %}
  - id: ask
    action: human
    description: Answered by the test, from another process.
    config:
      prompt: Go on?
  - id: linger
    action: human
    description: Answered by nobody; expires.
    config:
      prompt: Nobody answers this one.
      expires: 2s
      on_expiry: expired
  - id: expired
    action: transform
    config:
      template: '{"id": ["expired", "step"], "n": 0, "acc": 3, "len": 9, "after": {{ event.failure.kind | tojson }}}'
  - id: fan
    action: fork
    config:
      fsm: branch.yaml
      over: /items
      trail: summary
      success_to: joined
      failure_to: broken
  - id: joined
    action: transform
    config:
      template: |
        {% set ns = namespace(acc=0) %}{% for b in event.branches %}{% set ns.acc = ns.acc + b.result.acc %}{% endfor %}
        {"id": ["joined", "step"], "n": 0, "acc": {{ ns.acc }}, "len": {{ event.branches | length + 8 }}}
  - id: announce
    action: publish
    description: Announces the job to the FSMs subscribed to mix.jobs.
    config: {topic: mix.jobs, next: announced}
  - id: shelve
    action: publish
    description: Shelves the job on mix.shelved, where only urgent jobs are taken.
    config: {topic: mix.shelved, next: announced}
  - id: announced
    action: transform
    config:
      template: '{"id": ["announced", "step"], "n": 0, "acc": {{ event.topic | length }}, "len": 9}'
  - id: step
    action: transform
    config:
      template: |
        {% if event.n + 1 >= event.len %}{"id": ["step", "check"], "n": {{ event.n + 1 }}, "acc": {{ (event.acc * 3 + event.n) % 100003 }}, "run": {{ run_id | tojson }}}
        {% else %}{"id": ["step", "step"], "n": {{ event.n + 1 }}, "acc": {{ (event.acc * 3 + event.n) % 100003 }}, "len": {{ event.len }}}{% endif %}
  - id: check
    action: transform
    config:
      max_attempts: 2
      on_failure: finish
      template: '{"id": ["check", "finish"], "verdict": "not a number"}'
  - id: finish
    action: transform
    config:
      template: '{"id": ["finish", "done"], "run": {{ run_id | tojson }}}'
  - {id: done, action: end}
  - {id: broken, action: end}
xitions:
  - id: [start, intake]
    schema:
      type: object
      required: [kind, len]
      properties:
        kind: {enum: [straight, ask, expire, fork, publish]}
        len: {type: integer, minimum: 1, maximum: 50}
  - id: [intake, route]
  - id: [route, step]
    schema: {$ref: "#/$defs/job"}
  - id: [route, ask]
    schema: {$ref: "#/$defs/job"}
  - id: [route, linger]
    schema: {$ref: "#/$defs/job"}
  - id: [route, fan]
    schema: {type: object, required: [items]}
  - id: [route, announce]
    schema: {type: object, required: [acc, len, by]}
  - id: [route, shelve]
    schema: {type: object, required: [acc, len, by, urgent]}
  - id: [ask, step]
    schema: {$ref: "#/$defs/job"}
  - id: [linger, step]
    schema: {$ref: "#/$defs/job"}
  - id: [linger, expired]
    omit: true
  - id: [expired, step]
    schema: {$ref: "#/$defs/job"}
  - id: [fan, joined]
    schema: {type: object, required: [branches]}
  - id: [fan, broken]
  - id: [joined, step]
    schema: {$ref: "#/$defs/job"}
  - id: [announce, announced]
  - id: [announce, broken]
    omit: true
  - id: [shelve, announced]
  - id: [announced, step]
    schema: {$ref: "#/$defs/job"}
  - id: [step, step]
    schema: {$ref: "#/$defs/job"}
  - id: [step, check]
    schema: {type: object, required: [n, acc, run]}
  - id: [check, finish]
    schema: {type: object, required: [verdict], properties: {verdict: {type: integer}}}
  - id: [finish, done]
    schema: {type: object, required: [run]}
"##;
/// A branch of [`MIX`]'s fork: two transforms.
const BRANCH: &str = r#"
id: worker-branch
version: 1
states:
  - id: work
    action: transform
    config:
      template: '{"id": ["work", "twice"], "i": {{ event.i }}, "acc": {{ event.acc * 2 + event.i }}}'
  - id: twice
    action: transform
    config:
      template: '{"id": ["twice", "done"], "acc": {{ event.acc * 2 + 1 }}}'
  - {id: done, action: end}
xitions:
  - id: [start, work]
    schema: {type: object, required: [i, acc]}
  - id: [work, twice]
    schema: {type: object, required: [i, acc]}
  - id: [twice, done]
    schema: {type: object, required: [acc]}
"#;

/// Subscribed to `mix.jobs`: every event published there satisfies its trigger (each
/// has `acc`, `len` and `by`). Two transforms copy the event's fields (so that the trail
/// an event makes is plain to write down: [`subscriber_trail`]).
const JOB_LEDGER: &str = r#"
id: job-ledger
version: 1
description: Books every job announced on mix.jobs.
triggers:
  - on: mix.jobs
    schema: {type: object, required: [acc, len, by]}
states:
  - id: book
    action: transform
    config:
      template: '{"id": ["book", "tally"], "by": {{ event.by | tojson }}, "acc": {{ event.acc }}}'
  - id: tally
    action: transform
    config:
      template: '{"id": ["tally", "booked"], "by": {{ event.by | tojson }}, "run": {{ run_id | tojson }}}'
  - {id: booked, action: end}
xitions:
  - id: [start, book]
    schema: {type: object, required: [acc, len, by]}
  - id: [book, tally]
    schema: {type: object, required: [by, acc]}
  - id: [tally, booked]
    schema: {type: object, required: [by, run]}
"#;

/// Subscribed to `mix.jobs` for the events of a `len` of 14 or more, and to
/// `mix.shelved` for the urgent ones (none is: the events shelved match no trigger).
const JOB_REVIEW: &str = r#"
id: job-review
version: 1
description: Reviews the long jobs announced on mix.jobs, and the urgent ones shelved.
triggers:
  - on: mix.jobs
    schema: {type: object, required: [len], properties: {len: {minimum: 14}}}
  - on: mix.shelved
    schema: {type: object, required: [urgent], properties: {urgent: {const: true}}}
states:
  - id: review
    action: transform
    config:
      template: '{"id": ["review", "reviewed"], "by": {{ event.by | tojson }}, "len": {{ event.len }}, "run": {{ run_id | tojson }}}'
  - {id: reviewed, action: end}
xitions:
  - id: [start, review]
    schema: {type: object, required: [by, len]}
  - id: [review, reviewed]
    schema: {type: object, required: [by, len, run]}
"#;

const LEDGER: &str = "job-ledger";
const REVIEW: &str = "job-review";

/// The documents every worker is given: its subscribers.
const SUBSCRIBERS: [&str; 2] = ["job-ledger.yaml", "job-review.yaml"];

/// Where a `publish` run of `len` publishes, and the subscribers its event must start
/// (by id, in order): what [`JOB_LEDGER`]'s and [`JOB_REVIEW`]'s triggers say.
fn publication(len: u64) -> (&'static str, &'static [&'static str]) {
    match len {
        11 => ("mix.shelved", &[]),
        12 | 13 => ("mix.jobs", &[LEDGER]),
        _ => ("mix.jobs", &[LEDGER, REVIEW]),
    }
}

/// The trail (normalized: its own id written `RUN`) of a run of the subscriber `fsm`
/// started by `event`: the event as its input, then the subscriber's transforms.
fn subscriber_trail(fsm: &str, event: &Value) -> Vec<Value> {
    let entry = |seq: u64, from: &str, to: &str, event: Value| {
        json!({"seq": seq, "fsm": fsm, "version": 1, "from": from, "to": to, "event": event,
               "attempt": 1, "model": null, "usage": null, "failure": null})
    };
    let by = &event["by"];
    let mut input = event.clone();
    if fsm == LEDGER {
        input["id"] = json!(["start", "book"]);
        vec![
            entry(0, "start", "book", input),
            entry(
                1,
                "book",
                "tally",
                json!({"id": ["book", "tally"], "by": by, "acc": event["acc"]}),
            ),
            entry(
                2,
                "tally",
                "booked",
                json!({"id": ["tally", "booked"], "by": by, "run": "RUN"}),
            ),
        ]
    } else {
        input["id"] = json!(["start", "review"]);
        vec![
            entry(0, "start", "review", input),
            entry(
                1,
                "review",
                "reviewed",
                json!({"id": ["review", "reviewed"], "by": by, "len": event["len"], "run": "RUN"}),
            ),
        ]
    }
}

/// The paths through [`MIX`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Kind {
    Straight,
    Ask,
    Expire,
    Fork,
    Publish,
}

impl Kind {
    const ALL: [Kind; 5] = [
        Kind::Straight,
        Kind::Ask,
        Kind::Expire,
        Kind::Fork,
        Kind::Publish,
    ];

    fn name(self) -> &'static str {
        match self {
            Kind::Straight => "straight",
            Kind::Ask => "ask",
            Kind::Expire => "expire",
            Kind::Fork => "fork",
            Kind::Publish => "publish",
        }
    }
}

/// One run's input.
fn input(kind: Kind, len: u64) -> String {
    json!({"kind": kind.name(), "len": len}).to_string()
}

/// The answer to an `ask` wait (the same for the run and its reference).
fn answer(len: u64) -> String {
    json!({"id": ["ask", "step"], "n": 0, "acc": len * 5, "len": len}).to_string()
}

/// A run the test submits.
#[derive(Debug, Clone)]
struct Planned {
    id: String,
    kind: Kind,
    len: u64,
    /// Submitted alone, and a second time under the same idempotency key.
    twice: bool,
}

/// Runs submitted together: those submitted once by one `claij run mix.yaml --submit
/// --inputs PREFIX.jsonl --run-id PREFIX` process (which names them PREFIX-1, PREFIX-2, …
/// in the file's order), each of those submitted twice by two processes of its own.
#[derive(Debug)]
struct Group {
    prefix: String,
    runs: Vec<Planned>,
}

/// The plan, in the order of submission: the backlog (one group per submitter), the
/// groups submitted while the workers run, and the last group, submitted once the kills
/// wanted have landed (so that the runs cannot all be done before that however fast the
/// machine).
struct Plan {
    backlog: Vec<Group>,
    meanwhile: Vec<Group>,
    last: Group,
}

impl Plan {
    /// `runs` runs: the first five take each path, the rest are drawn.
    fn draw(rng: &mut Rng, runs: usize, submitters: usize) -> Plan {
        let drawn: Vec<(Kind, u64, bool)> = (0..runs)
            .map(|i| {
                let kind = match (i, rng.between(0, 99)) {
                    (i, _) if i < Kind::ALL.len() => Kind::ALL[i],
                    (_, 0..=34) => Kind::Straight,
                    (_, 35..=52) => Kind::Ask,
                    (_, 53..=69) => Kind::Expire,
                    (_, 70..=84) => Kind::Fork,
                    _ => Kind::Publish,
                };
                // One run in 50 (and the second) is submitted twice.
                (kind, rng.between(11, 15), i == 1 || rng.chance(2))
            })
            .collect();
        let backlog = runs * 4 / 5;
        let last = runs - (runs - backlog).min(10);
        let mut ranges: Vec<Range<usize>> = Vec::new();
        let part = backlog.div_ceil(submitters).max(1);
        ranges.extend(
            (0..backlog)
                .step_by(part)
                .map(|a| a..(a + part).min(backlog)),
        );
        let backlog_groups = ranges.len();
        ranges.extend(
            (backlog..last)
                .step_by(BATCH)
                .map(|a| a..(a + BATCH).min(last)),
        );
        ranges.push(last..runs);
        let mut groups: Vec<Group> = ranges
            .into_iter()
            .enumerate()
            .map(|(g, range)| {
                let prefix = format!("b{g:02}");
                let mut n = 0;
                let runs = range
                    .map(|i| {
                        let (kind, len, twice) = drawn[i];
                        let id = if twice {
                            format!("w-{i:05}")
                        } else {
                            n += 1;
                            format!("{prefix}-{n}")
                        };
                        Planned {
                            id,
                            kind,
                            len,
                            twice,
                        }
                    })
                    .collect();
                Group { prefix, runs }
            })
            .collect();
        let last = groups.pop().unwrap();
        let meanwhile = groups.split_off(backlog_groups);
        Plan {
            backlog: groups,
            meanwhile,
            last,
        }
    }

    fn runs(&self) -> impl Iterator<Item = &Planned> {
        self.backlog
            .iter()
            .chain(&self.meanwhile)
            .chain([&self.last])
            .flat_map(|g| &g.runs)
    }
}

/// The reference of one input: its trail and its children's (by the suffix that follows
/// the run id), normalized.
#[derive(Debug)]
struct Reference {
    trail: Vec<Value>,
    children: BTreeMap<String, Vec<Value>>,
}

impl Reference {
    /// The entry of the trail that goes `from` → `to`, its `RUN` written `run`.
    fn entry(&self, from: &str, to: &str, run: &str) -> Option<Value> {
        let entry = self
            .trail
            .iter()
            .find(|e| e["from"] == from && e["to"] == to)?;
        let text = entry
            .to_string()
            .replace("\"RUN\"", &format!("\"{run}\""))
            .replace("\"RUN:", &format!("\"{run}:"));
        Some(serde_json::from_str(&text).unwrap())
    }

    /// The event a `publish` run `run` of this input publishes: its id (`RUN:SEQ`), and
    /// the event itself (what entered the publishing state, without its `id`).
    fn published(&self, run: &str) -> Option<(String, Value)> {
        let (state, routed) = ["announce", "shelve"]
            .iter()
            .find_map(|s| self.entry("route", s, run).map(|e| (*s, e)))?;
        let mut event = routed["event"].clone();
        event.as_object_mut()?.remove("id");
        let published = self.entry(state, "announced", run)?;
        let id = published["event"]["event_id"].as_str()?.to_owned();
        Some((id, event))
    }
}

/// Uninterrupted runs of every (kind, len) in `wanted`, on a store of their own, a few at
/// a time: `claij run` (exit 0, or 3 for the waits); a wait answered with `claij runs
/// resume RUN --input …`; an expiring wait resumed (`claij runs resume RUN`, no input)
/// once it has expired.
fn references(
    ws: &Workspace,
    backend: Backend,
    wanted: &BTreeSet<(Kind, u64)>,
) -> BTreeMap<(Kind, u64), Reference> {
    let store = TestStore::new(backend);
    let store = store.url();
    let id = |kind: Kind, len: u64| format!("ref-{}-{len}", kind.name());
    let wanted: Vec<(Kind, u64)> = wanted.iter().copied().collect();
    // Each run, and when it ended (its wait, if any, was made before).
    let ended = in_parallel(&wanted, REFERENCE_RUNNERS, |&(kind, len)| {
        let run = id(kind, len);
        let out = ws.output(
            &[
                "run",
                "mix.yaml",
                "--run-id",
                &run,
                "--input",
                &input(kind, len),
                "--quiet",
            ],
            store,
        );
        let waits = matches!(kind, Kind::Ask | Kind::Expire);
        assert_eq!(
            out.status.code(),
            Some(if waits { 3 } else { 0 }),
            "reference run {run}: {out:?}"
        );
        if kind == Kind::Ask {
            let out = ws.output(
                &["runs", "resume", &run, "--input", &answer(len), "--quiet"],
                store,
            );
            stdout_of(&format!("claij runs resume {run}"), &out).unwrap();
        }
        Instant::now()
    });
    let expiring: Vec<(Kind, u64)> = wanted
        .iter()
        .copied()
        .filter(|(k, _)| *k == Kind::Expire)
        .collect();
    let last_expiring = wanted
        .iter()
        .zip(&ended)
        .filter(|((k, _), _)| *k == Kind::Expire)
        .map(|(_, at)| *at)
        .max();
    if let Some(at) = last_expiring {
        // `expires: 2s` from the wait's creation; a little more for the clock's rounding.
        std::thread::sleep(
            (at + Duration::from_millis(2300)).saturating_duration_since(Instant::now()),
        );
        in_parallel(&expiring, REFERENCE_RUNNERS, |&(kind, len)| {
            let run = id(kind, len);
            let out = ws.output(&["runs", "resume", &run, "--quiet"], store);
            stdout_of(&format!("claij runs resume {run}"), &out).unwrap();
        });
    }
    let records = list_runs(ws, store, None);
    for (run, record) in &records {
        assert_eq!(record["status"], "completed", "reference {run}: {record}");
    }
    let ids: Vec<String> = records.keys().cloned().collect();
    let trails = stored_trails(ws, store, &ids);
    wanted
        .iter()
        .map(|&(kind, len)| {
            let run = id(kind, len);
            let trail = trails[&run].as_ref().unwrap();
            let children = records
                .values()
                .filter(|r| r["parent"] == run.as_str())
                .map(|r| {
                    let child = r["id"].as_str().unwrap();
                    let suffix = child.strip_prefix(&run).unwrap().to_owned();
                    let trail = trails[child].as_ref().unwrap();
                    (suffix, normalized(child, trail))
                })
                .collect::<BTreeMap<_, _>>();
            let expected_children = if kind == Kind::Fork {
                (len % 2 + 2) as usize
            } else {
                0
            };
            assert_eq!(
                children.len(),
                expected_children,
                "reference {run}: {children:#?}"
            );
            let reference = Reference {
                trail: normalized(&run, trail),
                children,
            };
            if kind == Kind::Publish {
                assert!(
                    reference.published("RUN").is_some(),
                    "reference {run} publishes nothing: {:#?}",
                    reference.trail
                );
            }
            ((kind, len), reference)
        })
        .collect()
}

/// Submits `group`: those submitted once in one process, whose stdout must be their ids,
/// one a line; then each of those submitted twice alone, `claij run mix.yaml --submit
/// --run-id ID --idempotency-key key-ID`, which must print the id, and again under the
/// same key (another run id), which must print the first id. Adds to `done` the runs
/// submitted.
fn submit(ws: &Workspace, store: &str, group: &Group, done: &AtomicUsize, problems: &Problems) {
    let once: Vec<&Planned> = group.runs.iter().filter(|p| !p.twice).collect();
    if !once.is_empty() {
        let file = format!("{}.jsonl", group.prefix);
        let lines: String = once
            .iter()
            .map(|p| format!("{}\n", input(p.kind, p.len)))
            .collect();
        fs::write(ws.path().join(&file), lines).unwrap();
        let out = ws.output(
            &[
                "run",
                "mix.yaml",
                "--submit",
                "--inputs",
                &file,
                "--run-id",
                &group.prefix,
                "--quiet",
            ],
            store,
        );
        let want: Vec<&str> = once.iter().map(|p| p.id.as_str()).collect();
        match stdout_of(&format!("claij run --submit --inputs {file}"), &out) {
            Ok(printed) if printed.lines().collect::<Vec<_>>() == want => {}
            Ok(printed) => problems.push(format!(
                "submitting {file} printed\n{printed}not the ids {want:?}"
            )),
            Err(problem) => problems.push(problem),
        }
        done.fetch_add(once.len(), Ordering::SeqCst);
    }
    for run in group.runs.iter().filter(|p| p.twice) {
        let key = format!("key-{}", run.id);
        for id in [run.id.clone(), format!("{}-again", run.id)] {
            let out = ws.output(
                &[
                    "run",
                    "mix.yaml",
                    "--submit",
                    "--run-id",
                    &id,
                    "--idempotency-key",
                    &key,
                    "--input",
                    &input(run.kind, run.len),
                    "--quiet",
                ],
                store,
            );
            match stdout_of(&format!("claij run --submit --run-id {id}"), &out) {
                Ok(printed) if printed.trim() == run.id => {}
                Ok(printed) => problems.push(format!(
                    "submitting {id} under key {key} printed `{}`, not {}",
                    printed.trim(),
                    run.id
                )),
                Err(problem) => problems.push(problem),
            }
        }
        done.fetch_add(1, Ordering::SeqCst);
    }
}

/// Until `stop`: the runs suspended in `ask` are answered (`claij runs resume RUN --input
/// … --submit`, [`ANSWERERS`] processes at a time) as they appear, each once. Returns how
/// many times each run was answered.
fn answer_waits(
    ws: &Workspace,
    store: &str,
    plan: &BTreeMap<String, Planned>,
    stop: &AtomicBool,
    problems: &Problems,
) -> BTreeMap<String, usize> {
    let mut answered: BTreeMap<String, usize> = BTreeMap::new();
    while !stop.load(Ordering::SeqCst) {
        let mut waiting: Vec<&Planned> = Vec::new();
        for (id, record) in list_runs(ws, store, Some("suspended")) {
            if !record["parent"].is_null() {
                problems.push(format!("a branch suspended: {record}"));
                continue;
            }
            let Some(planned) = plan.get(&id) else {
                problems.push(format!("a run nobody submitted is suspended: {record}"));
                continue;
            };
            match (record["state"].as_str(), planned.kind) {
                (Some("ask"), Kind::Ask) => {}
                (Some("linger"), Kind::Expire) => continue,
                _ => {
                    problems.push(format!(
                        "run {id} ({:?}) suspended in the wrong place: {record}",
                        planned.kind
                    ));
                    continue;
                }
            }
            if answered.contains_key(&id) {
                // Answered but listed suspended again: the answer was lost (or the list
                // was read before the answer was recorded, which cannot be: the answer's
                // process ended before this listing began).
                problems.push(format!(
                    "run {id} waits in `ask` again after it was answered:\n{}",
                    ws.evidence(&id, store)
                ));
                *answered.get_mut(&id).unwrap() += 1;
                continue;
            }
            waiting.push(planned);
        }
        in_parallel(&waiting, ANSWERERS, |planned| {
            let id = &planned.id;
            let out = ws.output(
                &[
                    "runs",
                    "resume",
                    id,
                    "--input",
                    &answer(planned.len),
                    "--submit",
                    "--quiet",
                ],
                store,
            );
            if let Err(problem) = stdout_of(&format!("claij runs resume {id} --submit"), &out) {
                problems.push(format!("{problem}\n{}", ws.evidence(id, store)));
            }
        });
        for planned in waiting {
            *answered.entry(planned.id.clone()).or_default() += 1;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    answered
}

fn is_final(record: &Value) -> bool {
    matches!(
        record["status"].as_str(),
        Some("completed" | "failed" | "interrupted")
    )
}

/// How long after its publication an event was settled (from `claij events list
/// --json`: times in RFC 3339, to the microsecond).
fn dispatch_delay(event: &Value) -> Option<Duration> {
    let time = |t: &Value| humantime::parse_rfc3339(t.as_str()?).ok();
    time(&event["settled_at"])?
        .duration_since(time(&event["created_at"])?)
        .ok()
}

/// Whether every submitted run, every run in the store and every published event is
/// final: the runs listed, then the events (none pending), then the runs again (the same
/// ones, so that no event was dispatched after the first listing, starting runs it did not
/// show).
fn all_final(ws: &Workspace, store: &str, runs: usize) -> bool {
    let before = list_runs(ws, store, None);
    let top = before.values().filter(|r| r["parent"].is_null()).count();
    if top < runs || !before.values().all(is_final) {
        return false;
    }
    if !list_events(ws, store, Some("pending")).is_empty() {
        return false;
    }
    let after = list_runs(ws, store, None);
    after.len() == before.len() && after.values().all(is_final)
}

/// What one backend's test did.
#[derive(Debug, Default)]
struct Tally {
    kills: usize,
    /// Kills of a worker that held runs (by the store: running, its lease owner).
    kills_holding: usize,
    /// The runs those workers held.
    held_at_kills: usize,
    /// Kills that found the worker already gone (it exited by itself: a failure).
    exited_by_itself: Vec<String>,
    by_kind: BTreeMap<Kind, usize>,
    children: usize,
    twice: usize,
    answered: usize,
    expired: usize,
    /// Published events dispatched, and unmatched.
    dispatched: usize,
    unmatched: usize,
    /// Subscriber runs, by FSM.
    subscriber_runs: BTreeMap<String, usize>,
}

fn share_the_queue(
    backend: Backend,
    runs: usize,
    workers: usize,
    min_kills: usize,
    kill_delay_ms: (u64, u64),
    submitters: usize,
) {
    let began = Instant::now();
    let (mut rng, seed) = Rng::from_env("CLAIJ_WORKERS_SEED");
    eprintln!(
        "workers test on {backend}: seed {seed} (CLAIJ_WORKERS_SEED={seed} replays it): \
         {runs} runs, {workers} workers"
    );
    let ws = Workspace::new(&[
        ("mix.yaml", MIX),
        ("branch.yaml", BRANCH),
        (SUBSCRIBERS[0], JOB_LEDGER),
        (SUBSCRIBERS[1], JOB_REVIEW),
    ]);

    let plan = Plan::draw(&mut rng, runs, submitters);
    let by_id: BTreeMap<String, Planned> = plan.runs().map(|p| (p.id.clone(), p.clone())).collect();
    assert_eq!(by_id.len(), runs, "run ids are not unique");
    let wanted: BTreeSet<(Kind, u64)> = plan.runs().map(|p| (p.kind, p.len)).collect();
    let references = references(&ws, backend, &wanted);
    let referenced = began.elapsed();

    let test_store = TestStore::new(backend);
    let store = test_store.url();
    // The store's migrations, once, before the crowd.
    let listed = list_workers(&ws, store);
    assert_eq!(listed["workers"], json!([]), "{listed}");

    let problems = Problems::default();
    let submitted = AtomicUsize::new(0);
    let submit_in_parallel = |groups: &[Group]| {
        in_parallel(groups, submitters, |group| {
            submit(&ws, store, group, &submitted, &problems)
        });
    };
    // A backlog, so that the workers are busy from the start and kills land mid-run (runs
    // of transforms take milliseconds: workers kept waiting for submissions are idle most
    // of the time, and a kill would find nothing to interrupt); the rest is submitted
    // while they work.
    submit_in_parallel(&plan.backlog);
    let problems_now = problems.take();
    assert!(problems_now.is_empty(), "{}", problems_now.join("\n"));
    let backlog: usize = plan.backlog.iter().map(|g| g.runs.len()).sum();
    let backlog_submitted = began.elapsed();

    let mut worker_args = SUBSCRIBERS.to_vec();
    worker_args.extend(["--lease", "3s"]);
    let mut generation = 0;
    let mut spawn = |slot: usize| {
        generation += 1;
        ws.worker(
            store,
            &format!("worker-{slot}-{generation:03}"),
            &worker_args,
        )
    };
    let mut pool: Vec<Worker> = (0..workers).map(&mut spawn).collect();

    let stop = AtomicBool::new(false);
    let kills = AtomicUsize::new(0);
    let mut tally = Tally::default();
    let work_began = Instant::now();
    let mut submitted_at = None;
    let answered = std::thread::scope(|s| {
        s.spawn(|| {
            submit_in_parallel(&plan.meanwhile);
            while kills.load(Ordering::SeqCst) < min_kills && !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(50));
            }
            submit_in_parallel(std::slice::from_ref(&plan.last));
        });
        let answerer = s.spawn(|| answer_waits(&ws, store, &by_id, &stop, &problems));

        // Kill a worker at random points until every run is final.
        let failure = loop {
            std::thread::sleep(Duration::from_millis(
                rng.between(kill_delay_ms.0, kill_delay_ms.1),
            ));
            let problems = problems.take();
            if !problems.is_empty() {
                break Some(problems.join("\n"));
            }
            if !tally.exited_by_itself.is_empty() {
                break Some(tally.exited_by_itself.join("\n"));
            }
            if submitted.load(Ordering::SeqCst) == runs {
                let at = *submitted_at.get_or_insert_with(Instant::now);
                if all_final(&ws, store, runs) {
                    break None;
                }
                if at.elapsed() > SETTLE {
                    let unfinished: Vec<String> = list_runs(&ws, store, None)
                        .into_iter()
                        .filter(|(_, r)| !is_final(r))
                        .map(|(id, _)| id)
                        .collect();
                    let evidence: Vec<String> = unfinished
                        .iter()
                        .take(5)
                        .map(|id| ws.evidence(id, store))
                        .collect();
                    let pending = list_events(&ws, store, Some("pending"));
                    let pending_evidence: Vec<String> = pending
                        .iter()
                        .take(5)
                        .map(|(id, e)| format!("  event {e}\n  worker logs:\n{}", ws.log_lines(id)))
                        .collect();
                    break Some(format!(
                        "{} run(s) still unfinished and {} event(s) pending {SETTLE:?} after \
                         the last submission: {unfinished:?}\nworkers list: {}\n{}\n{}",
                        unfinished.len(),
                        pending.len(),
                        list_workers(&ws, store),
                        evidence.join("\n"),
                        pending_evidence.join("\n")
                    ));
                }
            }
            let slot = rng.between(0, workers as u64 - 1) as usize;
            match pool[slot].kill() {
                Ok(()) => {
                    tally.kills += 1;
                    kills.store(tally.kills, Ordering::SeqCst);
                    // What it held when it died (still held: it is restarted below).
                    let held = list_runs(&ws, store, Some("running"))
                        .values()
                        .filter(|r| held_by(r, &pool[slot]))
                        .count();
                    if held > 0 {
                        tally.kills_holding += 1;
                        tally.held_at_kills += held;
                    }
                }
                Err(status) => tally.exited_by_itself.push(format!(
                    "worker {} exited by itself ({status}); its log:\n{}",
                    pool[slot].name,
                    pool[slot].log_text()
                )),
            }
            pool[slot] = spawn(slot);
        };
        stop.store(true, Ordering::SeqCst);
        let answered = answerer.join().unwrap();
        if let Some(failure) = failure {
            panic!(
                "workers test on {backend} (seed {seed}), after {} kills: {failure}",
                tally.kills
            );
        }
        answered
    });
    let settled = work_began.elapsed();

    // Every worker stops on SIGTERM, at once (nothing is under way), exiting 0.
    for worker in &pool {
        worker.terminate();
    }
    for worker in &mut pool {
        let status = worker.exit_within(Duration::from_secs(40)).unwrap();
        assert!(
            status.success(),
            "worker {} ended with {status} after SIGTERM; its log:\n{}",
            worker.name,
            worker.log_text()
        );
    }
    let listed = list_workers(&ws, store);
    assert_eq!(
        listed["workers"],
        json!([]),
        "stopped and dead workers are still listed: {listed}"
    );
    for what in [
        "queued",
        "held",
        "timers_due",
        "timers_pending",
        "scheduled",
    ] {
        assert_eq!(listed["queue"][what], 0, "{what}: {listed}");
    }

    // Exactly the runs submitted and their branches (the subscribers' runs are checked
    // against the events below), each completed and held by no one.
    let records = list_runs(&ws, store, None);
    let subscribers = [LEDGER, REVIEW];
    let mut expected: BTreeSet<String> = BTreeSet::new();
    for p in plan.runs() {
        expected.insert(p.id.clone());
        for suffix in references[&(p.kind, p.len)].children.keys() {
            expected.insert(format!("{}{suffix}", p.id));
        }
    }
    let stored: BTreeSet<String> = records
        .iter()
        .filter(|(_, r)| !subscribers.iter().any(|s| r["fsm"] == *s))
        .map(|(id, _)| id.clone())
        .collect();
    let missing: Vec<&String> = expected.difference(&stored).collect();
    let extra: Vec<&String> = stored.difference(&expected).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "the store does not hold exactly the runs submitted and their branches: missing \
         {missing:?}, extra {extra:?}"
    );
    let mut failures: Vec<String> = Vec::new();
    for (id, record) in &records {
        if record["status"] != "completed" || !record["owner"].is_null() {
            failures.push(format!(
                "run {id} is {} (owner {})\n{}",
                record["status"],
                record["owner"],
                ws.evidence(id, store)
            ));
        }
    }

    // Each trail equals its reference's.
    let ids: Vec<String> = records.keys().cloned().collect();
    let checking = Instant::now();
    let trails = stored_trails(&ws, store, &ids);
    let trails_read = checking.elapsed();
    for p in plan.runs() {
        let reference = &references[&(p.kind, p.len)];
        *tally.by_kind.entry(p.kind).or_default() += 1;
        tally.twice += usize::from(p.twice);
        let check = |run: &str, want: &[Value]| match &trails[run] {
            Ok(trail) => compare(run, trail, want).map(|()| trail.clone()),
            Err(problem) => Err(problem.clone()),
        };
        let trail = match check(&p.id, &reference.trail) {
            Ok(trail) => trail,
            Err(problem) => {
                failures.push(format!(
                    "run {} ({:?}, len {}) ends with another trail than the reference: {problem}\n{}",
                    p.id,
                    p.kind,
                    p.len,
                    ws.evidence(&p.id, store)
                ));
                continue;
            }
        };
        for (suffix, want) in &reference.children {
            let child = format!("{}{suffix}", p.id);
            tally.children += 1;
            if let Err(problem) = check(&child, want) {
                failures.push(format!(
                    "branch {child} ends with another trail than the reference: {problem}\n{}",
                    ws.evidence(&child, store)
                ));
            }
        }
        // Spelled out, though the comparison implies them: one expiry, one answer.
        let expiries = count(&trail, "linger", None, Some("timeout"));
        let expiry_routes = count(&trail, "linger", Some("expired"), None);
        let answers = count(&trail, "ask", Some("step"), None);
        let times_answered = answered.get(&p.id).copied().unwrap_or(0);
        let (want_expiries, want_answers) = match p.kind {
            Kind::Expire => (1, 0),
            Kind::Ask => (0, 1),
            _ => (0, 0),
        };
        if (expiries, expiry_routes, answers, times_answered)
            != (want_expiries, want_expiries, want_answers, want_answers)
        {
            failures.push(format!(
                "run {} ({:?}): {expiries} expiries, {expiry_routes} `on_expiry` routes, \
                 {answers} answers taken, answered {times_answered} time(s)\n{}",
                p.id,
                p.kind,
                ws.evidence(&p.id, store)
            ));
        }
        tally.expired += expiries;
        tally.answered += times_answered;
    }

    // Each published event started each subscriber whose trigger it satisfies once.
    let events = list_events(&ws, store, None);
    check_events(
        &ws,
        store,
        &plan,
        &references,
        &events,
        &records,
        &trails,
        &mut failures,
        &mut tally,
    );
    let checked = checking.elapsed();
    let slowest_dispatch = events
        .values()
        .filter_map(|e| Some((dispatch_delay(e)?, e["id"].as_str()?)))
        .max();

    if !failures.is_empty() {
        let shown: Vec<&String> = failures.iter().take(8).collect();
        panic!(
            "workers test on {backend} (seed {seed}, {} kills): {} failure(s); the first:\n{}",
            tally.kills,
            failures.len(),
            shown
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        );
    }

    eprintln!(
        "workers test on {backend}: {} kills (every {}–{} ms) of {workers} workers, {} of \
         which holding runs ({} runs in all), over {runs} runs {:?} ({} submitted twice, {} \
         branches, {} waits answered, {} expired; {} events published: {} dispatched, {} \
         unmatched, starting {:?}; the slowest settled {:.1?} after its publication); {} reference runs made in {:.1?}; backlog of {backlog} \
         submitted {:.1?} after the start, then with the workers running: all submitted \
         after {:.1?}, every run final after {:.1?}; {} trails read in {:.1?}, checked in \
         {:.1?}; whole test {:.1?}",
        tally.kills,
        kill_delay_ms.0,
        kill_delay_ms.1,
        tally.kills_holding,
        tally.held_at_kills,
        tally.by_kind,
        tally.twice,
        tally.children,
        tally.answered,
        tally.expired,
        events.len(),
        tally.dispatched,
        tally.unmatched,
        tally.subscriber_runs,
        slowest_dispatch,
        references.len(),
        referenced,
        backlog_submitted,
        submitted_at.map(|at| at - work_began).unwrap_or_default(),
        settled,
        ids.len(),
        trails_read,
        checked,
        began.elapsed(),
    );
    assert!(
        tally.kills >= min_kills,
        "only {} kills landed before the runs were done (at least {min_kills} wanted): {tally:?}",
        tally.kills
    );
    assert!(
        tally.kills_holding >= min_kills / 5,
        "only {} kills found the worker holding runs: the test interrupted too few runs to \
         test much: {tally:?}",
        tally.kills_holding
    );
}

/// The published events against the `publish` runs (the events their references say they
/// published, their runs' ids put in), and the subscribers' runs against the events.
#[allow(clippy::too_many_arguments)]
fn check_events(
    ws: &Workspace,
    store: &str,
    plan: &Plan,
    references: &BTreeMap<(Kind, u64), Reference>,
    events: &BTreeMap<String, Value>,
    records: &BTreeMap<String, Value>,
    trails: &BTreeMap<String, Result<Vec<Value>, String>>,
    failures: &mut Vec<String>,
    tally: &mut Tally,
) {
    let evidence =
        |id: &str, event: &Value| format!("  event: {event}\n  worker logs:\n{}", ws.log_lines(id));
    // The events the `publish` runs published, by id.
    let published: BTreeMap<String, (&Planned, Value)> = plan
        .runs()
        .filter(|p| p.kind == Kind::Publish)
        .map(|p| {
            let (id, event) = references[&(p.kind, p.len)].published(&p.id).unwrap();
            (id, (p, event))
        })
        .collect();
    // The events that name each run among those they started.
    let mut started_by: BTreeMap<&str, Vec<(&str, &Value)>> = BTreeMap::new();
    for (id, (p, event)) in &published {
        let Some(listed) = events.get(id) else {
            failures.push(format!(
                "run {} published {id}, which `claij events list` does not show\n{}",
                p.id,
                ws.evidence(&p.id, store)
            ));
            continue;
        };
        let (topic, fsms) = publication(p.len);
        if listed["topic"] != topic
            || listed["run_id"] != p.id.as_str()
            || listed["event"] != *event
        {
            failures.push(format!(
                "event {id} is not what run {} published on {topic} ({event}):\n{}",
                p.id,
                evidence(id, listed)
            ));
        }
        let runs: Vec<&str> = listed["runs"]
            .as_array()
            .map(|runs| runs.iter().map(|r| r.as_str().unwrap()).collect())
            .unwrap_or_default();
        for run in &runs {
            started_by.entry(run).or_default().push((id, event));
        }
        let note = listed["note"].as_str().unwrap_or_default();
        match (listed["status"].as_str(), fsms) {
            (Some("dispatched"), [_, ..]) => {
                let mut started: Vec<&str> = runs
                    .iter()
                    .map(|r| {
                        records
                            .get(*r)
                            .and_then(|record| record["fsm"].as_str())
                            .unwrap_or("(no such run)")
                    })
                    .collect();
                started.sort_unstable();
                if started != fsms {
                    failures.push(format!(
                        "event {id} started runs of {started:?}, not one of each of {fsms:?}:\n{}",
                        evidence(id, listed)
                    ));
                }
                tally.dispatched += 1;
            }
            (Some("unmatched"), []) => {
                if !runs.is_empty()
                    || !note.contains(&format!("{REVIEW}: "))
                    || !note.contains("urgent")
                {
                    failures.push(format!(
                        "event {id} is unmatched, but started runs or its note does not say \
                         that {REVIEW} refused it for `urgent`:\n{}",
                        evidence(id, listed)
                    ));
                }
                tally.unmatched += 1;
            }
            (status, _) => failures.push(format!(
                "event {id} (len {}) is {status:?}: it should have been {}\n{}",
                p.len,
                if fsms.is_empty() {
                    "unmatched".to_owned()
                } else {
                    format!("dispatched to {fsms:?}")
                },
                evidence(id, listed)
            )),
        }
    }
    for (id, event) in events {
        if !published.contains_key(id) {
            failures.push(format!(
                "event {id} was published by no `publish` run:\n{}",
                evidence(id, event)
            ));
        }
    }
    for (run, record) in records {
        let fsm = record["fsm"].as_str().unwrap_or_default();
        if fsm != LEDGER && fsm != REVIEW {
            continue;
        }
        *tally.subscriber_runs.entry(fsm.to_owned()).or_default() += 1;
        let event = match started_by.get(run.as_str()).map(Vec::as_slice) {
            Some([(_, event)]) => *event,
            by => {
                failures.push(format!(
                    "run {run} of {fsm} was named by {} event(s) {:?}, not one (a run started \
                     again by an event dispatched twice is named by none)\n{}",
                    by.map_or(0, <[_]>::len),
                    by.unwrap_or_default()
                        .iter()
                        .map(|(id, _)| id)
                        .collect::<Vec<_>>(),
                    ws.evidence(run, store)
                ));
                continue;
            }
        };
        let result = match trails.get(run) {
            Some(Ok(trail)) => compare(run, trail, &subscriber_trail(fsm, event)),
            Some(Err(problem)) => Err(problem.clone()),
            None => Err("its trail was not read".into()),
        };
        if let Err(problem) = result {
            failures.push(format!(
                "run {run} of {fsm} ends with another trail than its event makes: {problem}\n{}",
                ws.evidence(run, store)
            ));
        }
    }
}

#[test]
fn postgres_workers_share_the_queue_under_kills() {
    share_the_queue(
        Backend::Postgres,
        PG_RUNS,
        PG_WORKERS,
        PG_MIN_KILLS,
        (50, 400),
        2,
    );
}

#[test]
fn sqlite_workers_share_the_queue_under_kills() {
    share_the_queue(
        Backend::Sqlite,
        SQLITE_RUNS,
        SQLITE_WORKERS,
        SQLITE_MIN_KILLS,
        (30, 300),
        1,
    );
}

/// Three naps of a second each, by a program that logs the idempotency key it runs
/// under to `$CLAIJ_WORKERS_LOG_DIR/RUN.log` (the side effect) and puts it in its event.
const SLOW: &str = r##"
id: slow-naps
version: 1
states:
  - id: nap
    action: command
    config:
      argv:
        - sh
        - -c
        - |
          ev=$(cat)
          n=${ev#*\"n\":}; n=${n%%[!0-9]*}
          printf '%s\n' "$CLAIJ_IDEMPOTENCY_KEY" >> "$CLAIJ_WORKERS_LOG_DIR/$CLAIJ_RUN_ID.log"
          sleep 1
          n=$((n + 1))
          if [ "$n" -ge 3 ]; then to=done; else to=nap; fi
          printf '{"id": ["nap", "%s"], "n": %s, "key": "%s"}\n' "$to" "$n" "$CLAIJ_IDEMPOTENCY_KEY"
  - {id: done, action: end}
xitions:
  - id: [start, nap]
    schema: {type: object, required: [n], properties: {n: {const: 0}}}
  - id: [nap, nap]
    schema: {type: object, required: [n, key], properties: {n: {type: integer}}}
  - id: [nap, done]
    schema: {type: object, required: [n, key], properties: {n: {const: 3}}}
"##;

/// The input of every [`SLOW`] run.
const SLOW_INPUT: &str = r#"{"n": 0}"#;

/// Submits `n` runs of [`SLOW`] named `PREFIX-i`.
fn submit_slow(ws: &Workspace, store: &str, prefix: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let id = format!("{prefix}-{i}");
            let out = ws.output(
                &[
                    "run",
                    "slow.yaml",
                    "--submit",
                    "--run-id",
                    &id,
                    "--input",
                    SLOW_INPUT,
                    "--quiet",
                ],
                store,
            );
            assert_eq!(stdout_of("claij run --submit", &out).unwrap().trim(), id);
            id
        })
        .collect()
}

/// Checks the finished runs' trails against the reference, and their side effects: every
/// nap of the trail ran, under its own key, and nothing ran under a key the trail lacks.
/// Returns how many naps ran again under a key already used (the handed-back ones).
fn check_slow_runs(ws: &Workspace, store: &str, runs: &[String], reference: &[Value]) -> usize {
    let mut reruns = 0;
    for run in runs {
        let trail = stored_trail(ws, store, run).unwrap();
        if let Err(problem) = compare(run, &trail, reference) {
            panic!("run {run}: {problem}\n{}", ws.evidence(run, store));
        }
        let logged: Vec<String> = fs::read_to_string(ws.logs.join(format!("{run}.log")))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect();
        let distinct: BTreeSet<&String> = logged.iter().collect();
        let in_trail: BTreeSet<String> = attempts(&trail)
            .into_iter()
            .filter(|(_, e)| e["from"] == "nap")
            .map(|(key_seq, _)| format!("{run}:{key_seq}"))
            .collect();
        assert_eq!(
            distinct,
            in_trail.iter().collect(),
            "run {run}: the keys the naps ran under are not those of the trail's naps"
        );
        reruns += logged.len() - distinct.len();
    }
    reruns
}

fn sigterm_drains(backend: Backend) {
    let began = Instant::now();
    let ws = Workspace::new(&[("slow.yaml", SLOW)]);

    // The reference: one uninterrupted run.
    let reference_store = TestStore::new(backend);
    let out = ws.output(
        &[
            "run",
            "slow.yaml",
            "--run-id",
            "ref-slow",
            "--input",
            SLOW_INPUT,
            "--quiet",
        ],
        reference_store.url(),
    );
    stdout_of("claij run slow.yaml", &out).unwrap();
    let reference_trail = stored_trail(&ws, reference_store.url(), "ref-slow").unwrap();
    assert_eq!(reference_trail.len(), 4, "{reference_trail:#?}");
    let reference = normalized("ref-slow", &reference_trail);

    // A short grace: the runs under way are handed back, then finished by another worker.
    let short = TestStore::new(backend);
    let store = short.url();
    let runs = submit_slow(&ws, store, "short", 6);
    let mut first = ws.worker(
        store,
        "short-grace",
        &[
            "--concurrency",
            "64",
            "--grace",
            "300ms",
            "--lease",
            "3s",
            "--poll",
            "200ms",
        ],
    );
    wait_for(
        &ws,
        store,
        Duration::from_secs(60),
        "every run held by the worker",
        |r| runs.iter().all(|id| held_by(&r[id], &first)),
    );
    first.terminate();
    let status = first
        .exit_within(Duration::from_millis(300) + Duration::from_secs(10))
        .unwrap();
    let log = first.log_text();
    assert!(
        status.success(),
        "the worker ended with {status} after SIGTERM:\n{log}"
    );
    let (claimed, driven, handed_back) = stop_report(&log);
    let records = list_runs(&ws, store, None);
    let unfinished: Vec<&Value> = records
        .values()
        .filter(|r| r["status"] != "completed")
        .collect();
    for record in &unfinished {
        assert_eq!(record["status"], "running", "{record}");
        assert!(
            record["owner"].is_null(),
            "a run is still held after its worker stopped: {record}"
        );
    }
    assert_eq!(claimed, runs.len() as u64, "{log}");
    assert!(
        handed_back >= 1,
        "a grace of 300 ms let runs of 3 s finish:\n{log}"
    );
    assert_eq!(unfinished.len() as u64, handed_back, "{log}\n{records:#?}");
    let listed = list_workers(&ws, store);
    assert_eq!(
        listed["workers"],
        json!([]),
        "the stopped worker is still listed: {listed}"
    );
    assert_eq!(listed["queue"]["queued"], handed_back, "{listed}");

    let mut second = ws.worker(
        store,
        "short-grace-next",
        &["--lease", "3s", "--poll", "200ms"],
    );
    wait_completed(&ws, store, &runs);
    second.terminate();
    let status = second.exit_within(Duration::from_secs(40)).unwrap();
    assert!(status.success(), "{status}: {}", second.log_text());
    let short_reruns = check_slow_runs(&ws, store, &runs, &reference);
    eprintln!(
        "sigterm on {backend}, grace 300ms: {claimed} claimed, {driven} driven, {handed_back} \
         handed back; {short_reruns} nap(s) ran again under their key"
    );

    // A long grace: the runs under way finish; nothing more is claimed meanwhile.
    let long = TestStore::new(backend);
    let store = long.url();
    let runs = submit_slow(&ws, store, "long", 8);
    let mut first = ws.worker(
        store,
        "long-grace",
        &[
            "--concurrency",
            "4",
            "--grace",
            "30s",
            "--lease",
            "3s",
            "--poll",
            "200ms",
        ],
    );
    let records = wait_for(
        &ws,
        store,
        Duration::from_secs(60),
        "four runs held by the worker",
        |r| r.values().filter(|record| held_by(record, &first)).count() == 4,
    );
    let held: BTreeSet<&String> = records
        .iter()
        .filter(|(_, record)| held_by(record, &first))
        .map(|(id, _)| id)
        .collect();
    first.terminate();
    let status = first.exit_within(Duration::from_secs(30 + 10)).unwrap();
    let log = first.log_text();
    assert!(
        status.success(),
        "the worker ended with {status} after SIGTERM:\n{log}"
    );
    assert_eq!(stop_report(&log), (4, 4, 0), "{log}");
    let records = list_runs(&ws, store, None);
    for (id, record) in &records {
        if held.contains(id) {
            assert_eq!(
                record["status"], "completed",
                "a run under way at SIGTERM: {record}"
            );
        } else {
            // Untouched since its submission: still queued, its first entry only.
            assert_eq!(record["status"], "running", "{record}");
            assert!(record["owner"].is_null(), "{record}");
            assert_eq!(
                record["steps"], 1,
                "a run was claimed after SIGTERM: {record}"
            );
        }
    }
    let listed = list_workers(&ws, store);
    assert_eq!(
        listed["workers"],
        json!([]),
        "the stopped worker is still listed: {listed}"
    );
    assert_eq!(listed["queue"]["queued"], 4, "{listed}");
    let mut second = ws.worker(
        store,
        "long-grace-next",
        &["--lease", "3s", "--poll", "200ms"],
    );
    wait_completed(&ws, store, &runs);
    second.terminate();
    let status = second.exit_within(Duration::from_secs(40)).unwrap();
    assert!(status.success(), "{status}: {}", second.log_text());
    let long_reruns = check_slow_runs(&ws, store, &runs, &reference);
    assert_eq!(long_reruns, 0, "no nap was cut off, none should run twice");
    eprintln!(
        "sigterm on {backend}: both graces checked in {:.1?}",
        began.elapsed()
    );
}

#[test]
fn sqlite_sigterm_drains_with_nothing_lost() {
    sigterm_drains(Backend::Sqlite);
}

#[test]
fn postgres_sigterm_drains_with_nothing_lost() {
    sigterm_drains(Backend::Postgres);
}

/// The comparison itself: run ids are made neutral, times do not count, and an entry
/// lost, repeated or changed is caught.
#[test]
fn the_comparison_catches_lost_duplicated_and_changed_entries() {
    let entry = |run: &str, seq: u64, to: &str| {
        json!({"seq": seq, "fsm": "f", "version": 1, "from": "a", "to": to,
               "event": {"id": ["a", to], "run": run, "child": format!("{run}.{seq}.0"),
                         "key": format!("{run}:{seq}")},
               "attempt": 1, "at": format!("2026-01-01T00:00:0{seq}Z"), "duration_ms": seq})
    };
    let trail = |run: &str| vec![entry(run, 0, "b"), entry(run, 1, "c"), entry(run, 2, "d")];
    let reference = normalized("ref-x", &trail("ref-x"));
    let good = trail("w-1");
    assert_eq!(compare("w-1", &good, &reference), Ok(()));
    let mut retimed = good.clone();
    retimed[1]["at"] = json!("2030-01-01T00:00:00Z");
    retimed[1]["duration_ms"] = json!(999);
    assert_eq!(
        compare("w-1", &retimed, &reference),
        Ok(()),
        "times do not count"
    );

    let foreign = trail("w-2");
    let lost = vec![good[0].clone(), good[2].clone()];
    let duplicated = vec![good[0].clone(), good[1].clone(), good[1].clone()];
    let short = good[..2].to_vec();
    let mut longer = good.clone();
    longer.push(entry("w-1", 3, "e"));
    let mut changed = good.clone();
    changed[2]["attempt"] = json!(2);
    let mut failed = good.clone();
    failed[1]["failure"] = json!({"kind": "timeout", "message": "m", "attempt": 1});
    for (name, run, trail) in [
        ("another run's", "w-1", foreign),
        ("lost", "w-1", lost),
        ("duplicated", "w-1", duplicated),
        ("missing last", "w-1", short),
        ("extra", "w-1", longer),
        ("changed", "w-1", changed),
        ("failed", "w-1", failed),
    ] {
        assert!(
            compare(run, &trail, &reference).is_err(),
            "a {name} entry went unnoticed"
        );
    }
    let expiry = json!({"from": "linger", "to": null, "failure": {"kind": "timeout"}});
    let route = json!({"from": "linger", "to": "expired"});
    let twice = [expiry.clone(), route.clone(), expiry];
    assert_eq!(count(&twice, "linger", None, Some("timeout")), 2);
    assert_eq!(count(&twice, "linger", Some("expired"), None), 1);
}

/// The event checks themselves: an event lost, left pending, changed, dispatched to the
/// wrong subscribers or to one twice, unmatched without its reason or with runs, one
/// nobody published; a subscriber run no event names, or whose trail is not its event's
/// — each is caught.
#[test]
fn the_event_checks_catch_lost_pending_misrouted_and_duplicated_dispatches() {
    type Runs = BTreeMap<String, Value>;
    type Trails = BTreeMap<String, Result<Vec<Value>, String>>;
    type Change<'a> = Box<dyn Fn(&mut Runs, &mut Runs, &mut Trails) + 'a>;
    /// A run of the subscriber `fsm` named `run`, started by `event`, as listed and with
    /// the trail it should have.
    fn started(records: &mut Runs, trails: &mut Trails, fsm: &str, run: &str, event: &Value) {
        records.insert(run.into(), json!({"id": run, "fsm": fsm}));
        let trail = json!(subscriber_trail(fsm, event))
            .to_string()
            .replace("\"RUN\"", &format!("\"{run}\""));
        trails.insert(run.into(), Ok(serde_json::from_str(&trail).unwrap()));
    }

    let ws = Workspace::new(&[]);
    let lens = [11, 12, 14];
    // A `publish` run's reference: the entry into the publishing state, the one out.
    let reference = |len: u64| {
        let (topic, state) = match len {
            11 => ("mix.shelved", "shelve"),
            _ => ("mix.jobs", "announce"),
        };
        let mut event =
            json!({"id": ["route", state], "acc": len * 31 + 7, "len": len, "by": "RUN"});
        if len == 11 {
            event["urgent"] = json!(false);
        }
        Reference {
            trail: vec![
                json!({"seq": 2, "from": "route", "to": state, "event": event}),
                json!({"seq": 3, "from": state, "to": "announced",
                       "event": {"id": [state, "announced"], "topic": topic, "event_id": "RUN:3"}}),
            ],
            children: BTreeMap::new(),
        }
    };
    let references: BTreeMap<(Kind, u64), Reference> = lens
        .iter()
        .map(|&len| ((Kind::Publish, len), reference(len)))
        .collect();
    let plan = Plan {
        backlog: Vec::new(),
        meanwhile: Vec::new(),
        last: Group {
            prefix: "p".into(),
            runs: lens
                .iter()
                .map(|&len| Planned {
                    id: format!("p-{len}"),
                    kind: Kind::Publish,
                    len,
                    twice: false,
                })
                .collect(),
        },
    };

    // What the store holds when all went well.
    let mut events = Runs::new();
    let mut records = Runs::new();
    let mut trails = Trails::new();
    let mut published = BTreeMap::new();
    for &len in &lens {
        let (id, event) = references[&(Kind::Publish, len)]
            .published(&format!("p-{len}"))
            .unwrap();
        let (topic, fsms) = publication(len);
        let runs: Vec<String> = fsms.iter().map(|f| format!("{f}-{len}")).collect();
        for (fsm, run) in fsms.iter().zip(&runs) {
            started(&mut records, &mut trails, fsm, run, &event);
        }
        let mut listed = json!({"id": id, "topic": topic, "event": event,
                                "run_id": format!("p-{len}"), "status": "dispatched", "runs": runs});
        if fsms.is_empty() {
            listed["status"] = json!("unmatched");
            listed["note"] = json!(
                "job-review: at /urgent: true was expected (schema /properties/urgent/const)"
            );
            listed.as_object_mut().unwrap().remove("runs");
        }
        events.insert(id.clone(), listed);
        published.insert(len, (id, event));
    }
    let failures_of = |events: &Runs, records: &Runs, trails: &Trails| {
        let mut failures = Vec::new();
        check_events(
            &ws,
            "memory",
            &plan,
            &references,
            events,
            records,
            trails,
            &mut failures,
            &mut Tally::default(),
        );
        failures
    };
    assert_eq!(
        failures_of(&events, &records, &trails),
        Vec::<String>::new()
    );

    let ((e11, event11), (e12, event12), (e14, event14)) =
        (&published[&11], &published[&12], &published[&14]);
    let changes: Vec<(&str, Change)> = vec![
        (
            "a lost event",
            Box::new(|e, _, _| {
                e.remove(e12);
            }),
        ),
        (
            "a pending event",
            Box::new(|e, _, _| {
                e.get_mut(e14).unwrap()["status"] = json!("pending");
            }),
        ),
        (
            "a changed event",
            Box::new(|e, _, _| {
                e.get_mut(e12).unwrap()["event"]["acc"] = json!(1);
            }),
        ),
        (
            "an event on another topic",
            Box::new(|e, _, _| {
                e.get_mut(e12).unwrap()["topic"] = json!("mix.shelved");
            }),
        ),
        (
            "an event of another publisher",
            Box::new(|e, _, _| {
                e.get_mut(e12).unwrap()["run_id"] = json!("p-14");
            }),
        ),
        (
            "an event nobody published",
            Box::new(|e, _, _| {
                e.insert("x:1".into(), json!({"id": "x:1", "status": "dispatched"}));
            }),
        ),
        (
            "a matching event left unmatched",
            Box::new(|e, _, _| {
                e.get_mut(e12).unwrap()["status"] = json!("unmatched");
            }),
        ),
        (
            "a subscriber left out",
            Box::new(|e, _, _| {
                e.get_mut(e14).unwrap()["runs"] = json!(["job-ledger-14"]);
            }),
        ),
        (
            "a subscriber started whose trigger refused",
            Box::new(|e, r, t| {
                started(r, t, REVIEW, "job-review-12", event12);
                e.get_mut(e12).unwrap()["runs"] = json!(["job-ledger-12", "job-review-12"]);
            }),
        ),
        (
            "a subscriber started twice by one event",
            Box::new(|e, r, t| {
                started(r, t, LEDGER, "job-ledger-14b", event14);
                e.get_mut(e14).unwrap()["runs"] =
                    json!(["job-ledger-14", "job-ledger-14b", "job-review-14"]);
            }),
        ),
        (
            "a subscriber run no event names",
            Box::new(|_, r, t| {
                started(r, t, LEDGER, "job-ledger-14b", event14);
            }),
        ),
        (
            "a run two events name",
            Box::new(|e, _, _| {
                e.get_mut(e14).unwrap()["runs"] = json!(["job-ledger-12", "job-review-14"]);
            }),
        ),
        (
            "a run named that is not stored",
            Box::new(|e, _, _| {
                e.get_mut(e12).unwrap()["runs"] = json!(["ghost"]);
            }),
        ),
        (
            "a subscriber trail with an entry lost",
            Box::new(|_, _, t| {
                t.get_mut("job-ledger-12")
                    .unwrap()
                    .as_mut()
                    .unwrap()
                    .remove(1);
            }),
        ),
        (
            "a subscriber trail with another input",
            Box::new(|_, _, t| {
                t.get_mut("job-review-14").unwrap().as_mut().unwrap()[0]["event"]["len"] =
                    json!(15);
            }),
        ),
        (
            "an unmatched event with no reason",
            Box::new(|e, _, _| {
                e.get_mut(e11)
                    .unwrap()
                    .as_object_mut()
                    .unwrap()
                    .remove("note");
            }),
        ),
        (
            "an unmatched event that started a run",
            Box::new(|e, r, t| {
                started(r, t, REVIEW, "job-review-11", event11);
                e.get_mut(e11).unwrap()["runs"] = json!(["job-review-11"]);
            }),
        ),
    ];
    for (name, change) in changes {
        let (mut e, mut r, mut t) = (events.clone(), records.clone(), trails.clone());
        change(&mut e, &mut r, &mut t);
        assert!(!failures_of(&e, &r, &t).is_empty(), "{name} went unnoticed");
    }
}
