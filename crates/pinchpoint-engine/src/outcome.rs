//! How a request ended: a response with a status, or a classified transport error.

use std::io;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    ConnectRefused,
    ConnectTimeout,
    ConnectError,
    Reset,
    Closed,
    Timeout,
    Io,
}

impl ErrorClass {
    pub const ALL: [ErrorClass; 7] = [
        ErrorClass::ConnectRefused,
        ErrorClass::ConnectTimeout,
        ErrorClass::ConnectError,
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
    match err.kind() {
        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionAborted => {
            ErrorClass::Reset
        }
        io::ErrorKind::UnexpectedEof => ErrorClass::Closed,
        io::ErrorKind::TimedOut => ErrorClass::Timeout,
        _ => ErrorClass::Io,
    }
}
