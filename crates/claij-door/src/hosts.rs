//! Whose requests a server answers: a `Host` it is known by (a guard against DNS
//! rebinding: a page whose name an attacker rebinds to 127.0.0.1 still sends that name),
//! and an `Origin` that is its own (a guard against other sites' pages in a browser).

use std::net::{IpAddr, SocketAddr};

/// The names a server answers to: loopback names (`localhost`, 127.0.0.0/8, `::1`) and
/// the address it is bound to, on any port; when bound to every interface (`0.0.0.0`,
/// `::`), any IP address (a rebinding attack needs a name); and the names given, each on
/// any port (`name`) or one (`name:port`).
#[derive(Debug, Clone)]
pub struct Hosts {
    bound: SocketAddr,
    names: Vec<(String, Option<u16>)>,
}

impl Hosts {
    /// The names of a server bound to `bound`, and `allowed` (`name`, `name:port`,
    /// `[v6]:port`; a URL's authority is taken as well).
    pub fn new(bound: SocketAddr, allowed: &[String]) -> Self {
        let names = allowed
            .iter()
            .filter_map(|a| {
                let authority = url_authority(a).unwrap_or(a);
                split_authority(authority)
            })
            .collect();
        Hosts { bound, names }
    }

    /// Whether a request whose `Host` (or URI authority) is `authority` is answered.
    pub fn allows(&self, authority: &str) -> bool {
        let Some((host, port)) = split_authority(authority) else {
            return false;
        };
        if host == "localhost" {
            return true;
        }
        if let Ok(ip) = host.parse::<IpAddr>() {
            return ip.is_loopback() || ip == self.bound.ip() || self.bound.ip().is_unspecified();
        }
        self.names
            .iter()
            .any(|(name, p)| *name == host && (p.is_none() || *p == port))
    }
}

/// Whether `origin` (an `Origin` header) is the origin of a request to `authority` (its
/// `Host`), or the server's public origin `public` (`https://claij.example.com`): the same
/// host and port (a `Host` without a port: the origin scheme's default). `null`, and any
/// other origin, is not.
pub fn same_origin(origin: &str, authority: &str, public: Option<&str>) -> bool {
    let Some(origin) = Origin::parse(origin) else {
        return false;
    };
    if public
        .and_then(Origin::parse)
        .is_some_and(|public| public == origin)
    {
        return true;
    }
    match split_authority(authority) {
        Some((host, port)) => host == origin.host && port.unwrap_or(origin.port) == origin.port,
        None => false,
    }
}

/// A serialized origin (`scheme://host[:port]`), its port made explicit.
#[derive(Debug, PartialEq, Eq)]
struct Origin {
    scheme: String,
    host: String,
    port: u16,
}

impl Origin {
    fn parse(text: &str) -> Option<Origin> {
        let (scheme, rest) = text.trim().split_once("://")?;
        let scheme = scheme.to_ascii_lowercase();
        let default = match scheme.as_str() {
            "http" => 80,
            "https" => 443,
            _ => return None,
        };
        let authority = rest.split(['/', '?', '#']).next()?;
        if authority.contains('@') {
            return None;
        }
        let (host, port) = split_authority(authority)?;
        Some(Origin {
            scheme,
            host,
            port: port.unwrap_or(default),
        })
    }
}

/// The authority of a URL (`https://user@name:8443/path` → `name:8443`), if `text` is one.
fn url_authority(text: &str) -> Option<&str> {
    let (_, rest) = text.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    Some(authority.rsplit_once('@').map_or(authority, |(_, a)| a))
}

/// `host[:port]` (`[v6][:port]` for IPv6) as its host — lower case, without brackets or
/// a trailing dot — and port.
fn split_authority(authority: &str) -> Option<(String, Option<u16>)> {
    let authority = authority.trim();
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(port) => Some(port.parse().ok()?),
            None if after.is_empty() => None,
            None => return None,
        };
        (host, port)
    } else {
        match authority.rsplit_once(':') {
            // A bare IPv6 address (not valid in `Host`, but unambiguous).
            Some((host, _)) if host.contains(':') => (authority, None),
            Some((host, port)) => (host, Some(port.parse().ok()?)),
            None => (authority, None),
        }
    };
    let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    if host.is_empty() || host.contains(['/', '@', ' ', '[', ']']) {
        return None;
    }
    Some((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loopback() -> Hosts {
        Hosts::new(
            SocketAddr::from(([127, 0, 0, 1], 8080)),
            &[
                "claij.internal".to_owned(),
                "other.example:8443".to_owned(),
                "https://claij.example.com/".to_owned(),
            ],
        )
    }

    #[test]
    fn loopback_names_and_the_names_given_are_answered() {
        let hosts = loopback();
        for ok in [
            "127.0.0.1:8080",
            "127.0.0.1",
            "127.1.2.3:9",
            "localhost:8080",
            "LOCALHOST",
            "localhost.",
            "[::1]:8080",
            "[::1]",
            "claij.internal",
            "Claij.Internal:1234",
            "other.example:8443",
            "claij.example.com",
        ] {
            assert!(hosts.allows(ok), "{ok}");
        }
        for refused in [
            "attacker.example:8080",
            "127.0.0.1.attacker.example",
            "localhost.attacker.example",
            "other.example:8444",
            "other.example",
            "internal",
            "10.0.0.1:8080",
            "[::2]:8080",
            "",
            "user@127.0.0.1",
            "127.0.0.1:port",
        ] {
            assert!(!hosts.allows(refused), "{refused}");
        }
    }

    #[test]
    fn a_server_bound_to_every_interface_answers_any_address_but_no_unknown_name() {
        let hosts = Hosts::new(SocketAddr::from(([0, 0, 0, 0], 8080)), &[]);
        assert!(hosts.allows("192.0.2.7:8080"));
        assert!(hosts.allows("[2001:db8::1]:8080"));
        assert!(!hosts.allows("claij.example.com:8080"));
        let one = Hosts::new(SocketAddr::from(([192, 0, 2, 7], 8080)), &[]);
        assert!(one.allows("192.0.2.7:8080"));
        assert!(!one.allows("192.0.2.8:8080"));
    }

    #[test]
    fn an_origin_is_the_requests_own_or_the_public_one() {
        assert!(same_origin("http://127.0.0.1:8080", "127.0.0.1:8080", None));
        assert!(same_origin("HTTP://LocalHost:8080", "localhost:8080", None));
        assert!(same_origin("http://[::1]:8080", "[::1]:8080", None));
        assert!(same_origin(
            "https://claij.example.com",
            "claij.example.com",
            None
        ));
        assert!(same_origin(
            "http://claij.example.com",
            "claij.example.com:80",
            None
        ));
        let public = Some("https://claij.example.com/");
        assert!(same_origin(
            "https://claij.example.com",
            "127.0.0.1:8080",
            public
        ));
        for cross in [
            "http://attacker.example",
            "http://127.0.0.1:8081",
            "null",
            "file://",
            "",
            "http://user@127.0.0.1:8080",
        ] {
            assert!(!same_origin(cross, "127.0.0.1:8080", public), "{cross}");
        }
        assert!(!same_origin(
            "http://claij.example.com",
            "127.0.0.1:8080",
            public
        ));
    }
}
