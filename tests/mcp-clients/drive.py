"""Drives `claij mcp serve` with the official Python MCP SDK (mcp==2.3.0) as a real client.

Usage:
  drive.py PHASE --stdio CMD [ARGS...]     # the SDK starts the server as a child process
  drive.py PHASE --http URL                # a running server's streamable HTTP endpoint

Options before the transport: --state-file PATH (the bot's workflow_state.json),
--run-file PATH (where fsm1 writes the run id and fsm2 reads it).

Phases (each asserts what it sees; exit 0 only when every check passed):
  bot1  the bot's prompt listed and got; tools list; continue (a self-completing action, then the next); close; jump to a
        behavior; an action that runs an FSM (and one refused); run an action directly;
        close across a behavior boundary; restart.
  bot2  after the server was restarted: continue from the persisted state; a corrupt state
        is an error naming the file (never a reset); run the last action, close it: all
        behaviors complete.
  fsm1  start a run that suspends in a human state; refused inputs change nothing.
  fsm2  after the server was restarted: status, continue with a valid input, status again.
  resources  (legacy mode; serve tests/mcp-clients/ticket.yaml too; --claij and --store
        given) the FSM documents and the run template listed and read; a run read as a
        resource; subscribed: `resources/updated` when the run is continued here and when
        another process continues it (`claij runs resume`); the ticket prompt got, its
        enum argument and a run id completed; unknown resources and prompts refused.
  listen  (2026-07-28: auto mode; serve tests/mcp-clients/ticket.yaml too; --claij and
        --store given) a `subscriptions/listen` stream on two runs: an event for each when
        one is continued here and the other by another process; only claij's URIs honored;
        a run read, the template, the prompt listed and got, an argument completed.
  question1  (serve the `ask` FSM, whose MCP server asks a question) `ask_start` twice:
        each run is suspended on the server's question; their ids written to --run-file.
  question2  (a new client process, a new server process) `ask_continue`: an answer the
        requested schema refuses changes nothing; the answer completes the first run;
        "decline" (not an object) completes the second.
  held  (serve tests/mcp-clients/asker.yaml, $ASKER_LOG set) `asker_start` answers once the
        run waits on the server's question, its request held open (`held_until`);
        `asker_continue` answers it: the run completes, the tool having run once.
  cancel  (serve tests/mcp-clients/slow.yaml too; --run-file given) a run of `slow`
        cancelled by the client while its program runs: the run is interrupted and the
        program gone.
  elicit  (legacy mode; serve tests/mcp-conformance/fixtures/elicitation.yaml, the plain
        tool `test_elicitation` whose `human` state asks for a user name and an email) a
        client that takes elicitations: asked with the state's prompt and the form, its
        answer completes the run and the tool answers it; asked again, declined: the run
        waits, and `conformance-elicitation_continue` completes it.
  progress  a run started with a progress token and the log level at info: one progress
        notification per transition (1, 2, with "from → to"), an info log message for each,
        all before the result; at level warning, none of the info messages.
Prints one line per step ("ok: ...") and "PHASE passed" at the end.
"""

import argparse
import asyncio
import json
import os
import sys

from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

BOT = "story_writer"


def check(cond, what, detail=None):
    if not cond:
        raise AssertionError(f"{what}" + (f": {json.dumps(detail, default=str)[:2000]}" if detail is not None else ""))
    print(f"ok: {what}", flush=True)


async def call(client, name, args=None):
    result = await client.call_tool(name, args or {})
    text = "".join(getattr(c, "text", "") for c in result.content)
    return result, text


async def ok_json(client, name, args=None):
    result, text = await call(client, name, args)
    check(not result.is_error, f"{name} succeeds", text)
    data = result.structured_content
    check(isinstance(data, dict), f"{name} returns structured content", text)
    check(json.loads(text) == data, f"{name}: text and structured content agree")
    return data


async def error_text(client, name, args=None):
    result, text = await call(client, name, args)
    check(result.is_error, f"{name} is refused as a tool error", text)
    return text


async def bot1(client, opts):
    prompts = {p.name: p for p in (await client.list_prompts()).prompts}
    check("story_writer_new_story" in prompts, "the bot's prompt is listed", sorted(prompts))
    args = [(a.name, a.required) for a in prompts["story_writer_new_story"].arguments]
    check(args == [("subject", True)], "with its arguments", args)
    got = await client.get_prompt("story_writer_new_story", {"subject": "a lighthouse keeper"})
    text = got.messages[0].content.text
    check(text.startswith("Let's write a short story about a lighthouse keeper.\n")
          and "{{" not in text, "the prompt renders its arguments", text)
    tools = (await client.list_tools()).tools
    names = [t.name for t in tools]
    bot_tools = [n for n in names if n == BOT or n.startswith(BOT + "_")]
    check(len(bot_tools) == 3 + 4 + 4 * 5, "27 bot tools (3 + B + BxA for 4 behaviors of 5 actions)", bot_tools)
    for expected in [BOT, f"{BOT}_close_current_action", f"{BOT}_restart", f"{BOT}_shape",
                     f"{BOT}_revise", f"{BOT}_shape_gather_context", f"{BOT}_revise_final_approval"]:
        check(expected in names, f"tool {expected} is listed")
    by_name = {t.name: t for t in tools}
    check("Trigger patterns: gather context" in by_name[f"{BOT}_shape_gather_context"].description,
          "action tool descriptions carry trigger patterns", by_name[f"{BOT}_shape_gather_context"].description)
    check("Trigger patterns: shape (the )?(story|idea)" in by_name[f"{BOT}_shape"].description,
          "behavior tool descriptions carry trigger patterns")
    check(by_name[BOT].input_schema.get("type") == "object", "input schemas are objects")

    # Continue on a fresh state: the first action completes itself, the next waits.
    r = await ok_json(client, BOT)
    check((r["status"], r["behavior"], r["action"]) == ("completed", "shape", "initialize_project"),
          "continue starts at the first action, which completes itself", r)
    check(r["next"] == {"behavior": "shape", "action": "gather_context"}, "its next is gather_context", r)
    r = await ok_json(client, BOT)
    check((r["status"], r["behavior"], r["action"]) == ("in_progress", "shape", "gather_context"),
          "continue runs the current action", r)
    check("Who is the reader?" in r["instructions"], "instructions carry the guardrails' key questions")
    check("Ask, do not assume" in r["instructions"], "instructions carry the behavior's rules")
    check("Ask what the story is about" in r["instructions"], "instructions carry the instructions file")
    check(f"{BOT}_close_current_action" in r["instructions"], "instructions say how to finish")
    r = await ok_json(client, BOT)
    check(r["action"] == "gather_context", "continue again stays on the action: it completes only when closed", r)

    r = await ok_json(client, f"{BOT}_close_current_action")
    check(r["completed"] == {"behavior": "shape", "action": "gather_context"}, "close completes the current action", r)
    check(r["next"] == {"behavior": "shape", "action": "define_premise"} and not r["behavior_complete"],
          "close moves to the next action", r)
    r = await ok_json(client, f"{BOT}_shape")
    check((r["behavior"], r["action"]) == ("shape", "define_premise"), "the behavior tool runs its current action", r)
    check("# Premise" in r["instructions"], "instructions carry the action's template", r["instructions"])

    # An action that runs an FSM.
    r = await ok_json(client, f"{BOT}_draft_assemble_manuscript",
                      {"input": {"title": "Night Ferry", "author": "Ada", "chapters": ["one", "two"]}})
    run = r["fsm_run"]
    check(run["status"] == "completed" and run["result"]["title_page"] == "Night Ferry by Ada"
          and run["result"]["chapters"] == 2, "an action runs its FSM and returns the run's result", r)
    text = await error_text(client, f"{BOT}_draft_assemble_manuscript", {"input": {"author": "Ada"}})
    check("title" in text and "story-manuscript" in text, "a refused FSM input names the problem", text)

    # Jump to a behavior where nothing is done yet: its first action.
    r = await ok_json(client, f"{BOT}_characters")
    check((r["behavior"], r["action"], r["status"]) == ("characters", "list_cast", "in_progress"),
          "jumping to a behavior runs its first action", r)

    # Run an action directly, then close across the behavior boundary.
    r = await ok_json(client, f"{BOT}_shape_write_logline")
    check((r["behavior"], r["action"], r["status"]) == ("shape", "write_logline", "in_progress"),
          "running an action directly makes it current without completing it", r)
    state = json.load(open(opts.state_file))
    check(state["current_action"] == f"{BOT}.shape.write_logline"
          and state["current_behavior"] == f"{BOT}.shape", "the state file names the current action", state)
    check(not any(c["action_state"].endswith("write_logline") for c in state["completed_actions"]),
          "a direct run completes nothing", state)
    r = await ok_json(client, f"{BOT}_close_current_action")
    check(r["completed"] == {"behavior": "shape", "action": "write_logline"}
          and r["next"] == {"behavior": "characters", "action": "list_cast"} and r["behavior_complete"],
          "closing a behavior's last action moves to the next behavior's first", r)
    r = await ok_json(client, f"{BOT}_close_current_action")
    check(r["next"] == {"behavior": "characters", "action": "build_protagonist"}, "close again moves on", r)

    r = await ok_json(client, f"{BOT}_restart")
    check(r["status"] == "restarted" and r["current"] == {"behavior": "characters", "action": "build_protagonist"}
          and r["tools"] == 27, "restart reloads the folder and reports the position", r)
    print("bot1 passed", flush=True)


async def bot2(client, opts):
    r = await ok_json(client, BOT)
    check((r["behavior"], r["action"], r["status"]) == ("characters", "build_protagonist", "in_progress"),
          "after a restart of the server, continue picks up the persisted state", r)
    state = json.load(open(opts.state_file))
    check([c["action_state"] for c in state["completed_actions"]] == [
        f"{BOT}.shape.initialize_project", f"{BOT}.shape.gather_context",
        f"{BOT}.shape.write_logline", f"{BOT}.characters.list_cast"],
        "completed actions are kept with timestamps", state)
    check(all(c["timestamp"] for c in state["completed_actions"]), "every completion has a timestamp")

    # A corrupt state is an error naming the file, never a silent reset.
    saved = open(opts.state_file).read()
    with open(opts.state_file, "w") as f:
        f.write("{ not json")
    text = await error_text(client, BOT)
    check("corrupt" in text and opts.state_file in text, "a corrupt state file is named in the error", text)
    text = await error_text(client, f"{BOT}_close_current_action")
    check("corrupt" in text, "close refuses a corrupt state too", text)
    check(open(opts.state_file).read() == "{ not json", "the corrupt file is left as it was")

    # The file is read on every call: edits made while the server runs count.
    # An invalid current action falls back to the action after the last completed one.
    edited = json.loads(saved)
    edited["current_action"] = f"{BOT}.characters.no_such_action"
    with open(opts.state_file, "w") as f:
        json.dump(edited, f)
    r = await ok_json(client, BOT)
    check((r["behavior"], r["action"]) == ("characters", "build_protagonist"),
          "an invalid current action falls back to the one after the last completed", r)
    edited["current_action"] = f"{BOT}.draft.draft_middle"
    with open(opts.state_file, "w") as f:
        json.dump(edited, f)
    r = await ok_json(client, BOT)
    check((r["behavior"], r["action"]) == ("draft", "draft_middle"), "a valid current action wins", r)
    # A missing file starts at the beginning.
    os.remove(opts.state_file)
    r = await ok_json(client, BOT)
    check((r["behavior"], r["action"]) == ("shape", "initialize_project"), "a missing state starts at the beginning", r)
    with open(opts.state_file, "w") as f:
        f.write(saved)

    # The end of the workflow.
    r = await ok_json(client, f"{BOT}_revise_final_approval")
    check(r["action"] == "final_approval" and r["next"] is None, "the last action has no next")
    r = await ok_json(client, f"{BOT}_close_current_action")
    check(r["all_behaviors_complete"] and r["next"] is None, "closing the last action completes every behavior", r)
    r = await ok_json(client, BOT)
    check(r["status"] == "all_complete", "continue then says all behaviors are complete", r)
    r = await ok_json(client, f"{BOT}_close_current_action")
    check(r["status"] == "all_complete", "close then has nothing to close", r)
    print("bot2 passed", flush=True)


FSM = "human-approval"


async def fsm1(client, opts):
    tools = {t.name: t for t in (await client.list_tools()).tools}
    for verb in ("start", "continue", "status"):
        check(f"{FSM}_{verb}" in tools, f"tool {FSM}_{verb} is listed")
    schema = tools[f"{FSM}_start"].input_schema
    check(schema.get("type") == "object" and len(schema.get("oneOf", [])) == 2,
          "the start tool's schema is the union of the two entries", schema)
    text = await error_text(client, f"{FSM}_start", {"id": ["start", "summarise"], "service": "billing"})
    check("version" in text, "a start input missing a field is refused, naming it", text)
    r = await ok_json(client, f"{FSM}_start",
                      {"id": ["start", "summarise"], "service": "billing", "version": "2.4.1", "changes": 14})
    check(r["status"] == "suspended" and r["state"] == "approve", "the run suspends in the human state", r)
    check(sorted(map(tuple, r["waiting_for"])) == [("approve", "deploy"), ("approve", "rejected")],
          "it says what it waits for", r)
    run_id = r["run_id"]
    text = await error_text(client, f"{FSM}_continue", {"run_id": run_id, "input": {"id": ["approve", "deploy"]}})
    check("approver" in text, "a continue input missing a field is refused, naming it", text)
    text = await error_text(client, f"{FSM}_continue", {"run_id": run_id, "input": {"id": ["approve", "nowhere"]}})
    check("waits for" in text, "a continue input taking another transition is refused", text)
    text = await error_text(client, f"{FSM}_continue", {"run_id": "r-nope", "input": {}})
    check("r-nope" in text, "an unknown run is named", text)
    r = await ok_json(client, f"{FSM}_status", {"run_id": run_id})
    check(r["status"] == "suspended", "refused inputs changed nothing", r)
    with open(opts.run_file, "w") as f:
        f.write(run_id)
    print("fsm1 passed", flush=True)


async def fsm2(client, opts):
    run_id = open(opts.run_file).read().strip()
    r = await ok_json(client, f"{FSM}_status", {"run_id": run_id})
    check(r["status"] == "suspended" and r["schema"] is not None, "the run is still suspended after a restart", r)
    r = await ok_json(client, f"{FSM}_continue",
                      {"run_id": run_id, "input": {"id": ["approve", "deploy"], "approver": "ada"}})
    check(r["status"] == "completed" and r["state"] == "deploy" and r["result"]["approver"] == "ada",
          "continue with a valid input completes the run", r)
    r = await ok_json(client, f"{FSM}_status", {"run_id": run_id})
    hops = [(e["from"], e.get("to")) for e in r["trail"]]
    check(hops == [("start", "summarise"), ("summarise", "approve"), ("approve", "deploy")],
          "the status shows the whole trail", hops)
    text = await error_text(client, f"{FSM}_continue",
                            {"run_id": run_id, "input": {"id": ["approve", "deploy"], "approver": "bob"}})
    check("not suspended" in text, "a finished run takes no more input", text)
    print("fsm2 passed", flush=True)


async def progress(client, opts):
    notes = []

    async def on_progress(progress, total, message):
        notes.append(("progress", progress, message))

    LOG_SINK.append(lambda params: notes.append(("log", params.level, params.logger, params.data)))
    start = {"id": ["start", "summarise"], "service": "billing", "version": "2.4.1", "changes": 14}
    if opts.mode == "legacy":
        await client.set_logging_level("info")
    result = await client.call_tool(f"{FSM}_start", start, progress_callback=on_progress,
                                    meta={"io.modelcontextprotocol/logLevel": "info"})
    r = result.structured_content
    check(r["status"] == "suspended", "the run suspends", r)
    got = [(n[1], n[2]) for n in notes if n[0] == "progress"]
    check(got == [(1, "start → summarise"), (2, "summarise → approve")],
          "one progress notification per transition, before the result", notes)
    logs = [n for n in notes if n[0] == "log"]
    check(len(logs) == 2 and all(l[1] == "info" and l[2] == "claij" for l in logs),
          "an info log message from logger claij per transition", notes)
    check(logs[0][3]["run_id"] == r["run_id"] and logs[1][3]["transition"] == ["summarise", "approve"],
          "each names the run and the transition", logs)
    notes.clear()
    if opts.mode == "legacy":
        await client.set_logging_level("warning")
    result = await client.call_tool(f"{FSM}_start", start,
                                    meta={"io.modelcontextprotocol/logLevel": "warning"})
    check(result.structured_content["status"] == "suspended", "a second run suspends", result.structured_content)
    check(not notes, "at level warning, no info messages and no progress without a token", notes)
    print("progress passed", flush=True)


async def wait_for(notes, uri, seconds=15):
    for _ in range(seconds * 10):
        if uri in notes:
            return True
        await asyncio.sleep(0.1)
    return False


async def resources(client, opts):
    import subprocess
    import mcp.types as types

    listed = {r.uri: r for r in (await client.list_resources()).resources}
    check("claij://fsms/ticket" in listed and "claij://fsms/human-approval" in listed,
          "each served FSM's document is listed", sorted(listed))
    doc = json.loads((await client.read_resource("claij://fsms/ticket")).contents[0].text)
    check(doc["id"] == "ticket" and doc["states"][0]["id"] == "take", "an FSM document reads as JSON", doc)
    templates = (await client.list_resource_templates()).resource_templates
    check([t.uri_template for t in templates] == ["claij://runs/{run_id}"], "the run template is listed",
          [t.uri_template for t in templates])

    start = {"team": "billing", "text": "Charged twice"}
    here = await ok_json(client, "ticket_start", start)
    there = await ok_json(client, "ticket_start", start)
    check(here["status"] == there["status"] == "suspended", "two runs wait for a person", [here, there])
    uri_here, uri_there = (f"claij://runs/{r['run_id']}" for r in (here, there))
    run = json.loads((await client.read_resource(uri_here)).contents[0].text)
    check(run["status"] == "suspended" and [e["to"] for e in run["trail"]] == ["take"],
          "a run reads as its status and trail", run)
    listed = {r.uri for r in (await client.list_resources()).resources}
    check(uri_here in listed and uri_there in listed, "the latest runs are listed", sorted(listed))

    await client.subscribe_resource(uri_here)
    await client.subscribe_resource(uri_there)
    await ok_json(client, "ticket_continue", {"run_id": here["run_id"], "input": {"id": ["take", "taken"], "owner": "ada"}})
    check(await wait_for(UPDATED, uri_here), "continued here: resources/updated", UPDATED)
    subprocess.run([opts.claij, "runs", "resume", there["run_id"], "--store", opts.store,
                    "--input", json.dumps({"id": ["take", "taken"], "owner": "bob"})],
                   check=True, capture_output=True)
    check(await wait_for(UPDATED, uri_there), "continued by another process: resources/updated", UPDATED)
    run = json.loads((await client.read_resource(uri_there)).contents[0].text)
    check(run["status"] == "completed" and run["result"]["owner"] == "bob", "the resource shows the end", run)
    await client.unsubscribe_resource(uri_here)

    prompts = {p.name: p for p in (await client.list_prompts()).prompts}
    check("ticket" in prompts and "human-approval" not in prompts,
          "a prompt for the FSM of one entry (none for two)", sorted(prompts))
    args = {a.name: a.required for a in prompts["ticket"].arguments}
    check(args == {"team": True, "text": True, "urgent": False}, "its arguments are the entry's fields", args)
    got = await client.get_prompt("ticket", {"team": "account", "text": "Locked out", "urgent": "true"})
    text = got.messages[0].content.text
    check("ticket_start" in text and '"urgent": true' in text and '"team": "account"' in text,
          "the prompt asks for ticket_start with the typed arguments", text)
    try:
        await client.get_prompt("ticket", {"team": "account"})
        check(False, "a prompt missing a required argument is refused")
    except Exception as e:
        check("text" in str(e), "a prompt missing a required argument is refused, naming it", str(e))
    done = await client.complete(types.PromptReference(type="ref/prompt", name="ticket"),
                                 {"name": "team", "value": "b"})
    check(done.completion.values == ["billing"], "an enum argument completes", done.completion.values)
    done = await client.complete(types.PromptReference(type="ref/prompt", name="ticket"),
                                 {"name": "urgent", "value": ""})
    check(done.completion.values == ["true", "false"], "a boolean argument completes", done.completion.values)
    prefix = here["run_id"][:30]
    done = await client.complete(types.ResourceTemplateReference(type="ref/resource", uri="claij://runs/{run_id}"),
                                 {"name": "run_id", "value": prefix})
    check(here["run_id"] in done.completion.values, "a run id completes", done.completion.values)
    for uri in ("claij://runs/no-such-run", "claij://fsms/nope", "file:///etc/passwd"):
        try:
            await client.read_resource(uri)
            check(False, f"{uri} is refused")
        except Exception as e:
            check("no resource" in str(e), f"{uri} is refused, named", str(e))
    print("resources passed", flush=True)


async def listen(client, opts):
    import subprocess

    start = {"team": "technical", "text": "App crashes"}
    here = await ok_json(client, "ticket_start", start)
    there = await ok_json(client, "ticket_start", start)
    uri_here, uri_there = (f"claij://runs/{r['run_id']}" for r in (here, there))
    seen = []
    async with client.listen(resource_subscriptions=[uri_here, uri_there, "file:///etc/passwd"]) as sub:
        honored = sorted(sub.honored.resource_subscriptions or [])
        check(honored == sorted([uri_here, uri_there]), "claij's own URIs are honored, others not", honored)

        async def follow():
            async for event in sub:
                seen.append(getattr(event, "uri", None))
                if uri_here in seen and uri_there in seen:
                    return

        async with asyncio.timeout(15):
            task = asyncio.create_task(follow())
            await ok_json(client, "ticket_continue",
                          {"run_id": here["run_id"], "input": {"id": ["take", "taken"], "owner": "ada"}})
            subprocess.run([opts.claij, "runs", "resume", there["run_id"], "--store", opts.store,
                            "--input", json.dumps({"id": ["take", "taken"], "owner": "bob"})],
                           check=True, capture_output=True)
            await task
    check(uri_here in seen and uri_there in seen,
          "an event for the run continued here and for the one continued by another process", seen)
    # The rest of the resource and prompt surface, on 2026-07-28 too.
    run = json.loads((await client.read_resource(uri_there)).contents[0].text)
    check(run["status"] == "completed" and run["result"]["owner"] == "bob", "the run reads as completed", run)
    templates = (await client.list_resource_templates()).resource_templates
    check(len(templates) == 1, "the run template is listed", templates)
    prompts = [p.name for p in (await client.list_prompts()).prompts]
    check("ticket" in prompts, "the FSM's prompt is listed", prompts)
    got = await client.get_prompt("ticket", {"team": "billing", "text": "x"})
    check("ticket_start" in got.messages[0].content.text, "the prompt is got", got)
    import mcp.types as types
    done = await client.complete(types.PromptReference(type="ref/prompt", name="ticket"),
                                 {"name": "team", "value": "t"})
    check(done.completion.values == ["technical"], "an argument completes", done.completion.values)
    print("listen passed", flush=True)


async def question1(client, opts):
    r = await ok_json(client, "ask_start", {})
    check(r["status"] == "suspended" and r["question"]["server"] == "ev" and r["waiting_for"] == [],
          "the run is suspended on the server's question", r)
    check(r["schema"]["required"] == ["name"], "with the schema the server asked for", r["schema"])
    other = await ok_json(client, "ask_start", {})
    check(other["status"] == "suspended", "a second run waits too", other)
    with open(opts.run_file, "w") as f:
        f.write(r["run_id"] + "\n" + other["run_id"])
    print("question1 passed", flush=True)


async def question2(client, opts):
    run_id, other = open(opts.run_file).read().split()
    r = await ok_json(client, "ask_status", {"run_id": run_id, "trail": False})
    check(r["status"] == "suspended" and r["question"]["server"] == "ev",
          "after both restarts the run still waits for the answer", r)
    text = await error_text(client, "ask_continue", {"run_id": run_id, "input": {"name": 5}})
    check("/name" in text and "nothing changed" in text, "a refused answer changes nothing, naming the field", text)
    r = await ok_json(client, "ask_continue", {"run_id": run_id, "input": {"name": "Grace"}})
    check(r["status"] == "completed" and "Name: Grace" in r["result"]["said"],
          "the answer completes the run: the server got it", r)
    tools = {t.name: t for t in (await client.list_tools()).tools}
    check("type" not in tools["ask_continue"].input_schema["properties"]["input"],
          "ask_continue's input takes an answer that is not an object", tools["ask_continue"].input_schema)
    r = await ok_json(client, "ask_continue", {"run_id": other, "input": "decline"})
    check(r["status"] == "completed" and "declined" in r["result"]["said"],
          "a declined question: the server hears it", r)
    print("question2 passed", flush=True)


async def held(client, opts):
    r = await ok_json(client, "asker_start", {})
    check(r["status"] == "suspended" and r["question"]["server"] == "asker" and "held_until" in r,
          "asker_start answers once the run waits on the question, its request held open", r)
    done = await ok_json(client, "asker_continue", {"run_id": r["run_id"], "input": {"name": "Ada"}})
    check(done["status"] == "completed" and done["result"]["said"] == "Hello, Ada!",
          "the answer went straight back to the server's waiting request", done)
    calls = open(os.environ["ASKER_LOG"]).read().splitlines()
    check(len(calls) == 1, "the tool ran once", calls)
    print("held passed", flush=True)


# What the elicitation callback answers, in order, and what it was asked.
ELICIT_ANSWERS = []
ELICITED = []


async def on_elicit(context, params):
    from mcp import types

    ELICITED.append(params)
    action, content = ELICIT_ANSWERS.pop(0)
    return types.ElicitResult(action=action, content=content)


async def elicit(client, opts):
    ELICIT_ANSWERS.extend([("accept", {"username": "ada", "email": "ada@example.com"}), ("decline", None)])
    r = await client.call_tool("test_elicitation", {"message": "Who are you?"})
    text = r.content[0].text if r.content else ""
    check(not r.is_error and len(ELICITED) == 1, "the person was asked once, through the client", r)
    asked = ELICITED[0]
    check(asked.message == "Please provide your information.", "with the state's prompt", asked.message)
    form = asked.requested_schema
    form = form if isinstance(form, dict) else form.model_dump(by_alias=True, exclude_none=True)
    check(sorted(form["properties"]) == ["email", "username"] and sorted(form["required"]) == ["email", "username"],
          "and the transition's schema, less its id, as the form", form)
    check(text.startswith("User response: accept") and "ada@example.com" in text,
          "the answer went on through the run: the tool answers what it became", text)
    r = await ok_json(client, "test_elicitation", {"message": "Again?"})
    check(len(ELICITED) == 2 and r["status"] == "suspended" and r["waiting_for"] == [["ask", "reply"]],
          "declined: the run waits, as stored", r)
    done = await ok_json(client, "conformance-elicitation_continue", {
        "run_id": r["run_id"], "input": {"id": ["ask", "reply"], "username": "lin", "email": "lin@example.com"}})
    check(done["status"] == "completed" and "lin@example.com" in done["result"]["content"][0]["text"],
          "and is answered with ID_continue later", done)
    print("elicit passed", flush=True)


async def cancel(client, opts):
    import anyio

    pid_file = opts.run_file + ".pid"
    with anyio.move_on_after(3):
        await client.call_tool("slow_start", {"pid_file": pid_file})
        check(False, "the call was cancelled before it ended")
    check(os.path.exists(pid_file), "the program was running when the call was cancelled")
    pid = int(open(pid_file).read())
    gone = False
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            gone = True
            break
        await asyncio.sleep(0.1)
    check(gone, "the program is gone after the cancellation", pid)
    runs = (await ok_json(client, "slow_status", {}))["runs"]
    check(len(runs) == 1 and runs[0]["status"] == "interrupted", "the run is interrupted", runs)
    print("cancel passed", flush=True)


# Where resources/updated notifications go (their URIs).
UPDATED = []


async def on_message(message):
    root = getattr(message, "root", message)
    if type(root).__name__ == "ResourceUpdatedNotification":
        UPDATED.append(str(root.params.uri))


# Where log notifications go (the client takes its logging callback when it connects).
LOG_SINK = []


async def on_log(params):
    for sink in LOG_SINK:
        sink(params)


PHASES = {"bot1": bot1, "bot2": bot2, "fsm1": fsm1, "fsm2": fsm2, "progress": progress,
          "resources": resources, "cancel": cancel, "listen": listen,
          "question1": question1, "question2": question2, "held": held, "elicit": elicit}


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("phase", choices=sorted(PHASES))
    p.add_argument("--state-file")
    p.add_argument("--run-file")
    p.add_argument("--mode", default="auto", help="the SDK's connect mode: auto or legacy")
    p.add_argument("--claij", help="the claij binary (resources: to resume a run from another process)")
    p.add_argument("--store", help="the server's store (resources)")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--http")
    g.add_argument("--stdio", nargs=argparse.REMAINDER)
    opts = p.parse_args()
    if opts.http:
        server = opts.http
    else:
        server = StdioServerParameters(command=opts.stdio[0], args=opts.stdio[1:])
    # Only the elicit phase's client takes elicitations: the others see runs wait.
    elicitation = on_elicit if opts.phase == "elicit" else None
    async with Client(server, mode=opts.mode, read_timeout_seconds=60, logging_callback=on_log,
                      message_handler=on_message, elicitation_callback=elicitation) as client:
        await PHASES[opts.phase](client, opts)


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except AssertionError as e:
        print(f"FAILED: {e}", file=sys.stderr, flush=True)
        sys.exit(1)
