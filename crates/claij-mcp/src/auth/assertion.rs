//! Private-key JWT client authentication (RFC 7523 §2.2, as the MCP's client credentials
//! extension has machine clients prove who they are): a short-lived JWT naming the client
//! (`iss` = `sub` = its id) and the authorization server (`aud`), signed with the client's
//! private key (ring), sent as the token request's `client_assertion`. The key never
//! leaves the process; only the signed assertion does.

use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::{SecureRandom as _, SystemRandom};
use ring::signature::{self, EcdsaKeyPair, RsaKeyPair};
use rmcp::transport::auth::{AuthError, CredentialStore as _, StoredCredentials};
use rustls_pki_types::PrivatePkcs8KeyDer;
use rustls_pki_types::pem::PemObject as _;
use serde_json::json;

use super::{CredentialsFile, auth_failed};
use crate::error::McpError;

/// How long an assertion is good for.
const LIFETIME: Duration = Duration::from_secs(300);

/// The JWS algorithms a client key may sign with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SigningAlgorithm {
    /// ECDSA with P-256 and SHA-256.
    Es256,
    /// ECDSA with P-384 and SHA-384.
    Es384,
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    Rs256,
}

impl SigningAlgorithm {
    /// Its JWS name (`ES256`, …).
    pub fn name(self) -> &'static str {
        match self {
            SigningAlgorithm::Es256 => "ES256",
            SigningAlgorithm::Es384 => "ES384",
            SigningAlgorithm::Rs256 => "RS256",
        }
    }
}

impl std::str::FromStr for SigningAlgorithm {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_uppercase().as_str() {
            "ES256" => Ok(SigningAlgorithm::Es256),
            "ES384" => Ok(SigningAlgorithm::Es384),
            "RS256" => Ok(SigningAlgorithm::Rs256),
            other => Err(format!(
                "signing algorithm `{other}` is not supported: use ES256, ES384 or RS256"
            )),
        }
    }
}

/// A client's private key, ready to sign assertions.
pub struct ClientKey {
    algorithm: SigningAlgorithm,
    signer: Signer,
}

enum Signer {
    Ecdsa(EcdsaKeyPair),
    Rsa(RsaKeyPair),
}

impl std::fmt::Debug for ClientKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientKey")
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
    }
}

impl ClientKey {
    /// The key in `pem` (an unencrypted PKCS#8 `PRIVATE KEY`), for `algorithm`.
    pub fn from_pem(pem: &str, algorithm: SigningAlgorithm) -> Result<ClientKey, String> {
        let der = PrivatePkcs8KeyDer::from_pem_slice(pem.as_bytes()).map_err(|e| {
            format!("the private key is not an unencrypted PKCS#8 PEM (`BEGIN PRIVATE KEY`): {e}")
        })?;
        let der = der.secret_pkcs8_der();
        let rng = SystemRandom::new();
        let unfit = |e: ring::error::KeyRejected| {
            format!("the private key is not an {} key: {e}", algorithm.name())
        };
        let signer = match algorithm {
            SigningAlgorithm::Es256 => Signer::Ecdsa(
                EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, der, &rng)
                    .map_err(unfit)?,
            ),
            SigningAlgorithm::Es384 => Signer::Ecdsa(
                EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P384_SHA384_FIXED_SIGNING, der, &rng)
                    .map_err(unfit)?,
            ),
            SigningAlgorithm::Rs256 => Signer::Rsa(RsaKeyPair::from_pkcs8(der).map_err(unfit)?),
        };
        Ok(ClientKey { algorithm, signer })
    }

    /// `input` signed as JWS asks of the key's algorithm (ECDSA: `r ‖ s`, fixed length).
    fn sign(&self, input: &[u8]) -> Result<Vec<u8>, String> {
        let rng = SystemRandom::new();
        let failed = |_| "the key could not sign the assertion".to_owned();
        match &self.signer {
            Signer::Ecdsa(pair) => Ok(pair.sign(&rng, input).map_err(failed)?.as_ref().to_vec()),
            Signer::Rsa(pair) => {
                let mut out = vec![0; pair.public().modulus_len()];
                pair.sign(&signature::RSA_PKCS1_SHA256, &rng, input, &mut out)
                    .map_err(failed)?;
                Ok(out)
            }
        }
    }

    /// A client assertion: a JWT from client `client_id` for `audience` (the
    /// authorization server's issuer), issued at `now`, good for five minutes, with a
    /// random `jti`.
    pub fn assertion(
        &self,
        client_id: &str,
        audience: &str,
        now: SystemTime,
    ) -> Result<String, String> {
        let issued = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_err(|_| "the clock is before 1970".to_owned())?
            .as_secs();
        let mut nonce = [0u8; 16];
        SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|_| "no randomness from the OS".to_owned())?;
        let header = json!({"alg": self.algorithm.name(), "typ": "JWT"});
        let claims = json!({
            "iss": client_id,
            "sub": client_id,
            "aud": audience,
            "iat": issued,
            "exp": issued + LIFETIME.as_secs(),
            "jti": URL_SAFE_NO_PAD.encode(nonce),
        });
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let signature = self.sign(input.as_bytes())?;
        Ok(format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature)))
    }
}

/// Authorizes claij with the server at `url` as a machine whose proof is a private key:
/// the client credentials grant with a private-key JWT (RFC 7523), for a client
/// registered beforehand with its public key. The tokens are kept in `file`; when they
/// expire, log in again.
pub async fn login_with_key(
    url: &str,
    file: &CredentialsFile,
    client_id: &str,
    key: &ClientKey,
) -> Result<(), McpError> {
    let fail = |e: AuthError| auth_failed(url, e);
    let manager = super::manager(url, file).await?;
    let metadata = manager.resolve_metadata().await.map_err(fail)?.metadata;
    if !private_enough(url, &metadata.token_endpoint) {
        return Err(auth_failed(
            url,
            format!(
                "the token endpoint {} is neither https nor, for a loopback server, on loopback: a private key's proof is not sent there",
                metadata.token_endpoint
            ),
        ));
    }
    let methods = metadata
        .additional_fields
        .get("token_endpoint_auth_methods_supported")
        .and_then(serde_json::Value::as_array);
    if let Some(methods) = methods
        && !methods.iter().any(|m| m == "private_key_jwt")
    {
        return Err(auth_failed(
            url,
            format!(
                "the authorization server does not take private-key JWTs; it takes: {}",
                serde_json::Value::Array(methods.clone())
            ),
        ));
    }
    let audience = metadata
        .issuer
        .clone()
        .unwrap_or_else(|| metadata.token_endpoint.clone());
    let now = std::time::SystemTime::now();
    let assertion = key
        .assertion(client_id, &audience, now)
        .map_err(|m| auth_failed(url, m))?;
    let body = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("grant_type", "client_credentials")
        .append_pair(
            "client_assertion_type",
            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
        )
        .append_pair("client_assertion", &assertion)
        .append_pair("resource", url)
        .finish();
    let answer = super::without_redirects()
        .map_err(|e| auth_failed(url, e))?
        .post(&metadata.token_endpoint)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("accept", "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| auth_failed(url, format!("the token endpoint did not answer: {e}")))?;
    let status = answer.status();
    let bytes = answer
        .bytes()
        .await
        .map_err(|e| auth_failed(url, format!("the token endpoint's answer broke off: {e}")))?;
    if !status.is_success() {
        let answered: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
        let why = ["error", "error_description"]
            .iter()
            .filter_map(|k| answered[k].as_str())
            .collect::<Vec<_>>()
            .join(": ");
        return Err(auth_failed(
            url,
            format!("the token endpoint refused the client ({status}): {why}"),
        ));
    }
    let not_a_token = |e: serde_json::Error| {
        auth_failed(
            url,
            format!("the token endpoint's answer is not a token: {e}"),
        )
    };
    let answered: serde_json::Value = serde_json::from_slice(&bytes).map_err(not_a_token)?;
    let granted = answered["scope"]
        .as_str()
        .map(|s| s.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    let token: rmcp::transport::auth::OAuthTokenResponse =
        serde_json::from_value(answered).map_err(not_a_token)?;
    let received = now
        .duration_since(std::time::SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .ok();
    let credentials = StoredCredentials::new(client_id.to_owned(), Some(token), granted, received)
        .with_issuer(metadata.issuer.clone());
    file.store(url).save(credentials).await.map_err(fail)
}

/// Whether a client's proof may go to `token_endpoint` for the server at `resource`:
/// over https, or over http when both are on loopback (a server on this machine).
fn private_enough(resource: &str, token_endpoint: &str) -> bool {
    let loopback = |u: &url::Url| match u.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    match (url::Url::parse(resource), url::Url::parse(token_endpoint)) {
        (Ok(resource), Ok(endpoint)) => {
            endpoint.scheme() == "https"
                || (endpoint.scheme() == "http" && loopback(&resource) && loopback(&endpoint))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::KeyPair as _;

    fn decoded(part: &str) -> serde_json::Value {
        let bytes = URL_SAFE_NO_PAD.decode(part).unwrap_or_default();
        serde_json::from_slice(&bytes).unwrap_or_default()
    }

    fn pem_of(der: &[u8]) -> String {
        let body = base64::engine::general_purpose::STANDARD.encode(der);
        let lines: Vec<&str> = body
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).unwrap_or_default())
            .collect();
        format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            lines.join("\n")
        )
    }

    #[test]
    fn a_proof_goes_over_https_or_between_loopback_addresses_only() {
        let local = "http://127.0.0.1:3000/mcp";
        assert!(private_enough(local, "http://localhost:3001/token"));
        assert!(private_enough(local, "http://[::1]:3001/token"));
        assert!(private_enough(
            "https://mcp.example.com/mcp",
            "https://auth.example.com/token"
        ));
        assert!(!private_enough(local, "http://auth.example.com/token"));
        assert!(!private_enough(
            "https://mcp.example.com/mcp",
            "http://127.0.0.1:1/token"
        ));
        assert!(!private_enough(local, "not a url"));
    }

    #[test]
    fn an_es256_assertion_names_the_client_and_the_server_and_verifies_with_its_public_key() {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .unwrap_or_else(|e| panic!("{e}"));
        let key = ClientKey::from_pem(&pem_of(pkcs8.as_ref()), SigningAlgorithm::Es256)
            .unwrap_or_else(|e| panic!("{e}"));
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let jwt = key
            .assertion("machine-1", "https://auth.example.com", now)
            .unwrap_or_else(|e| panic!("{e}"));
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3, "{jwt}");
        assert_eq!(decoded(parts[0]), json!({"alg": "ES256", "typ": "JWT"}));
        let claims = decoded(parts[1]);
        assert_eq!(claims["iss"], "machine-1");
        assert_eq!(claims["sub"], "machine-1");
        assert_eq!(claims["aud"], "https://auth.example.com");
        assert_eq!(claims["iat"], 1_800_000_000u64);
        assert_eq!(claims["exp"], 1_800_000_300u64);
        assert!(claims["jti"].as_str().is_some_and(|j| j.len() >= 20));
        // The signature is the key's over the first two parts.
        let pair = EcdsaKeyPair::from_pkcs8(
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            pkcs8.as_ref(),
            &rng,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let public = signature::UnparsedPublicKey::new(
            &signature::ECDSA_P256_SHA256_FIXED,
            pair.public_key().as_ref(),
        );
        let signed = format!("{}.{}", parts[0], parts[1]);
        let sig = URL_SAFE_NO_PAD.decode(parts[2]).unwrap_or_default();
        assert!(public.verify(signed.as_bytes(), &sig).is_ok());
        assert!(public.verify(b"something else", &sig).is_err());
        // Two assertions never share a jti.
        let again = key
            .assertion("machine-1", "https://auth.example.com", now)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_ne!(
            decoded(again.split('.').nth(1).unwrap_or_default())["jti"],
            claims["jti"]
        );
    }

    #[test]
    fn a_key_that_is_not_pkcs8_or_not_of_the_algorithm_is_refused_saying_so() {
        let error = ClientKey::from_pem("not a key", SigningAlgorithm::Es256)
            .err()
            .unwrap_or_default();
        assert!(error.contains("PKCS#8"), "{error}");
        let rng = SystemRandom::new();
        let p256 = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .unwrap_or_else(|e| panic!("{e}"));
        let error = ClientKey::from_pem(&pem_of(p256.as_ref()), SigningAlgorithm::Es384)
            .err()
            .unwrap_or_default();
        assert!(error.contains("not an ES384 key"), "{error}");
        assert!("HS256".parse::<SigningAlgorithm>().is_err());
        assert_eq!("es256".parse(), Ok(SigningAlgorithm::Es256));
    }
}
