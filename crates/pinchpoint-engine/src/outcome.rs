//! How a request ended: a response with a status, or a classified transport error.

use std::io;

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
}

impl ErrorClass {
    pub const ALL: [ErrorClass; 8] = [
        ErrorClass::ConnectRefused,
        ErrorClass::ConnectTimeout,
        ErrorClass::ConnectError,
        ErrorClass::Tls,
        ErrorClass::Reset,
        ErrorClass::Closed,
        ErrorClass::Timeout,
        ErrorClass::Io,
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
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// Classifies a failure while connecting.
pub fn classify_connect(err: &io::Error) -> ErrorClass {
    match err.kind() {
        io::ErrorKind::ConnectionRefused => ErrorClass::ConnectRefused,
        io::ErrorKind::TimedOut => ErrorClass::ConnectTimeout,
        _ => ErrorClass::ConnectError,
    }
}

/// Classifies a failure on an established connection.
pub fn classify_io(err: &io::Error) -> ErrorClass {
    if crate::tls::is_tls_error(err) {
        return ErrorClass::Tls;
    }
    match err.kind() {
        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionAborted => {
            ErrorClass::Reset
        }
        io::ErrorKind::UnexpectedEof => ErrorClass::Closed,
        io::ErrorKind::TimedOut => ErrorClass::Timeout,
        _ => ErrorClass::Io,
    }
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
}
