//! Loads an FSM document and prints its diagnostics: `cargo run -p claij-core --example check FILE`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test or benchmark reports failure
fn main() {
    for p in std::env::args().skip(1) {
        match claij_core::load_file(std::path::Path::new(&p), &claij_core::BuiltinNames) {
            Ok(f) => println!(
                "{p}: ok ({} states, {} transitions)",
                f.states.len(),
                f.transitions.len()
            ),
            Err(e) => println!("{e}"),
        }
    }
}
