//! Fetches the embedded model into the cache (what `claij model fetch` does) and prints
//! its path: `cargo run -p claij-embedded --example fetch`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = claij_embedded::fetch(&claij_embedded::cache_root())?;
    println!("{}", path.display());
    Ok(())
}
