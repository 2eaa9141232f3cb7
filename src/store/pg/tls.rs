//! TLS for PostgreSQL connections, through rustls: the server's certificate is verified against
//! the Web PKI roots, or against the certificates of the file `sslrootcert` names. Whether TLS
//! is used at all is the URL's `sslmode` (`disable`, `prefer`, `require`).

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use tokio_postgres_rustls::MakeRustlsConnect;

/// The connector for every connection of one store.
pub fn connector(root_cert: Option<&str>) -> Result<MakeRustlsConnect, String> {
    let mut roots = rustls::RootCertStore::empty();
    match root_cert {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .map_err(|e| format!("cannot read sslrootcert {path}: {e}"))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("cannot read sslrootcert {path}: {e}"))?;
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                return Err(format!("sslrootcert {path} holds no certificate"));
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot set up TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}
