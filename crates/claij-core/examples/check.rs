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
