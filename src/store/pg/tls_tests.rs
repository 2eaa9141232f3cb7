//! TLS on a real server: a throwaway cluster with `ssl=on` and a self-signed certificate for
//! `localhost`, listening on a loopback port. A connection with `sslmode=require` and that
//! certificate as `sslrootcert` is encrypted; without it, the certificate is refused; with
//! `sslmode=disable` the connection is plain.

use std::os::unix::fs::PermissionsExt;
use std::sync::OnceLock;

use super::testdb;
use crate::args;
use crate::store::Store;

struct TlsServer {
    port: u16,
    cert: String,
}

fn server() -> &'static TlsServer {
    static S: OnceLock<TlsServer> = OnceLock::new();
    S.get_or_init(|| {
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let key = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("a certificate");
        let mut cert_path = String::new();
        let extra = format!(
            "-c listen_addresses='127.0.0.1' -c port={port} -c ssl=on -c ssl_cert_file='{{dir}}/server.crt' -c ssl_key_file='{{dir}}/server.key'"
        );
        testdb::start("tls", &extra, |dir| {
            let crt = dir.join("server.crt");
            std::fs::write(&crt, key.cert.pem()).map_err(|e| e.to_string())?;
            let k = dir.join("server.key");
            std::fs::write(&k, key.signing_key.serialize_pem()).map_err(|e| e.to_string())?;
            std::fs::set_permissions(&k, std::fs::Permissions::from_mode(0o600)).map_err(|e| e.to_string())?;
            cert_path = crt.display().to_string();
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
        TlsServer { port, cert: cert_path }
    })
}

fn ssl_in_use(s: &Store) -> bool {
    s.read(|db| db.row("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", args![], |r| r.get::<bool>(0)))
        .expect("read pg_stat_ssl")
        .expect("a row for this backend")
}

#[test]
fn sslmode_require_with_the_servers_certificate_connects_encrypted() {
    let t = server();
    let url = format!(
        "postgres://postgres@localhost:{}/postgres?sslmode=require&sslrootcert={}&schema=tls_a",
        t.port, t.cert
    );
    let s = Store::open(&url).expect("open over TLS");
    assert!(ssl_in_use(&s));
}

#[test]
fn a_certificate_that_chains_to_no_trusted_root_is_refused() {
    let t = server();
    let url = format!("postgres://postgres@localhost:{}/postgres?sslmode=require&connect_timeout=5", t.port);
    let err = Store::open(&url).err().expect("refused");
    assert_eq!(err.code(), crate::error::ErrorCode::StoreError);
    assert!(err.message().to_lowercase().contains("certificate"), "{}", err.message());
}

#[test]
fn sslmode_disable_connects_in_the_clear() {
    let t = server();
    let url = format!("postgres://postgres@localhost:{}/postgres?sslmode=disable&schema=tls_b", t.port);
    let s = Store::open(&url).expect("open in the clear");
    assert!(!ssl_in_use(&s));
}
