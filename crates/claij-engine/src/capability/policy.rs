//! [`Policy`]: what the operator allows API clients' documents to touch, asked at
//! registration ([`Policy::refusals`]) and by the actions as they run.

use std::fmt;
use std::path::{Path, PathBuf};

use claij_core::Owner;

use super::{Need, Touch};

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
        let host = crate::egress::target(url).ok().map(|t| t.host);
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

#[cfg(test)]
mod tests {
    use super::*;

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
