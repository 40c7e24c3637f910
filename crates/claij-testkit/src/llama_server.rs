//! A real OpenAI-compatible server: llama-cpp-python's (installed by
//! `scripts/setup/llama-server`, with the SmolLM2 model) on a free loopback port, serving
//! a GGUF file from claij's cache, killed when dropped.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The server; `base_url` ends in `/v1`.
pub struct LlamaServer {
    child: Child,
    /// `http://127.0.0.1:PORT/v1`.
    pub base_url: String,
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl LlamaServer {
    /// The server with SmolLM2 (the Q4_1 file the setup script installs).
    pub fn start() -> Self {
        Self::start_with(&crate::cache::dir().join("models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    }

    /// The server with the GGUF `model` and two threads, listening once the model is
    /// loaded (it blocks the calling thread until then, three minutes at most); panics
    /// with [`try_start_with`](Self::try_start_with)'s reason when it cannot start.
    pub fn start_with(model: &Path) -> Self {
        Self::try_start_with(model).unwrap_or_else(|message| panic!("{message}"))
    }

    /// [`start_with`](Self::start_with), saying why the server could not start.
    pub fn try_start_with(model: &Path) -> Result<Self, String> {
        let cache = crate::cache::dir();
        let python = cache.join("llama-venv/bin/python");
        // `python -m llama_cpp.server` with weight repacking off (see the setup script).
        let launcher = cache.join("llama-venv/claij_llama_server.py");
        if !(python.exists() && launcher.exists() && model.exists()) {
            return Err(format!(
                "llama-cpp-python or the model {} is missing: run scripts/setup/llama-server \
                 (and scripts/setup/model for the Qwen models)",
                model.display()
            ));
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .map_err(|e| format!("no free loopback port: {e}"))?;
        let child = Command::new(&python)
            .arg(&launcher)
            .arg("--model")
            .arg(model)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--n_threads", "2", "--n_ctx", "4096"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("llama_cpp.server did not start: {e}"))?;
        let server = Self {
            child,
            base_url: format!("http://127.0.0.1:{port}/v1"),
        };
        let started = Instant::now();
        // Accepting connections; the model loads before uvicorn listens.
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if started.elapsed() > Duration::from_secs(180) {
                return Err("llama_cpp.server did not start listening within 180 s".into());
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        Ok(server)
    }
}
