//! Test servers on 127.0.0.1 built on hyper: HTTP/2 with prior knowledge (h2c), and
//! TLS (rustls, with a certificate made by rcgen) serving HTTP/2 or HTTP/1.1 as ALPN
//! decides.
//!
//! They answer by path:
//! - `/status/<code>`: that status, body `status <code>\n`;
//! - `/reset`: the handler fails: HTTP/2 resets the stream, HTTP/1.1 drops the connection;
//! - `/goaway`: 200 with [`BODY`], then the connection is shut down gracefully (GOAWAY);
//! - anything else: 200 with [`BODY`].
//!
//! They count connections (those whose handshake succeeded, for TLS) and requests, and
//! keep what each request looked like.

#![allow(dead_code)]

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode, Version};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

pub const BODY: &[u8] = b"hello over h2 or tls\n";

#[derive(Clone, Debug)]
pub struct Seen {
    pub version: Version,
    /// Path and query.
    pub uri: String,
    /// `:authority` (HTTP/2) or `Host` (HTTP/1.1).
    pub authority: Option<String>,
    pub tag: Option<String>,
}

#[derive(Default)]
struct State {
    connections: AtomicU64,
    requests: AtomicU64,
    seen: Mutex<Vec<Seen>>,
}

pub struct Server {
    pub addr: SocketAddr,
    state: Arc<State>,
    runtime: Option<tokio::runtime::Runtime>,
}

/// A certificate authority and a server certificate it signed for `localhost` and
/// 127.0.0.1.
pub struct Certs {
    pub ca_pem: String,
    pub cert: CertificateDer<'static>,
    pub key: PrivatePkcs8KeyDer<'static>,
}

impl Certs {
    pub fn new() -> Self {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, "pinchpoint test CA");
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca, ca_key);
        let key = KeyPair::generate().unwrap();
        let mut leaf = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        leaf.distinguished_name.push(DnType::CommonName, "localhost");
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = leaf.signed_by(&key, &issuer).unwrap();
        Self {
            ca_pem: ca_cert.pem(),
            cert: cert.der().clone(),
            key: PrivatePkcs8KeyDer::from(key.serialize_der()),
        }
    }

    /// Writes the CA certificate as PEM to `path`.
    pub fn write_ca(&self, path: &Path) {
        std::fs::write(path, &self.ca_pem).unwrap();
    }
}

impl Server {
    /// HTTP/2 with prior knowledge on plain TCP.
    pub fn h2c() -> Self {
        Self::start(None)
    }

    /// TLS with `certs`' server certificate, offering the `alpn` protocols.
    pub fn tls(certs: &Certs, alpn: &[&[u8]]) -> Self {
        let mut config = ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![certs.cert.clone()], PrivateKeyDer::Pkcs8(certs.key.clone_key()))
            .unwrap();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Self::start(Some(TlsAcceptor::from(Arc::new(config))))
    }

    fn start(tls: Option<TlsAcceptor>) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State::default());
        let st = state.clone();
        runtime.spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let (st, tls) = (st.clone(), tls.clone());
                tokio::spawn(async move {
                    match tls {
                        None => {
                            st.connections.fetch_add(1, Ordering::SeqCst);
                            serve(tcp, true, st).await
                        }
                        Some(acceptor) => {
                            let Ok(stream) = acceptor.accept(tcp).await else { return };
                            st.connections.fetch_add(1, Ordering::SeqCst);
                            let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
                            serve(stream, h2, st).await
                        }
                    }
                });
            }
        });
        Self {
            addr,
            state,
            runtime: Some(runtime),
        }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn connections(&self) -> u64 {
        self.state.connections.load(Ordering::SeqCst)
    }

    pub fn requests(&self) -> u64 {
        self.state.requests.load(Ordering::SeqCst)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

async fn serve<S>(io: S, h2: bool, state: Arc<State>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let goaway = Arc::new(Notify::new());
    let service = {
        let goaway = goaway.clone();
        service_fn(move |req| answer(req, state.clone(), goaway.clone()))
    };
    let io = TokioIo::new(io);
    if h2 {
        let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new()).serve_connection(io, service);
        tokio::pin!(conn);
        tokio::select! {
            _ = conn.as_mut() => return,
            _ = goaway.notified() => conn.as_mut().graceful_shutdown(),
        }
        let _ = conn.await;
    } else {
        let _ = hyper::server::conn::http1::Builder::new()
            .serve_connection(io, service)
            .await;
    }
}

async fn answer(
    req: Request<Incoming>,
    state: Arc<State>,
    goaway: Arc<Notify>,
) -> Result<Response<Full<Bytes>>, io::Error> {
    state.requests.fetch_add(1, Ordering::SeqCst);
    let authority = req.uri().authority().map(|a| a.to_string()).or_else(|| {
        req.headers()
            .get("host")
            .and_then(|h| h.to_str().ok())
            .map(str::to_string)
    });
    let seen = Seen {
        version: req.version(),
        uri: req.uri().path_and_query().map(|p| p.to_string()).unwrap_or_default(),
        authority,
        tag: req
            .headers()
            .get("x-pinchpoint")
            .and_then(|h| h.to_str().ok())
            .map(str::to_string),
    };
    let path = req.uri().path().to_string();
    state.seen.lock().unwrap().push(seen);
    let _ = req.into_body().collect().await;
    if path == "/reset" {
        return Err(io::Error::other("reset on purpose"));
    }
    if path == "/goaway" {
        goaway.notify_one();
    }
    if path == "/big-head" {
        let big = "x".repeat(100 << 10);
        return Ok(Response::builder().header("x-big", big).body(Full::new(Bytes::from_static(BODY))).unwrap());
    }
    let (status, body) = match path.strip_prefix("/status/").and_then(|c| c.parse::<u16>().ok()) {
        Some(code) => (
            StatusCode::from_u16(code).unwrap(),
            Bytes::from(format!("status {code}\n")),
        ),
        None => (StatusCode::OK, Bytes::from_static(BODY)),
    };
    Ok(Response::builder().status(status).body(Full::new(body)).unwrap())
}
