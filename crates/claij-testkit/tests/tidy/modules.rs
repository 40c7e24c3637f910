//! A crate's graph of top-level modules, read from its source: a file `src/x.rs` or a
//! directory `src/x/` is module `x` (`lib.rs`/`main.rs`, the root, is no node), and module
//! `a` depends on module `b` when code in `a` names `crate::b` — in a `use`, grouped or
//! not, or as a path in code — or reaches it through `super::`/`self::`. Some top-level
//! modules are split: each of their children is a node of its own (the binary's
//! `commands::run`, `commands::serve`, …), so a child naming a sibling is an edge too.
//!
//! What it does not see: a module reaching another through an item the root re-exports
//! (`crate::Item` where `lib.rs` says `pub use b::Item`), and a parent naming its child by
//! a relative path (`run::execute` in `commands/mod.rs`).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::lexer::{Kind, Token, tokens};

/// One place a module names another.
#[derive(Debug, Clone)]
pub(crate) struct Use {
    /// The file, relative to the crate's `src/`.
    pub(crate) file: PathBuf,
    /// Its line.
    pub(crate) line: usize,
    /// The path as it resolves from the crate root (`routes::hooks::mint`).
    pub(crate) path: String,
}

/// A crate's module graph: its nodes, and for each edge where it arises.
#[derive(Debug, Default)]
pub(crate) struct Graph {
    /// Every module (`auth`, `commands::run`).
    pub(crate) nodes: BTreeSet<String>,
    /// `from → to`, with every place it arises (in file order).
    pub(crate) edges: BTreeMap<(String, String), Vec<Use>>,
}

/// Reads the crate whose source is under `src`; `split` names the top-level modules whose
/// children are nodes of their own.
pub(crate) fn read_crate(src: &Path, split: &[&str]) -> std::io::Result<Graph> {
    let mut files = Vec::new();
    collect_rs(src, &mut files)?;
    files.sort();
    let mut scanned = Vec::new();
    let mut test_only: Vec<Vec<String>> = Vec::new();
    for file in files {
        let rel = file.strip_prefix(src).unwrap_or(&file).to_path_buf();
        let module = module_of(&rel);
        let found = scan(&std::fs::read_to_string(&file)?, &module);
        for name in &found.test_modules {
            test_only.push(module.iter().cloned().chain([name.clone()]).collect());
        }
        scanned.push((rel, module, found.paths));
    }
    // Test code (`#[cfg(test)] mod x;` and all below it) is no part of the graph.
    scanned.retain(|(_, module, _)| !test_only.iter().any(|t| module.starts_with(t)));
    let mut graph = Graph::default();
    for (_, module, _) in &scanned {
        if let Some(first) = module.first() {
            graph.nodes.insert(first.clone());
            if let Some(second) = module.get(1).filter(|_| split.contains(&first.as_str())) {
                graph.nodes.insert(format!("{first}::{second}"));
            }
        }
    }
    for (rel, module, paths) in scanned {
        let Some(from) = node_of(&graph.nodes, &module) else {
            continue; // the root
        };
        for (path, line) in paths {
            let Some(to) = node_of(&graph.nodes, &path) else {
                continue;
            };
            if to != from {
                let place = Use {
                    file: rel.clone(),
                    line,
                    path: path.join("::"),
                };
                graph
                    .edges
                    .entry((from.clone(), to))
                    .or_default()
                    .push(place);
            }
        }
    }
    Ok(graph)
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect_rs(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// The module a file under `src/` is: `a/b.rs` and `a/b/mod.rs` are `[a, b]`; the root
/// files are `[]`.
pub(crate) fn module_of(rel: &Path) -> Vec<String> {
    let mut segments: Vec<String> = rel
        .iter()
        .map(|s| s.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if segments.len() == 1 && matches!(segments[0].as_str(), "lib" | "main") {
        segments.clear();
    }
    if segments.last().is_some_and(|s| s == "mod") {
        segments.pop();
    }
    segments
}

/// The node a module path (from the crate root) falls in, if any.
fn node_of(nodes: &BTreeSet<String>, path: &[String]) -> Option<String> {
    let first = path.first()?;
    if let Some(second) = path.get(1) {
        let child = format!("{first}::{second}");
        if nodes.contains(&child) {
            return Some(child);
        }
    }
    nodes.contains(first).then(|| first.clone())
}

/// What one file says about the module graph.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    /// Every path from `crate`, `super` or `self` it names, resolved from the crate root,
    /// with its line.
    pub(crate) paths: Vec<(Vec<String>, usize)>,
    /// The child modules it declares for tests only (`#[cfg(test)] mod tests;`).
    pub(crate) test_modules: Vec<String>,
}

/// Reads `source`, the file of module `module`. Grouped `use` trees give one path per
/// leaf; `super` inside an inline `mod x { … }` counts from `x`; a macro's `$crate` is not
/// counted, nor anything inside a `#[cfg(test)] mod x { … }`.
pub(crate) fn scan(source: &str, module: &[String]) -> Scan {
    let toks = tokens(source);
    let kind = |i: usize| toks.get(i).map(|t| &t.kind);
    let mut out = Scan::default();
    let mut depth = 0usize;
    // Inline modules open around the current token, with the depth of their body.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        match &toks[i].kind {
            Kind::Open => depth += 1,
            Kind::Close => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            Kind::Punct('#') if is_cfg_test(&toks, i) => {
                let mut j = skip_attributes(&toks, i);
                if kind(j) == Some(&Kind::Ident("pub".into())) {
                    j += 1;
                    if kind(j) == Some(&Kind::Punct('(')) {
                        while kind(j).is_some_and(|k| *k != Kind::Punct(')')) {
                            j += 1;
                        }
                        j += 1;
                    }
                }
                if let (Some(Kind::Ident(word)), Some(Kind::Ident(name))) = (kind(j), kind(j + 1))
                    && word == "mod"
                {
                    match kind(j + 2) {
                        Some(Kind::Open) => {
                            i = skip_braces(&toks, j + 2);
                            continue;
                        }
                        Some(Kind::Punct(';')) if inline.is_empty() => {
                            out.test_modules.push(name.clone());
                        }
                        _ => {}
                    }
                }
                i = j;
                continue;
            }
            Kind::Ident(word) if word == "mod" => {
                if let (Some(Kind::Ident(name)), Some(Kind::Open)) = (kind(i + 1), kind(i + 2)) {
                    depth += 1;
                    inline.push((name.clone(), depth));
                    i += 3;
                    continue;
                }
            }
            Kind::Ident(word)
                if matches!(word.as_str(), "crate" | "super" | "self")
                    && kind(i + 1) == Some(&Kind::PathSep)
                    && (i == 0 || toks[i - 1].kind != Kind::Dollar) =>
            {
                let here: Vec<String> = module
                    .iter()
                    .cloned()
                    .chain(inline.iter().map(|(name, _)| name.clone()))
                    .collect();
                let (trees, next) = use_tree(&toks, i, Vec::new());
                for relative in trees {
                    if let Some(path) = resolve(&here, &relative) {
                        out.paths.push((path, toks[i].line));
                    }
                }
                i = next;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Whether the tokens from `i` are `#[cfg(test)]`.
fn is_cfg_test(toks: &[Token], i: usize) -> bool {
    let want = [
        Kind::Punct('#'),
        Kind::Punct('['),
        Kind::Ident("cfg".into()),
        Kind::Punct('('),
        Kind::Ident("test".into()),
        Kind::Punct(')'),
        Kind::Punct(']'),
    ];
    toks.len() >= i + want.len() && toks[i..i + want.len()].iter().map(|t| &t.kind).eq(&want)
}

/// The index after the outer attributes (`#[…]`, brackets balanced) starting at `i`.
fn skip_attributes(toks: &[Token], mut i: usize) -> usize {
    while toks.get(i).map(|t| &t.kind) == Some(&Kind::Punct('#'))
        && toks.get(i + 1).map(|t| &t.kind) == Some(&Kind::Punct('['))
    {
        let mut depth = 0;
        i += 1;
        while let Some(t) = toks.get(i) {
            i += 1;
            match t.kind {
                Kind::Punct('[') => depth += 1,
                Kind::Punct(']') => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    i
}

/// The index after the brace block opening at `i`.
fn skip_braces(toks: &[Token], mut i: usize) -> usize {
    let mut depth = 0;
    while let Some(t) = toks.get(i) {
        i += 1;
        match t.kind {
            Kind::Open => depth += 1,
            Kind::Close => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            _ => {}
        }
    }
    i
}

/// Reads a path or `use` tree from `i`: `a::b::c`, `a::{b, c::{d, e}}`; returns each leaf
/// path (with `prefix` before it) and the index after the tree.
fn use_tree(toks: &[Token], mut i: usize, prefix: Vec<String>) -> (Vec<Vec<String>>, usize) {
    let mut segments = prefix;
    loop {
        match toks.get(i).map(|t| &t.kind) {
            Some(Kind::Ident(word)) => {
                segments.push(word.clone());
                i += 1;
            }
            Some(Kind::Open) => {
                i += 1;
                let mut leaves = Vec::new();
                loop {
                    match toks.get(i).map(|t| &t.kind) {
                        None => break,
                        Some(Kind::Close) => {
                            i += 1;
                            break;
                        }
                        // `,` between leaves; a leaf `*` is the group's prefix itself.
                        Some(Kind::Comma | Kind::Punct(_) | Kind::Literal) => i += 1,
                        Some(_) => {
                            let (more, next) = use_tree(toks, i, segments.clone());
                            leaves.extend(more);
                            i = next.max(i + 1);
                        }
                    }
                }
                return (leaves, i);
            }
            _ => return (vec![segments], i),
        }
        if toks.get(i).is_some_and(|t| t.kind == Kind::PathSep) {
            i += 1;
        } else {
            return (vec![segments], i);
        }
    }
}

/// `relative` (from `crate`, `super` or `self`) as a path from the crate root, seen from
/// module `here`; `None` when it climbs above the root.
fn resolve(here: &[String], relative: &[String]) -> Option<Vec<String>> {
    let mut path = here.to_vec();
    for (k, segment) in relative.iter().enumerate() {
        match segment.as_str() {
            "crate" if k == 0 => path.clear(),
            "self" => {}
            "super" => {
                path.pop()?;
            }
            name => path.push(name.to_owned()),
        }
    }
    Some(path)
}

/// The graph's circles: each strongly connected set of two or more modules, as one
/// shortest circle through its first module, then every edge inside it and the first
/// place it arises. Empty when the graph has none.
pub(crate) fn circles(graph: &Graph) -> Vec<String> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in graph.edges.keys() {
        next.entry(from.as_str()).or_default().push(to.as_str());
    }
    let mut reports = Vec::new();
    for component in strongly_connected(&graph.nodes, &next) {
        if component.len() < 2 {
            continue;
        }
        let inside: BTreeSet<&str> = component.iter().copied().collect();
        let circle = shortest_circle(component[0], &next, &inside);
        let mut report = circle.join(" → ");
        for ((from, to), uses) in &graph.edges {
            if inside.contains(from.as_str()) && inside.contains(to.as_str()) {
                let first = &uses[0];
                let _ = write!(
                    report,
                    "\n      {from} → {to}: src/{}:{} names {}",
                    first.file.display(),
                    first.line,
                    first.path
                );
                if uses.len() > 1 {
                    let _ = write!(report, " (and {} more)", uses.len() - 1);
                }
            }
        }
        reports.push(report);
    }
    reports
}

/// Tarjan's strongly connected components, each sorted, in a stable order.
fn strongly_connected<'a>(
    nodes: &'a BTreeSet<String>,
    next: &BTreeMap<&'a str, Vec<&'a str>>,
) -> Vec<Vec<&'a str>> {
    struct State<'a> {
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<&'a str>>,
    }
    fn visit<'a>(v: &'a str, next: &BTreeMap<&'a str, Vec<&'a str>>, s: &mut State<'a>) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for &w in next.get(v).map(Vec::as_slice).unwrap_or_default() {
            if !s.index.contains_key(w) {
                visit(w, next, s);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w);
                if w == v {
                    break;
                }
            }
            component.sort_unstable();
            s.out.push(component);
        }
    }
    let mut state = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in nodes {
        if !state.index.contains_key(v.as_str()) {
            visit(v, next, &mut state);
        }
    }
    state.out.sort();
    state.out
}

/// A shortest path from `start` back to itself, staying `inside`.
fn shortest_circle<'a>(
    start: &'a str,
    next: &BTreeMap<&'a str, Vec<&'a str>>,
    inside: &BTreeSet<&'a str>,
) -> Vec<&'a str> {
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &w in next.get(v).map(Vec::as_slice).unwrap_or_default() {
            if !inside.contains(w) {
                continue;
            }
            if w == start {
                let mut circle = vec![v];
                let mut at = v;
                while at != start {
                    at = came_from[at];
                    circle.push(at);
                }
                circle.reverse();
                circle.push(start);
                return circle;
            }
            if w != start && !came_from.contains_key(w) {
                came_from.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    vec![start]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paths `source`, the file of module `module` (`a::b`), names, joined with `::`.
    fn named(source: &str, module: &str) -> Vec<String> {
        let module: Vec<String> = module
            .split("::")
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        scan(source, &module)
            .paths
            .into_iter()
            .map(|(path, _)| path.join("::"))
            .collect()
    }

    #[test]
    fn a_plain_use() {
        assert_eq!(named("use crate::b::Thing;", "a"), ["b::Thing"]);
        assert_eq!(named("pub(crate) use crate::b::Thing;", "a"), ["b::Thing"]);
        assert_eq!(named("pub use crate::b as c;", "a"), ["b"]);
    }

    #[test]
    fn a_grouped_use() {
        assert_eq!(
            named("use crate::{b::{X, Y}, c, d::*};", "a"),
            ["b::X", "b::Y", "c", "d"]
        );
        assert_eq!(
            named("use crate::{\n    b::{self, X},\n    c::Z,\n};", "a"),
            ["b", "b::X", "c::Z"]
        );
    }

    #[test]
    fn a_path_in_code() {
        assert_eq!(
            named("fn f() -> crate::b::Out { crate::c::make::<u8>(1) }", "a"),
            ["b::Out", "c::make"]
        );
    }

    #[test]
    fn super_and_self() {
        // From a direct child of the root, `super` is the root.
        assert_eq!(named("use super::b::X;", "a"), ["b::X"]);
        // Deeper, `super` stays inside.
        assert_eq!(named("use super::c::X;", "a::b"), ["a::c::X"]);
        assert_eq!(named("use super::super::c;", "a::b"), ["c"]);
        assert_eq!(named("use self::inner::X;", "a"), ["a::inner::X"]);
        // Above the root is nothing.
        assert!(named("use super::super::c;", "a").is_empty());
    }

    #[test]
    fn super_in_an_inline_module_counts_from_it() {
        let source =
            "fn f() {}\nmod inner {\n    use super::*;\n    use super::super::b;\n}\nuse super::c;";
        assert_eq!(named(source, "a"), ["a", "b", "c"]);
    }

    #[test]
    fn test_code_is_not_counted() {
        let source = "use crate::b;\n#[cfg(test)]\n#[allow(unused)]\nmod tests {\n    use crate::c;\n    mod deeper { use crate::d; }\n}\n#[cfg(test)]\npub(crate) mod helpers;\nuse crate::e;";
        let found = scan(source, &["a".to_owned()]);
        let paths: Vec<String> = found.paths.iter().map(|(p, _)| p.join("::")).collect();
        assert_eq!(paths, ["b", "e"]);
        assert_eq!(found.test_modules, ["helpers"]);
    }

    #[test]
    fn comments_strings_and_macros_are_not_paths() {
        let source = r##"
            // use crate::b;
            /* crate::c::X and /* nested crate::d */ */
            /// [`crate::e`]
            const S: &str = "crate::f::g";
            const R: &str = r#"crate::h "quoted" "#;
            const C: char = '"';
            fn x<'a>(s: &'a str) -> &'a str { crate::i::j(s) }
            macro_rules! m { () => { $crate::k::l } }
        "##;
        assert_eq!(named(source, "a"), ["i::j"]);
    }

    #[test]
    fn pub_crate_is_no_path() {
        assert!(named("pub(crate) fn f() {} pub(super) struct S;", "a").is_empty());
    }

    #[test]
    fn a_crate_with_a_circle() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path();
        std::fs::create_dir_all(src.join("b")).unwrap();
        std::fs::create_dir_all(src.join("commands")).unwrap();
        std::fs::write(
            src.join("lib.rs"),
            "mod a; mod b; use crate::a::X;\n#[cfg(test)]\nmod support;",
        )
        .unwrap();
        std::fs::write(
            src.join("a.rs"),
            "use crate::b::inner::Y;\n#[cfg(test)]\nmod tests { use crate::support::S; }",
        )
        .unwrap();
        std::fs::write(src.join("support.rs"), "use crate::a::X;").unwrap();
        std::fs::write(src.join("b/mod.rs"), "mod inner;").unwrap();
        std::fs::write(src.join("b/inner.rs"), "use super::super::a;").unwrap();
        std::fs::write(src.join("c.rs"), "use crate::a;").unwrap();
        std::fs::write(src.join("commands/mod.rs"), "mod run; mod serve;").unwrap();
        std::fs::write(src.join("commands/run.rs"), "use super::serve::S;").unwrap();
        std::fs::write(src.join("commands/serve.rs"), "use crate::commands::run;").unwrap();

        let whole = read_crate(src, &[]).unwrap();
        assert_eq!(
            whole.nodes.iter().collect::<Vec<_>>(),
            ["a", "b", "c", "commands"]
        );
        let found = circles(&whole);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("a → b → a\n"), "{}", found[0]);
        assert!(
            found[0].contains("b → a: src/b/inner.rs:1 names a"),
            "{}",
            found[0]
        );

        let split = read_crate(src, &["commands"]).unwrap();
        let found = circles(&split);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(
            found[1].starts_with("commands::run → commands::serve → commands::run"),
            "{}",
            found[1]
        );
    }
}
