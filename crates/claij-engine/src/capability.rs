//! What a document touches outside its runs, and who may touch what.
//!
//! Every [`Action`] says, field by field, what its `config` touches outside the run
//! ([`Action::touches`]: files, programs, hosts, environment variables, models, MCP
//! servers), and from that what one state's config needs ([`Action::needs`]). The
//! needs of a whole document ([`document_needs`]) are what registration checks against
//! the operator's [`Policy`]; the same policy is asked again by the actions themselves
//! when they run ([`Policy::program`], [`Policy::file`], [`Policy::host`], …), so a
//! document that registration missed still cannot open a path or start a program.
//!
//! Whose document it is decides ([`Owner`]): the operator's touch what the process can;
//! an API client's touch only what the policy names — programs by absolute path, files
//! under named folders, hosts by name, environment variables by name. See
//! docs/SECURITY.md.

use std::fmt;
use std::path::{Path, PathBuf};

use claij_core::{Fsm, JsonPath, Owner};
use serde_json::{Map, Value};

use crate::action::Action;
use crate::registry::ActionRegistry;

/// What a config field touches outside the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Touch {
    /// Nothing outside the run: a prompt, a route, a number, a template.
    Nothing,
    /// A file or folder of the host (a child FSM's document, a working directory, a root
    /// shown to an MCP server).
    File,
    /// A program started (looked up on the process's `PATH` when it has no `/`).
    Program,
    /// A host connected to: the field holds a URL.
    Host,
    /// Environment variables a program is given: the field's keys name them.
    Environment,
    /// A model the operator configured, called with its provider's key (which never
    /// leaves the process; budgets bound what calls cost).
    Model,
    /// MCP servers by name: each touches what its entry in the document's `servers`
    /// says (and a server reached over HTTP, the operator's stored credential for it).
    Servers,
    /// A credential the process holds for a host (an MCP server's OAuth token): never a
    /// config field of its own, implied by a server's URL.
    Credential,
}

impl Touch {
    /// In words, for refusals.
    pub fn noun(self) -> &'static str {
        match self {
            Touch::Nothing => "nothing",
            Touch::File => "file",
            Touch::Program => "program",
            Touch::Host => "host",
            Touch::Environment => "environment variable",
            Touch::Model => "model",
            Touch::Servers => "MCP server",
            Touch::Credential => "stored credential",
        }
    }
}

/// One field of an action's config (or of an MCP server's entry) and what it touches.
///
/// `pointer` is a JSON Pointer into the config whose segments may be `*` (every member
/// or item). A field covers everything under it, so `{"/argv", Nothing}` with
/// `{"/argv/0", Program}` says that the first item starts a program and the rest touch
/// nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// Where, in the config.
    pub pointer: &'static str,
    /// What the value there touches.
    pub touch: Touch,
}

impl Field {
    /// A field touching `touch`.
    pub const fn new(pointer: &'static str, touch: Touch) -> Self {
        Self { pointer, touch }
    }

    /// A field touching nothing outside the run.
    pub const fn inert(pointer: &'static str) -> Self {
        Self::new(pointer, Touch::Nothing)
    }
}

/// One thing a document would touch, and where it says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    /// Where in the document (`$.states[2].config.argv[0]`).
    pub path: JsonPath,
    /// What kind of thing.
    pub touch: Touch,
    /// The thing: the path, program, URL, variable, model or server name as written.
    pub value: String,
}

impl fmt::Display for Need {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the {} `{}`", self.touch.noun(), self.value)
    }
}

/// Where an action's needs are asked for: one state's config, where it is written, and
/// the document it belongs to.
#[derive(Clone, Copy)]
pub struct NeedsOf<'a> {
    /// The state's config.
    pub config: &'a Value,
    /// Where the config is written in the document.
    pub at: &'a JsonPath,
    /// The document.
    pub fsm: &'a Fsm,
}

impl NeedsOf<'_> {
    /// The needs `fields` derive from the config: for each field that touches
    /// something, every value at its pointer (for [`Touch::Environment`], the keys of
    /// the object there).
    pub fn from_fields(&self, fields: &[Field]) -> Vec<Need> {
        let mut needs = Vec::new();
        for field in fields.iter().filter(|f| f.touch != Touch::Nothing) {
            let segments: Vec<&str> = field.pointer.split('/').skip(1).collect();
            values_at(
                self.config,
                &segments,
                self.at.clone(),
                &mut |path, value| {
                    needs.extend(values_of(field.touch, path, value));
                },
            );
        }
        needs
    }
}

/// Every value under `value` at `segments` (`*`: every member or item), with its path.
fn values_at(
    value: &Value,
    segments: &[&str],
    path: JsonPath,
    found: &mut dyn FnMut(JsonPath, &Value),
) {
    let Some((first, rest)) = segments.split_first() else {
        found(path, value);
        return;
    };
    match (value, *first) {
        (Value::Object(map), "*") => {
            for (key, member) in map {
                values_at(member, rest, path.join(key), found);
            }
        }
        (Value::Array(items), "*") => {
            for (i, item) in items.iter().enumerate() {
                values_at(item, rest, path.join(i), found);
            }
        }
        (Value::Object(map), key) => {
            if let Some(member) = map.get(key) {
                values_at(member, rest, path.join(key), found);
            }
        }
        (Value::Array(items), index) => {
            if let Some(item) = index.parse::<usize>().ok().and_then(|i| items.get(i)) {
                values_at(item, rest, path.join(index), found);
            }
        }
        _ => {}
    }
}

/// The needs of one value a field points at.
fn values_of(touch: Touch, path: JsonPath, value: &Value) -> Vec<Need> {
    let need = |path: JsonPath, value: &str| Need {
        path,
        touch,
        value: value.to_owned(),
    };
    match (touch, value) {
        (Touch::Environment, Value::Object(map)) => {
            map.keys().map(|k| need(path.join(k), k)).collect()
        }
        (_, Value::String(s)) => vec![need(path, s)],
        (_, Value::Array(items)) => items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| item.as_str().map(|s| need(path.join(i), s)))
            .collect(),
        _ => Vec::new(),
    }
}

/// Everything `fsm` would touch, in document order: each state's needs as its action
/// declares them, and the document's MCP servers (as the registered `mcp` action
/// declares them, whether or not a state of its own calls them: declaring a server
/// connects it).
pub fn document_needs(fsm: &Fsm, registry: &ActionRegistry) -> Vec<Need> {
    let mut needs = Vec::new();
    for state in &fsm.states {
        let Some(action) = registry.action(&state.action) else {
            continue;
        };
        let at = config_path(fsm, &state.id);
        needs.extend(action.needs(NeedsOf {
            config: &state.config,
            at: &at,
            fsm,
        }));
    }
    if !fsm.servers.is_empty()
        && let Some(mcp) = registry.action("mcp")
    {
        let every_server = Value::Object(Map::new());
        needs.extend(mcp.needs(NeedsOf {
            config: &every_server,
            at: &JsonPath::root().join("servers"),
            fsm,
        }));
    }
    let mut seen = std::collections::HashSet::new();
    needs.retain(|n| seen.insert((n.path.pointer().to_owned(), n.touch, n.value.clone())));
    needs
}

/// Where the config of state `id` is written in `fsm`'s document: `$.states[i].config`,
/// or, for the state an MCP hat added (`S.mcp`), `$.states[i].servers` of `S`.
pub fn config_path(fsm: &Fsm, id: &str) -> JsonPath {
    let states = fsm.document.get("states").and_then(Value::as_array);
    let index_of = |id: &str| {
        states
            .into_iter()
            .flatten()
            .position(|s| s.get("id").and_then(Value::as_str) == Some(id))
    };
    let root = JsonPath::root().join("states");
    if let Some(i) = index_of(id) {
        return root.join(i).join("config");
    }
    match id.strip_suffix(".mcp").and_then(index_of) {
        Some(i) => root.join(i).join("servers"),
        None => JsonPath::root(),
    }
}

/// Where the MCP server `name` of `fsm` is written: `$.servers.NAME`, or in the state that
/// declares it (`$.states[i].servers.NAME`, `$.states[i].config.servers.NAME`).
pub fn server_path(fsm: &Fsm, name: &str) -> JsonPath {
    let document = &fsm.document;
    if document.get("servers").and_then(|s| s.get(name)).is_some() {
        return JsonPath::root().join("servers").join(name);
    }
    let states = document.get("states").and_then(Value::as_array);
    for (i, state) in states.into_iter().flatten().enumerate() {
        let at = JsonPath::root().join("states").join(i);
        if state.get("servers").and_then(|s| s.get(name)).is_some() {
            return at.join("servers").join(name);
        }
        if state
            .get("config")
            .and_then(|c| c.get("servers"))
            .and_then(|s| s.get(name))
            .is_some()
        {
            return at.join("config").join("servers").join(name);
        }
    }
    JsonPath::root().join("servers").join(name)
}

/// What the operator allows the documents of API clients to touch, by name. Documents
/// the operator gave are not limited by it.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    programs: Vec<PathBuf>,
    folders: Vec<PathBuf>,
    hosts: Vec<HostEntry>,
    environment: Vec<String>,
    credentials: Vec<String>,
}

/// A host the operator allows: a name or an address as URLs write it (normalised as an
/// HTTP client reads it), and the one port allowed, if it says.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HostEntry {
    host: String,
    port: Option<u16>,
}

impl HostEntry {
    /// `name`, `name:port`, `address`, `[v6]` or `[v6]:port`.
    fn parse(text: &str) -> Self {
        let text = text.trim().to_ascii_lowercase();
        let bare_v6 = text.parse::<std::net::Ipv6Addr>().is_ok();
        let authority = if bare_v6 {
            format!("[{text}]")
        } else {
            text.clone()
        };
        match crate::egress::target(&format!("http://{authority}/")) {
            Ok(t) => HostEntry {
                host: t.host,
                port: t.url.port(),
            },
            Err(_) => HostEntry {
                host: text,
                port: None,
            },
        }
    }
}

impl fmt::Display for HostEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        match self.port {
            Some(port) => write!(f, "{host}:{port}"),
            None => f.write_str(&host),
        }
    }
}

/// A setting of a [`Policy`] that cannot be taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// A program allowed by a name, not an absolute path.
    #[error(
        "--allow-program takes a program's absolute path, not `{0}`{hint} (a name would let a document's own `PATH` choose the program)",
        hint = which(.0).map(|p| format!(" (on this machine: {})", p.display())).unwrap_or_default()
    )]
    NotAbsolute(String),
    /// A program or folder that does not exist.
    #[error("{what} `{path}` does not exist: {message}")]
    Missing {
        /// `the program` or `the folder`.
        what: &'static str,
        /// The path as given.
        path: String,
        /// Why.
        message: String,
    },
}

/// Why the policy refused a need.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} is not allowed for a document registered over the API: {why}")]
pub struct Refused {
    /// What was refused (`the program `python3``).
    pub what: String,
    /// Why, and what the operator would do to allow it.
    pub why: String,
}

impl Policy {
    /// A policy allowing API clients' documents nothing outside their runs.
    pub fn nothing() -> Self {
        Self::default()
    }

    /// Also allows the program at the absolute path `program` (its symbolic links
    /// resolved: a document naming any link to it gets it too).
    pub fn allow_program(mut self, program: &str) -> Result<Self, PolicyError> {
        if !Path::new(program).is_absolute() {
            return Err(PolicyError::NotAbsolute(program.to_owned()));
        }
        self.programs.push(canonical("the program", program)?);
        Ok(self)
    }

    /// Also allows the files under `folder` (and the folder itself), its symbolic links
    /// resolved.
    pub fn allow_folder(mut self, folder: &str) -> Result<Self, PolicyError> {
        self.folders.push(canonical("the folder", folder)?);
        Ok(self)
    }

    /// Also allows connections to `host` (a name or an address, with or without a port),
    /// whatever addresses it resolves to: for MCP servers of API clients' documents, and
    /// completion callbacks (see [`Policy::egress`]).
    pub fn allow_host(mut self, host: &str) -> Self {
        self.hosts.push(HostEntry::parse(host));
        self
    }

    /// Whether the operator names `host` (as [`crate::egress::Route::host`]) on `port`.
    pub(crate) fn names_host(&self, host: &str, port: u16) -> bool {
        self.hosts
            .iter()
            .any(|h| h.host == host && h.port.is_none_or(|p| p == port))
    }

    /// Also allows documents to set the environment variable `name` for their programs.
    pub fn allow_environment(mut self, name: &str) -> Self {
        self.environment.push(name.to_owned());
        self
    }

    /// Also sends the operator's stored credential for the server at `url` (its host, or
    /// the whole URL) when an API client's document connects to it.
    pub fn allow_credentials(mut self, url: &str) -> Self {
        self.credentials.push(url.to_owned());
        self
    }

    /// Whether `owner`'s document may have `need`.
    pub fn permit(&self, owner: Owner, need: &Need) -> Result<(), Refused> {
        if owner == Owner::Operator {
            return Ok(());
        }
        match need.touch {
            Touch::Nothing | Touch::Model | Touch::Servers => Ok(()),
            Touch::Program => self.program(owner, &need.value).map(drop),
            Touch::File => self.file(owner, Path::new(&need.value)).map(drop),
            Touch::Host => self.host(owner, &need.value),
            Touch::Environment => self.environment(owner, &need.value),
            Touch::Credential => self.credential(owner, &need.value),
        }
    }

    /// The needs of `fsm` its owner may not have, each with why.
    pub fn refusals(&self, fsm: &Fsm, registry: &ActionRegistry) -> Vec<(Need, Refused)> {
        document_needs(fsm, registry)
            .into_iter()
            .filter_map(|need| self.permit(fsm.owner, &need).err().map(|r| (need, r)))
            .collect()
    }

    /// The program `owner`'s document may start for `name`: for the operator, `name` as
    /// written (looked up on `PATH` as usual); for a client, the allowed program's
    /// absolute path, found on this process's `PATH` (never the document's).
    pub fn program(&self, owner: Owner, name: &str) -> Result<PathBuf, Refused> {
        if owner == Owner::Operator {
            return Ok(PathBuf::from(name));
        }
        let refused = |why: String| Refused {
            what: format!("the program `{name}`"),
            why,
        };
        let found = if name.contains('/') {
            Some(PathBuf::from(name))
        } else {
            which(name)
        };
        let Some(found) = found else {
            return Err(refused("no such program on this server's PATH".into()));
        };
        let real = std::fs::canonicalize(&found)
            .map_err(|e| refused(format!("{}: {e}", found.display())))?;
        if self.programs.contains(&real) {
            Ok(real)
        } else {
            Err(refused(format!(
                "the operator allows {} (`--allow-program {}` would allow it)",
                listed(&self.programs),
                found.display()
            )))
        }
    }

    /// The file or folder `owner`'s document may use at `path`: for the operator, `path`
    /// as written; for a client, its real path, which must lie under an allowed folder.
    pub fn file(&self, owner: Owner, path: &Path) -> Result<PathBuf, Refused> {
        if owner == Owner::Operator {
            return Ok(path.to_owned());
        }
        let refused = |why: String| Refused {
            what: format!("the file `{}`", path.display()),
            why,
        };
        let Ok(real) = std::fs::canonicalize(path) else {
            // Not said whether it exists: a document must not learn the host's files.
            return Err(refused(format!(
                "it is not under a folder the operator allows ({})",
                listed(&self.folders)
            )));
        };
        if self.folders.iter().any(|folder| real.starts_with(folder)) {
            Ok(real)
        } else {
            Err(refused(format!(
                "it is not under a folder the operator allows ({})",
                listed(&self.folders)
            )))
        }
    }

    /// Whether `owner`'s document may connect to `url`: for a client, an http(s) URL
    /// without credentials whose host the operator names (`--allow-connect`). Where it
    /// then connects is [`Policy::egress`]'s to say.
    pub fn host(&self, owner: Owner, url: &str) -> Result<(), Refused> {
        if owner == Owner::Operator {
            return Ok(());
        }
        let refused = |why: String| Refused {
            what: format!("the host of `{}`", crate::egress::shown(url)),
            why,
        };
        let target = crate::egress::target(url).map_err(refused)?;
        if self.names_host(&target.host, target.port) {
            return Ok(());
        }
        Err(refused(format!(
            "the operator allows {} (`--allow-connect` names them)",
            if self.hosts.is_empty() {
                "none".to_owned()
            } else {
                self.hosts
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        )))
    }

    /// Whether `owner`'s document may set the environment variable `name`.
    pub fn environment(&self, owner: Owner, name: &str) -> Result<(), Refused> {
        if owner == Owner::Operator || self.environment.iter().any(|n| n == name) {
            return Ok(());
        }
        Err(Refused {
            what: format!("the environment variable `{name}`"),
            why: "the operator allows a document to set only the variables `--allow-env` names"
                .into(),
        })
    }

    /// Whether the operator's stored credential for `url` may be sent for `owner`'s
    /// document.
    pub fn credential(&self, owner: Owner, url: &str) -> Result<(), Refused> {
        if owner == Owner::Operator {
            return Ok(());
        }
        let host = host_of(url).map(|(name, _)| name);
        let allowed = self
            .credentials
            .iter()
            .any(|c| c == url || host.as_deref() == Some(c.as_str()));
        if allowed {
            Ok(())
        } else {
            Err(Refused {
                what: format!("the stored credential for `{url}`"),
                why: "the operator's stored credentials go only to servers named by the \
                      operator's documents or by `--allow-credentials`"
                    .into(),
            })
        }
    }
}

/// A URL's host (lower case, without brackets) and port (the scheme's default when
/// none is written).
pub fn host_of(url: &str) -> Option<(String, u16)> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit('@').next()?;
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "https" => 443,
        "http" => 80,
        _ => return None,
    };
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None => default_port,
        };
        (host.to_owned(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host.to_owned(), port.parse().ok()?),
            None => (authority.to_owned(), default_port),
        }
    };
    (!host.is_empty()).then(|| (host.to_ascii_lowercase(), port))
}

/// The program `name` on this process's `PATH`.
fn which(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

fn canonical(what: &'static str, path: &str) -> Result<PathBuf, PolicyError> {
    std::fs::canonicalize(path).map_err(|e| PolicyError::Missing {
        what,
        path: path.to_owned(),
        message: e.to_string(),
    })
}

fn listed(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return "none".into();
    }
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The fields of `action`'s config schema that no [`Field`] of its
/// [`touches`](Action::touches) covers, as JSON Pointers with `*` for members and items:
/// what a test fails on, so that no field is added without saying what it touches.
pub fn unclassified(action: &dyn Action) -> Vec<String> {
    unclassified_in(&action.config_schema(), action.touches())
}

/// The positions of `schema` (a config's JSON Schema) that no field of `fields` covers.
pub fn unclassified_in(schema: &Value, fields: &[Field]) -> Vec<String> {
    let mut positions = Vec::new();
    schema_positions(schema, String::new(), &mut positions);
    positions
        .into_iter()
        .filter(|position| !fields.iter().any(|f| covers(f.pointer, position)))
        .collect()
}

/// Whether the field at `pointer` covers the schema position `position`: its segments
/// are a prefix of the position's (a field's `*` matching any segment; a position's `*`,
/// any member or item, only a field's `*`).
fn covers(pointer: &str, position: &str) -> bool {
    let field: Vec<&str> = pointer.split('/').skip(1).collect();
    let at: Vec<&str> = position.split('/').skip(1).collect();
    field.len() <= at.len() && field.iter().zip(&at).all(|(f, a)| f == a || *f == "*")
}

/// Every named place a config schema describes: its properties (recursively, through
/// items, additional and pattern properties, and the branches of `anyOf`/`oneOf`/
/// `allOf`/`if`/`then`/`else`).
fn schema_positions(schema: &Value, at: String, out: &mut Vec<String>) {
    let Value::Object(schema) = schema else {
        return;
    };
    if let Some(Value::Object(properties)) = schema.get("properties") {
        for (name, sub) in properties {
            let here = format!("{at}/{name}");
            out.push(here.clone());
            schema_positions(sub, here, out);
        }
    }
    for key in ["additionalProperties", "items"] {
        if let Some(sub @ Value::Object(_)) = schema.get(key) {
            schema_positions(sub, format!("{at}/*"), out);
        }
    }
    if let Some(Value::Object(patterns)) = schema.get("patternProperties") {
        // `x-…` members are the author's notes: claij never reads them.
        for (pattern, sub) in patterns.iter().filter(|(p, _)| !p.starts_with("^x-")) {
            let here = format!("{at}/{pattern}");
            out.push(here.clone());
            schema_positions(sub, here, out);
        }
    }
    if let Some(Value::Array(items)) = schema.get("prefixItems") {
        for (i, sub) in items.iter().enumerate() {
            schema_positions(sub, format!("{at}/{i}"), out);
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(branches)) = schema.get(key) {
            for sub in branches {
                schema_positions(sub, at.clone(), out);
            }
        }
    }
    for key in ["if", "then", "else"] {
        if let Some(sub) = schema.get(key) {
            schema_positions(sub, at.clone(), out);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_url_gives_its_host_and_port() {
        assert_eq!(
            host_of("http://Example.com/mcp"),
            Some(("example.com".into(), 80))
        );
        assert_eq!(
            host_of("https://u:p@h.test:8443/x?y"),
            Some(("h.test".into(), 8443))
        );
        assert_eq!(host_of("http://[::1]:3000/"), Some(("::1".into(), 3000)));
        assert_eq!(host_of("ftp://h/"), None);
        assert_eq!(host_of("http://:80/"), None);
    }

    #[test]
    fn fields_cover_what_lies_under_them() {
        assert!(covers("/argv", "/argv/0"));
        assert!(covers("/env/*", "/env/*"));
        assert!(covers("/servers/*/url", "/servers/*/url"));
        assert!(!covers("/argv/0", "/argv"));
        assert!(!covers("/argv/0", "/argv/*"));
        assert!(!covers("/cwd", "/env"));
    }

    #[test]
    fn an_unclassified_field_is_found_at_any_depth() {
        let schema = json!({
            "type": "object",
            "properties": {
                "argv": {"type": "array", "prefixItems": [{"type": "string"}]},
                "keep": {"type": "object", "properties": {"summary": {"type": "string"}, "path": {"type": "string"}}},
                "env": {"type": "object", "additionalProperties": {"type": "string"}}
            }
        });
        let fields = [
            Field::new("/argv/0", Touch::Program),
            Field::inert("/argv"),
            Field::inert("/keep/summary"),
            Field::new("/env", Touch::Environment),
        ];
        assert_eq!(unclassified_in(&schema, &fields), ["/keep", "/keep/path"]);
    }

    #[test]
    fn environment_needs_are_the_keys_and_others_the_values() {
        let env = values_of(
            Touch::Environment,
            JsonPath::root().join("env"),
            &json!({"PATH": "/x", "LANG": "C"}),
        );
        let names: Vec<&str> = env.iter().map(|n| n.value.as_str()).collect();
        assert_eq!(names, ["PATH", "LANG"]);
        assert_eq!(env[1].path.to_string(), "$.env.LANG");
        let list = values_of(
            Touch::Model,
            JsonPath::root().join("fallback"),
            &json!(["a", 3, "b"]),
        );
        let paths: Vec<String> = list.iter().map(|n| n.path.to_string()).collect();
        assert_eq!(paths, ["$.fallback[0]", "$.fallback[2]"]);
    }

    #[test]
    fn a_client_gets_only_what_is_named_and_the_operator_everything() {
        let dir = tempfile::tempdir().expect("a folder");
        let inside = dir.path().join("child.yaml");
        std::fs::write(&inside, "id: c").expect("written");
        let folder = dir.path().display().to_string();
        let policy = Policy::nothing()
            .allow_folder(&folder)
            .expect("the folder exists")
            .allow_program("/bin/sh")
            .expect("sh exists")
            .allow_host("127.0.0.1:9")
            .allow_environment("LANG");
        let client = Owner::Client;
        assert!(policy.file(client, &inside).is_ok());
        assert!(policy.file(client, Path::new("/etc/passwd")).is_err());
        let escape = dir.path().join("../../etc/passwd");
        assert!(policy.file(client, &escape).is_err());
        assert!(policy.program(client, "sh").is_ok());
        assert!(policy.program(client, "/bin/sh").is_ok());
        assert!(policy.program(client, "env").is_err());
        assert!(policy.host(client, "http://127.0.0.1:9/mcp").is_ok());
        assert!(policy.host(client, "http://127.0.0.1:10/mcp").is_err());
        assert!(policy.environment(client, "LANG").is_ok());
        assert!(policy.environment(client, "PATH").is_err());
        assert!(policy.credential(client, "http://127.0.0.1:9/mcp").is_err());
        let operator = Owner::Operator;
        assert_eq!(
            policy.file(operator, Path::new("/etc/passwd")),
            Ok(PathBuf::from("/etc/passwd"))
        );
        assert_eq!(policy.program(operator, "env"), Ok(PathBuf::from("env")));
        assert!(policy.credential(operator, "http://h/").is_ok());
    }

    #[test]
    fn programs_are_allowed_by_absolute_path_only() {
        assert!(matches!(
            Policy::nothing().allow_program("sh"),
            Err(PolicyError::NotAbsolute(_))
        ));
        assert!(matches!(
            Policy::nothing().allow_program("/no/such/program"),
            Err(PolicyError::Missing { .. })
        ));
    }
}
