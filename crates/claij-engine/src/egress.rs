//! Where the process connects on an API client's behalf: the one egress policy of
//! completion callbacks and of the MCP servers of documents registered over the API.
//!
//! A URL is read the way HTTP clients read it (WHATWG: `http://2130706433/`,
//! `http://0x7f.1/` and `http://127.1/` are `http://127.0.0.1/`), must be `http` or
//! `https`, and may carry no user name or password. Its host is resolved **once**; every
//! address it resolves to is checked, and the connection is then made to those addresses
//! only ([`Route::addrs`]: the caller pins its HTTP client to them and follows no
//! redirect), so a name that resolves elsewhere a moment later changes nothing.
//!
//! An address is refused when it is internal ([`internal`]): loopback, private (RFC 1918,
//! IPv6 unique-local), link-local (where clouds serve their metadata), shared (CGNAT),
//! unspecified, multicast, broadcast, reserved or documentation ranges, and the IPv6 forms
//! that embed such an IPv4 address (mapped, compatible, NAT64, 6to4) — unless the
//! operator names the host as the URL writes it (`--allow-connect`: the policy's hosts,
//! `name` or `name:port`), which allows whatever that name resolves to. The operator's own
//! documents are not limited: the operator's [`Policy`](crate::capability::Policy) says
//! which hosts, and [`Policy::egress`](crate::capability::Policy::egress) checks a URL.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// A connection the policy allows: the URL as it will be used, and the addresses to
/// connect to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The URL as parsed (its host normalised; no credentials).
    pub url: String,
    /// Its host: a name, or an address (IPv6 without brackets).
    pub host: String,
    /// Its port (the scheme's default when it writes none).
    pub port: u16,
    /// The addresses checked, each with the port: the only ones to connect to. Empty for
    /// the operator's connections, which resolve as usual.
    pub addrs: Vec<SocketAddr>,
}

impl Route {
    /// Whether the connection must go to [`addrs`](Self::addrs) and nowhere else.
    pub fn pinned(&self) -> bool {
        !self.addrs.is_empty()
    }

    /// Whether the host is a name (to be pinned by the HTTP client's resolver), not an
    /// address.
    pub fn host_is_name(&self) -> bool {
        self.host.parse::<IpAddr>().is_err()
    }
}

/// A URL the process does not connect to for an API client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{url}` is not reached for an API client: {why}")]
pub struct EgressRefused {
    /// The URL, without any credentials it carried.
    pub url: String,
    /// Why, and what the operator would do to allow it.
    pub why: String,
}

/// A URL read for a connection: checked for its scheme, host and credentials.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// The URL as parsed, without credentials.
    pub(crate) url: url::Url,
    /// Its host, as [`Route::host`].
    pub(crate) host: String,
    /// Its port.
    pub(crate) port: u16,
    /// The address, when the host is one.
    pub(crate) ip: Option<IpAddr>,
}

/// `url` without the user name and password it may carry (for messages).
pub fn shown(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) => {
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.to_string()
        }
        Err(_) => url
            .rsplit_once('@')
            .map(|(_, host)| format!("…@{host}"))
            .unwrap_or_else(|| url.to_owned()),
    }
}

/// Reads `url` for a connection: http(s), a host, no credentials.
pub(crate) fn target(url: &str) -> Result<Target, String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("`{}` is not an http(s) URL", parsed.scheme()));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("a URL carrying a user name or password is never followed".into());
    }
    let (host, ip) = match parsed.host() {
        Some(url::Host::Domain(name)) => (name.trim_end_matches('.').to_ascii_lowercase(), None),
        Some(url::Host::Ipv4(v4)) => (v4.to_string(), Some(IpAddr::V4(v4))),
        Some(url::Host::Ipv6(v6)) => (v6.to_string(), Some(IpAddr::V6(v6))),
        None => return Err("the URL names no host".into()),
    };
    if host.is_empty() {
        return Err("the URL names no host".into());
    }
    let port = parsed
        .port_or_known_default()
        .ok_or("the URL has no port")?;
    Ok(Target {
        url: parsed,
        host,
        port,
        ip,
    })
}

/// What kind of internal address `ip` is, or `None` for a public one.
pub fn internal(ip: IpAddr) -> Option<String> {
    match ip {
        IpAddr::V4(v4) => internal_v4(v4).map(str::to_owned),
        IpAddr::V6(v6) => {
            if let Some(kind) = internal_v6(v6) {
                return Some(kind.to_owned());
            }
            embedded_v4(v6).and_then(|(form, v4)| {
                internal_v4(v4).map(|kind| format!("{kind} address ({form} of {v4})"))
            })
        }
    }
    .map(|kind| {
        if kind.contains(" address") {
            kind
        } else {
            format!("{kind} address")
        }
    })
}

fn internal_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        (0, _, _) => "unspecified (this network)",
        (127, _, _) => "loopback",
        (10, _, _) | (192, 168, _) => "private",
        (172, 16..=31, _) => "private",
        (169, 254, _) => "link-local (the cloud metadata service's)",
        (100, 64..=127, _) => "shared (carrier-grade NAT)",
        (192, 0, 0) | (192, 88, 99) | (198, 18..=19, _) => "reserved",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "documentation",
        (224..=239, _, _) => "multicast",
        (255, 255, 255) if ip.is_broadcast() => "broadcast",
        (240..=255, _, _) => "reserved",
        _ => return None,
    })
}

fn internal_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    Some(match s {
        _ if ip.is_unspecified() => "unspecified",
        _ if ip.is_loopback() => "loopback",
        [0xfe80..=0xfebf, ..] => "link-local",
        [0xfec0..=0xfeff, ..] => "site-local",
        [0xfc00..=0xfdff, ..] => "unique-local (private)",
        [0xff00..=0xffff, ..] => "multicast",
        [0x2001, 0x0db8, ..] => "documentation",
        [0x0100, 0, 0, 0, ..] => "reserved (discard)",
        [0x2001, 0x0000, ..] => "reserved (Teredo)",
        [0x2001, 0x0002, 0, ..] => "reserved (benchmarking)",
        [0x0064, 0xff9b, 0x0001, ..] => "reserved (local NAT64)",
        _ => return None,
    })
}

/// The IPv4 address an IPv6 address carries, and in what form: mapped (`::ffff:a.b.c.d`),
/// compatible (`::a.b.c.d`), NAT64 (`64:ff9b::a.b.c.d`) or 6to4 (`2002:AABB:CCDD::`).
fn embedded_v4(ip: Ipv6Addr) -> Option<(&'static str, Ipv4Addr)> {
    let s = ip.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        [0, 0, 0, 0, 0, 0xffff, ..] => Some(("an IPv4-mapped form", low)),
        [0, 0, 0, 0, 0, 0, ..] => Some(("an IPv4-compatible form", low)),
        [0x0064, 0xff9b, 0, 0, 0, 0, ..] => Some(("a NAT64 form", low)),
        [0x2002, hi, lo, ..] => Some((
            "a 6to4 form",
            Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8),
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        match text.parse() {
            Ok(ip) => ip,
            Err(e) => panic!("{text}: {e}"),
        }
    }

    #[test]
    fn internal_addresses_are_named_and_public_ones_pass() {
        for (address, kind) in [
            ("127.0.0.1", "loopback"),
            ("127.255.0.9", "loopback"),
            ("0.0.0.0", "unspecified"),
            ("0.1.2.3", "unspecified"),
            ("10.1.2.3", "private"),
            ("172.31.0.1", "private"),
            ("192.168.0.1", "private"),
            ("169.254.169.254", "link-local"),
            ("100.100.100.200", "shared"),
            ("224.0.0.1", "multicast"),
            ("255.255.255.255", "broadcast"),
            ("240.0.0.1", "reserved"),
            ("192.0.2.1", "documentation"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("fe80::1", "link-local"),
            ("fd00:ec2::254", "unique-local"),
            ("ff02::1", "multicast"),
            (
                "::ffff:127.0.0.1",
                "loopback address (an IPv4-mapped form of 127.0.0.1)",
            ),
            ("::ffff:169.254.169.254", "link-local"),
            ("::10.0.0.1", "IPv4-compatible form of 10.0.0.1"),
            ("64:ff9b::a9fe:a9fe", "NAT64 form of 169.254.169.254"),
            ("2002:a9fe:a9fe::1", "6to4 form of 169.254.169.254"),
            ("2001::1", "Teredo"),
        ] {
            let found = internal(ip(address));
            assert!(
                found.as_deref().is_some_and(|k| k.contains(kind)),
                "{address}: {found:?}"
            );
        }
        for public in [
            "1.1.1.1",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
            "::ffff:1.1.1.1",
            "64:ff9b::101:101",
        ] {
            assert_eq!(internal(ip(public)), None, "{public}");
        }
    }

    #[test]
    fn urls_are_read_as_http_clients_read_them() {
        let read = |url: &str| target(url).map(|t| (t.host, t.port));
        assert_eq!(read("http://2130706433:81/"), Ok(("127.0.0.1".into(), 81)));
        assert_eq!(read("http://0x7f.1/"), Ok(("127.0.0.1".into(), 80)));
        assert_eq!(read("http://0177.0.0.1/"), Ok(("127.0.0.1".into(), 80)));
        assert_eq!(
            read("https://[::ffff:7f00:1]/"),
            Ok(("::ffff:127.0.0.1".into(), 443))
        );
        assert_eq!(
            read("http://Example.COM./x"),
            Ok(("example.com".into(), 80))
        );
        assert!(read("http://u:p@example.com/").is_err());
        assert!(read("http://u@example.com/").is_err());
        assert!(read("ftp://example.com/").is_err());
        assert!(read("file:///etc/passwd").is_err());
        assert_eq!(shown("http://u:secret@h.test/x"), "http://h.test/x");
    }
}
