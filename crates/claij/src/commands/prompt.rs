//! `claij prompt`: the exact messages a model gets in an `llm` state, with token counts.

use std::time::SystemTime;

use anyhow::{Context, bail};
use claij_core::prompts::{Message, PromptOptions, Prompting, project};
use claij_core::{Fsm, TrailEntry};
use claij_engine::Engine;
use claij_llm::action::{DEFAULT_MAX_TOOL_ROUNDS, LlmStateConfig, prompt_budget};
use claij_llm::tokens::{count_for, fit};
use claij_llm::{LlmLayer, Mode, ResolvedModel};
use serde_json::Value;

mod seed_projection;

use super::load;
use crate::app::App;
use crate::cli::{ProjectionKind, PromptArgs};
use crate::{EXIT_OK, EXIT_USAGE, input};
use seed_projection::seed_style;

/// Runs `claij prompt`: the engine reads the document; `layer` (the model configuration,
/// the run's model, the embedded default) says which model a state uses, so the request
/// is shown as that model reads it and counted by its own tokenizer where known.
pub(super) async fn prompt(
    app: &App,
    engine: &Engine,
    layer: &LlmLayer,
    args: &PromptArgs,
) -> anyhow::Result<u8> {
    let mut fsm = match load(engine.registry(), &args.file) {
        Ok(fsm) => fsm,
        Err(d) => {
            note!("claij: {d}");
            return Ok(EXIT_USAGE);
        }
    };
    // The servers the document declares, started so that their tools' schemas show as
    // the model reads them (without them, a placeholder names each dynamic schema).
    if let Err(e) = app.mcp().connect(&fsm).await {
        note!("claij: {e} (its schemas are shown as placeholders)");
    }
    if args.inline_schemas {
        inline_shared_schemas(&mut fsm);
    }
    let opts = PromptOptions {
        dynamic: Some(engine.registry()),
        constrained: false,
        max_tool_rounds: None,
        prompting: Prompting::Claij,
    };
    // The model and mode a state's first attempt uses (None: no model configured, and
    // the request is shown as a model without a grammar reads it).
    let choice = |state: &str| {
        fsm.state(state)
            .and_then(|s| claij_llm::action::first_choice(layer, &s.config).ok())
    };
    let rounds = |state: &str| {
        state_config(&fsm, state)
            .max_tool_rounds
            .unwrap_or(DEFAULT_MAX_TOOL_ROUNDS) as usize
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
        // Each step as it was asked: by the model and in the mode its entry records
        // (--enforce overrides the mode), else as the state's first attempt would be.
        let step_of = |i: usize| {
            let entry = &trail[i];
            let chosen = choice(&entry.from);
            let model = entry
                .model
                .as_deref()
                .and_then(|m| layer.resolve(m).ok())
                .or_else(|| chosen.as_ref().map(|(m, _)| m.clone()));
            let recorded = entry
                .enforce
                .as_deref()
                .and_then(|m| m.parse::<Mode>().ok());
            let mode = args
                .enforce
                .or(recorded)
                .or_else(|| chosen.as_ref().map(|(_, m)| *m));
            let opts = PromptOptions {
                constrained: mode.is_some_and(Mode::writes_shape),
                max_tool_rounds: Some(rounds(&entry.from)),
                ..opts
            };
            (opts, model)
        };
        if let Some(n) = args.step {
            let Some(&i) = n.checked_sub(1).and_then(|k| steps.get(k)) else {
                bail!(
                    "the trail has {} model step(s), not a step {n}",
                    steps.len()
                );
            };
            let (opts, model) = step_of(i);
            let (earlier, state) = (&trail[..i], &trail[i].from);
            let messages =
                messages_for(args, engine, &fsm, earlier, state, &opts, model.as_ref()).await;
            print_messages(&messages, model.as_ref()).await?;
            return Ok(EXIT_OK);
        }
        out!("step  seq  state                 messages  prompt tokens")?;
        let mut sum = 0;
        let mut tokenizers = std::collections::BTreeSet::new();
        for (step, &i) in steps.iter().enumerate() {
            let (opts, model) = step_of(i);
            let (earlier, state) = (&trail[..i], &trail[i].from);
            let messages =
                messages_for(args, engine, &fsm, earlier, state, &opts, model.as_ref()).await;
            let counted = count_for(model.as_ref(), &messages).await;
            sum += counted.total;
            tokenizers.insert(counted.tokenizer);
            out!(
                "{:>4}  {:>3}  {:<20}  {:>8}  {:>13}",
                step + 1,
                trail[i].seq,
                trail[i].from,
                messages.len(),
                counted.total
            )?;
        }
        let by = tokenizers.into_iter().collect::<Vec<_>>().join("; ");
        let by = if by.is_empty() {
            by
        } else {
            format!(" ({by})")
        };
        out!(
            "total prompt tokens over {} model step(s): {sum}{by}",
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
    let chosen = choice(&state);
    let mode = args.enforce.or_else(|| chosen.as_ref().map(|(_, m)| *m));
    let opts = PromptOptions {
        constrained: mode.is_some_and(Mode::writes_shape),
        max_tool_rounds: Some(rounds(&state)),
        ..opts
    };
    let model = chosen.as_ref().map(|(m, _)| m);
    let earlier = std::slice::from_ref(&entry);
    let messages = messages_for(args, engine, &fsm, earlier, &state, &opts, model).await;
    print_messages(&messages, model).await?;
    Ok(EXIT_OK)
}

/// The messages of the projection asked for: claij's (fitted to the state's
/// `max_prompt_tokens`, as the llm action fits them), the plain baseline's (`claij eval
/// --baseline plain`) or the seed-style one.
async fn messages_for(
    args: &PromptArgs,
    engine: &Engine,
    fsm: &Fsm,
    earlier: &[TrailEntry],
    state: &str,
    opts: &PromptOptions<'_>,
    model: Option<&ResolvedModel>,
) -> Vec<Message> {
    match args.projection {
        ProjectionKind::Seed => seed_style(fsm, earlier, state, engine.registry()),
        ProjectionKind::Claij | ProjectionKind::Plain => {
            let opts = PromptOptions {
                prompting: if args.projection == ProjectionKind::Plain {
                    Prompting::Plain
                } else {
                    Prompting::Claij
                },
                ..*opts
            };
            let opts = &opts;
            let config = state_config(fsm, state);
            let budget = match model {
                Some(model) => prompt_budget(&config, model),
                None => config.max_prompt_tokens,
            };
            fit(project(fsm, earlier, state, opts), budget, model).await
        }
    }
}

/// `state`'s `llm` config (the defaults when it has none, or is not an `llm` state).
fn state_config(fsm: &Fsm, state: &str) -> LlmStateConfig {
    fsm.state(state)
        .and_then(|s| serde_json::from_value(s.config.clone()).ok())
        .unwrap_or_default()
}

/// Prints each message with its role and token count, then the total and what counted.
async fn print_messages(messages: &[Message], model: Option<&ResolvedModel>) -> anyhow::Result<()> {
    let counted = count_for(model, messages).await;
    for (m, n) in messages.iter().zip(&counted.per_message) {
        out!("── {} ({n} tokens) ──\n{}\n", m.role, m.content)?;
    }
    out!(
        "total: {} tokens in {} message(s) ({})",
        counted.total,
        messages.len(),
        counted.tokenizer
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
        summary: None,
        votes: None,
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
