//! The policy's side of egress ([`crate::egress`]): where a connection made for an owner
//! may go, checked before anything is sent.

use std::net::SocketAddr;
use std::time::Duration;

use claij_core::Owner;

use super::Policy;
use crate::egress::{EgressRefused, Route, internal, shown, target};

/// How long resolving a name may take.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(10);

impl Policy {
    /// Where a connection to `url` made for `owner` may go, checked before anything is
    /// sent. For the operator: the URL read, resolved as usual (no addresses given). For
    /// an API client: an http(s) URL without credentials whose host, resolved once here,
    /// gives only public addresses — or whose host the operator names (`--allow-connect`,
    /// as the URL writes it), any; the caller connects to [`Route::addrs`] only and follows
    /// no redirect.
    pub async fn egress(&self, owner: Owner, url: &str) -> Result<Route, EgressRefused> {
        let refused = |why: String| EgressRefused {
            url: shown(url),
            why,
        };
        let target = target(url).map_err(&refused)?;
        let mut route = Route {
            url: target.url.to_string(),
            host: target.host.clone(),
            port: target.port,
            addrs: Vec::new(),
        };
        if owner == Owner::Operator {
            return Ok(route);
        }
        let named = self.names_host(&target.host, target.port);
        route.addrs = match target.ip {
            Some(ip) => {
                if !named && let Some(kind) = internal(ip) {
                    return Err(refused(format!(
                        "{ip} is a {kind}; such addresses are reached for API clients only \
                         where `--allow-connect` names them"
                    )));
                }
                vec![SocketAddr::new(ip, target.port)]
            }
            None => {
                let beyond = || {
                    refused(format!(
                        "`{host}` does not resolve to a public address (`--allow-connect {host}` \
                         would allow it)",
                        host = target.host
                    ))
                };
                let found = tokio::time::timeout(
                    RESOLVE_TIMEOUT,
                    tokio::net::lookup_host((target.host.as_str(), target.port)),
                )
                .await
                .map_err(|_| beyond())?
                .map_err(|_| beyond())?;
                let mut addrs: Vec<SocketAddr> = Vec::new();
                for addr in found {
                    if !addrs.contains(&addr) {
                        addrs.push(addr);
                    }
                }
                if addrs.is_empty() || (!named && addrs.iter().any(|a| internal(a.ip()).is_some()))
                {
                    return Err(beyond());
                }
                addrs
            }
        };
        Ok(route)
    }

    /// [`egress`](Self::egress)'s checks that need no resolution: whether `url` is one the
    /// process may connect to for `owner`, as far as its text tells.
    pub fn egress_text(&self, owner: Owner, url: &str) -> Result<(), EgressRefused> {
        let refused = |why: String| EgressRefused {
            url: shown(url),
            why,
        };
        let target = target(url).map_err(&refused)?;
        if owner == Owner::Operator || self.names_host(&target.host, target.port) {
            return Ok(());
        }
        match target.ip.and_then(|ip| internal(ip).map(|kind| (ip, kind))) {
            Some((ip, kind)) => Err(refused(format!(
                "{ip} is a {kind}; such addresses are reached for API clients only where \
                 `--allow-connect` names them"
            ))),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_client_reaches_public_and_named_addresses_only_and_the_operator_any() {
        let policy = Policy::nothing().allow_host("127.0.0.1:9");
        let client = Owner::Client;
        let refused = policy.egress(client, "http://127.0.0.1:10/").await;
        assert!(refused.is_err_and(|e| e.why.contains("loopback")));
        let named = policy.egress(client, "http://2130706433:9/").await;
        assert_eq!(
            named.map(|r| r.addrs),
            Ok(vec![SocketAddr::from(([127, 0, 0, 1], 9))])
        );
        // A name that resolves to loopback: refused unless named (localhost resolves
        // from /etc/hosts, nothing leaves the machine).
        assert!(policy.egress(client, "http://localhost:9/").await.is_err());
        let named = Policy::nothing().allow_host("localhost");
        let route = named.egress(client, "http://localhost:9/").await;
        assert!(route.is_ok_and(|r| r.pinned() && r.addrs.iter().all(|a| a.ip().is_loopback())));
        let public = policy.egress(client, "https://1.1.1.1/hook").await;
        assert!(public.is_ok_and(|r| r.addrs == [SocketAddr::from(([1, 1, 1, 1], 443))]));
        let operator = policy.egress(Owner::Operator, "http://127.0.0.1:10/").await;
        assert!(operator.is_ok_and(|r| !r.pinned()));
        assert!(
            policy
                .egress_text(client, "http://169.254.169.254/")
                .is_err()
        );
        assert!(policy.egress_text(client, "http://example.com/").is_ok());
    }
}
