//! `claij prompt`: the exact messages a model gets in an `llm` state, with token counts.

use std::time::SystemTime;

use anyhow::{Context, bail};
use claij_core::prompts::{PromptOptions, trail_to_prompts};
use claij_core::{Fsm, TrailEntry};
use claij_engine::Engine;
use claij_llm::Mode;
use claij_llm::tokens::{count_tokens, total};
use serde_json::Value;

use super::load;
use crate::cli::PromptArgs;
use crate::{EXIT_OK, EXIT_USAGE, input};

/// Runs `claij prompt`.
pub(super) fn prompt(engine: &Engine, args: &PromptArgs) -> anyhow::Result<u8> {
    let mut fsm = match load(engine, &args.file) {
        Ok(fsm) => fsm,
        Err(d) => {
            note!("claij: {d}");
            return Ok(EXIT_USAGE);
        }
    };
    if args.inline_schemas {
        inline_shared_schemas(&mut fsm);
    }
    let opts = PromptOptions {
        dynamic: Some(engine.registry()),
        constrained: args.enforce.unwrap_or(Mode::Grammar) == Mode::Grammar,
    };
    if let Some(path) = &args.trail {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the trail {}", path.display()))?;
        let trail: Vec<TrailEntry> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .enumerate()
            .map(|(i, l)| {
                serde_json::from_str(l).with_context(|| {
                    format!("{} line {}: not a trail entry", path.display(), i + 1)
                })
            })
            .collect::<anyhow::Result<_>>()?;
        // Model steps: entries of `llm` states, except the engine's own `on_failure` route.
        let steps: Vec<usize> = trail
            .iter()
            .enumerate()
            .filter(|(_, entry)| {
                fsm.state(&entry.from).is_some_and(|s| {
                    &*s.action == "llm"
                        && !(entry.to.is_some() && entry.to == s.settings.on_failure)
                })
            })
            .map(|(i, _)| i)
            .collect();
        // Each step as it was asked: in the mode its entry records, unless --enforce says.
        let prompt_of = |i: usize| {
            let recorded = trail[i]
                .enforce
                .as_deref()
                .and_then(|m| m.parse::<Mode>().ok());
            let mode = args.enforce.or(recorded).unwrap_or(Mode::Grammar);
            let opts = PromptOptions {
                constrained: mode == Mode::Grammar,
                ..opts
            };
            trail_to_prompts(&fsm, &trail[..i], &trail[i].from, &opts)
        };
        if let Some(n) = args.step {
            let Some(&i) = n.checked_sub(1).and_then(|k| steps.get(k)) else {
                bail!(
                    "the trail has {} model step(s), not a step {n}",
                    steps.len()
                );
            };
            print_messages(&prompt_of(i))?;
            return Ok(EXIT_OK);
        }
        out!("step  seq  state                 messages  prompt tokens")?;
        let mut sum = 0;
        for (step, &i) in steps.iter().enumerate() {
            let messages = prompt_of(i);
            let tokens = total(&count_tokens(&messages).unwrap_or_default());
            sum += tokens;
            out!(
                "{:>4}  {:>3}  {:<20}  {:>8}  {tokens:>13}",
                step + 1,
                trail[i].seq,
                trail[i].from,
                messages.len()
            )?;
        }
        out!(
            "total prompt tokens over {} model step(s): {sum}",
            steps.len()
        )?;
        return Ok(EXIT_OK);
    }
    let event = input::json_argument("input", &args.input)?;
    let entry = entry_of(&fsm, event)?;
    let state = args
        .state
        .clone()
        .unwrap_or_else(|| entry.to.as_deref().unwrap_or_default().to_owned());
    if fsm.state(&state).is_none() {
        bail!("no state `{state}` in {}", args.file.display());
    }
    let messages = trail_to_prompts(&fsm, std::slice::from_ref(&entry), &state, &opts);
    print_messages(&messages)?;
    Ok(EXIT_OK)
}

/// Prints each message with its role and token count, then the total.
fn print_messages(messages: &[claij_core::prompts::Message]) -> anyhow::Result<()> {
    let counts = count_tokens(messages).unwrap_or_default();
    for (m, n) in messages.iter().zip(&counts) {
        out!("── {} ({n} tokens) ──\n{}\n", m.role, m.content)?;
    }
    out!(
        "total: {} tokens in {} message(s) (tiktoken o200k_base, with chat framing)",
        total(&counts),
        messages.len()
    )?;
    Ok(())
}

/// A trail entry for the input taking its entry transition (picked by its `id`, or the
/// only one).
fn entry_of(fsm: &Fsm, mut event: Value) -> anyhow::Result<TrailEntry> {
    let entries: Vec<_> = fsm.outgoing(claij_core::START).collect();
    let id = event.get("id").cloned();
    let t = match id {
        Some(id) => entries
            .iter()
            .find(|t| t.id_value == id)
            .with_context(|| format!("the input's `id` {id} is not an entry of the FSM"))?,
        None => match entries.as_slice() {
            [only] => only,
            _ => bail!("the FSM has several entries: give the input an `id`"),
        },
    };
    if let Value::Object(m) = &mut event {
        m.insert("id".into(), t.id_value.clone());
    }
    Ok(TrailEntry {
        seq: 0,
        fsm: fsm.id.clone(),
        version: fsm.version,
        from: t.from.clone(),
        to: Some(t.to.clone()),
        event,
        at: SystemTime::now(),
        attempt: 1,
        model: None,
        usage: None,
        enforce: None,
        duration_ms: None,
        failure: None,
    })
}

/// Every transition's schema with the shared schemas inlined, and no shared schemas.
fn inline_shared_schemas(fsm: &mut Fsm) {
    let defs = std::mem::take(&mut fsm.schemas);
    for t in &mut fsm.transitions {
        if let Some(effective) = &t.effective {
            t.effective = Some(claij_llm::enforce::inline_refs(effective, &defs, 0));
        }
    }
}
