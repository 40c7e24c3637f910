//! Finding the one JSON object in a model's answer: tolerates code fences and prose
//! around it.

use serde_json::Value;

/// Why no object was found.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExtractError {
    /// The answer holds no JSON object.
    #[error("the answer holds no JSON object")]
    NoObject,
    /// The answer holds several different JSON objects.
    #[error("the answer holds {0} JSON objects; answer with exactly one")]
    Several(usize),
}

/// The one JSON object in `text`: the whole text when it is one; else the objects found
/// by scanning for balanced `{…}` spans (code fences and prose ignored). Several equal
/// objects count as one.
pub fn extract_object(text: &str) -> Result<Value, ExtractError> {
    let trimmed = text.trim();
    if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(trimmed) {
        return Ok(v);
    }
    let mut found: Vec<Value> = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'{'
            && let Some(end) = balanced_end(&text[i..])
            && let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(&text[i..i + end])
        {
            if !found.contains(&v) {
                found.push(v);
            }
            i += end;
            continue;
        }
        i += 1;
    }
    match found.len() {
        0 => Err(ExtractError::NoObject),
        1 => Ok(found.remove(0)),
        n => Err(ExtractError::Several(n)),
    }
}

/// The length of the balanced `{…}` span at the start of `s` (strings respected).
fn balanced_end(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' => depth += 1,
            '}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_fenced_and_prose_wrapped_objects_are_found() {
        assert_eq!(extract_object(" {\"a\": 1} ").unwrap(), json!({"a": 1}));
        assert_eq!(
            extract_object("Sure!\n```json\n{\"a\": {\"b\": \"}\"}}\n```\nDone.").unwrap(),
            json!({"a": {"b": "}"}})
        );
        assert_eq!(
            extract_object("{\"a\":1} again {\"a\":1}").unwrap(),
            json!({"a": 1})
        );
    }

    #[test]
    fn garbage_and_ambiguity_are_refused() {
        assert_eq!(
            extract_object("no json { here"),
            Err(ExtractError::NoObject)
        );
        assert_eq!(extract_object("[1, 2]"), Err(ExtractError::NoObject));
        assert_eq!(
            extract_object("{\"a\":1} or {\"b\":2}"),
            Err(ExtractError::Several(2))
        );
    }
}
