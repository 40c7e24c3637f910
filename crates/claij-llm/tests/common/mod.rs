//! Test support: a local HTTP server answering with canned responses in a provider's
//! documented wire format (remote model APIs are out of reach from the test machines),
//! recording what it was sent.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use claij_core::Fsm;
use claij_engine::{ActionRegistry, Engine};
use claij_llm::LlmLayer;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One canned answer.
#[derive(Clone)]
pub(crate) struct Canned {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Canned {
    pub(crate) fn json(status: u16, body: Value) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: body.to_string(),
        }
    }

    pub(crate) fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// What the server was sent.
#[derive(Clone, Debug)]
pub(crate) struct Received {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

/// A local HTTP/1.1 server: answers each request with the next canned answer (the last
/// one repeats).
pub(crate) struct StubServer {
    pub url: String,
    pub received: Arc<Mutex<Vec<Received>>>,
}

impl StubServer {
    pub(crate) async fn start(answers: Vec<Canned>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let received = Arc::new(Mutex::new(Vec::new()));
        let queue = Arc::new(Mutex::new(VecDeque::from(answers)));
        let rec = received.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                let rec = rec.clone();
                let queue = queue.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 8192];
                    let (head_end, content_length) = loop {
                        let n = sock.read(&mut chunk).await.unwrap_or(0);
                        if n == 0 {
                            return;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        if let Some(i) = find(&buf, b"\r\n\r\n") {
                            let head = String::from_utf8_lossy(&buf[..i]).to_string();
                            let len = head
                                .lines()
                                .find_map(|l| {
                                    let (k, v) = l.split_once(':')?;
                                    k.eq_ignore_ascii_case("content-length")
                                        .then(|| v.trim().parse::<usize>().ok())?
                                })
                                .unwrap_or(0);
                            break (i + 4, len);
                        }
                    };
                    while buf.len() < head_end + content_length {
                        let n = sock.read(&mut chunk).await.unwrap_or(0);
                        if n == 0 {
                            break;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                    }
                    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
                    let mut lines = head.lines();
                    let path = lines
                        .next()
                        .and_then(|l| l.split_whitespace().nth(1))
                        .unwrap_or("")
                        .to_owned();
                    let headers = lines
                        .filter_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            Some((k.trim().to_ascii_lowercase(), v.trim().to_owned()))
                        })
                        .collect();
                    let body = serde_json::from_slice(&buf[head_end..]).unwrap_or(Value::Null);
                    rec.lock().unwrap().push(Received {
                        path,
                        headers,
                        body,
                    });
                    let answer = {
                        let mut q = queue.lock().unwrap();
                        if q.len() > 1 {
                            q.pop_front().unwrap()
                        } else {
                            q.front().cloned().unwrap()
                        }
                    };
                    let mut out = format!(
                        "HTTP/1.1 {} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                        answer.status,
                        answer.body.len()
                    );
                    for (k, v) in &answer.headers {
                        out.push_str(&format!("{k}: {v}\r\n"));
                    }
                    out.push_str("\r\n");
                    out.push_str(&answer.body);
                    let _ = sock.write_all(out.as_bytes()).await;
                    let _ = sock.shutdown().await;
                });
            }
        });
        Self {
            url: format!("http://{addr}/v1"),
            received,
        }
    }

    pub(crate) fn requests(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A chat completion in OpenAI's documented format whose message content is `content`.
pub(crate) fn openai_answer(content: &str) -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110,
            "prompt_tokens_details": {"cached_tokens": 40}}
    })
}

/// A layer with one OpenAI-compatible provider `stub` at `url` and a model `m` on it.
pub(crate) fn layer_for(url: &str, extra: &str) -> LlmLayer {
    let toml = format!(
        r#"
default_model = "m"
{extra}
[providers.stub]
kind = "openai"
base_url = "{url}"
api_key_env = "STUB_KEY"
[models.m]
provider = "stub"
name = "stub-model"
price = {{ input = 1.0, output = 2.0, cached = 0.5 }}
[models.m2]
provider = "stub"
name = "stub-model-2"
"#
    );
    let config = claij_llm::LlmConfig::parse(&toml, std::path::Path::new("test.toml")).unwrap();
    let mut layer = LlmLayer::with_env(config, &|v| {
        (v == "STUB_KEY").then(|| "sk-test-SECRET-42".into())
    })
    .unwrap();
    layer.set_retry_policy(claij_llm::retry::RetryPolicy {
        max_retries: 3,
        base: std::time::Duration::from_millis(10),
        max: std::time::Duration::from_millis(200),
    });
    layer
}

/// An engine with the `llm` action over `layer`.
pub(crate) fn engine(layer: LlmLayer) -> Engine {
    let mut registry = ActionRegistry::with_builtins();
    claij_llm::register(&mut registry, Arc::new(layer));
    Engine::new(Arc::new(registry))
}

/// A one-question FSM: `ask` (llm) answers with `{"answer": string}` to `done`.
pub(crate) fn ask_fsm(engine: &Engine, ask_config: &str) -> Arc<Fsm> {
    let doc = format!(
        r#"
id: ask
states:
  - id: ask
    action: llm
    config: {ask_config}
  - id: done
    action: end
  - id: failed
    action: end
xitions:
  - id: [start, ask]
    schema: {{type: object, required: [question], properties: {{question: {{type: string}}}}}}
  - id: [ask, done]
    description: The answer.
    schema: {{type: object, required: [answer], properties: {{answer: {{type: string}}}}}}
  - id: [ask, failed]
    omit: true
"#
    );
    Arc::new(claij_core::load_str("ask.yaml", &doc, engine.registry()).unwrap())
}
