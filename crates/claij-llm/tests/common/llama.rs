//! A real OpenAI-compatible server: llama-cpp-python's (installed with the SmolLM2 model
//! by `scripts/setup/llama-server`) on a free loopback port, killed when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The server; `base_url` ends in `/v1`.
pub(crate) struct LlamaServer {
    child: Child,
    pub(crate) base_url: String,
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn cache() -> PathBuf {
    std::env::var_os("CLAIJ_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/claij"))
}

impl LlamaServer {
    /// The server with SmolLM2 (the Q4_1 file the setup script installs).
    pub(crate) async fn start() -> Self {
        Self::start_with(&cache().join("models/SmolLM2-135M-Instruct.Q4_1.gguf")).await
    }

    /// The server with the GGUF `model`, listening once the model is loaded.
    pub(crate) async fn start_with(model: &Path) -> Self {
        let python = cache().join("llama-venv/bin/python");
        // `python -m llama_cpp.server` with weight repacking off (see the setup script).
        let launcher = cache().join("llama-venv/claij_llama_server.py");
        assert!(
            python.exists() && launcher.exists() && model.exists(),
            "llama-cpp-python or the model {} is missing: run scripts/setup/llama-server",
            model.display()
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(&python)
            .arg(&launcher)
            .arg("--model")
            .arg(model)
            .args([
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "--n_threads",
                "2",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start llama_cpp.server");
        let server = Self {
            child,
            base_url: format!("http://127.0.0.1:{port}/v1"),
        };
        let started = Instant::now();
        // Accepting connections; the model loads before uvicorn listens.
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(
                started.elapsed() < Duration::from_secs(180),
                "llama_cpp.server did not start listening within 180 s"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        server
    }
}
