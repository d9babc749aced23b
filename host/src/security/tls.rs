//! TLS for SSL and SASL_SSL listeners (rustls with the `ring` provider):
//! the server's certificate chain and key from PEM files, optional client
//! certificates verified against a CA (Kafka's `ssl.client.auth` none,
//! requested, required), and the principal a client certificate names.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;

use super::session::Principal;

/// ssl.client.auth.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ClientAuth {
    None,
    Requested,
    Required,
}

/// The TLS settings of the broker's TLS listeners.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
    pub client_ca: Option<std::path::PathBuf>,
    pub client_auth: ClientAuth,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn certs(path: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .with_context(|| format!("reading certificates from {}", path.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("parsing certificates in {}", path.display()))?;
    anyhow::ensure!(!certs.is_empty(), "no certificate in {}", path.display());
    Ok(certs)
}

/// Builds the server configuration; every error names the file at fault.
pub fn server_config(files: &TlsFiles) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let chain = certs(&files.cert)?;
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .with_context(|| format!("reading the private key in {}", files.key.display()))?;
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?;
    let builder = match (files.client_auth, &files.client_ca) {
        (ClientAuth::None, _) => builder.with_no_client_auth(),
        (_, None) => anyhow::bail!("--ssl-client-auth requested/required needs --ssl-client-ca"),
        (mode, Some(ca)) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in certs(ca)? {
                roots
                    .add(c)
                    .with_context(|| format!("adding a CA certificate from {}", ca.display()))?;
            }
            let v = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider());
            let v = if mode == ClientAuth::Requested {
                v.allow_unauthenticated()
            } else {
                v
            };
            builder.with_client_cert_verifier(v.build().context("client certificate verifier")?)
        }
    };
    let config = builder.with_single_cert(chain, key).with_context(|| {
        format!(
            "the key in {} does not fit the certificate",
            files.key.display()
        )
    })?;
    Ok(Arc::new(config))
}

/// The principal a verified client certificate names: `User:` and its
/// subject as an RFC 2253 string (most specific first, e.g.
/// `User:CN=alice,OU=eng,O=Acme`), as Kafka's default principal builder.
pub fn principal_of(cert: &CertificateDer<'_>) -> Option<Principal> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let mut rdns: Vec<String> = Vec::new();
    for rdn in parsed.subject().iter_rdn() {
        let parts: Vec<String> = rdn
            .iter()
            .filter_map(|atv| {
                let key = x509_parser::objects::oid2abbrev(
                    atv.attr_type(),
                    x509_parser::objects::oid_registry(),
                )
                .map(str::to_owned)
                .unwrap_or_else(|_| atv.attr_type().to_id_string());
                let value = atv.as_str().ok()?;
                Some(format!("{key}={}", escape_rfc2253(value)))
            })
            .collect();
        rdns.push(parts.join("+"));
    }
    rdns.reverse();
    let name = rdns.join(",");
    (!name.is_empty()).then(|| Principal::user(&name))
}

fn escape_rfc2253(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for (i, c) in v.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i + 1 == v.chars().count() && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
