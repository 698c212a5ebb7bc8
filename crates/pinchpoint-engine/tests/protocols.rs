//! HTTP/2 (h2c and over TLS) and HTTP/1.1 over TLS against local servers: counts,
//! statuses, the tag, connections per user, certificates trusted or not, stream resets
//! and GOAWAY.

mod common;
mod servers;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use common::{config, open_config, run, serial, steps};
use hyper::Version;
use pinchpoint_engine::{Arrivals, ErrorClass, HttpVersion, Phase, Protocol, RunConfig, RunSummary, TlsOptions};
use servers::{Certs, Server, BODY};

fn errors(s: &RunSummary) -> BTreeMap<&'static str, u64> {
    let mut out = BTreeMap::new();
    for class in ErrorClass::ALL {
        let n: u64 = s.steps.iter().map(|st| st.errors[class.index()]).sum();
        if n > 0 {
            out.insert(class.name(), n);
        }
    }
    out
}

/// The reasons the run kept for `class`.
fn reasons(s: &RunSummary, class: ErrorClass) -> Vec<String> {
    s.reasons.iter().find(|(c, _)| *c == class).map(|(_, r)| r.clone()).unwrap_or_default()
}

fn statuses(s: &RunSummary) -> BTreeMap<u16, u64> {
    let mut out = BTreeMap::new();
    for st in &s.steps {
        for (code, n) in &st.statuses {
            *out.entry(*code).or_default() += n;
        }
    }
    out
}

fn bytes(s: &RunSummary) -> u64 {
    s.steps.iter().map(|st| st.bytes).sum()
}

fn protocol(http: HttpVersion, tls: Option<TlsOptions>) -> Protocol {
    Protocol { http, tls, streams_per_connection: 0 }
}

fn trusting(ca: &Path) -> Option<TlsOptions> {
    Some(TlsOptions { ca_file: Some(ca.to_path_buf()), insecure: false })
}

/// `users` closed-loop users for `ms` milliseconds against `paths` of `server`.
fn closed(dir: &Path, server: &Server, paths: &[&str], users: u32, ms: u64, protocol: Protocol) -> RunConfig {
    let mut cfg = config(dir, server.port(), paths, steps(&[(users, ms)]));
    cfg.protocol = protocol;
    cfg
}

/// Every response was counted by the server, with the status and body its path gives.
fn check_answers(s: &RunSummary, server: &Server) {
    let statuses = statuses(s);
    assert_eq!(server.requests(), s.records, "server received == engine records");
    assert_eq!(statuses.values().sum::<u64>(), s.records, "{statuses:?}");
    let ok = statuses.get(&200).copied().unwrap_or(0);
    let not_found = statuses.get(&404).copied().unwrap_or(0);
    assert!(ok > 0, "{statuses:?}");
    assert_eq!(bytes(s), ok * BODY.len() as u64 + not_found * b"status 404\n".len() as u64);
}

#[test]
fn h2c_users_hold_a_connection_each_and_requests_carry_the_tag() {
    let _serial = serial();
    let server = Server::h2c();
    let dir = tempfile::tempdir().unwrap();
    let cfg = closed(dir.path(), &server, &["/a?x=1", "/status/404"], 3, 800, protocol(HttpVersion::Http2, None));
    let s = run(&cfg);
    eprintln!("h2c: {} records, {:?}, {} connections", s.records, statuses(&s), server.connections());
    assert_eq!(errors(&s), BTreeMap::new());
    check_answers(&s, &server);
    assert!(statuses(&s)[&404] > 0);
    assert_eq!(server.connections(), 3, "one connection per user");
    let seen = server.seen();
    let authority = format!("127.0.0.1:{}", server.port());
    for r in &seen {
        assert_eq!(r.version, Version::HTTP_2);
        assert_eq!(r.authority.as_deref(), Some(authority.as_str()));
        let (path, query) = r.uri.split_once('?').expect("the tag is in the query");
        assert!(path == "/a" || path == "/status/404", "{r:?}");
        let req = query.rsplit_once("pp_req=").expect("request id").1;
        let expected = if path == "/a" { "x=1&pp_run=test-run_1.a&pp_users=3" } else { "pp_run=test-run_1.a&pp_users=3" };
        assert!(query.starts_with(expected), "{r:?}");
        assert_eq!(r.tag.as_deref(), Some(format!("run=test-run_1.a; users=3; req={req}").as_str()));
    }
}

#[test]
fn h2c_users_share_connections_when_asked() {
    let _serial = serial();
    let server = Server::h2c();
    let dir = tempfile::tempdir().unwrap();
    let mut p = protocol(HttpVersion::Http2, None);
    p.streams_per_connection = 4;
    let s = run(&closed(dir.path(), &server, &["/"], 8, 600, p));
    assert_eq!(errors(&s), BTreeMap::new());
    check_answers(&s, &server);
    assert_eq!(server.connections(), 2, "8 users, 4 streams per connection");
}

#[test]
fn h2_and_http1_over_tls_with_a_custom_ca() {
    let _serial = serial();
    let certs = Certs::new();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    certs.write_ca(&ca);
    for (http, version) in [(HttpVersion::Http2, Version::HTTP_2), (HttpVersion::Http1, Version::HTTP_11)] {
        let server = Server::tls(&certs, &[b"h2", b"http/1.1"]);
        let cfg = closed(dir.path(), &server, &["/", "/status/404"], 2, 700, protocol(http, trusting(&ca)));
        let s = run(&cfg);
        eprintln!("{http:?} over TLS: {} records, {:?}, {} connections", s.records, statuses(&s), server.connections());
        assert_eq!(errors(&s), BTreeMap::new(), "{http:?}");
        check_answers(&s, &server);
        assert_eq!(server.connections(), 2, "{http:?}: keep-alive, one connection per user");
        assert!(server.seen().iter().all(|r| r.version == version), "{http:?}");
    }
}

#[test]
fn an_untrusted_certificate_is_a_tls_error_and_insecure_accepts_it() {
    let _serial = serial();
    let certs = Certs::new();
    let dir = tempfile::tempdir().unwrap();
    for http in [HttpVersion::Http1, HttpVersion::Http2] {
        let server = Server::tls(&certs, &[b"h2", b"http/1.1"]);
        let s = run(&closed(dir.path(), &server, &["/"], 2, 500, protocol(http, Some(TlsOptions::default()))));
        let errors = errors(&s);
        eprintln!("{http:?} untrusted: {errors:?}");
        assert_eq!(errors.keys().collect::<Vec<_>>(), vec![&"tls"], "{http:?}");
        // Why: the TLS error itself, kept once however many handshakes failed.
        assert_eq!(reasons(&s, ErrorClass::Tls), ["invalid peer certificate: UnknownIssuer"], "{http:?}");
        assert_eq!(s.reasons.len(), 1, "{:?}", s.reasons);
        assert!(s.records >= 4, "the users kept trying for the whole step: {}", s.records);
        assert!(s.records < 400, "after a failed handshake a user pauses: {}", s.records);
        assert_eq!((server.connections(), server.requests()), (0, 0));

        let insecure = Some(TlsOptions { ca_file: None, insecure: true });
        let s = run(&closed(dir.path(), &server, &["/"], 2, 400, protocol(http, insecure)));
        assert_eq!(self::errors(&s), BTreeMap::new(), "{http:?} insecure");
        check_answers(&s, &server);
    }
}

#[test]
fn h2_without_the_servers_consent_by_alpn_is_a_tls_error() {
    let _serial = serial();
    let certs = Certs::new();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    certs.write_ca(&ca);
    let server = Server::tls(&certs, &[b"http/1.1"]);
    let s = run(&closed(dir.path(), &server, &["/"], 1, 300, protocol(HttpVersion::Http2, trusting(&ca))));
    assert_eq!(errors(&s).keys().collect::<Vec<_>>(), vec![&"tls"]);
    // The server refuses the handshake with an alert, which is the reason given.
    assert_eq!(reasons(&s, ErrorClass::Tls), ["received fatal alert: NoApplicationProtocol"]);
    assert_eq!(server.requests(), 0);
}

#[test]
fn h2_stream_resets_are_reset_and_the_connection_goes_on() {
    let _serial = serial();
    let server = Server::h2c();
    let dir = tempfile::tempdir().unwrap();
    let s = run(&closed(dir.path(), &server, &["/", "/reset"], 2, 600, protocol(HttpVersion::Http2, None)));
    let errors = errors(&s);
    let ok = statuses(&s)[&200];
    eprintln!("resets: {ok} ok, {errors:?}, {} connections", server.connections());
    assert_eq!(errors.keys().collect::<Vec<_>>(), vec![&"reset"]);
    assert!(errors["reset"].abs_diff(ok) <= 2, "every other request is reset: {ok} ok");
    assert_eq!(server.connections(), 2, "a reset stream leaves its connection open");
}

#[test]
fn an_h2_answer_with_a_header_list_past_64_kib_is_an_error_not_memory() {
    let _serial = serial();
    let server = Server::h2c();
    let dir = tempfile::tempdir().unwrap();
    let s = run(&closed(dir.path(), &server, &["/", "/big-head"], 1, 400, protocol(HttpVersion::Http2, None)));
    let errors = errors(&s);
    let ok = statuses(&s).get(&200).copied().unwrap_or(0);
    let why: Vec<String> = ErrorClass::ALL.iter().flat_map(|c| reasons(&s, *c)).take(2).collect();
    eprintln!("big head: {ok} ok, {errors:?}, {why:?}");
    assert!(ok >= 2, "the other requests are answered: {ok} ok");
    let failed: u64 = errors.values().sum();
    assert!(failed.abs_diff(ok) <= 2, "every other request fails: {ok} ok, {errors:?}");
}

#[test]
fn after_goaway_users_reconnect() {
    let _serial = serial();
    let server = Server::h2c();
    let dir = tempfile::tempdir().unwrap();
    let s = run(&closed(dir.path(), &server, &["/goaway"], 2, 600, protocol(HttpVersion::Http2, None)));
    let errors = errors(&s);
    let ok = statuses(&s).get(&200).copied().unwrap_or(0);
    eprintln!("goaway: {ok} ok, {errors:?}, {} connections", server.connections());
    assert!(ok >= 4, "{ok} ok");
    assert!(server.connections() >= ok / 2, "each connection ends after its GOAWAY");
    // A request that waited for a connection closing after its GOAWAY is sent on a new
    // one; one sent as the GOAWAY came is `closed` (and maybe processed).
    assert!(errors.keys().all(|k| *k == "closed"), "{errors:?}");
    assert!(errors.get("closed").copied().unwrap_or(0) * 5 <= ok, "{errors:?}");
    let processed = server.requests();
    assert!(processed >= ok && processed <= s.records, "{processed} requests reached the server");
}

#[test]
fn open_loop_multiplexes_streams_on_few_connections() {
    let _serial = serial();
    let certs = Certs::new();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    certs.write_ca(&ca);
    for tls in [None, trusting(&ca)] {
        let server = if tls.is_some() { Server::tls(&certs, &[b"h2"]) } else { Server::h2c() };
        let phases = vec![Phase::ramp(300.0, 300.0, Duration::from_secs(1))];
        let mut cfg = open_config(dir.path(), server.port(), &["/"], phases, Arrivals::Uniform, 50);
        cfg.protocol = protocol(HttpVersion::Http2, tls.clone());
        let s = run(&cfg);
        eprintln!("open loop h2 (tls {}): {} records, {} connections", tls.is_some(), s.records, server.connections());
        assert_eq!(errors(&s), BTreeMap::new());
        assert_eq!((s.levels[0].intended, s.records), (300, 300));
        check_answers(&s, &server);
        assert_eq!(server.connections(), 1, "up to 100 streams on one connection");
    }
}
