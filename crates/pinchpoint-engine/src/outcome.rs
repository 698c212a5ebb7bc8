//! How a request ended: a response with a status, or a classified transport error,
//! and why: the first distinct messages of each class of error (the OS's, rustls's),
//! noted into the [`Reasons`] of the run the current thread works for.

use std::cell::RefCell;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    ConnectRefused,
    ConnectTimeout,
    ConnectError,
    /// The TLS handshake failed (an untrusted or wrong certificate, no common protocol
    /// version or ALPN protocol, a non-TLS server) or TLS failed on the connection.
    Tls,
    Reset,
    Closed,
    Timeout,
    Io,
    /// A flow's check failed on the response (its status, body or a JSON value).
    Check,
    /// A flow's capture found nothing in the response, or no response came to capture
    /// from: the user starts its flow again.
    Capture,
    /// A gRPC call ended with a status other than OK (its code's name after `grpc_`),
    /// from the server's `grpc-status` or, when an answer has none, from its HTTP status.
    GrpcCancelled,
    GrpcUnknown,
    GrpcInvalidArgument,
    GrpcDeadlineExceeded,
    GrpcNotFound,
    GrpcAlreadyExists,
    GrpcPermissionDenied,
    GrpcResourceExhausted,
    GrpcFailedPrecondition,
    GrpcAborted,
    GrpcOutOfRange,
    GrpcUnimplemented,
    GrpcInternal,
    GrpcUnavailable,
    GrpcDataLoss,
    GrpcUnauthenticated,
    /// A gRPC answer that breaks the protocol: a bad length prefix, a message cut short,
    /// no `grpc-status`, a message that does not decode as the method's output.
    GrpcProtocol,
}

impl ErrorClass {
    pub const ALL: [ErrorClass; 27] = [
        ErrorClass::ConnectRefused,
        ErrorClass::ConnectTimeout,
        ErrorClass::ConnectError,
        ErrorClass::Tls,
        ErrorClass::Reset,
        ErrorClass::Closed,
        ErrorClass::Timeout,
        ErrorClass::Io,
        ErrorClass::Check,
        ErrorClass::Capture,
        ErrorClass::GrpcCancelled,
        ErrorClass::GrpcUnknown,
        ErrorClass::GrpcInvalidArgument,
        ErrorClass::GrpcDeadlineExceeded,
        ErrorClass::GrpcNotFound,
        ErrorClass::GrpcAlreadyExists,
        ErrorClass::GrpcPermissionDenied,
        ErrorClass::GrpcResourceExhausted,
        ErrorClass::GrpcFailedPrecondition,
        ErrorClass::GrpcAborted,
        ErrorClass::GrpcOutOfRange,
        ErrorClass::GrpcUnimplemented,
        ErrorClass::GrpcInternal,
        ErrorClass::GrpcUnavailable,
        ErrorClass::GrpcDataLoss,
        ErrorClass::GrpcUnauthenticated,
        ErrorClass::GrpcProtocol,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::ConnectRefused => "connect_refused",
            ErrorClass::ConnectTimeout => "connect_timeout",
            ErrorClass::ConnectError => "connect_error",
            ErrorClass::Tls => "tls",
            ErrorClass::Reset => "reset",
            ErrorClass::Closed => "closed",
            ErrorClass::Timeout => "timeout",
            ErrorClass::Io => "io",
            ErrorClass::Check => "check",
            ErrorClass::Capture => "capture",
            ErrorClass::GrpcCancelled => "grpc_cancelled",
            ErrorClass::GrpcUnknown => "grpc_unknown",
            ErrorClass::GrpcInvalidArgument => "grpc_invalid_argument",
            ErrorClass::GrpcDeadlineExceeded => "grpc_deadline_exceeded",
            ErrorClass::GrpcNotFound => "grpc_not_found",
            ErrorClass::GrpcAlreadyExists => "grpc_already_exists",
            ErrorClass::GrpcPermissionDenied => "grpc_permission_denied",
            ErrorClass::GrpcResourceExhausted => "grpc_resource_exhausted",
            ErrorClass::GrpcFailedPrecondition => "grpc_failed_precondition",
            ErrorClass::GrpcAborted => "grpc_aborted",
            ErrorClass::GrpcOutOfRange => "grpc_out_of_range",
            ErrorClass::GrpcUnimplemented => "grpc_unimplemented",
            ErrorClass::GrpcInternal => "grpc_internal",
            ErrorClass::GrpcUnavailable => "grpc_unavailable",
            ErrorClass::GrpcDataLoss => "grpc_data_loss",
            ErrorClass::GrpcUnauthenticated => "grpc_unauthenticated",
            ErrorClass::GrpcProtocol => "grpc_protocol",
        }
    }

    /// The class of a gRPC status code other than 0 (OK); a code beyond 16 is unknown.
    pub fn grpc(code: u32) -> ErrorClass {
        let first = ErrorClass::GrpcCancelled.index();
        match code {
            1..=16 => ErrorClass::ALL[first + code as usize - 1],
            _ => ErrorClass::GrpcUnknown,
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// Distinct messages kept per class of error.
pub const REASONS_PER_CLASS: usize = 3;
/// A message is cut to this many characters.
const REASON_CHARS: usize = 200;

/// Why requests of a run failed: up to [`REASONS_PER_CLASS`] distinct messages per
/// class, in the order they first came.
#[derive(Debug, Default)]
pub struct Reasons {
    kept: Mutex<Vec<(ErrorClass, String)>>,
    full: [AtomicBool; ErrorClass::ALL.len()],
}

impl Reasons {
    /// Keeps `message` (made only if the class has room) for `class` unless already kept.
    pub fn note(&self, class: ErrorClass, message: impl FnOnce() -> String) {
        let full = &self.full[class.index()];
        if full.load(Ordering::Relaxed) {
            return;
        }
        let mut text = message();
        if let Some((cut, _)) = text.char_indices().nth(REASON_CHARS) {
            text.truncate(cut);
        }
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let mine = kept.iter().filter(|(c, _)| *c == class).count();
        if mine < REASONS_PER_CLASS && !kept.iter().any(|(c, m)| *c == class && *m == text) {
            kept.push((class, text));
            if mine + 1 == REASONS_PER_CLASS {
                full.store(true, Ordering::Relaxed);
            }
        }
    }

    /// The messages of each class that has any, classes in [`ErrorClass::ALL`] order.
    pub fn by_class(&self) -> Vec<(ErrorClass, Vec<String>)> {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        ErrorClass::ALL
            .iter()
            .map(|&class| (class, kept.iter().filter(|(c, _)| *c == class).map(|(_, m)| m.clone()).collect()))
            .filter(|(_, messages): &(ErrorClass, Vec<String>)| !messages.is_empty())
            .collect()
    }
}

thread_local! {
    static NOTING: RefCell<Option<Arc<Reasons>>> = const { RefCell::new(None) };
}

/// Makes this thread note why requests fail into `reasons` (None: nowhere); returns
/// where it noted before.
pub fn note_into(reasons: Option<Arc<Reasons>>) -> Option<Arc<Reasons>> {
    NOTING.with(|noting| noting.replace(reasons))
}

/// This thread notes why requests fail into its reasons until the guard is dropped.
pub struct Noting(Option<Arc<Reasons>>);

/// Makes this thread note into `reasons` until the returned guard is dropped.
pub fn noting(reasons: Arc<Reasons>) -> Noting {
    Noting(note_into(Some(reasons)))
}

impl Drop for Noting {
    fn drop(&mut self) {
        note_into(self.0.take());
    }
}

/// Notes why a request failed, into the reasons of the run this thread works for.
pub fn note(class: ErrorClass, message: impl FnOnce() -> String) {
    NOTING.with(|noting| {
        if let Some(reasons) = noting.borrow().as_ref() {
            reasons.note(class, message);
        }
    });
}

/// Classifies a failure while connecting (and notes why).
pub fn classify_connect(err: &io::Error) -> ErrorClass {
    let class = match err.kind() {
        io::ErrorKind::ConnectionRefused => ErrorClass::ConnectRefused,
        io::ErrorKind::TimedOut => ErrorClass::ConnectTimeout,
        _ => ErrorClass::ConnectError,
    };
    note(class, || err.to_string());
    class
}

/// An I/O error that carries a TLS error (rustls reports them as `InvalidData`).
pub fn is_tls_error(err: &io::Error) -> bool {
    err.get_ref().is_some_and(|inner| inner.is::<tokio_rustls::rustls::Error>())
}

/// Classifies a failure on an established connection (and notes why).
pub fn classify_io(err: &io::Error) -> ErrorClass {
    let class = if is_tls_error(err) {
        ErrorClass::Tls
    } else {
        match err.kind() {
            io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionAborted => {
                ErrorClass::Reset
            }
            io::ErrorKind::UnexpectedEof => ErrorClass::Closed,
            io::ErrorKind::TimedOut => ErrorClass::Timeout,
            _ => ErrorClass::Io,
        }
    };
    note(class, || err.to_string());
    class
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_listed_in_order() {
        for (i, class) in ErrorClass::ALL.iter().enumerate() {
            assert_eq!(class.index(), i, "{}", class.name());
        }
    }

    #[test]
    fn grpc_codes_have_their_classes() {
        assert_eq!(ErrorClass::grpc(1), ErrorClass::GrpcCancelled);
        assert_eq!(ErrorClass::grpc(4).name(), "grpc_deadline_exceeded");
        assert_eq!(ErrorClass::grpc(14).name(), "grpc_unavailable");
        assert_eq!(ErrorClass::grpc(16), ErrorClass::GrpcUnauthenticated);
        assert_eq!(ErrorClass::grpc(99), ErrorClass::GrpcUnknown);
    }

    #[test]
    fn the_first_distinct_reasons_of_each_class_are_kept() {
        let reasons = Arc::new(Reasons::default());
        let before = note_into(Some(reasons.clone()));
        let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
        for _ in 0..5 {
            assert_eq!(classify_connect(&refused), ErrorClass::ConnectRefused);
        }
        for n in 0..5 {
            note(ErrorClass::Tls, || format!("tls failure {n}"));
        }
        note(ErrorClass::Io, || "x".repeat(1000));
        note_into(before);
        note(ErrorClass::Timeout, || "not noted: this thread no longer notes".into());
        let by_class = reasons.by_class();
        let classes: Vec<_> = by_class.iter().map(|(c, _)| *c).collect();
        assert_eq!(classes, [ErrorClass::ConnectRefused, ErrorClass::Tls, ErrorClass::Io]);
        assert_eq!(by_class[0].1, [refused.to_string()]);
        assert_eq!(by_class[1].1, ["tls failure 0", "tls failure 1", "tls failure 2"]);
        assert_eq!(by_class[2].1[0].len(), REASON_CHARS);
    }
}
