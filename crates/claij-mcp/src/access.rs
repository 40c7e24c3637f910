//! On whose behalf a connection reaches its server: the operator's documents reach it
//! as written, with the operator's stored credentials and this process's environment;
//! an API client's document reaches it only as the engine's [`Policy`] allows — an HTTP
//! server at the addresses the egress policy checked (pinned, no redirect, no proxy),
//! without the operator's stored credentials unless `--allow-credentials` names it; a
//! stdio server as the program the policy found on this process's `PATH`, with none of
//! this process's secrets in its environment.

use std::path::PathBuf;

use claij_core::Owner;
use claij_engine::{Policy, Route};

use crate::error::McpError;
use crate::spec::{ServerSpec, Transport};

/// The variables of this process a client's stdio server is given (when set): what a
/// program needs to run, and no secret (as the engine's `command` action gives a
/// client's program).
const PASSED_TO_CLIENTS: [&str; 6] = ["PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR"];

/// How a connection may reach its server.
#[derive(Debug, Clone)]
pub struct Access {
    /// An HTTP server's addresses, checked: the connection goes there only, follows no
    /// redirect and no proxy. `None`: resolved as usual.
    pub(crate) route: Option<Route>,
    /// Whether the stored credentials for an HTTP server's URL are sent.
    pub(crate) credentials: bool,
    /// A stdio server's program as the policy found it (`None`: as written).
    pub(crate) program: Option<PathBuf>,
    /// Whether a stdio server inherits this process's environment (else only
    /// [`PASSED_TO_CLIENTS`], and its entry's `env`).
    pub(crate) inherit_environment: bool,
}

impl Access {
    /// As the operator: the server as written, the stored credentials for its URL sent,
    /// this process's environment inherited.
    pub fn operator() -> Self {
        Access {
            route: None,
            credentials: true,
            program: None,
            inherit_environment: true,
        }
    }

    /// As `owner`'s document may reach the server `name` at `spec`, by `policy`.
    pub async fn of(
        owner: Owner,
        policy: &Policy,
        name: &str,
        spec: &ServerSpec,
    ) -> Result<Self, McpError> {
        if owner == Owner::Operator {
            return Ok(Self::operator());
        }
        let refused = |message: String| McpError::Refused {
            server: name.to_owned(),
            message,
        };
        match &spec.transport {
            Transport::Http { url } => {
                policy
                    .host(owner, url)
                    .map_err(|r| refused(r.to_string()))?;
                let route = policy
                    .egress(owner, url)
                    .await
                    .map_err(|r| refused(r.to_string()))?;
                Ok(Access {
                    route: Some(route),
                    credentials: policy.credential(owner, url).is_ok(),
                    program: None,
                    inherit_environment: false,
                })
            }
            Transport::Stdio { command, env, .. } => {
                let program = policy
                    .program(owner, command)
                    .map_err(|r| refused(r.to_string()))?;
                for variable in env.keys() {
                    policy
                        .environment(owner, variable)
                        .map_err(|r| refused(r.to_string()))?;
                }
                Ok(Access {
                    route: None,
                    credentials: false,
                    program: Some(program),
                    inherit_environment: false,
                })
            }
        }
    }

    /// The variables of this process a server started with this access is given, when
    /// it does not inherit them all.
    pub(crate) fn passed_environment(&self) -> Option<Vec<(&'static str, std::ffi::OsString)>> {
        (!self.inherit_environment).then(|| {
            PASSED_TO_CLIENTS
                .iter()
                .filter_map(|name| std::env::var_os(name).map(|value| (*name, value)))
                .collect()
        })
    }

    /// An HTTP client along the checked route, when there is one: to its addresses only
    /// (a name pinned to them), no redirect followed, no proxy.
    pub(crate) fn pinned_client(&self) -> Result<Option<reqwest::Client>, String> {
        let Some(route) = &self.route else {
            return Ok(None);
        };
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy();
        if route.pinned() && route.host_is_name() {
            builder = builder.resolve_to_addrs(&route.host, &route.addrs);
        }
        builder.build().map(Some).map_err(|e| e.to_string())
    }
}
