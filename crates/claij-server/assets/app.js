// claij — the web page of `claij serve` (docs/SERVER.md, "The web page").
//
// Plain modern JavaScript: no framework, no build step, nothing from another origin. The
// server's content security policy forbids inline scripts and styles, so every element is
// made with the DOM API (text as text, never as HTML) and styled by class.
//
// Routes (the URL's hash):
//   #/            the runs, newest first, refreshed every 2 s, filtered by status; the
//                 FSMs served, each with a form that starts a run
//   #/runs/ID     one run: its status and state, its FSM drawn with the current state lit,
//                 its trail growing live (server-sent events read with fetch()), the form
//                 that answers it when it waits, the button that interrupts it
// Link mode (the URL's path is /hooks/SECRET: a resume link opened in a browser): no hash
// router, no token, no way to the runs; one card with the link's question (GET of the link
// as JSON) and its form, posted to the link itself (POST /hooks/SECRET?wait=10, the answer
// as the body); then a thank-you, or why the link answers nothing (404, 409, 410).
//
// The API token: when a call answers 401 the page asks for the token, keeps it in
// sessionStorage and sends it as `Authorization: Bearer …` (EventSource cannot send
// headers, so the event stream is read with fetch() and parsed here).
//
// Stable hooks (ids and data-testid) the tests use — keep them:
//   #app                            the current view
//   #token-dialog #token-input #token-submit #token-error   the token prompt
//   #toast                          transient messages
// The runs (#/):
//   #runs-view                      the view
//   #status-filter                  <select>: "" (all), running, suspended, completed, failed, interrupted
//   #runs-table                     the table; its rows: [data-testid="run-row"][data-run-id][data-status]
//   [data-testid="run-link"]        a row's link to the run
//   #runs-count #runs-empty #runs-error
//   #definitions                    the FSMs served: [data-testid="definition"][data-fsm]
//   [data-testid="start-button"]    opens the start form of an FSM (#start-form, same fields as below)
// A run (#/runs/ID):
//   #run-view                       the view ([data-run-id])
//   #run-header                     the header card
//   #run-status                     the status badge ([data-status], text: the status)
//   #run-fsm #run-state #run-id #run-trail-len
//   #live-state                     [data-state]: connecting, live, reconnecting, ended
//   #interrupt-button               shown while the run is running or suspended
//   #graph                          the FSM's graph ([data-current]: the state lit);
//                                   the lit node: #graph g.node.current
//   #graph-fallback                 the Mermaid text, when the server has no Graphviz
//   #wait-card #wait-prompt         what a waiting run asks
//   #answer-form                    the form ([data-transition]: "from->to" of the answer chosen)
//   #answer-select                  <select> of the answers (value: the answer's index)
//   #field-NAME                     the input of the answer's property NAME ([data-field=NAME])
//   #error-NAME                     the validator's messages for NAME ([data-error-for=NAME])
//   #form-error                     problems not placed at a field
//   #answer-submit                  the submit button
//   #answer-asker                   for an MCP server's question: who asks (the form then has
//                                   [data-question]: the server, no #answer-select, and
//                                   #answer-decline #answer-cancel beside #answer-submit)
//   #answer-sent                    shown once an answer was taken
//   #run-result #run-failure        a completed run's result, a failed run's last failure
//   #trail                          the trail's <tbody>: [data-testid="trail-entry"][data-seq][data-from][data-to]
//   #trail-count                    how many entries are shown (the latest 500 at most)
//   #trail-earlier                  a long run's note that its earlier entries are not shown
//   [data-testid="fork-button"]     an entry's "Fork from here" ([data-seq]: the entry): opens
//                                   #fork-form ([data-seq]) under the entry, with #fork-event
//                                   (the entry's event, to edit), #fork-submit, #fork-cancel and
//                                   #fork-error (why a fork was refused); a fork made opens the
//                                   new run (#/runs/NEW)
//   #forked-from                    in the details: the run and entry a fork came from (a link)
// The answer form, in a run's wait card and at a resume link alike:
//   #wait-prompt #wait-expires      what the wait asks, when it expires (if it does)
//   #answer-form #answer-select #field-NAME #error-NAME #form-error #answer-submit   as above
// A resume link (/hooks/SECRET):
//   #link-view                      the view ([data-state]: loading, open, answered, invalid,
//                                   used, taken, error)
//   #link-card                      the one card
//   #link-title                     "Your answer is needed"
//   #link-state                     the state that waits
//   #link-done                      the thank-you ([data-status]: the run's status after)
//   #link-run-status #link-run-next the run's status badge, and what it does now
//   #link-message                   why the link answers nothing ([data-reason]: invalid,
//                                   used, taken, error); #link-message-title its words
//   #link-retry                     tries again after an error

"use strict";

// ---------------------------------------------------------------------------------------
// Small helpers.

const TOKEN_KEY = "claij.token";
const FILTER_KEY = "claij.status-filter";
const STATUSES = ["running", "suspended", "completed", "failed", "interrupted"];

/** One element: `h("div", {class: "x", id: "y"}, child, "text", …)`. */
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "text") el.textContent = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (key === "value") el.value = value;
    else if (key === "checked" || key === "disabled" || key === "hidden" || key === "selected") el[key] = Boolean(value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/** Replaces `el`'s children (null and false are left out). */
function fill(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

const $ = (selector, root = document) => root.querySelector(selector);

function sleep(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    if (signal) signal.addEventListener("abort", () => { clearTimeout(timer); resolve(); }, { once: true });
  });
}

function pretty(value) {
  return JSON.stringify(value, null, 2);
}

/** "3 s ago", "5 min ago", "2 h ago", "4 d ago". */
function age(iso) {
  const at = Date.parse(iso);
  if (Number.isNaN(at)) return "";
  const s = Math.max(0, Math.round((Date.now() - at) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

/** "in 59 min" for a time to come. */
function until(iso) {
  const at = Date.parse(iso);
  if (Number.isNaN(at)) return "";
  const s = Math.round((at - Date.now()) / 1000);
  if (s <= 0) return "now";
  if (s < 60) return `in ${s} s`;
  if (s < 3600) return `in ${Math.floor(s / 60)} min`;
  if (s < 86400) return `in ${Math.floor(s / 3600)} h`;
  return `in ${Math.floor(s / 86400)} d`;
}

function clock(iso) {
  const at = new Date(iso);
  if (Number.isNaN(at.getTime())) return iso || "";
  const pad = (n, w = 2) => String(n).padStart(w, "0");
  return `${pad(at.getHours())}:${pad(at.getMinutes())}:${pad(at.getSeconds())}.${pad(at.getMilliseconds(), 3)}`;
}

function fullTime(iso) {
  const at = new Date(iso);
  return Number.isNaN(at.getTime()) ? iso || "" : at.toLocaleString();
}

function shortId(id) {
  return id.length > 14 ? `${id.slice(0, 8)}…${id.slice(-4)}` : id;
}

function badge(status, attrs = {}) {
  return h("span", { class: `badge badge-${status}`, dataset: { status }, ...attrs }, status);
}

let toastTimer = null;
function toast(message, kind = "info") {
  const el = $("#toast");
  el.textContent = message;
  el.dataset.kind = kind;
  el.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { el.hidden = true; }, 5000);
}

function copyButton(text, label = "Copy") {
  return h("button", {
    type: "button", class: "btn btn-ghost btn-tiny", title: "Copy to the clipboard",
    onclick: async (e) => {
      e.preventDefault();
      e.stopPropagation();
      try {
        await navigator.clipboard.writeText(text);
        toast("Copied.");
      } catch {
        toast("The clipboard is not available here.", "error");
      }
    },
  }, label);
}

// ---------------------------------------------------------------------------------------
// The API: fetch with the token, asking for it on 401.

class ApiError extends Error {
  constructor(status, body) {
    const problem = body && typeof body === "object" ? body : null;
    super(problem ? problem.detail || problem.title || `HTTP ${status}` : (typeof body === "string" && body) || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

function authHeaders(headers = {}) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = `Bearer ${token}`;
  return headers;
}

let tokenAsked = null;

/** Shows the token prompt (once, however many calls wait for it); resolves when given. */
function askToken(reason) {
  if (tokenAsked) return tokenAsked;
  tokenAsked = new Promise((resolve) => {
    const dialog = $("#token-dialog");
    const form = $("#token-form");
    const input = $("#token-input");
    const error = $("#token-error");
    error.hidden = !reason;
    error.textContent = reason || "";
    input.value = "";
    const submit = (event) => {
      event.preventDefault();
      const token = input.value.trim();
      if (!token) {
        error.hidden = false;
        error.textContent = "Give the token.";
        return;
      }
      sessionStorage.setItem(TOKEN_KEY, token);
      form.removeEventListener("submit", submit);
      dialog.close();
      tokenAsked = null;
      updateTokenButton();
      resolve();
    };
    form.addEventListener("submit", submit);
    dialog.addEventListener("cancel", (e) => e.preventDefault());
    if (!dialog.open) dialog.showModal();
    input.focus();
  });
  return tokenAsked;
}

function updateTokenButton() {
  $("#token-button").hidden = !sessionStorage.getItem(TOKEN_KEY);
}

async function readBody(response) {
  const type = response.headers.get("content-type") || "";
  const text = await response.text();
  if (type.includes("json")) {
    try { return JSON.parse(text); } catch { return text; }
  }
  return text;
}

/** A call to the API: the Response (401 asks for the token and tries again). */
async function api(path, { method = "GET", body, signal, headers = {} } = {}) {
  for (;;) {
    const all = authHeaders({ Accept: "application/json", ...headers });
    // Every POST says it sends JSON, a body or not: a server without a token refuses
    // those that do not (no form of another site can say it).
    if (body !== undefined || method !== "GET") all["Content-Type"] = "application/json";
    const response = await fetch(path, {
      method, headers: all, signal, cache: "no-store",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (response.status !== 401) return response;
    const problem = await readBody(response);
    const wrong = sessionStorage.getItem(TOKEN_KEY) ? "That token was refused." : "";
    sessionStorage.removeItem(TOKEN_KEY);
    updateTokenButton();
    await askToken(wrong || (problem && problem.detail) || "");
  }
}

/** A call whose answer is JSON; an ApiError unless it is 2xx. */
async function apiJson(path, options) {
  const response = await api(path, options);
  const body = await readBody(response);
  if (!response.ok) throw new ApiError(response.status, body);
  return body;
}

// ---------------------------------------------------------------------------------------
// Server-sent events over fetch() (so that the token header can be sent).

/** The most entries of a run's trail the page shows (its latest ones). */
const TRAIL_SHOWN = 500;

/**
 * Follows `path` until the stream ends or `signal` aborts, calling `onEvent(type, data, id)`
 * for each event; reconnects after a failure with `Last-Event-ID` (the last id seen).
 * `onState` hears "connecting", "live", "reconnecting", "ended".
 */
async function followEvents(path, { onEvent, onState, signal }) {
  let lastId = null;
  let ended = false;
  let delay = 500;
  while (!ended && !signal.aborted) {
    onState(lastId === null ? "connecting" : "reconnecting");
    try {
      const headers = { Accept: "text/event-stream" };
      if (lastId !== null) headers["Last-Event-ID"] = lastId;
      const response = await api(path, { signal, headers });
      if (!response.ok) {
        const body = await readBody(response);
        throw new ApiError(response.status, body);
      }
      onState("live");
      delay = 500;
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      let event = { type: "", data: [], id: null };
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        for (;;) {
          const match = /\r\n|\r|\n/.exec(buffer);
          if (!match) break;
          // A lone "\r" at the end may be the first half of "\r\n": wait for more.
          if (match[0] === "\r" && match.index === buffer.length - 1) break;
          const line = buffer.slice(0, match.index);
          buffer = buffer.slice(match.index + match[0].length);
          if (line === "") {
            if (event.id !== null) lastId = event.id;
            if (event.data.length || event.type) {
              const type = event.type || "message";
              onEvent(type, event.data.join("\n"), event.id);
              if (type === "end") ended = true;
            }
            event = { type: "", data: [], id: null };
            continue;
          }
          if (line.startsWith(":")) continue;
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          let data = colon < 0 ? "" : line.slice(colon + 1);
          if (data.startsWith(" ")) data = data.slice(1);
          if (field === "event") event.type = data;
          else if (field === "data") event.data.push(data);
          else if (field === "id") event.id = data;
        }
        if (ended) {
          reader.cancel().catch(() => {});
          break;
        }
      }
    } catch (error) {
      if (signal.aborted) return;
      if (error instanceof ApiError && error.status === 404) {
        onState("ended");
        throw error;
      }
    }
    if (!ended && !signal.aborted) {
      onState("reconnecting");
      await sleep(delay, signal);
      delay = Math.min(delay * 2, 8000);
    }
  }
  if (ended) onState("ended");
}

// ---------------------------------------------------------------------------------------
// Forms from JSON Schemas: one input per property of the chosen answer's schema.

/** `schema` with a local `$ref` (`#/$defs/X`) followed, within `root`. */
function deref(schema, root, depth = 0) {
  if (!schema || typeof schema !== "object" || depth > 16) return schema || {};
  if (typeof schema.$ref === "string" && schema.$ref.startsWith("#/")) {
    let target = root;
    for (const part of schema.$ref.slice(2).split("/")) {
      target = target && target[part.replace(/~1/g, "/").replace(/~0/g, "~")];
    }
    if (target && typeof target === "object") {
      const { $ref, ...rest } = schema;
      return deref({ ...target, ...rest }, root, depth + 1);
    }
  }
  if (Array.isArray(schema.allOf) && !schema.properties) {
    // `allOf` of object schemas: their properties and required lists put together.
    const merged = { ...schema, properties: {}, required: [...(schema.required || [])] };
    delete merged.allOf;
    for (const part of schema.allOf.map((s) => deref(s, root, depth + 1))) {
      Object.assign(merged.properties, part.properties || {});
      merged.required.push(...(part.required || []));
      if (!merged.type && part.type) merged.type = part.type;
    }
    return merged;
  }
  return schema;
}

function typeOf(schema) {
  let type = schema.type;
  if (Array.isArray(type)) type = type.find((t) => t !== "null") || type[0];
  if (!type && Array.isArray(schema.enum)) type = "enum";
  if (!type && "const" in schema) type = "const";
  return type || "any";
}

/** What a property allows, in words ("at least 2 characters", "0 to 10"). */
function constraints(schema) {
  const out = [];
  if (schema.minLength !== undefined && schema.maxLength !== undefined) out.push(`${schema.minLength} to ${schema.maxLength} characters`);
  else if (schema.minLength !== undefined) out.push(`at least ${schema.minLength} character${schema.minLength === 1 ? "" : "s"}`);
  else if (schema.maxLength !== undefined) out.push(`at most ${schema.maxLength} characters`);
  if (schema.minimum !== undefined && schema.maximum !== undefined) out.push(`${schema.minimum} to ${schema.maximum}`);
  else if (schema.minimum !== undefined) out.push(`≥ ${schema.minimum}`);
  else if (schema.maximum !== undefined) out.push(`≤ ${schema.maximum}`);
  if (schema.pattern) out.push(`matches /${schema.pattern}/`);
  if (schema.format) out.push(schema.format);
  return out.join(" · ");
}

/** A property name usable in an id. */
function slug(name) {
  return String(name).replace(/[^A-Za-z0-9_-]/g, (c) => `_${c.charCodeAt(0).toString(16)}`);
}

/** The inputs of one schema; `values()` reads them, `showErrors()` places messages. */
function schemaFields(schema, root, container) {
  const resolved = deref(schema, root);
  const properties = Object.entries(resolved.properties || {}).filter(([name]) => name !== "id");
  const required = new Set(resolved.required || []);
  const fields = new Map();

  const field = (name, prop, isRequired) => {
    const type = typeOf(prop);
    const id = `field-${slug(name)}`;
    const common = { id, name, dataset: { field: name, type }, "aria-describedby": `hint-${slug(name)} error-${slug(name)}` };
    if (isRequired) common["aria-required"] = "true";
    let input;
    let read;
    if (Array.isArray(prop.enum)) {
      input = h("select", { class: "input", ...common },
        h("option", { value: "" }, isRequired ? "Choose…" : "—"),
        prop.enum.map((v, i) => h("option", { value: String(i) }, typeof v === "string" ? v : JSON.stringify(v))));
      if (prop.default !== undefined) {
        const i = prop.enum.findIndex((v) => JSON.stringify(v) === JSON.stringify(prop.default));
        if (i >= 0) input.value = String(i);
      }
      read = () => (input.value === "" ? undefined : prop.enum[Number(input.value)]);
    } else if (type === "const") {
      input = h("input", { class: "input", ...common, value: JSON.stringify(prop.const), readonly: true });
      read = () => prop.const;
    } else if (type === "string") {
      const long = (prop.maxLength || 0) > 200 || prop.format === "textarea" || /^(reason|comment|note|notes|text|body|message|description|feedback)$/i.test(name);
      const attrs = { class: "input", ...common, spellcheck: "true", autocomplete: "off" };
      if (prop.default !== undefined) attrs.value = String(prop.default);
      if (prop.examples && prop.examples.length) attrs.placeholder = String(prop.examples[0]);
      input = long ? h("textarea", { ...attrs, rows: 3 }) : h("input", { ...attrs, type: prop.format === "email" ? "email" : "text" });
      read = () => (input.value === "" && !isRequired ? undefined : input.value);
    } else if (type === "integer" || type === "number") {
      input = h("input", {
        class: "input", ...common, type: "number", inputmode: type === "integer" ? "numeric" : "decimal",
        step: type === "integer" ? "1" : "any", min: prop.minimum, max: prop.maximum,
        value: prop.default !== undefined ? String(prop.default) : undefined,
      });
      read = () => {
        if (input.value === "") return undefined;
        const n = Number(input.value);
        if (Number.isNaN(n)) throw new FieldError(name, "not a number");
        return n;
      };
    } else if (type === "boolean") {
      input = h("input", { ...common, class: "checkbox", type: "checkbox", checked: prop.default === true });
      read = () => input.checked;
    } else {
      const example = type === "array" ? "[]" : type === "object" ? "{}" : "";
      input = h("textarea", {
        class: "input mono", ...common, rows: 4, spellcheck: "false",
        placeholder: example ? `JSON, e.g. ${example}` : "JSON",
        value: prop.default !== undefined ? pretty(prop.default) : undefined,
      });
      read = () => {
        if (input.value.trim() === "") return undefined;
        try {
          return JSON.parse(input.value);
        } catch (e) {
          throw new FieldError(name, `not JSON: ${e.message}`);
        }
      };
    }
    const hintText = [prop.description || prop.title, constraints(prop)].filter(Boolean).join(" — ");
    const error = h("div", { class: "field-error", id: `error-${slug(name)}`, dataset: { errorFor: name }, role: "alert", hidden: true });
    const label = h("label", { class: "field-label", for: id },
      h("span", { class: "field-name" }, name),
      isRequired ? h("span", { class: "required", title: "required", "aria-label": "required" }, "*") : null,
      h("span", { class: "field-type" }, type === "enum" ? "choice" : type));
    const wrapper = type === "boolean"
      ? h("div", { class: "field field-check", dataset: { field: name } }, h("label", { class: "check" }, input, h("span", { class: "field-name" }, name), isRequired ? h("span", { class: "required" }, "*") : null), h("div", { class: "hint", id: `hint-${slug(name)}` }, hintText), error)
      : h("div", { class: "field", dataset: { field: name } }, label, input, h("div", { class: "hint", id: `hint-${slug(name)}` }, hintText), error);
    input.addEventListener("input", () => clearFieldError(fields.get(name)));
    fields.set(name, { name, input, error, wrapper, read });
    return wrapper;
  };

  if (properties.length) {
    for (const [name, prop] of properties) container.append(field(name, deref(prop, root), required.has(name)));
  } else {
    // No properties to go by: the whole answer as JSON (its `id` is added).
    container.append(field("__answer", { type: "object", description: "The answer as a JSON object (its `id` is set from the choice above)." }, false));
  }

  return {
    fields,
    values() {
      const out = {};
      for (const f of fields.values()) {
        const v = f.read();
        if (f.name === "__answer") {
          if (v !== undefined && (typeof v !== "object" || v === null || Array.isArray(v))) throw new FieldError("__answer", "an object is needed");
          Object.assign(out, v || {});
        } else if (v !== undefined) {
          out[f.name] = v;
        }
      }
      return out;
    },
  };
}

class FieldError extends Error {
  constructor(field, message) {
    super(message);
    this.field = field;
  }
}

function clearFieldError(f) {
  if (!f) return;
  f.error.hidden = true;
  fill(f.error);
  f.wrapper.classList.remove("invalid");
  f.input.removeAttribute("aria-invalid");
}

function setFieldError(f, messages) {
  fill(f.error, ...messages.map((m) => h("div", { class: "field-error-line" }, m)));
  f.error.hidden = false;
  f.wrapper.classList.add("invalid");
  f.input.setAttribute("aria-invalid", "true");
}

/** The property a problem's `place` names under `base` (`$.input.approver` → approver). */
function placeField(place, base) {
  if (typeof place !== "string" || !place.startsWith(base)) return null;
  const rest = place.slice(base.length);
  let m = /^\.([A-Za-z0-9_-]+)/.exec(rest);
  if (m) return m[1];
  m = /^\['((?:[^'\\]|\\.)*)'\]/.exec(rest);
  if (m) return m[1].replace(/\\'/g, "'");
  return null;
}

/**
 * A form that sends one of `answers` (`[{id: [from, to], description, schema}]`): a choice of
 * answer, the fields of its schema, a box for problems not placed at a field. For the
 * question of an MCP server (`question`: `{server, message}`, `schema`: what it asks for),
 * the fields of that schema instead, sent as `{action: "accept", content}`, and two more
 * buttons that decline (#answer-decline) or cancel (#answer-cancel) the question.
 * `send(input)` returns the Response; `onDone(response, body)` hears a 2xx;
 * `onProblem(response, problem)`, if given, hears a refusal first and returns true when it
 * dealt with it (else each problem is shown by its field, `base` being the answer's place).
 */
function answerForm({ answers, question, schema, ids, submitLabel, base, send, onDone, onProblem }) {
  const describe = h("p", { class: "answer-description muted" });
  const fieldsBox = h("div", { class: "fields" });
  const general = h("div", { class: "form-error", id: "form-error", role: "alert", hidden: true });
  const submit = h("button", { type: "submit", class: "btn btn-primary", id: ids.submit }, submitLabel);
  const refusals = question
    ? [["decline", "Decline"], ["cancel", "Cancel"]].map(([action, label]) =>
      h("button", { type: "button", class: "btn", id: `answer-${action}`, dataset: { action } }, label))
    : [];
  let select = null;
  let head;
  if (question) {
    head = h("p", { class: "answer-description muted", id: "answer-asker" },
      "Asked by the MCP server ", h("span", { class: "mono" }, question.server),
      " while the step runs: your answer goes back to it.");
  } else {
    select = h("select", { class: "input", id: ids.select, name: "answer" },
      answers.map((a, i) => h("option", { value: String(i) }, `${a.id[0]} → ${a.id[1]}${a.description ? ` — ${a.description}` : ""}`)));
    head = h("div", { class: "field" },
      h("label", { class: "field-label", for: ids.select }, h("span", { class: "field-name" }, answers.length > 1 ? "Answer" : "Transition")),
      select, describe);
  }
  const form = h("form", { class: "form", id: ids.form, novalidate: true },
    head, fieldsBox, general,
    h("div", { class: "actions" }, submit, ...refusals));

  let current = null;
  const choose = () => {
    fill(fieldsBox);
    general.hidden = true;
    if (question) {
      form.dataset.question = question.server;
      current = { answer: null, inputs: schemaFields(schema || {}, schema || {}, fieldsBox) };
      return;
    }
    const answer = answers[Number(select.value)] || answers[0];
    form.dataset.transition = `${answer.id[0]}->${answer.id[1]}`;
    describe.textContent = answer.description || "";
    describe.hidden = !answer.description;
    current = { answer, inputs: schemaFields(answer.schema || {}, answer.schema || {}, fieldsBox) };
  };
  if (select) select.addEventListener("change", choose);
  choose();

  const showGeneral = (title, lines) => {
    fill(general, h("strong", {}, title), lines.length ? h("ul", {}, lines.map((l) => h("li", {}, l))) : null);
    general.hidden = false;
  };

  // Sends `input` with `button` busy; a refusal is shown by its fields.
  const sendInput = async (input, button) => {
    const buttons = [submit, ...refusals];
    for (const b of buttons) b.disabled = true;
    const label = button.textContent;
    button.textContent = "Sending…";
    form.setAttribute("aria-busy", "true");
    try {
      const response = await send(input);
      const body = await readBody(response);
      if (response.ok) {
        onDone(response, body);
        return;
      }
      const problem = body && typeof body === "object" ? body : { title: `HTTP ${response.status}`, detail: String(body) };
      if (onProblem && onProblem(response, problem)) return;
      const byField = new Map();
      const unplaced = [];
      for (const e of problem.errors || []) {
        let name = placeField(e.place, base);
        if (!name && e.place === base) {
          const m = /^"([^"]+)" is a required property/.exec(e.message || "");
          if (m) name = m[1];
        }
        const f = name && current.inputs.fields.get(name);
        if (f) {
          if (!byField.has(f)) byField.set(f, []);
          byField.get(f).push(e.message);
        } else {
          unplaced.push(e.place ? `${e.place}: ${e.message}` : e.message);
        }
      }
      for (const [f, messages] of byField) setFieldError(f, messages);
      if (unplaced.length || byField.size === 0) {
        showGeneral(problem.title || "Refused", unplaced.length ? unplaced : [problem.detail || ""]);
      }
      const first = byField.keys().next().value;
      if (first) first.input.focus();
    } catch (e) {
      showGeneral("The answer was not sent", [e.message]);
    } finally {
      for (const b of buttons) b.disabled = false;
      button.textContent = label;
      form.removeAttribute("aria-busy");
    }
  };

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    general.hidden = true;
    for (const f of current.inputs.fields.values()) clearFieldError(f);
    let values;
    try {
      values = current.inputs.values();
    } catch (e) {
      const f = e instanceof FieldError && current.inputs.fields.get(e.field);
      if (f) setFieldError(f, [e.message]);
      else showGeneral("Check the answer", [e.message]);
      return;
    }
    const input = question ? { action: "accept", content: values } : { id: current.answer.id, ...values };
    sendInput(input, submit);
  });
  for (const button of refusals) {
    button.addEventListener("click", () => {
      general.hidden = true;
      for (const f of current.inputs.fields.values()) clearFieldError(f);
      sendInput({ action: button.dataset.action }, button);
    });
  }
  return form;
}

/**
 * What a wait asks and the form that answers it, for a run's wait card and a resume link's
 * card alike: the prompt (#wait-prompt), when the wait expires (#wait-expires), and the
 * answer form (#answer-form, #answer-select, #answer-submit) for `answers`. `options` are
 * answerForm's (base, send, onDone, onProblem, submitLabel).
 */
function waitParts(wait, answers, options) {
  return {
    prompt: wait.prompt ? h("blockquote", { class: "prompt", id: "wait-prompt" }, wait.prompt) : null,
    expires: wait.expires_at
      ? h("span", { class: "muted small", id: "wait-expires", title: fullTime(wait.expires_at) }, `expires ${until(wait.expires_at)}`)
      : null,
    form: answerForm({
      submitLabel: "Send answer",
      ...options,
      answers,
      question: wait.question || null,
      schema: wait.schema,
      ids: { form: "answer-form", select: "answer-select", submit: "answer-submit" },
    }),
  };
}

// ---------------------------------------------------------------------------------------
// The views.

let view = null;

function route() {
  if (view) view.destroy();
  const app = $("#app");
  fill(app);
  const hash = location.hash || "#/";
  const run = /^#\/runs\/([^/?#]+)/.exec(hash);
  for (const link of document.querySelectorAll(".nav-link")) link.classList.remove("active");
  if (run) {
    view = runView(app, decodeURIComponent(run[1]));
  } else {
    $("#nav-runs").classList.add("active");
    view = listView(app);
  }
  window.scrollTo(0, 0);
}

/** `#/`: the runs, and the FSMs served. */
function listView(root) {
  const controller = new AbortController();
  const { signal } = controller;
  let timer = null;

  const filter = h("select", { class: "input input-inline", id: "status-filter", "aria-label": "Status" },
    h("option", { value: "" }, "All statuses"),
    STATUSES.map((s) => h("option", { value: s }, s)));
  filter.value = sessionStorage.getItem(FILTER_KEY) || "";
  const count = h("span", { class: "muted", id: "runs-count" });
  const updated = h("span", { class: "muted small", id: "runs-updated" });
  const tbody = h("tbody");
  const table = h("table", { class: "table table-runs", id: "runs-table" },
    h("thead", {}, h("tr", {},
      h("th", {}, "Run"), h("th", {}, "FSM"), h("th", {}, "Status"), h("th", {}, "State"),
      h("th", { class: "col-time" }, "Started"), h("th", { class: "col-time" }, "Updated"))),
    tbody);
  const empty = h("div", { class: "empty", id: "runs-empty", hidden: true });
  const error = h("div", { class: "banner banner-error", id: "runs-error", hidden: true });
  const definitions = h("div", { class: "definitions", id: "definitions" }, h("p", { class: "muted pad" }, "Loading…"));
  const startBox = h("div", { id: "start-box" });

  root.append(h("div", { class: "view", id: "runs-view" },
    h("div", { class: "page-head" },
      h("h1", {}, "Runs"),
      h("span", { class: "spacer" }),
      updated),
    h("div", { class: "layout-list" },
      h("section", { class: "card" },
        h("div", { class: "card-head" },
          h("h2", {}, "Recent runs"), count,
          h("span", { class: "spacer" }),
          h("label", { class: "muted small", for: "status-filter" }, "Status"), filter),
        error,
        h("div", { class: "table-wrap" }, table),
        empty),
      h("aside", { class: "stack" },
        h("section", { class: "card" },
          h("div", { class: "card-head" }, h("h2", {}, "Workflows")),
          definitions),
        startBox))));

  filter.addEventListener("change", () => {
    sessionStorage.setItem(FILTER_KEY, filter.value);
    clearTimeout(timer);
    refresh();
  });

  const render = (runs) => {
    fill(tbody, ...runs.map((run) => {
      const href = `#/runs/${encodeURIComponent(run.id)}`;
      return h("tr", {
        class: "row-link", dataset: { testid: "run-row", runId: run.id, status: run.status },
        onclick: (e) => { if (!e.target.closest("a, button")) location.hash = href; },
      },
      h("td", { class: "mono" }, h("a", { href, dataset: { testid: "run-link" }, title: run.id }, shortId(run.id)),
        run.parent ? h("span", { class: "muted small" }, " child") : null),
      h("td", {}, h("span", { class: "fsm-name" }, run.fsm), h("span", { class: "muted small" }, ` v${run.version}`)),
      h("td", {}, badge(run.status)),
      h("td", { class: "mono" }, run.state),
      h("td", { class: "col-time muted", title: fullTime(run.created_at) }, age(run.created_at)),
      h("td", { class: "col-time muted", title: fullTime(run.updated_at) }, age(run.updated_at)));
    }));
    count.textContent = `${runs.length}${runs.length === 100 ? "+" : ""}`;
    table.hidden = runs.length === 0;
    empty.hidden = runs.length !== 0;
    if (runs.length === 0) {
      fill(empty,
        h("p", { class: "empty-title" }, filter.value ? `No ${filter.value} runs.` : "No runs yet."),
        h("p", { class: "muted" }, "Start one from a workflow on the right, or over the API:"),
        h("pre", { class: "code" }, `curl -XPOST '${location.origin}/runs?wait=10' -H 'content-type: application/json' \\\n  -d '{"fsm": "ID", "input": {…}}'`));
    }
  };

  const refresh = async () => {
    try {
      const query = new URLSearchParams({ limit: "100" });
      if (filter.value) query.set("status", filter.value);
      const page = await apiJson(`/runs?${query}`, { signal });
      render(page.runs || []);
      error.hidden = true;
      updated.textContent = `Updated ${new Date().toLocaleTimeString()} · refreshes every 2 s`;
    } catch (e) {
      if (signal.aborted) return;
      error.textContent = `The runs could not be read: ${e.message}`;
      error.hidden = false;
    }
    if (!signal.aborted) timer = setTimeout(refresh, 2000);
  };

  const loadDefinitions = async () => {
    try {
      const list = await apiJson("/definitions", { signal });
      fill(definitions, ...(list.length ? list.map((d) => h("div", { class: "definition", dataset: { testid: "definition", fsm: d.id } },
        h("div", { class: "definition-head" },
          h("span", { class: "fsm-name" }, d.id), h("span", { class: "muted small" }, ` v${d.version}`),
          d.trusted ? null : h("span", { class: "tag", title: "Registered over the network" }, "registered"),
          h("span", { class: "spacer" }),
          h("button", { type: "button", class: "btn btn-small", dataset: { testid: "start-button" }, onclick: () => openStart(d.id) }, "Start")),
        d.description ? h("p", { class: "muted small" }, d.description) : null)) : [h("p", { class: "muted pad" }, "No FSMs are served.")]));
    } catch (e) {
      if (!signal.aborted) fill(definitions, h("p", { class: "banner banner-error" }, e.message));
    }
  };

  const openStart = async (fsm) => {
    try {
      const definition = await apiJson(`/definitions/${encodeURIComponent(fsm)}`, { signal });
      const entries = definition.entries || [];
      const form = answerForm({
        answers: entries,
        ids: { form: "start-form", select: "start-select", submit: "start-submit" },
        submitLabel: "Start run",
        base: "$.input",
        send: (input) => api("/runs?wait=2", { method: "POST", body: { fsm, version: definition.version, input }, signal }),
        onDone: (_response, body) => {
          toast(`Run ${shortId(body.id)} started.`);
          location.hash = `#/runs/${encodeURIComponent(body.id)}`;
        },
      });
      fill(startBox, h("section", { class: "card" },
        h("div", { class: "card-head" }, h("h2", {}, "Start "), h("span", { class: "fsm-name" }, fsm),
          h("span", { class: "spacer" }),
          h("button", { type: "button", class: "btn btn-ghost btn-small", onclick: () => fill(startBox) }, "Close")),
        h("div", { class: "pad" }, form)));
      startBox.scrollIntoView({ behavior: "smooth", block: "nearest" });
    } catch (e) {
      if (!signal.aborted) toast(e.message, "error");
    }
  };

  refresh();
  loadDefinitions();
  return { destroy() { controller.abort(); clearTimeout(timer); } };
}

/** `#/runs/ID`: one run, live. */
function runView(root, id) {
  const controller = new AbortController();
  const { signal } = controller;
  let run = null;
  let graphKey = null;
  let waitKey = null;
  let refreshing = null;
  const seen = new Set();
  const visited = new Set();
  const taken = new Set();
  let lastFailure = null;

  // The header.
  const status = h("span", { class: "badge", id: "run-status" }, "…");
  const fsmName = h("span", { id: "run-fsm", class: "fsm-name" });
  const fsmVersion = h("span", { class: "muted" });
  const stateName = h("span", { id: "run-state", class: "mono state-name" });
  const live = h("span", { id: "live-state", class: "live", dataset: { state: "connecting" } }, "connecting");
  const trailLen = h("span", { id: "run-trail-len" });
  const started = h("span");
  const changed = h("span");
  const interrupt = h("button", { type: "button", class: "btn btn-danger", id: "interrupt-button", hidden: true }, "Interrupt");
  const header = h("section", { class: "card run-header", id: "run-header" },
    h("div", { class: "run-title" },
      h("h1", {}, fsmName, fsmVersion),
      status,
      h("span", { class: "state-chip" }, h("span", { class: "muted small" }, "state"), stateName),
      h("span", { class: "spacer" }),
      live,
      interrupt),
    h("div", { class: "run-meta" },
      h("span", {}, h("span", { class: "muted" }, "Run "), h("span", { class: "mono", id: "run-id" }, id), " ", copyButton(id, "Copy id")),
      h("span", {}, h("span", { class: "muted" }, "Started "), started),
      h("span", {}, h("span", { class: "muted" }, "Updated "), changed),
      h("span", {}, trailLen, h("span", { class: "muted" }, " trail entries"))));

  // The graph, what the run waits for or gave, the trail, the details.
  const graph = h("div", { class: "graph", id: "graph" }, h("p", { class: "muted pad" }, "Drawing…"));
  const waitCard = h("section", { class: "card", id: "wait-card", hidden: true });
  const outcome = h("section", { class: "card", id: "outcome-card", hidden: true });
  const details = h("section", { class: "card", id: "details-card" });
  const trail = h("tbody", { id: "trail" });
  const trailCount = h("span", { class: "muted", id: "trail-count" }, "0");
  const trailEmpty = h("p", { class: "muted pad", id: "trail-empty" }, "No entries yet.");
  const problemBox = h("div", { class: "banner banner-error", id: "run-error", hidden: true });

  root.append(h("div", { class: "view", id: "run-view", dataset: { runId: id } },
    h("nav", { class: "crumbs", "aria-label": "Breadcrumb" }, h("a", { href: "#/" }, "Runs"), h("span", { class: "muted" }, " / "), h("span", { class: "mono" }, shortId(id))),
    problemBox,
    header,
    h("div", { class: "layout-run" },
      h("section", { class: "card graph-card" },
        h("div", { class: "card-head" }, h("h2", {}, "Graph"), h("span", { class: "spacer" }),
          h("span", { class: "legend" }, h("span", { class: "swatch swatch-current" }), "current", h("span", { class: "swatch swatch-visited" }), "visited")),
        graph),
      h("div", { class: "stack" }, waitCard, outcome, details)),
    h("section", { class: "card" },
      h("div", { class: "card-head" }, h("h2", {}, "Trail"), trailCount, h("span", { class: "spacer" }),
        h("span", { class: "muted small" }, "live, as the run goes")),
      h("div", { class: "table-wrap" },
        h("table", { class: "table table-trail" },
          h("thead", {}, h("tr", {}, h("th", { class: "col-seq" }, "#"), h("th", {}, "Transition"), h("th", { class: "col-attempt" }, "Attempt"), h("th", { class: "col-time" }, "Time"), h("th", {}, "Event"))),
          trail)),
      trailEmpty)));

  interrupt.addEventListener("click", async () => {
    if (!run) return;
    if (!confirm(`Interrupt run ${id}?\n\nIt stops ${run.status === "running" ? "at its next step" : "at once"} and cannot go on.`)) return;
    interrupt.disabled = true;
    try {
      await apiJson(`/runs/${encodeURIComponent(id)}/interrupt`, { method: "POST", signal });
      toast("Interrupt sent.");
      refresh();
    } catch (e) {
      if (!signal.aborted) toast(`Not interrupted: ${e.message}`, "error");
    } finally {
      interrupt.disabled = false;
    }
  });

  const renderHeader = () => {
    status.className = `badge badge-${run.status}`;
    status.dataset.status = run.status;
    status.textContent = run.status;
    fsmName.textContent = run.fsm;
    fsmVersion.textContent = ` v${run.version}`;
    stateName.textContent = run.state;
    trailLen.textContent = String(run.trail_len);
    started.textContent = age(run.created_at);
    started.title = fullTime(run.created_at);
    changed.textContent = age(run.updated_at);
    changed.title = fullTime(run.updated_at);
    interrupt.hidden = !(run.status === "running" || run.status === "suspended");
    document.title = `${run.fsm} · ${run.status} · claij`;
    highlight();
  };

  const highlight = () => {
    if (!run) return;
    graph.dataset.current = run.state;
    graph.dataset.status = run.status;
    const svg = $("svg", graph);
    if (!svg) return;
    for (const node of svg.querySelectorAll("g.node")) {
      const title = node.querySelector("title");
      const name = title ? title.textContent.trim() : "";
      node.classList.toggle("current", name === run.state);
      node.classList.toggle("visited", name !== "start" && visited.has(name) && name !== run.state);
    }
    for (const edge of svg.querySelectorAll("g.edge")) {
      const title = edge.querySelector("title");
      edge.classList.toggle("taken", Boolean(title) && taken.has(title.textContent.trim()));
    }
  };

  const drawGraph = async () => {
    const key = `${run.fsm}@${run.version}`;
    if (graphKey === key) return;
    graphKey = key;
    try {
      const response = await api(`/ui/graph/${encodeURIComponent(run.fsm)}.svg?version=${run.version}`, { signal, headers: { Accept: "image/svg+xml" } });
      if (response.status === 501 || response.status === 404) {
        const definition = await apiJson(`/definitions/${encodeURIComponent(run.fsm)}`, { signal });
        fill(graph,
          h("p", { class: "muted small pad" }, response.status === 501 ? "The server has no Graphviz to draw the graph: here it is as Mermaid." : "This version is no longer served: the newest, as Mermaid."),
          h("pre", { class: "code", id: "graph-fallback" }, definition.mermaid));
        return;
      }
      const text = await response.text();
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const doc = new DOMParser().parseFromString(text, "image/svg+xml");
      const svg = doc.documentElement;
      if (!svg || svg.nodeName !== "svg" || doc.querySelector("parsererror")) throw new Error("not an SVG");
      // Nothing active from the drawing: no scripts, no handlers, no links.
      for (const bad of svg.querySelectorAll("script, foreignObject")) bad.remove();
      for (const el of [svg, ...svg.querySelectorAll("*")]) {
        for (const attr of [...el.attributes]) if (/^on/i.test(attr.name)) el.removeAttribute(attr.name);
      }
      for (const a of svg.querySelectorAll("a")) { a.removeAttribute("href"); a.removeAttribute("xlink:href"); }
      svg.removeAttribute("width");
      svg.removeAttribute("height");
      svg.setAttribute("role", "img");
      svg.setAttribute("aria-label", `The graph of ${run.fsm}`);
      fill(graph, document.importNode(svg, true));
      highlight();
    } catch (e) {
      if (signal.aborted) return;
      graphKey = null;
      fill(graph, h("p", { class: "banner banner-error" }, `The graph could not be drawn: ${e.message}`));
    }
  };

  const renderWait = () => {
    const wait = run.wait;
    const answers = run.status === "suspended" && wait && !(wait.children && wait.children.length) ? wait.answers || [] : [];
    if (run.status === "suspended" && wait && wait.children && wait.children.length) {
      const key = `children:${wait.children.join(",")}`;
      if (key === waitKey) return;
      waitKey = key;
      fill(waitCard,
        h("div", { class: "card-head" }, h("h2", {}, "Waiting for child runs")),
        h("ul", { class: "pad list" }, wait.children.map((c) => h("li", {}, h("a", { class: "mono", href: `#/runs/${encodeURIComponent(c)}` }, c)))));
      waitCard.hidden = false;
      return;
    }
    const asked = run.status === "suspended" && wait && wait.question;
    if (!answers.length && !asked) {
      // "Answer taken" stays while the run goes on; otherwise nothing is shown.
      if (waitKey === "sent" && (run.status === "running" || run.status === "suspended")) return;
      fill(waitCard);
      waitCard.hidden = true;
      waitKey = null;
      return;
    }
    // Re-drawn only when the wait changed: never under the user's typing.
    const key = JSON.stringify([wait.state, answers.map((a) => a.id), wait.question || null, run.trail_len]);
    if (key === waitKey) return;
    waitKey = key;
    // The answer is for the wait shown: a run answered meanwhile refuses it (409).
    const shownAt = run.trail_len;
    const parts = waitParts(wait, answers, {
      base: "$.input",
      send: (input) => api(`/runs/${encodeURIComponent(id)}/resume?wait=10`, { method: "POST", body: { input, trail_len: shownAt }, signal }),
      onDone: (_response, body) => {
        waitKey = "sent";
        fill(waitCard, h("div", { class: "pad sent", id: "answer-sent" },
          h("strong", {}, "Answer taken."), " ", h("span", { class: "muted" }, "The run goes on.")));
        if (body && body.status) {
          run = { ...run, ...body };
          renderAll();
        }
        refresh();
      },
    });
    fill(waitCard,
      h("div", { class: "card-head card-head-wait" }, h("h2", {}, "Waiting for an answer"),
        h("span", { class: "spacer" }),
        parts.expires),
      h("div", { class: "pad" }, parts.prompt, parts.form));
    waitCard.hidden = false;
  };

  const renderOutcome = () => {
    const parts = [];
    if (run.status === "completed" && run.result !== undefined) {
      parts.push(h("div", { class: "card-head" }, h("h2", {}, "Result"), h("span", { class: "spacer" }), copyButton(pretty(run.result))),
        h("pre", { class: "code code-result", id: "run-result" }, pretty(run.result)));
    } else if (run.status === "failed") {
      parts.push(h("div", { class: "card-head" }, h("h2", {}, "Failed")),
        h("div", { class: "pad failure-box", id: "run-failure" }, lastFailure ? `${lastFailure.kind}: ${lastFailure.message}` : `The run failed in ${run.state}.`));
    } else if (run.status === "interrupted") {
      parts.push(h("div", { class: "card-head" }, h("h2", {}, "Interrupted")),
        h("p", { class: "pad muted", id: "run-failure" }, `The run was interrupted in ${run.state}.`));
    }
    fill(outcome, ...parts);
    outcome.hidden = parts.length === 0;
  };

  const renderDetails = () => {
    const usage = run.usage || {};
    const rows = [
      ["Started", fullTime(run.created_at)],
      ["Updated", fullTime(run.updated_at)],
    ];
    if (run.parent) rows.push(["Parent", h("a", { class: "mono", href: `#/runs/${encodeURIComponent(run.parent)}` }, shortId(run.parent))]);
    if (run.forked_from) {
      const from = run.forked_from;
      rows.push(["Forked from", h("span", { id: "forked-from", dataset: { run: from.run, seq: String(from.seq) } },
        h("a", { class: "mono", href: `#/runs/${encodeURIComponent(from.run)}` }, shortId(from.run)),
        ` at entry ${from.seq}${from.edited ? ", its event replaced" : ""}`)]);
    }
    if (usage.input_tokens || usage.output_tokens) {
      rows.push(["Tokens", `${usage.input_tokens || 0} in · ${usage.output_tokens || 0} out`]);
    }
    if (typeof usage.cost_usd === "number") rows.push(["Cost", `$${usage.cost_usd.toFixed(4)}`]);
    if (run.interrupt_requested && (run.status === "running" || run.status === "suspended")) rows.push(["Interrupt", "asked for; the run stops at its next step"]);
    rows.push(["Trail", `${run.trail_len} entr${run.trail_len === 1 ? "y" : "ies"}`]);
    const context = run.context && typeof run.context === "object" && Object.keys(run.context).length ? run.context : null;
    fill(details,
      h("div", { class: "card-head" }, h("h2", {}, "Details")),
      h("dl", { class: "details pad" }, rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
      context ? h("details", { class: "pad json-details" }, h("summary", {}, "Context"), h("pre", { class: "code" }, pretty(context))) : null);
  };

  const renderAll = () => {
    renderHeader();
    renderWait();
    renderOutcome();
    renderDetails();
    drawGraph();
  };

  /**
   * The form that forks the run at `entry` (POST /runs/ID/fork), under the entry's `row`:
   * the entry's event to edit; unchanged, the states after it run again. A fork made opens
   * the new run; a refused one says why, and nothing was stored.
   */
  const openFork = (entry, row) => {
    const open = $("#fork-form-row");
    if (open) open.remove();
    const original = pretty(entry.event);
    const text = h("textarea", { class: "code fork-event", id: "fork-event", rows: "8", spellcheck: "false" });
    text.value = original;
    const error = h("div", { class: "banner banner-error", id: "fork-error", hidden: true });
    const submit = h("button", { type: "submit", class: "btn btn-primary", id: "fork-submit" }, "Fork");
    const cancel = h("button", { type: "button", class: "btn btn-ghost", id: "fork-cancel", onclick: () => formRow.remove() }, "Cancel");
    const form = h("form", { class: "fork-form pad", id: "fork-form", dataset: { seq: String(entry.seq) } },
      h("p", { class: "muted small" },
        `A new run whose trail is this one's up to entry ${entry.seq}, then goes on from \`${entry.to}\`. `,
        "Edit the event to fork as if ", h("span", { class: "mono" }, entry.from), " had sent it (its id names the route); ",
        "this run is not changed."),
      text, error, h("div", { class: "form-actions" }, submit, cancel));
    const formRow = h("tr", { class: "fork-row", id: "fork-form-row" }, h("td", { colspan: "5" }, form));
    const refuse = (lines) => fill(error, lines.map((l) => h("div", {}, l))).hidden = false;
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const body = { at: entry.seq };
      if (text.value.trim() !== original.trim()) {
        try { body.event = JSON.parse(text.value); } catch (e) { refuse([`The event is not JSON: ${e.message}`]); return; }
      }
      submit.disabled = true;
      try {
        const made = await apiJson(`/runs/${encodeURIComponent(id)}/fork?wait=10`, { method: "POST", body, signal });
        toast(`Forked: run ${shortId(made.id)}`);
        location.hash = `#/runs/${encodeURIComponent(made.id)}`;
      } catch (e) {
        if (signal.aborted) return;
        const problem = e.problem || {};
        refuse([problem.detail || e.message, ...(problem.errors || []).map((x) => `${x.place}: ${x.message}`)]);
      } finally {
        submit.disabled = false;
      }
    });
    row.after(formRow);
    text.focus();
  };

  const addEntry = (entry) => {
    if (seen.has(entry.seq)) return;
    seen.add(entry.seq);
    visited.add(entry.from);
    if (entry.to) {
      visited.add(entry.to);
      taken.add(`${entry.from}->${entry.to}`);
    }
    if (entry.failure) lastFailure = entry.failure;
    const eventText = pretty(entry.event);
    const preview = entry.event && typeof entry.event === "object" ? JSON.stringify(entry.event) : String(entry.event);
    const failure = entry.failure
      ? h("div", { class: "failure" }, h("span", { class: "tag tag-failure" }, entry.failure.kind), " ", entry.failure.message,
        (entry.failure.errors || []).length ? h("ul", {}, entry.failure.errors.map((e) => h("li", {}, `${e.instance_path || "(root)"}: ${e.message}`))) : null)
      : null;
    const row = h("tr", {
      class: `trail-row fresh${entry.failure ? " trail-failure" : ""}`,
      dataset: { testid: "trail-entry", seq: String(entry.seq), from: entry.from, to: entry.to || "" },
    },
    h("td", { class: "col-seq mono muted" }, String(entry.seq)),
    h("td", {},
      h("span", { class: "transition mono" }, h("span", {}, entry.from), h("span", { class: "arrow" }, " → "), entry.to ? h("span", {}, entry.to) : h("span", { class: "muted" }, "(failed)")),
      entry.model ? h("div", { class: "muted small" }, entry.model) : null,
      failure),
    h("td", { class: "col-attempt" }, String(entry.attempt)),
    h("td", { class: "col-time mono small", title: fullTime(entry.at) }, clock(entry.at),
      typeof entry.duration_ms === "number" ? h("div", { class: "muted" }, `${entry.duration_ms} ms`) : null),
    h("td", { class: "col-event" },
      h("details", { class: "json-details" },
        h("summary", { class: "mono small" }, preview.length > 90 ? `${preview.slice(0, 90)}…` : preview),
        h("pre", { class: "code" }, eventText)),
      // An entry that took a transition is a point to fork the run at (time travel).
      entry.to && !entry.failure ? h("button", {
        type: "button", class: "btn btn-ghost btn-tiny fork-button", title: "A new run from this entry, its event edited or not",
        dataset: { testid: "fork-button", seq: String(entry.seq) }, onclick: () => openFork(entry, row),
      }, "Fork from here") : null));
    // In order, whatever order they came in.
    const after = [...trail.children].find((r) => Number(r.dataset.seq) > entry.seq);
    trail.insertBefore(row, after || null);
    setTimeout(() => row.classList.remove("fresh"), 1500);
    trailCount.textContent = String(trail.children.length);
    trailEmpty.hidden = true;
    highlight();
  };

  /** Reads the run again (its wait's answers, result, usage), at most one read at a time. */
  const refresh = () => {
    if (refreshing) {
      refreshing.again = true;
      return refreshing.promise;
    }
    const state = { again: false, promise: null };
    refreshing = state;
    state.promise = (async () => {
      do {
        state.again = false;
        try {
          run = await apiJson(`/runs/${encodeURIComponent(id)}`, { signal });
          problemBox.hidden = true;
          renderAll();
        } catch (e) {
          if (signal.aborted) return;
          problemBox.textContent = e.status === 404 ? `No run ${id}.` : `The run could not be read: ${e.message}`;
          problemBox.hidden = false;
        }
      } while (state.again && !signal.aborted);
      refreshing = null;
    })();
    return state.promise;
  };

  const onEvent = (type, data) => {
    let value = data;
    try { value = JSON.parse(data); } catch { /* `end` carries a word */ }
    if (type === "entry" && value && typeof value === "object") {
      addEntry(value);
    } else if (type === "status" && value && run) {
      const changedNow = value.status !== run.status || value.state !== run.state || value.trail_len !== run.trail_len;
      run = { ...run, status: value.status, state: value.state, trail_len: value.trail_len };
      renderHeader();
      // The wait's answers and schemas, the result: from the run itself.
      if (changedNow || (value.status === "suspended" && !run.wait)) refresh();
    } else if (type === "attempt" && value && run) {
      live.title = `${value.state}: attempt ${value.attempt}`;
    } else if (type === "end") {
      refresh();
    }
  };

  const setLive = (state) => {
    live.dataset.state = state;
    live.textContent = state;
  };

  (async () => {
    await refresh();
    if (!run || signal.aborted) return;
    // A long trail is shown from its latest entries: the earlier ones are a page of the API away.
    const from = Math.max(0, run.trail_len - TRAIL_SHOWN);
    if (from > 0) trailEmpty.replaceWith(h("p", { class: "muted pad small", id: "trail-earlier" },
      `Entries before #${from} are not shown (GET /runs/${id}/trail reads them a page at a time).`));
    try {
      await followEvents(`/runs/${encodeURIComponent(id)}/events?from=${from}`, { onEvent, onState: setLive, signal });
    } catch (e) {
      if (!signal.aborted) setLive("ended");
    }
  })();

  // Ages in the header stay true.
  const ticker = setInterval(() => { if (run) { started.textContent = age(run.created_at); changed.textContent = age(run.updated_at); } }, 5000);

  return { destroy() { controller.abort(); clearInterval(ticker); document.title = "claij"; } };
}

/**
 * A resume link opened in a browser (`/hooks/SECRET`): the one question it answers, for a
 * person who has no API token. Nothing here calls the API: only the link itself, which
 * needs no credential.
 */
function linkView(root) {
  const controller = new AbortController();
  const { signal } = controller;
  const path = location.pathname;
  const card = h("section", { class: "card link-card", id: "link-card" }, h("p", { class: "muted pad" }, "Loading…"));
  const viewEl = h("div", { class: "view link-view", id: "link-view", dataset: { state: "loading" } }, card);
  root.append(viewEl);

  const show = (state, title, ...body) => {
    viewEl.dataset.state = state;
    document.title = `${title} · claij`;
    fill(card, ...body);
  };

  /** The link answers nothing: why, in words (`reason`: invalid, used, taken, error). */
  const refused = (reason, detail) => {
    const words = {
      invalid: ["This link is not valid", "Check that the whole link was opened, exactly as it was sent to you."],
      used: ["This link no longer answers: the question was answered, withdrawn, or expired.", "There is nothing more to do here."],
      taken: ["Someone else answered first.", "Your answer was not taken: the question was answered before it arrived."],
      error: ["The question could not be read.", detail || "Try again in a moment."],
    }[reason];
    show(reason, reason === "error" ? "Error" : "Nothing to answer",
      h("div", { class: `link-message link-message-${reason}`, id: "link-message", dataset: { reason }, role: "status" },
        h("h1", { id: "link-message-title" }, words[0]),
        h("p", { class: "muted" }, words[1]),
        reason === "error" ? h("button", { type: "button", class: "btn", id: "link-retry", onclick: load }, "Try again") : null));
  };

  /** The answer was taken: what the run does now. */
  const answered = (body) => {
    const run = body && typeof body === "object" ? body : {};
    const next = {
      completed: `The run completed, in ${run.state}.`,
      running: `The run goes on (now in ${run.state}).`,
      suspended: `The run now waits in ${run.state}.`,
      failed: `The run failed, in ${run.state}.`,
      interrupted: "The run was interrupted.",
    }[run.status] || "The run goes on.";
    show("answered", "Thank you",
      h("div", { class: "link-message link-message-done", id: "link-done", dataset: { status: run.status || "" }, role: "status" },
        h("h1", {}, "Thank you: your answer was taken."),
        h("p", {}, run.status ? badge(run.status, { id: "link-run-status" }) : null, " ", h("span", { id: "link-run-next" }, next)),
        h("p", { class: "muted small" }, "You may close this page.")));
  };

  /** The question: the waiting state, its prompt, when it expires, the form. */
  const question = (hook) => {
    const parts = waitParts(hook, hook.answers || [], {
      base: "$",
      send: (answer) => fetch(`${path}?wait=10`, {
        method: "POST",
        headers: { accept: "application/json", "content-type": "application/json" },
        body: JSON.stringify(answer),
        cache: "no-store",
        signal,
      }),
      onDone: (_response, body) => answered(body),
      onProblem: (response) => {
        const reason = { 404: "invalid", 409: "taken", 410: "used" }[response.status];
        if (!reason) return false;
        refused(reason);
        return true;
      },
    });
    show("open", "Your answer is needed",
      h("div", { class: "card-head card-head-wait" },
        h("h1", { id: "link-title" }, "Your answer is needed"),
        h("span", { class: "spacer" }),
        parts.expires),
      h("div", { class: "pad link-body" },
        h("p", { class: "link-state muted" }, "Step ", h("span", { class: "mono state-name", id: "link-state" }, hook.state)),
        parts.prompt,
        (hook.answers && hook.answers.length) || hook.question
          ? parts.form
          : h("p", { class: "banner banner-error" }, "This question takes no answer here.")));
    const first = $("#answer-form input, #answer-form textarea", card);
    if (first) first.focus();
  };

  async function load() {
    show("loading", "Loading", h("p", { class: "muted pad" }, "Loading…"));
    try {
      const response = await fetch(path, { headers: { accept: "application/json" }, cache: "no-store", signal });
      const body = await readBody(response);
      if (response.status === 404) return refused("invalid");
      if (response.status === 410) return refused("used");
      if (!response.ok || !body || typeof body !== "object") {
        return refused("error", body && body.detail ? body.detail : `HTTP ${response.status}`);
      }
      question(body);
    } catch (e) {
      if (!signal.aborted) refused("error", e.message);
    }
  }

  load();
  return { destroy() { controller.abort(); document.title = "claij"; } };
}

// ---------------------------------------------------------------------------------------

if (location.pathname.startsWith("/hooks/")) {
  // A resume link: its question only. No token, no way to the runs (the person has none).
  document.body.classList.add("link-mode");
  for (const nav of document.querySelectorAll(".nav")) nav.hidden = true;
  $("#token-button").hidden = true;
  $("#brand").removeAttribute("href");
  view = linkView($("#app"));
} else {
  $("#token-button").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    updateTokenButton();
    toast("The token was forgotten in this tab.");
  });
  updateTokenButton();
  window.addEventListener("hashchange", route);
  route();
}
