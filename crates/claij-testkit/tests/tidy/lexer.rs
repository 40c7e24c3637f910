//! Rust source as the few tokens the module graph reads: identifiers, `::`, braces,
//! commas and other punctuation. Comments, string and character literals and lifetimes are dropped, so a
//! `crate::x` in a comment or a string is never taken for a path.

/// One token, with the line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Token {
    /// What the token is.
    pub(crate) kind: Kind,
    /// Its line, from 1.
    pub(crate) line: usize,
}

/// The kinds of token the module graph tells apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    /// An identifier or keyword (`crate`, `use`, `foo`); raw identifiers without `r#`.
    Ident(String),
    /// `::`
    PathSep,
    /// `{`
    Open,
    /// `}`
    Close,
    /// `,`
    Comma,
    /// `$` (a macro's `$crate` is not this crate's path).
    Dollar,
    /// Any other punctuation (`#`, `[`, `(`, `*`, …).
    Punct(char),
    /// A string, character or number literal.
    Literal,
}

/// Splits `source` into tokens.
pub(crate) fn tokens(source: &str) -> Vec<Token> {
    let chars: Vec<char> = source.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let push = |out: &mut Vec<Token>, kind, line| out.push(Token { kind, line });
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match c {
            '\n' => {
                line += 1;
                i += 1;
            }
            c if c.is_whitespace() => i += 1,
            '/' if next == Some('/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '/' if next == Some('*') => {
                let mut depth = 0;
                while i < chars.len() {
                    if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                        depth += 1;
                        i += 2;
                    } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        if chars[i] == '\n' {
                            line += 1;
                        }
                        i += 1;
                    }
                }
            }
            '"' => {
                push(&mut out, Kind::Literal, line);
                i = skip_string(&chars, i + 1, None, &mut line);
            }
            '\'' => {
                if next == Some('\\') {
                    // An escaped character literal: '\n', '\'', '\u{..}'.
                    i += 2;
                    while i < chars.len() && chars[i] != '\'' {
                        i += 1;
                    }
                    i += 1;
                    push(&mut out, Kind::Literal, line);
                } else if chars.get(i + 2) == Some(&'\'') {
                    // A character literal: 'a', '"', '{'.
                    i += 3;
                    push(&mut out, Kind::Literal, line);
                } else {
                    // A lifetime or label: drop the quote and its name.
                    i += 1;
                    while i < chars.len() && is_ident_char(chars[i]) {
                        i += 1;
                    }
                }
            }
            ':' if next == Some(':') => {
                push(&mut out, Kind::PathSep, line);
                i += 2;
            }
            '{' | '}' | ',' | '$' => {
                let kind = match c {
                    '{' => Kind::Open,
                    '}' => Kind::Close,
                    ',' => Kind::Comma,
                    _ => Kind::Dollar,
                };
                push(&mut out, kind, line);
                i += 1;
            }
            c if c.is_ascii_digit() => {
                while i < chars.len() && is_ident_char(chars[i]) {
                    i += 1;
                }
                push(&mut out, Kind::Literal, line);
            }
            c if is_ident_char(c) => {
                let start = i;
                while i < chars.len() && is_ident_char(chars[i]) {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                if let Some(after) = raw_string_start(&chars, i, &word) {
                    // r"…", r#"…"#, br"…", cr#"…"#: hashes counted, then the body.
                    let hashes = after - i - 1;
                    push(&mut out, Kind::Literal, line);
                    i = skip_string(&chars, after, Some(hashes), &mut line);
                } else if (word == "b" || word == "c") && chars.get(i) == Some(&'"') {
                    push(&mut out, Kind::Literal, line);
                    i = skip_string(&chars, i + 1, None, &mut line);
                } else if word == "r" && chars.get(i) == Some(&'#') {
                    // A raw identifier: r#type.
                    i += 1;
                } else {
                    push(&mut out, Kind::Ident(word), line);
                }
            }
            c => {
                push(&mut out, Kind::Punct(c), line);
                i += 1;
            }
        }
    }
    out
}

fn is_ident_char(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

/// When `word` (ending at `i`) opens a raw string, the index just past its opening quote.
fn raw_string_start(chars: &[char], i: usize, word: &str) -> Option<usize> {
    if !matches!(word, "r" | "br" | "cr") {
        return None;
    }
    let mut j = i;
    while chars.get(j) == Some(&'#') {
        j += 1;
    }
    (chars.get(j) == Some(&'"')).then_some(j + 1)
}

/// Skips a string body from `i` (just past its opening quote) to just past its closing
/// quote and `hashes` hashes (`None` for a plain string, whose `\"` does not close it).
fn skip_string(chars: &[char], mut i: usize, raw: Option<usize>, line: &mut usize) -> usize {
    let hashes = raw.unwrap_or(0);
    while i < chars.len() {
        match chars[i] {
            '\\' if raw.is_none() => {
                if chars.get(i + 1) == Some(&'\n') {
                    *line += 1;
                }
                i += 2;
            }
            '\n' => {
                *line += 1;
                i += 1;
            }
            '"' if (1..=hashes).all(|k| chars.get(i + k) == Some(&'#')) => return i + 1 + hashes,
            _ => i += 1,
        }
    }
    i
}
