//! TLS to PostgreSQL with libpq's `sslmode` and `sslrootcert` (rustls with the ring provider; no OpenSSL).
//!
//! The modes mean what they mean to libpq (and so to Optuna, whose psycopg2 reads the same URL):
//! - `disable`: plain TCP.
//! - `prefer` (the default): TLS when the server offers it, plain otherwise; the certificate is not checked.
//! - `require`: TLS or no connection; the certificate is not checked, unless a root certificate is at hand
//!   (`sslrootcert`, or libpq's default `~/.postgresql/root.crt`), which makes it `verify-ca`, as in libpq.
//! - `verify-ca`: TLS, the server's chain must lead to a root in `sslrootcert`; the host name is not checked.
//! - `verify-full`: `verify-ca` and the certificate must name the host of the URL.
//!
//! `sslrootcert` is a PEM file, or `system` for the operating system's trusted roots (which, as in libpq,
//! makes the default mode `verify-full` and refuses a weaker one). Without `sslrootcert`, the verifying
//! modes read `~/.postgresql/root.crt` and, when it does not exist, refuse with libpq's explanation. The
//! URL's options come first; `PGSSLMODE` and `PGSSLROOTCERT` fill in what the URL leaves out.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::Error;

/// libpq's `sslmode` values tradesim supports (`allow`, plain first and TLS on refusal, is not one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SslMode {
    /// Plain TCP.
    Disable,
    /// TLS when offered, unverified.
    Prefer,
    /// TLS, unverified (verified as `VerifyCa` when a root certificate is at hand).
    Require,
    /// TLS, the chain verified.
    VerifyCa,
    /// TLS, the chain and the host name verified.
    VerifyFull,
}

impl SslMode {
    /// Parses a `sslmode` value.
    pub fn parse(value: &str) -> Result<Self, Error> {
        Ok(match value {
            "disable" => Self::Disable,
            "prefer" => Self::Prefer,
            "require" => Self::Require,
            "verify-ca" => Self::VerifyCa,
            "verify-full" => Self::VerifyFull,
            "allow" => {
                return Err(Error::config("sslmode", "sslmode `allow` is not supported: use prefer, or disable"));
            }
            _ => {
                return Err(Error::config(
                    "sslmode",
                    format!("sslmode `{value}` is not one of disable, prefer, require, verify-ca, verify-full"),
                ));
            }
        })
    }

    fn name(self) -> &'static str {
        match self {
            Self::Disable => "disable",
            Self::Prefer => "prefer",
            Self::Require => "require",
            Self::VerifyCa => "verify-ca",
            Self::VerifyFull => "verify-full",
        }
    }
}

/// What the URL (or the environment) asked for.
#[derive(Clone, Debug, Default)]
pub struct TlsOptions {
    /// `sslmode`, when given.
    pub mode: Option<String>,
    /// `sslrootcert`, when given.
    pub rootcert: Option<String>,
}

/// The connection's TLS: the mode tokio-postgres negotiates, the connector, and what it verifies (for
/// error messages).
pub struct Tls {
    /// What the client asks the server for.
    pub negotiate: postgres::config::SslMode,
    /// The rustls connector.
    pub connector: MakeRustlsConnect,
    /// The mode in force (after libpq's rules).
    pub mode: SslMode,
    /// The root certificates' source (`system` or a file), when the certificate is verified.
    pub roots: Option<String>,
}

impl TlsOptions {
    /// The options, `PGSSLMODE` and `PGSSLROOTCERT` filling in what is unset.
    pub fn with_environment(mut self) -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        self.mode = self.mode.or_else(|| var("PGSSLMODE"));
        self.rootcert = self.rootcert.or_else(|| var("PGSSLROOTCERT"));
        self
    }

    /// The TLS these options mean (libpq's rules; errors say why, naming the option).
    pub fn resolve(&self) -> Result<Tls, Error> {
        let asked = self.mode.as_deref().map(SslMode::parse).transpose()?;
        let system = self.rootcert.as_deref() == Some("system");
        let mode = match asked {
            Some(m) if system && m != SslMode::VerifyFull => {
                return Err(Error::config(
                    "sslmode",
                    format!("sslmode `{}` may not be used with sslrootcert=system (use verify-full)", m.name()),
                ));
            }
            Some(m) => m,
            None if system => SslMode::VerifyFull,
            None => SslMode::Prefer,
        };
        #[allow(deprecated, reason = "ring has no post-quantum key exchange; aws-lc-rs would need its C build")]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let default_file = || std::env::var_os("HOME").map(|h| Path::new(&h).join(".postgresql").join("root.crt"));
        // The roots the certificate is checked against, when it is.
        let roots: Option<(String, RootCertStore)> = match (mode, self.rootcert.as_deref()) {
            (SslMode::Disable | SslMode::Prefer, _) => None,
            (_, Some("system")) => Some(("the system's trusted roots".to_owned(), system_roots()?)),
            (_, Some(file)) => Some((format!("sslrootcert `{file}`"), file_roots(Path::new(file))?)),
            (SslMode::Require, None) => match default_file().filter(|f| f.exists()) {
                Some(f) => Some((format!("`{}`", f.display()), file_roots(&f)?)),
                None => None,
            },
            (_, None) => match default_file().filter(|f| f.exists()) {
                Some(f) => Some((format!("`{}`", f.display()), file_roots(&f)?)),
                None => {
                    let f = default_file().unwrap_or_else(|| PathBuf::from("~/.postgresql/root.crt"));
                    return Err(Error::config(
                        "sslrootcert",
                        format!(
                            "sslmode `{}` needs root certificates: root certificate file `{}` does not exist; give \
                             sslrootcert=FILE, use the system's trusted roots with sslrootcert=system, or choose \
                             sslmode=require to connect without verifying the server",
                            mode.name(),
                            f.display()
                        ),
                    ));
                }
            },
        };
        let verifier: Arc<dyn ServerCertVerifier> = match &roots {
            None => Arc::new(Lenient { chain: None, provider: provider.clone() }),
            Some((_, store)) => {
                let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(store.clone()), provider.clone())
                    .build()
                    .map_err(|e| Error::config("sslrootcert", format!("root certificates: {e}")))?;
                if mode == SslMode::VerifyFull {
                    webpki
                } else {
                    Arc::new(Lenient { chain: Some(webpki), provider: provider.clone() })
                }
            }
        };
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::config("sslmode", format!("TLS: {e}")))?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        let negotiate = match mode {
            SslMode::Disable => postgres::config::SslMode::Disable,
            SslMode::Prefer => postgres::config::SslMode::Prefer,
            _ => postgres::config::SslMode::Require,
        };
        let mode = if roots.is_some() && mode == SslMode::Require { SslMode::VerifyCa } else { mode };
        Ok(Tls { negotiate, connector: MakeRustlsConnect::new(config), mode, roots: roots.map(|r| r.0) })
    }
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("mode", &self.mode).field("roots", &self.roots).finish_non_exhaustive()
    }
}

impl Tls {
    /// Why a connection failed, when TLS is why: the certificate problem in words (the host, the roots
    /// and the mode named), else `None`.
    pub fn explain(&self, error: &(dyn std::error::Error + 'static), host: &str) -> Option<String> {
        let cause = rustls_cause(error)?;
        let roots = self.roots.as_deref().unwrap_or("no roots");
        let mode = self.mode.name();
        Some(match cause {
            rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => format!(
                "TLS: the server's certificate is not signed by a certificate authority in {roots} (sslmode={mode})"
            ),
            rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            ) => format!(
                "TLS: the server's certificate is not valid for host `{host}` (sslmode={mode} checks the host name; \
                 verify-ca does not)"
            ),
            rustls::Error::InvalidCertificate(CertificateError::Expired | CertificateError::ExpiredContext { .. }) => {
                format!("TLS: the server's certificate has expired (sslmode={mode})")
            }
            rustls::Error::InvalidCertificate(
                CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. },
            ) => format!("TLS: the server's certificate is not valid yet (sslmode={mode})"),
            other => format!("TLS (sslmode={mode}): {other}"),
        })
    }
}

/// The rustls error somewhere in `error`'s chain (behind the I/O error tokio-rustls wraps it in).
fn rustls_cause<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(r) = e.downcast_ref::<rustls::Error>() {
            return Some(r);
        }
        if let Some(r) = e.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref())
            && let Some(r) = r.downcast_ref::<rustls::Error>()
        {
            return Some(r);
        }
        next = e.source();
    }
    None
}

/// The certificates of a PEM file as roots.
fn file_roots(file: &Path) -> Result<RootCertStore, Error> {
    let name = file.display();
    let refuse = |why: String| Error::config("sslrootcert", format!("sslrootcert `{name}`: {why}"));
    let bytes = std::fs::read(file).map_err(|e| refuse(e.to_string()))?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<_, _>>()
        .map_err(|e| refuse(format!("not PEM certificates: {e}")))?;
    if certs.is_empty() {
        return Err(refuse("no certificate in the file".to_owned()));
    }
    let mut store = RootCertStore::empty();
    for (i, cert) in certs.into_iter().enumerate() {
        store.add(cert).map_err(|e| refuse(format!("certificate {}: {e}", i + 1)))?;
    }
    Ok(store)
}

/// The operating system's trusted roots.
fn system_roots() -> Result<RootCertStore, Error> {
    let found = rustls_native_certs::load_native_certs();
    let mut store = RootCertStore::empty();
    store.add_parsable_certificates(found.certs);
    if store.is_empty() {
        let why: Vec<String> = found.errors.iter().map(ToString::to_string).collect();
        return Err(Error::config(
            "sslrootcert",
            format!("sslrootcert=system: no trusted root certificates found ({})", why.join("; ")),
        ));
    }
    Ok(store)
}

/// The verifiers short of `verify-full`: `prefer` and `require` without roots (`chain: None`) take any
/// certificate; `verify-ca` (`chain`) verifies the chain against the roots but not the host name (webpki
/// checks the chain before the name, so a name error means the chain was good). Either way the handshake's
/// signatures are checked with the provider's algorithms, as webpki's verifier checks them (the session is
/// encrypted to whoever holds the key of the certificate presented).
#[derive(Debug)]
struct Lenient {
    chain: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Lenient {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else { return Ok(ServerCertVerified::assertion()) };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(mode: Option<&str>, rootcert: Option<&str>) -> TlsOptions {
        TlsOptions { mode: mode.map(str::to_owned), rootcert: rootcert.map(str::to_owned) }
    }

    #[test]
    fn modes_follow_libpq() {
        assert_eq!(options(None, None).resolve().unwrap().mode, SslMode::Prefer);
        assert_eq!(options(Some("disable"), None).resolve().unwrap().negotiate, postgres::config::SslMode::Disable);
        let require = options(Some("require"), None).resolve().unwrap();
        assert_eq!(require.negotiate, postgres::config::SslMode::Require);
        let e = options(Some("verify-full"), Some("system")).resolve().err();
        // The system's roots either load (verify-full) or the error says there are none.
        assert!(e.as_ref().is_none_or(|e| e.to_string().contains("sslrootcert=system")), "{e:?}");
        let weak = options(Some("require"), Some("system")).resolve().err().unwrap().to_string();
        assert!(weak.contains("may not be used with sslrootcert=system"), "{weak}");
        let bad = options(Some("verify"), None).resolve().err().unwrap().to_string();
        assert!(bad.contains("sslmode `verify` is not one of"), "{bad}");
        assert!(options(Some("allow"), None).resolve().err().unwrap().to_string().contains("not supported"));
    }

    #[test]
    fn a_missing_or_empty_root_file_is_named() {
        let missing = options(Some("verify-ca"), Some("/nonexistent/ca.pem")).resolve().err().unwrap().to_string();
        assert!(missing.contains("sslrootcert `/nonexistent/ca.pem`"), "{missing}");
        let dir = std::env::temp_dir().join(format!("tradesim-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = options(Some("verify-full"), empty.to_str()).resolve().err().unwrap().to_string();
        assert!(e.contains("no certificate in the file"), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
