//! A bot's prompts: each `prompts/NAME.md` of its folder is the MCP prompt `BOT_NAME` (a
//! chat client's slash command). The file may open with front matter — YAML between two
//! `---` lines: `description`, and `arguments` (`name`, `description`, `required`) — and
//! its text is the prompt's message, each `{{ARGUMENT}}` replaced by the argument's value
//! (an optional argument left out by nothing). `attach` lists files of the bot's folder
//! sent before the message, each as a message of its own: an image (`.png`, `.jpg`,
//! `.jpeg`, `.gif`, `.webp`) as image content, any other file as an embedded resource
//! (its text, or its bytes when it is not UTF-8).
//!
//! ```text
//! ---
//! description: Start a story about a subject.
//! arguments:
//!   - {name: subject, description: What the story is about, required: true}
//! ---
//! Let's write a short story about {{subject}}. Call story_writer to begin.
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::tool::is_tool_word;

/// The folder of a bot's prompts.
pub(crate) const PROMPTS_DIR: &str = "prompts";

/// One prompt of a bot.
#[derive(Debug, Clone, PartialEq)]
pub struct BotPrompt {
    /// The file's name without `.md`: the prompt is served as `BOT_NAME`.
    pub name: String,
    /// What it is for.
    pub description: Option<String>,
    /// Its arguments, in order.
    pub arguments: Vec<PromptArgument>,
    /// The message, with `{{ARGUMENT}}` placeholders.
    pub text: String,
    /// Files of the bot's folder sent before the message (checked when loaded, read when
    /// the prompt is got).
    pub attachments: Vec<PathBuf>,
    /// Its file.
    pub file: PathBuf,
}

/// One argument of a bot's prompt.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptArgument {
    /// Its name (the placeholder `{{NAME}}`).
    pub name: String,
    /// What to give.
    #[serde(default)]
    pub description: Option<String>,
    /// Whether it must be given.
    #[serde(default)]
    pub required: bool,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FrontMatter {
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    arguments: Vec<PromptArgument>,
    #[serde(default)]
    attach: Vec<String>,
}

/// The most bytes an attached file may hold.
const MOST_ATTACHED_BYTES: u64 = 1 << 20;

/// An attached file's path in `bot_dir`, checked: relative, inside the folder, a file of
/// at most [`MOST_ATTACHED_BYTES`].
fn attachment(bot_dir: &Path, name: &str) -> Result<PathBuf, String> {
    let relative = Path::new(name);
    let inside = relative
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_)));
    if name.is_empty() || !inside {
        return Err(format!(
            "`attach` names {name:?}: a path inside the bot's folder, relative to it"
        ));
    }
    let path = bot_dir.join(relative);
    // A link inside the folder to a file outside it is outside it.
    if let (Ok(real), Ok(real_dir)) = (std::fs::canonicalize(&path), std::fs::canonicalize(bot_dir))
        && !real.starts_with(&real_dir)
    {
        return Err(format!(
            "`attach` names {name:?}: a path inside the bot's folder, relative to it (it links outside)"
        ));
    }
    match std::fs::metadata(&path) {
        Ok(m) if m.is_file() && m.len() <= MOST_ATTACHED_BYTES => Ok(path),
        Ok(m) if m.is_file() => Err(format!(
            "`attach` names {name:?}, of {} bytes: at most {MOST_ATTACHED_BYTES} may be attached",
            m.len()
        )),
        Ok(_) => Err(format!("`attach` names {name:?}, which is not a file")),
        Err(e) => Err(format!(
            "`attach` names {name:?}, which cannot be read: {e}"
        )),
    }
}

/// The prompts in `bot_dir/prompts/` (none when the folder is absent), in file name
/// order, or every problem found, each with its file.
pub(crate) fn load(bot_dir: &Path) -> Result<Vec<BotPrompt>, Vec<(PathBuf, String)>> {
    let dir = bot_dir.join(PROMPTS_DIR);
    if !dir.exists() {
        return Ok(Vec::new());
    }
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) => return Err(vec![(dir, format!("cannot be read: {e}"))]),
    };
    let mut files: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    files.sort();
    let mut prompts = Vec::new();
    let mut problems = Vec::new();
    for file in files {
        if file.extension().is_none_or(|e| e != "md") {
            problems.push((file, "a prompt is a `.md` file".to_owned()));
            continue;
        }
        match read(bot_dir, &file) {
            Ok(prompt) => prompts.push(prompt),
            Err(message) => problems.push((file, message)),
        }
    }
    if problems.is_empty() {
        Ok(prompts)
    } else {
        Err(problems)
    }
}

/// One prompt file, checked: its name, front matter, placeholders and attachments.
fn read(bot_dir: &Path, file: &Path) -> Result<BotPrompt, String> {
    let name = file
        .file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    if !is_tool_word(&name) {
        return Err(format!(
            "the prompt name {name:?} must be 1-64 letters, digits, `_` or `-` (it becomes part of a prompt name)"
        ));
    }
    let content = std::fs::read_to_string(file).map_err(|e| format!("cannot be read: {e}"))?;
    let (front, text) = split_front_matter(&content)?;
    let front: FrontMatter = match front {
        Some(yaml) => {
            serde_yaml_ng::from_str(yaml).map_err(|e| format!("invalid front matter: {e}"))?
        }
        None => FrontMatter::default(),
    };
    let mut problems = Vec::new();
    for (i, argument) in front.arguments.iter().enumerate() {
        if !is_tool_word(&argument.name) {
            problems.push(format!(
                "the argument name {:?} must be 1-64 letters, digits, `_` or `-`",
                argument.name
            ));
        }
        if front.arguments[..i].iter().any(|a| a.name == argument.name) {
            problems.push(format!("the argument {:?} is listed twice", argument.name));
        }
    }
    for placeholder in placeholders(text) {
        if !front.arguments.iter().any(|a| a.name == placeholder) {
            problems.push(format!(
                "`{{{{{placeholder}}}}}` names no argument of the front matter"
            ));
        }
    }
    let mut attachments = Vec::new();
    for name in &front.attach {
        match attachment(bot_dir, name) {
            Ok(path) => attachments.push(path),
            Err(problem) => problems.push(problem),
        }
    }
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    Ok(BotPrompt {
        name,
        description: front.description,
        arguments: front.arguments,
        text: text.trim().to_owned(),
        attachments,
        file: file.to_path_buf(),
    })
}

/// The front matter (between a first line `---` and the next `---` line) and the rest.
fn split_front_matter(content: &str) -> Result<(Option<&str>, &str), String> {
    let Some(rest) = content
        .strip_prefix("---\n")
        .or_else(|| content.strip_prefix("---\r\n"))
    else {
        return Ok((None, content));
    };
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Ok((Some(&rest[..offset]), &rest[offset + line.len()..]));
        }
        offset += line.len();
    }
    Err("the front matter opened by `---` is not closed by a `---` line".to_owned())
}

/// The names in `{{NAME}}` placeholders, in order.
fn placeholders(text: &str) -> Vec<&str> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            break;
        };
        names.push(after[..end].trim());
        rest = &after[end + 2..];
    }
    names
}

/// An attached file as MCP content: an image, or an embedded resource.
fn attached(path: &Path) -> Result<Value, String> {
    use base64::Engine as _;
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let extension = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let image = match extension.as_str() {
        "png" => Some("image/png"),
        "jpg" | "jpeg" => Some("image/jpeg"),
        "gif" => Some("image/gif"),
        "webp" => Some("image/webp"),
        _ => None,
    };
    let encoded = || base64::engine::general_purpose::STANDARD.encode(&bytes);
    if let Some(mime) = image {
        return Ok(serde_json::json!({"type": "image", "data": encoded(), "mimeType": mime}));
    }
    let uri = format!("file://{}", path.display());
    let mime = match extension.as_str() {
        "md" => "text/markdown",
        "json" => "application/json",
        "yaml" | "yml" => "application/yaml",
        "html" => "text/html",
        "csv" => "text/csv",
        _ => "text/plain",
    };
    let resource = match std::str::from_utf8(&bytes) {
        Ok(text) => serde_json::json!({"uri": uri, "mimeType": mime, "text": text}),
        Err(_) => {
            serde_json::json!({"uri": uri, "mimeType": "application/octet-stream", "blob": encoded()})
        }
    };
    Ok(serde_json::json!({"type": "resource", "resource": resource}))
}

impl BotPrompt {
    /// The messages for `arguments`: each attachment, then the text (see
    /// [`render`](Self::render)); or why not.
    pub(crate) fn messages(&self, arguments: &Map<String, Value>) -> Result<Vec<Value>, String> {
        let text = self.render(arguments)?;
        let mut messages = Vec::new();
        for path in &self.attachments {
            messages.push(serde_json::json!({"role": "user", "content": attached(path)?}));
        }
        messages
            .push(serde_json::json!({"role": "user", "content": {"type": "text", "text": text}}));
        Ok(messages)
    }

    /// The message for `arguments` (their values as text), or why not: a required one
    /// missing, one the prompt does not take.
    pub(crate) fn render(&self, arguments: &Map<String, Value>) -> Result<String, String> {
        for given in arguments.keys() {
            if !self.arguments.iter().any(|a| &a.name == given) {
                return Err(format!(
                    "the prompt takes no argument `{given}` (it takes {})",
                    self.arguments
                        .iter()
                        .map(|a| a.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        if let Some(missing) = self
            .arguments
            .iter()
            .find(|a| a.required && !arguments.contains_key(&a.name))
        {
            return Err(format!("the prompt needs the argument `{}`", missing.name));
        }
        let mut text = String::new();
        let mut rest = self.text.as_str();
        while let Some(start) = rest.find("{{") {
            let after = &rest[start + 2..];
            let Some(end) = after.find("}}") else {
                break;
            };
            text.push_str(&rest[..start]);
            match arguments.get(after[..end].trim()) {
                Some(Value::String(s)) => text.push_str(s),
                Some(other) => text.push_str(&other.to_string()),
                None => {}
            }
            rest = &after[end + 2..];
        }
        text.push_str(rest);
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn write(dir: &Path, name: &str, text: &str) {
        crate::test_bots::write(dir, &format!("{PROMPTS_DIR}/{name}"), text);
    }

    #[test]
    fn a_prompt_reads_with_its_front_matter_and_renders_its_arguments() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(
            dir.path(),
            "new_story.md",
            "---\ndescription: Start a story.\narguments:\n  - {name: subject, required: true}\n  - {name: tone}\n---\nA story about {{subject}}, {{ tone }}.\n",
        );
        write(dir.path(), "plain.md", "No front matter here.\n");
        let prompts = load(dir.path()).expect("loads");
        assert_eq!(prompts.len(), 2);
        let story = &prompts[0];
        assert_eq!(story.name, "new_story");
        assert_eq!(story.description.as_deref(), Some("Start a story."));
        let args = json!({"subject": "a lighthouse", "tone": "quiet"});
        assert_eq!(
            story.render(args.as_object().expect("object")),
            Ok("A story about a lighthouse, quiet.".to_owned())
        );
        let only = json!({"subject": "rain"});
        assert_eq!(
            story.render(only.as_object().expect("object")),
            Ok("A story about rain, .".to_owned())
        );
        let e = story
            .render(json!({"tone": "dark"}).as_object().expect("object"))
            .expect_err("subject is required");
        assert!(e.contains("`subject`"), "{e}");
        let e = story
            .render(
                json!({"subject": "x", "colour": "red"})
                    .as_object()
                    .expect("object"),
            )
            .expect_err("no such argument");
        assert!(e.contains("`colour`"), "{e}");
        assert_eq!(prompts[1].text, "No front matter here.");
    }

    #[test]
    fn every_bad_prompt_file_is_reported_with_its_reason() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), "a.md", "---\narguments: [{name: x}]\nA {{x}}\n");
        write(dir.path(), "b.md", "---\ncolour: red\n---\nHi\n");
        write(dir.path(), "c.md", "Hello {{who}}\n");
        write(dir.path(), "d.txt", "not markdown\n");
        write(dir.path(), "bad name.md", "Hi\n");
        let problems = load(dir.path()).expect_err("all are bad");
        let text: Vec<String> = problems
            .iter()
            .map(|(f, m)| {
                format!(
                    "{}: {m}",
                    f.file_name().unwrap_or_default().to_string_lossy()
                )
            })
            .collect();
        assert_eq!(text.len(), 5, "{text:?}");
        assert!(
            text[0].starts_with("a.md: the front matter opened"),
            "{text:?}"
        );
        assert!(
            text[1].starts_with("b.md: invalid front matter") && text[1].contains("colour"),
            "{text:?}"
        );
        assert!(
            text[2].starts_with("bad name.md: the prompt name"),
            "{text:?}"
        );
        assert!(
            text[3].contains("c.md: `{{who}}` names no argument"),
            "{text:?}"
        );
        assert!(
            text[4].starts_with("d.txt: a prompt is a `.md` file"),
            "{text:?}"
        );
    }

    #[test]
    fn attached_files_go_before_the_message_as_an_image_and_an_embedded_resource() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("guide")).expect("mkdir");
        std::fs::write(dir.path().join("guide/style.md"), "Short sentences.").expect("write");
        std::fs::write(dir.path().join("guide/dot.png"), [0x89, b'P', b'N', b'G']).expect("write");
        write(
            dir.path(),
            "review.md",
            "---\nattach: [guide/dot.png, guide/style.md]\n---\nReview it.\n",
        );
        let prompts = load(dir.path()).expect("loads");
        let messages = prompts[0].messages(&Map::new()).expect("renders");
        assert_eq!(messages.len(), 3);
        assert_eq!(
            messages[0]["content"],
            json!({"type": "image", "data": "iVBORw==", "mimeType": "image/png"})
        );
        let resource = &messages[1]["content"]["resource"];
        assert_eq!(messages[1]["content"]["type"], "resource");
        assert_eq!(resource["mimeType"], "text/markdown");
        assert_eq!(resource["text"], "Short sentences.");
        assert!(
            resource["uri"]
                .as_str()
                .is_some_and(|u| u.starts_with("file://") && u.ends_with("guide/style.md"))
        );
        assert_eq!(
            messages[2]["content"],
            json!({"type": "text", "text": "Review it."})
        );
    }

    #[test]
    fn an_attachment_outside_the_folder_or_missing_is_a_problem_naming_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(
            dir.path(),
            "a.md",
            "---\nattach: [../secret.txt]\n---\nA.\n",
        );
        write(dir.path(), "b.md", "---\nattach: [nowhere.txt]\n---\nB.\n");
        write(dir.path(), "c.md", "---\nattach: [/etc/passwd]\n---\nC.\n");
        let problems = load(dir.path()).expect_err("refused");
        let text: Vec<&str> = problems.iter().map(|(_, m)| m.as_str()).collect();
        assert_eq!(text.len(), 3, "{text:?}");
        assert!(
            text[0].contains("\"../secret.txt\": a path inside the bot's folder"),
            "{text:?}"
        );
        assert!(
            text[1].contains("\"nowhere.txt\", which cannot be read"),
            "{text:?}"
        );
        assert!(
            text[2].contains("\"/etc/passwd\": a path inside"),
            "{text:?}"
        );
    }

    #[test]
    fn an_attachment_linking_out_of_the_folder_is_a_problem() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bot = dir.path().join("bot");
        std::fs::create_dir_all(&bot).expect("the bot's folder");
        std::fs::write(dir.path().join("secret.txt"), "the host's\n").expect("written");
        std::os::unix::fs::symlink(dir.path().join("secret.txt"), bot.join("link.txt"))
            .expect("a link");
        write(&bot, "d.md", "---\nattach: [link.txt]\n---\nD.\n");
        let problems = load(&bot).expect_err("refused");
        let text: Vec<&str> = problems.iter().map(|(_, m)| m.as_str()).collect();
        assert_eq!(text.len(), 1, "{text:?}");
        assert!(
            text[0].contains("\"link.txt\": a path inside the bot's folder"),
            "{text:?}"
        );
    }
}
