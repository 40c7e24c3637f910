//! Places in a JSON value: `$.a.b[0]` (also `$['a b']`, `$` alone) or a JSON Pointer
//! (`/a/b/0`, `` for the whole value).

use std::fmt;

use serde_json::Value;

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// An object's member (or, given as a number in a pointer, an array's item).
    Key(String),
    /// An array's item (`[0]`).
    Index(usize),
}

/// A parsed path, shown as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValuePath {
    text: String,
    steps: Vec<Step>,
}

impl fmt::Display for ValuePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl ValuePath {
    /// Parses `$.a.b[0]`, `$['a b'][2]`, `$` or a JSON Pointer (`/a/b/0`, `` or `/`
    /// escapes `~0`, `~1`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let steps = if text.is_empty() {
            Vec::new()
        } else if let Some(rest) = text.strip_prefix('/') {
            rest.split('/')
                .map(|t| Step::Key(t.replace("~1", "/").replace("~0", "~")))
                .collect()
        } else if let Some(rest) = text.strip_prefix('$') {
            dollar_steps(rest)?
        } else {
            return Err(format!(
                "`{text}` is not a path: write `$.a.b[0]` or a JSON Pointer `/a/b/0`"
            ));
        };
        Ok(Self {
            text: text.to_owned(),
            steps,
        })
    }

    /// The value at this path, if there is one.
    pub fn find<'v>(&self, value: &'v Value) -> Option<&'v Value> {
        let mut here = value;
        for step in &self.steps {
            here = match (step, here) {
                (Step::Key(k), Value::Object(map)) => map.get(k)?,
                (Step::Key(k), Value::Array(items)) => items.get(k.parse::<usize>().ok()?)?,
                (Step::Index(i), Value::Array(items)) => items.get(*i)?,
                _ => return None,
            };
        }
        Some(here)
    }
}

fn dollar_steps(mut rest: &str) -> Result<Vec<Step>, String> {
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            let key = &after[..end];
            if key.is_empty() {
                return Err("an empty member name after `.`".into());
            }
            steps.push(Step::Key(key.to_owned()));
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after
                .find(']')
                .ok_or_else(|| "a `[` without its `]`".to_owned())?;
            let inside = after[..end].trim();
            let quoted = inside
                .strip_prefix('\'')
                .and_then(|s| s.strip_suffix('\''))
                .or_else(|| inside.strip_prefix('"').and_then(|s| s.strip_suffix('"')));
            match quoted {
                Some(key) => steps.push(Step::Key(key.to_owned())),
                None => steps.push(Step::Index(inside.parse().map_err(|_| {
                    format!("`[{inside}]` is neither an index nor a quoted name")
                })?)),
            }
            rest = &after[end + 1..];
        } else {
            return Err(format!(
                "unexpected `{rest}`: expected `.name` or `[index]`"
            ));
        }
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::ValuePath;
    use serde_json::json;

    #[test]
    fn dollar_paths_and_pointers_find_the_same_values() {
        let v = json!({"a": {"b": [10, {"c d": 3}]}, "x/y": 1});
        for (path, found) in [
            ("$.a.b[0]", Some(json!(10))),
            ("/a/b/0", Some(json!(10))),
            ("$.a.b[1]['c d']", Some(json!(3))),
            ("/a/b/1/c d", Some(json!(3))),
            ("/x~1y", Some(json!(1))),
            ("$", Some(v.clone())),
            ("", Some(v.clone())),
            ("$.a.b[2]", None),
            ("$.a.missing", None),
            ("/a/b/zero", None),
        ] {
            let p = ValuePath::parse(path).unwrap();
            assert_eq!(p.find(&v).cloned(), found, "{path}");
        }
    }

    #[test]
    fn bad_paths_say_why() {
        for (path, says) in [
            ("a.b", "is not a path"),
            ("$.a[", "without its `]`"),
            ("$.a[x]", "neither an index"),
            ("$..a", "empty member name"),
            ("$a", "unexpected `a`"),
        ] {
            let e = ValuePath::parse(path).unwrap_err();
            assert!(e.contains(says), "{path}: {e}");
        }
    }
}
