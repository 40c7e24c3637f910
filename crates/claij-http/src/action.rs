//! `http`: calls a service over HTTP; its answer is the next event.
//!
//! The method, URL, headers and body are templates over the run's values (rendered in
//! `transform`'s environment, [`template_environment`], on a blocking thread, bounded by fuel), with `secret.NAME` for
//! each variable of the process's environment the state declares in `secrets`. A secret's
//! value is read when the call is made and never written anywhere: wherever it would
//! appear in the event, a failure or its output, it is replaced by `[secret NAME]`.
//!
//! Answers with 429 or 5xx are asked again (`retries`, 3 by default) after the wait the
//! answer's `Retry-After` names, or a growing backoff; every try of one attempt sends the
//! same `Idempotency-Key` ([`ActionInput::idempotency_key`]). The state's attempt timeout
//! bounds the whole call, and `request_timeout` (30 s by default) each try.
//!
//! Where the call may go is the operator's policy's to say
//! ([`Policy::host`](claij_engine::Policy::host) and [`Policy::egress`](claij_engine::Policy::egress)):
//! an API client's document reaches only the hosts `--allow-connect` names, checked when
//! it is registered (a URL whose host is written out) and again before each call, pinned
//! to the addresses checked, following no redirect.

use std::sync::Arc;
use std::time::Duration;

use claij_core::known_actions::ConfigRoute;
use claij_core::{ConfigIssue, JsonPath};
use minijinja::Environment;
use serde_json::{Map, Value, json};

use claij_engine::actions::{DEFAULT_FUEL, template_environment};
use claij_engine::capability::{Field, Need, NeedsOf, Touch};
use claij_engine::{Action, ActionError, ActionInput, ActionOutput, BoxFuture, Outcome};

/// How many times an answer with 429 or 5xx is asked again unless `retries` says.
const DEFAULT_RETRIES: u64 = 3;
/// The most `retries` may say.
const MAX_RETRIES: u64 = 10;
/// How long one try may take unless `request_timeout` says.
const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest wait a `Retry-After` is honoured for (a longer one is cut to it).
const MAX_RETRY_AFTER: Duration = Duration::from_secs(120);
/// The first backoff when an answer names no `Retry-After`; doubled each retry.
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// How much of an answer's body is read (beyond it the attempt fails).
const MAX_BODY: usize = 16 << 20;
/// How much of a refused answer's body a failure quotes.
const QUOTED: usize = 500;

/// Calls `config.url` with `config.method` (GET by default), `headers` and a JSON
/// `body` (a template; without one, POST, PUT and PATCH send the input event without its
/// `id`), and makes the answer the next event: `{"id": [state, next], "status", "headers",
/// "body"}`, `body` the answer's JSON (or its text with `response: text`), `headers` those
/// `response_headers` names (`content-type` by default). `next` is `config.next`, or the
/// state's only transition; `on_status` routes answers by status (`404`, `4xx`, `*`)
/// instead. An answer of 400 or more that no `on_status` routes is a failure.
pub struct Http {
    /// The environment templates are rendered in (`transform`'s, with its default fuel).
    env: Arc<Environment<'static>>,
}

impl Default for Http {
    fn default() -> Self {
        Self {
            env: Arc::new(template_environment(DEFAULT_FUEL)),
        }
    }
}

impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http").finish_non_exhaustive()
    }
}

/// The methods a state may use.
const METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

impl Action for Http {
    fn config_schema(&self) -> Value {
        json!({
            "type": "object",
            "required": ["url"],
            "properties": {
                "method": {"enum": METHODS, "default": "GET"},
                "url": {"type": "string", "minLength": 1, "description": "A template rendering the URL (http or https)."},
                "headers": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Header name to a template rendering its value."},
                "body": {"type": "string", "minLength": 1, "description": "A template rendering the JSON body; without it POST, PUT and PATCH send the input event without its `id`."},
                "secrets": {"type": "array", "uniqueItems": true, "items": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}, "description": "Environment variables the templates may read as `secret.NAME`; never written to the trail."},
                "next": {"type": "string", "minLength": 1, "description": "The state the answer goes to (default: the state's only transition)."},
                "on_status": {"type": "object", "propertyNames": {"pattern": "^([1-5][0-9][0-9]|[1-5]xx|\\*)$"}, "additionalProperties": {"type": "string"}, "description": "Status (`404`), class (`4xx`) or `*` to the state the answer goes to."},
                "response": {"enum": ["json", "text"], "default": "json"},
                "response_headers": {"type": "array", "items": {"type": "string", "minLength": 1}, "description": "The answer's headers kept in the event (default: content-type)."},
                "retries": {"type": "integer", "minimum": 0, "maximum": MAX_RETRIES, "default": DEFAULT_RETRIES},
                "request_timeout": {"type": ["number", "string"], "description": "How long one try may take (seconds, or `500ms`, `1m`); default 30 s."}
            },
            "additionalProperties": false
        })
    }

    /// The host of `url`; the variables `secrets` reads. Everything else is a template
    /// over the run's values or a setting of the call.
    fn touches(&self) -> &'static [Field] {
        const FIELDS: &[Field] = &[
            Field::new("/url", Touch::Host),
            Field::new("/secrets", Touch::Environment),
            Field::inert("/method"),
            Field::inert("/headers"),
            Field::inert("/body"),
            Field::inert("/next"),
            Field::inert("/on_status"),
            Field::inert("/response"),
            Field::inert("/response_headers"),
            Field::inert("/retries"),
            Field::inert("/request_timeout"),
        ];
        FIELDS
    }

    /// The variables `secrets` names, and the host of `url` when the URL writes it out
    /// (a templated host is checked when the call is made).
    fn needs(&self, of: NeedsOf<'_>) -> Vec<Need> {
        let mut needs = of.from_fields(&[Field::new("/secrets", Touch::Environment)]);
        if let Some(url) = of.config.get("url").and_then(Value::as_str)
            && let Some(fixed) = static_origin(url)
        {
            needs.push(Need {
                path: of.at.join("url"),
                touch: Touch::Host,
                value: fixed,
            });
        }
        needs
    }

    fn check_config(&self, config: &Value) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        let mut bad_names = Vec::new();
        let mut check = |pointer: String, template: &str| {
            if let Err(e) = self.env.template_from_str(template) {
                issues.push(ConfigIssue {
                    pointer,
                    message: format!("the template does not parse: {e}"),
                });
            }
        };
        for key in ["url", "body"] {
            if let Some(template) = config.get(key).and_then(Value::as_str) {
                check(format!("/{key}"), template);
            }
        }
        if let Some(headers) = config.get("headers").and_then(Value::as_object) {
            for (name, template) in headers {
                let pointer = JsonPath::root().join("headers").join(name);
                check(
                    pointer.pointer().to_owned(),
                    template.as_str().unwrap_or(""),
                );
                if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                    bad_names.push(ConfigIssue {
                        pointer: pointer.pointer().to_owned(),
                        message: format!("`{name}` is not a header name"),
                    });
                }
            }
        }
        issues.append(&mut bad_names);
        if let Some(timeout) = config.get("request_timeout")
            && let Err(e) = duration(timeout)
        {
            issues.push(ConfigIssue {
                pointer: "/request_timeout".into(),
                message: e,
            });
        }
        issues
    }

    /// `next` and each target of `on_status`.
    fn routes(&self, config: &Value) -> Vec<ConfigRoute> {
        let mut routes = Vec::new();
        if let Some(next) = config.get("next").and_then(Value::as_str) {
            routes.push(ConfigRoute {
                pointer: "/next".into(),
                target: next.to_owned(),
            });
        }
        for (key, target) in config
            .get("on_status")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            if let Some(target) = target.as_str() {
                routes.push(ConfigRoute {
                    pointer: JsonPath::root()
                        .join("on_status")
                        .join(key)
                        .pointer()
                        .to_owned(),
                    target: target.to_owned(),
                });
            }
        }
        routes
    }

    fn run<'a>(&'a self, input: ActionInput<'a>) -> BoxFuture<'a, Result<Outcome, ActionError>> {
        Box::pin(async move {
            let secrets = Secrets::read(&input)?;
            call(&self.env, &input, &secrets)
                .await
                .map(|event| ActionOutput::event(secrets.redact_value(event)).into())
                .map_err(|e| secrets.redact_error(e))
        })
    }
}

/// `scheme://host:port/` of a URL template whose scheme and host are written out (no
/// template syntax before the path), or `None` when a template may choose the host.
fn static_origin(template: &str) -> Option<String> {
    let marker = ["{{", "{%", "{#"]
        .iter()
        .filter_map(|m| template.find(m))
        .min();
    let Some(marker) = marker else {
        return Some(template.to_owned());
    };
    let prefix = &template[..marker];
    let (scheme, rest) = prefix.split_once("://")?;
    let end = rest.find(['/', '?', '#'])?;
    Some(format!("{scheme}://{}/", &rest[..end]))
}

/// A duration: seconds, or a humantime string.
fn duration(value: &Value) -> Result<Duration, String> {
    match value {
        Value::Number(n) => n
            .as_f64()
            .filter(|s| *s > 0.0 && s.is_finite())
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
            .ok_or_else(|| format!("`{n}` is not a positive number of seconds")),
        Value::String(s) => humantime::parse_duration(s.trim())
            .map_err(|e| format!("`{s}` is not a duration ({e})"))
            .and_then(|d| {
                if d.is_zero() {
                    Err("a zero timeout".to_owned())
                } else {
                    Ok(d)
                }
            }),
        other => Err(format!("`{other}` is not a duration")),
    }
}

/// The secrets a state declares, read from the process's environment.
struct Secrets(Vec<(String, String)>);

impl Secrets {
    /// The values of the variables `config.secrets` names, each allowed by the policy for
    /// the document's owner.
    fn read(input: &ActionInput<'_>) -> Result<Self, ActionError> {
        let state = &input.state.id;
        let policy = input.scope.engine.policy();
        let mut found = Vec::new();
        let names = input.state.config.get("secrets").and_then(Value::as_array);
        for name in names.into_iter().flatten().filter_map(Value::as_str) {
            policy
                .environment(input.fsm.owner, name)
                .map_err(|r| ActionError::fatal(format!("state `{state}`: {r}")))?;
            match std::env::var(name) {
                Ok(value) => found.push((name.to_owned(), value)),
                Err(_) => {
                    return Err(ActionError::fatal(format!(
                        "state `{state}`: the secret `{name}` is not set in this process's environment"
                    )));
                }
            }
        }
        // The longest first, so that a secret containing another is replaced whole.
        found.sort_by_key(|(_, value)| std::cmp::Reverse(value.len()));
        Ok(Self(found))
    }

    /// The `secret` object templates see.
    fn as_context(&self) -> Map<String, Value> {
        self.0
            .iter()
            .map(|(name, value)| (name.clone(), Value::String(value.clone())))
            .collect()
    }

    /// `text` with every secret's value replaced by its name.
    fn redact(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for (name, value) in self.0.iter().filter(|(_, v)| !v.is_empty()) {
            if text.contains(value.as_str()) {
                text = text.replace(value.as_str(), &format!("[secret {name}]"));
            }
        }
        text
    }

    /// Whether `text` holds a secret's value.
    fn holds(&self, text: &str) -> bool {
        self.0
            .iter()
            .any(|(_, v)| !v.is_empty() && text.contains(v.as_str()))
    }

    /// `value` with every secret's value replaced, in strings and object keys.
    fn redact_value(&self, value: Value) -> Value {
        if self.0.is_empty() {
            return value;
        }
        match value {
            Value::String(s) => Value::String(self.redact(&s)),
            Value::Array(items) => {
                Value::Array(items.into_iter().map(|v| self.redact_value(v)).collect())
            }
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .map(|(k, v)| (self.redact(&k), self.redact_value(v)))
                    .collect(),
            ),
            other => other,
        }
    }

    fn redact_error(&self, mut error: ActionError) -> ActionError {
        error.message = self.redact(&error.message);
        error.output = self.redact_value(std::mem::take(&mut error.output));
        error
    }
}

/// The request of one attempt, rendered.
struct Request {
    method: reqwest::Method,
    url: String,
    headers: Vec<(String, String)>,
    body: Option<Vec<u8>>,
}

/// `url` as failures name it: no credentials, query or fragment.
fn located(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) => {
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.set_query(None);
            parsed.set_fragment(None);
            parsed.to_string()
        }
        Err(_) => claij_engine::egress::shown(url)
            .split(['?', '#'])
            .next()
            .unwrap_or_default()
            .to_owned(),
    }
}

/// Renders the request of `input`'s state.
async fn render(
    env: &Arc<Environment<'static>>,
    input: &ActionInput<'_>,
    secrets: &Secrets,
) -> Result<Request, ActionError> {
    let config = &input.state.config;
    let state = input.state.id.to_string();
    let method = config
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or("GET")
        .to_ascii_uppercase();
    let method = reqwest::Method::from_bytes(method.as_bytes())
        .map_err(|_| ActionError::fatal(format!("state `{state}`: `{method}` is not a method")))?;
    let url = config
        .get("url")
        .and_then(Value::as_str)
        .ok_or_else(|| ActionError::fatal(format!("state `{state}`: `config.url` is missing")))?
        .to_owned();
    let headers: Vec<(String, String)> = config
        .get("headers")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
        .collect();
    let body = config
        .get("body")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let (env, event, context) = (env.clone(), input.event.clone(), input.context.clone());
    let (run_id, secret) = (input.run_id.to_owned(), secrets.as_context());
    let state_name = state.clone();
    let rendered = tokio::task::spawn_blocking(move || {
        let ctx = minijinja::context! {
            event => minijinja::value::Serde(&event),
            context => minijinja::value::Serde(&context),
            state => state_name,
            run_id => run_id,
            secret => minijinja::value::Serde(&secret),
        };
        let one = |what: &str, template: &str| {
            env.render_str(template, &ctx)
                .map_err(|e| format!("the template of `{what}` failed: {e}"))
        };
        let url = one("url", &url)?;
        let headers = headers
            .iter()
            .map(|(name, template)| Ok((name.clone(), one(&format!("headers.{name}"), template)?)))
            .collect::<Result<Vec<_>, String>>()?;
        let body = body.map(|b| one("body", &b)).transpose()?;
        Ok::<_, String>((url, headers, body))
    })
    .await;
    let (url, headers, body) = match rendered {
        Ok(Ok(parts)) => parts,
        Ok(Err(message)) => {
            let mut error = ActionError::failed(format!("state `{state}`: {message}"));
            error.retryable = false;
            return Err(error);
        }
        Err(e) => {
            return Err(ActionError::failed(format!(
                "state `{state}`: the templates stopped: {e}"
            )));
        }
    };
    let body = match body {
        Some(text) => {
            let value: Value = serde_json::from_str(&text).map_err(|e| {
                let mut error = ActionError::parse(
                    format!("state `{state}`: the `body` template's output is not JSON ({e})"),
                    Value::String(text.clone()),
                );
                error.retryable = false;
                error
            })?;
            Some(serde_json::to_vec(&value).unwrap_or_default())
        }
        None if matches!(method.as_str(), "POST" | "PUT" | "PATCH") => {
            let mut event = input.event.clone();
            if let Value::Object(map) = &mut event {
                map.remove("id");
            }
            Some(serde_json::to_vec(&event).unwrap_or_default())
        }
        None => None,
    };
    Ok(Request {
        method,
        url: url.trim().to_owned(),
        headers,
        body,
    })
}

/// An answer read whole.
struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Vec<u8>,
}

/// Makes the call of `input`'s state and builds the next event from its answer.
async fn call(
    env: &Arc<Environment<'static>>,
    input: &ActionInput<'_>,
    secrets: &Secrets,
) -> Result<Value, ActionError> {
    let config = &input.state.config;
    let state = input.state.id.to_string();
    let request = render(env, input, secrets).await?;
    let shown = located(&request.url);
    let fatal = |message: String| ActionError::fatal(format!("state `{state}`: {message}"));

    // Where the call may go: for an API client's document, a host the operator names,
    // resolved once and pinned.
    let owner = input.fsm.owner;
    let policy = input.scope.engine.policy();
    policy
        .host(owner, &request.url)
        .map_err(|r| fatal(r.to_string()))?;
    let route = policy
        .egress(owner, &request.url)
        .await
        .map_err(|r| fatal(r.to_string()))?;

    let timeout = match config.get("request_timeout") {
        Some(value) => duration(value).map_err(fatal)?,
        None => DEFAULT_REQUEST_TIMEOUT,
    };
    let mut builder = reqwest::Client::builder()
        .timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy();
    if route.pinned() && route.host_is_name() {
        builder = builder.resolve_to_addrs(&route.host, &route.addrs);
    }
    let client = builder
        .build()
        .map_err(|e| fatal(format!("no HTTP client: {e}")))?;

    let mut headers = reqwest::header::HeaderMap::new();
    for (name, value) in &request.headers {
        let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| fatal(format!("`{name}` is not a header name")))?;
        let mut value = reqwest::header::HeaderValue::from_str(value).map_err(|_| {
            fatal(format!(
                "the header `{name}` renders a value no header may carry"
            ))
        })?;
        value.set_sensitive(secrets.holds(value.to_str().unwrap_or_default()));
        headers.insert(name, value);
    }
    let key = input.idempotency_key();
    if !headers.contains_key("idempotency-key")
        && let Ok(value) = reqwest::header::HeaderValue::from_str(&key)
    {
        headers.insert("idempotency-key", value);
    }
    if request.body.is_some() && !headers.contains_key(reqwest::header::CONTENT_TYPE) {
        headers.insert(
            reqwest::header::CONTENT_TYPE,
            reqwest::header::HeaderValue::from_static("application/json"),
        );
    }
    if !headers.contains_key(reqwest::header::ACCEPT) {
        headers.insert(
            reqwest::header::ACCEPT,
            reqwest::header::HeaderValue::from_static("application/json"),
        );
    }

    // A request that may change the world is noted (durable runs) before it is sent:
    // after a crash the run records that it may have happened, and the attempt made
    // again sends it with the same key.
    if !matches!(
        request.method,
        reqwest::Method::GET | reqwest::Method::HEAD | reqwest::Method::OPTIONS
    ) {
        input
            .meter
            .before_side_effect(claij_core::Intent {
                kind: claij_core::IntentKind::Request,
                name: format!("{} {shown}", request.method),
                server: None,
                key: key.clone(),
            })
            .await
            .map_err(|e| {
                ActionError::failed(format!(
                    "state `{state}`: `{} {shown}` could not be noted as in flight: {e}",
                    request.method
                ))
            })?;
    }
    let retries = config
        .get("retries")
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_RETRIES)
        .min(MAX_RETRIES);
    let method = request.method.clone();
    let mut tried = 0;
    let answer = loop {
        let mut send = client
            .request(method.clone(), &route.url)
            .headers(headers.clone());
        if let Some(body) = &request.body {
            send = send.body(body.clone());
        }
        let answer = match send.send().await {
            Ok(response) => read(response).await,
            Err(e) => Err(e),
        };
        let answer = answer.map_err(|e| {
            let what = if e.is_timeout() {
                format!("no answer within {}", humantime::format_duration(timeout))
            } else {
                e.without_url().to_string()
            };
            ActionError::failed(format!("state `{state}`: `{method} {shown}`: {what}"))
        })?;
        if answer.body.len() > MAX_BODY {
            return Err(fatal(format!(
                "`{method} {shown}` answered more than {} MiB",
                MAX_BODY >> 20
            )));
        }
        let again = answer.status == 429 || answer.status >= 500;
        if !again || tried >= retries {
            break answer;
        }
        let wait = retry_after(&answer.headers)
            .unwrap_or_else(|| FIRST_BACKOFF.saturating_mul(1 << tried.min(6)));
        tried += 1;
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = input.cancel.cancelled() => {
                return Err(fatal(format!("`{method} {shown}`: interrupted while waiting to ask again")));
            }
        }
    };

    let status = answer.status;
    let target = route_for(input, status).map_err(fatal)?;
    let Some(target) = target else {
        let quoted = String::from_utf8_lossy(&answer.body);
        let quoted: String = quoted.chars().take(QUOTED).collect();
        let mut error = ActionError::failed(format!(
            "state `{state}`: `{method} {shown}` answered {status}{}{}",
            if quoted.trim().is_empty() { "" } else { ": " },
            quoted.trim()
        ));
        // A refusal (4xx) is given again to the same request; an overloaded or failing
        // service (429, 5xx) may answer another attempt.
        error.retryable = status == 429 || status == 408 || status >= 500;
        return Err(error);
    };

    let body = if config.get("response").and_then(Value::as_str) == Some("text") {
        Value::String(String::from_utf8_lossy(&answer.body).into_owned())
    } else if answer.body.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        serde_json::from_slice(&answer.body).map_err(|e| {
            let text = String::from_utf8_lossy(&answer.body);
            let mut error = ActionError::parse(
                format!("state `{state}`: `{method} {shown}` answered {status} with a body that is not JSON ({e})"),
                Value::String(text.chars().take(2000).collect()),
            );
            error.retryable = false;
            error
        })?
    };
    let kept: Vec<String> = match config.get("response_headers").and_then(Value::as_array) {
        Some(names) => names
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_ascii_lowercase)
            .collect(),
        None => vec!["content-type".to_owned()],
    };
    let mut picked = Map::new();
    for name in kept {
        if let Some(value) = answer.headers.get(&name).and_then(|v| v.to_str().ok()) {
            picked.insert(name, Value::String(value.to_owned()));
        }
    }
    let event = json!({
        "id": [state, target],
        "status": status,
        "headers": picked,
        "body": body,
    });

    // Held to the transition's schema here, so that a failure names the call.
    if let Some(transition) = input.fsm.transition(&input.state.id, &target)
        && let Some(schema) = &transition.compiled
        && !schema.is_valid(&event)
    {
        let issues = schema.issues(&event);
        let listed: Vec<String> = issues
            .iter()
            .map(|i| {
                let at = if i.instance_path.is_empty() {
                    "/"
                } else {
                    &i.instance_path
                };
                format!("{at}: {}", i.message)
            })
            .collect();
        let mut error = ActionError::parse(
            format!(
                "state `{state}`: the answer of `{method} {shown}` ({status}) does not satisfy the schema of [{state}, {target}]: {}",
                listed.join("; ")
            ),
            secrets.redact_value(event),
        );
        error.kind = claij_core::FailureKind::Validation;
        error.retryable = false;
        return Err(error);
    }
    Ok(event)
}

/// Reads a response whole, up to a little more than [`MAX_BODY`].
async fn read(mut response: reqwest::Response) -> Result<Answer, reqwest::Error> {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_BODY {
            break;
        }
    }
    Ok(Answer {
        status,
        headers,
        body,
    })
}

/// The wait an answer's `Retry-After` asks for (seconds; a date is not read), at most
/// [`MAX_RETRY_AFTER`].
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let seconds: u64 = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(seconds).min(MAX_RETRY_AFTER))
}

/// Where an answer with `status` goes: the `on_status` entry matching it (the status,
/// then its class, then `*`), else for a status under 400 `next` or the state's only
/// transition (`Ok(None)`: a failure).
fn route_for(input: &ActionInput<'_>, status: u16) -> Result<Option<String>, String> {
    let config = &input.state.config;
    let on_status = config.get("on_status").and_then(Value::as_object);
    let class = format!("{}xx", status / 100);
    let routed = on_status.and_then(|routes| {
        [status.to_string(), class, "*".to_owned()]
            .iter()
            .find_map(|key| routes.get(key).and_then(Value::as_str))
    });
    if let Some(target) = routed {
        return Ok(Some(target.to_owned()));
    }
    if status >= 400 {
        return Ok(None);
    }
    if let Some(next) = config.get("next").and_then(Value::as_str) {
        return Ok(Some(next.to_owned()));
    }
    let routed_elsewhere: Vec<&str> = on_status
        .into_iter()
        .flatten()
        .filter_map(|(_, t)| t.as_str())
        .collect();
    let mut candidates = input
        .fsm
        .outgoing(&input.state.id)
        .map(|t| t.to.to_string())
        .filter(|to| !routed_elsewhere.contains(&to.as_str()));
    match (candidates.next(), candidates.next()) {
        (Some(only), None) => Ok(Some(only)),
        (None, _) => Err("the state has no transition for the answer (say `next`)".into()),
        (Some(_), Some(_)) => {
            Err("the state has more than one transition: `next` says which the answer takes".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_is_static_when_written_before_any_template() {
        assert_eq!(
            static_origin("http://127.0.0.1:9/items/{{ event.id }}"),
            Some("http://127.0.0.1:9/".into())
        );
        assert_eq!(
            static_origin("https://api.test/x"),
            Some("https://api.test/x".into())
        );
        assert_eq!(static_origin("http://{{ event.host }}/x"), None);
        assert_eq!(static_origin("{{ event.url }}"), None);
        assert_eq!(static_origin("http://api{{ n }}.test/"), None);
    }

    #[test]
    fn secrets_are_replaced_by_their_names_wherever_they_appear() {
        let secrets = Secrets(vec![("TOKEN".into(), "s3cr3t".into())]);
        let redacted =
            secrets.redact_value(json!({"echo": ["Bearer s3cr3t"], "s3cr3t": 1, "n": 2}));
        assert_eq!(
            redacted,
            json!({"echo": ["Bearer [secret TOKEN]"], "[secret TOKEN]": 1, "n": 2})
        );
        assert_eq!(
            located("http://u:p@h.test:8/a/b?token=x#f"),
            "http://h.test:8/a/b"
        );
    }
}
