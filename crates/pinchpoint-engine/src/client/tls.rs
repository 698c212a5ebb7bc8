//! TLS for both HTTP versions: rustls (ring), the server name (SNI) from the URL's
//! host, ALPN for the HTTP version, and the certificate checked against Mozilla's roots
//! plus the plan's CA file, or not at all when the plan says `insecure`.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use tokio_rustls::rustls::crypto::{self, CryptoProvider};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_rustls::rustls::{self, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_rustls::TlsConnector;

use crate::config::TlsOptions;
use crate::client::http1::Stream;
use crate::outcome::{classify_io, note, ErrorClass};

/// ALPN protocol ids.
pub const ALPN_H2: &[u8] = b"h2";
pub const ALPN_HTTP1: &[u8] = b"http/1.1";

/// Opens TLS sessions to one server.
pub struct Connector {
    connector: TlsConnector,
    name: ServerName<'static>,
    alpn: &'static [u8],
}

impl Connector {
    /// A connector for `host` (a DNS name or an IP address) offering `alpn`. Errors
    /// (an unreadable CA file, a host that is no server name) are for the plan's author.
    pub fn new(options: &TlsOptions, host: &str, alpn: &'static [u8]) -> Result<Self, String> {
        let provider = Arc::new(crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?;
        let mut config = if options.insecure {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
                .with_no_client_auth()
        } else {
            let mut roots = RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            };
            if let Some(path) = &options.ca_file {
                let shown = path.display();
                let mut added = 0;
                for cert in CertificateDer::pem_file_iter(path).map_err(|e| format!("ca_file {shown}: {e}"))? {
                    let cert = cert.map_err(|e| format!("ca_file {shown}: {e}"))?;
                    roots.add(cert).map_err(|e| format!("ca_file {shown}: {e}"))?;
                    added += 1;
                }
                if added == 0 {
                    return Err(format!("ca_file {shown}: no PEM certificate in it"));
                }
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        };
        config.alpn_protocols = vec![alpn.to_vec()];
        let name = ServerName::try_from(host.to_string()).map_err(|_| format!("{host:?} is not a TLS server name"))?;
        Ok(Self {
            connector: TlsConnector::from(Arc::new(config)),
            name,
            alpn,
        })
    }

    /// The TLS handshake on `tcp`, within `timeout`. The server must accept the ALPN
    /// protocol offered: a server that ignores ALPN is taken for one that speaks
    /// HTTP/1.1 only, which is a `tls` error when HTTP/2 was asked for.
    pub async fn handshake(&self, tcp: TcpStream, timeout: Duration) -> Result<TlsStream<TcpStream>, ErrorClass> {
        let stream = match tokio::time::timeout(timeout, self.connector.connect(self.name.clone(), tcp)).await {
            Err(_) => {
                note(ErrorClass::ConnectTimeout, || format!("no TLS handshake within {timeout:?}"));
                return Err(ErrorClass::ConnectTimeout);
            }
            Ok(Err(e)) => return Err(classify_handshake(&e)),
            Ok(Ok(s)) => s,
        };
        let agreed = stream.get_ref().1.alpn_protocol();
        if agreed != Some(self.alpn) && !(agreed.is_none() && self.alpn == ALPN_HTTP1) {
            note(ErrorClass::Tls, || {
                let agreed = agreed.map_or("none".into(), String::from_utf8_lossy);
                let offered = String::from_utf8_lossy(self.alpn);
                format!("the server did not agree to ALPN {offered} (it chose {agreed})")
            });
            return Err(ErrorClass::Tls);
        }
        Ok(stream)
    }
}

/// A failure during the handshake: TLS's own errors, and a server that closed the
/// connection in the middle of it (it refused the handshake), are `tls`; a reset or a
/// timeout is what it would be on any connection.
pub fn classify_handshake(err: &io::Error) -> ErrorClass {
    match err.kind() {
        io::ErrorKind::UnexpectedEof => {
            note(ErrorClass::Tls, || "the server closed the connection during the TLS handshake".into());
            ErrorClass::Tls
        }
        _ => classify_io(err),
    }
}

impl Stream for TlsStream<TcpStream> {
    /// Reads without waiting: TLS records that carry no data (a session ticket) are
    /// consumed and the stream stays open; the end, an alert or data closes it.
    fn idle_open(&mut self) -> bool {
        let mut probe = [0u8; 1];
        let mut buf = ReadBuf::new(&mut probe);
        let mut cx = Context::from_waker(Waker::noop());
        matches!(Pin::new(self).poll_read(&mut cx, &mut buf), Poll::Pending)
    }
}

/// `insecure = true`: any certificate is accepted, for any name; the handshake's
/// signatures are still checked, so the session is encrypted to whoever answered.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::is_tls_error;

    #[test]
    fn tls_errors_are_told_from_other_io_errors() {
        let tls = io::Error::new(io::ErrorKind::InvalidData, rustls::Error::DecryptError);
        assert!(is_tls_error(&tls));
        assert_eq!(classify_io(&tls), ErrorClass::Tls);
        assert_eq!(classify_handshake(&tls), ErrorClass::Tls);
        let eof = io::Error::from(io::ErrorKind::UnexpectedEof);
        assert!(!is_tls_error(&eof));
        assert_eq!(classify_io(&eof), ErrorClass::Closed);
        assert_eq!(classify_handshake(&eof), ErrorClass::Tls);
        let reset = io::Error::from(io::ErrorKind::ConnectionReset);
        assert_eq!(classify_handshake(&reset), ErrorClass::Reset);
    }

    #[test]
    fn bad_options_are_refused_before_the_run() {
        let missing = TlsOptions {
            ca_file: Some("/nonexistent/ca.pem".into()),
            insecure: false,
        };
        let err = Connector::new(&missing, "localhost", ALPN_H2).err().expect("an error");
        assert!(err.starts_with("ca_file /nonexistent/ca.pem"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let err = Connector::new(
            &TlsOptions {
                ca_file: Some(empty),
                insecure: false,
            },
            "h",
            ALPN_H2,
        )
        .err()
        .expect("an error");
        assert!(err.contains("no PEM certificate"), "{err}");
        assert!(Connector::new(&TlsOptions::default(), "bad name!", ALPN_H2).is_err());
        assert!(Connector::new(&TlsOptions::default(), "127.0.0.1", ALPN_HTTP1).is_ok());
        assert!(Connector::new(
            &TlsOptions {
                ca_file: None,
                insecure: true
            },
            "example.com",
            ALPN_H2
        )
        .is_ok());
    }
}
