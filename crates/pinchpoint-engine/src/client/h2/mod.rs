//! The engine's own HTTP/2 client, for plain requests (h2c by prior knowledge, and h2
//! over TLS): frames (`frame.rs`), HPACK (`hpack.rs`, `huffman.rs`, `static_table.rs`),
//! a request's header block (`request.rs`) and its text (`text.rs`), and the connection
//! its holders share (`conn.rs`, its state in `state/`, each stream in `stream.rs`).
//!
//! gRPC calls stay on the h2 crate (`h2conn.rs`), which streams their bodies.

mod conn;
mod frame;
mod hpack;
mod huffman;
pub mod request;
mod state;
mod static_table;
mod stream;
mod text;
#[cfg(test)]
mod tests;

pub use conn::Client;
pub use text::Text;

use crate::outcome::ErrorClass;

/// Why an exchange failed.
#[derive(Debug, PartialEq, Eq)]
pub enum Failure {
    /// The request was never sent: the connection ended (a graceful GOAWAY) while it
    /// waited for it. Safe to send again.
    Refused,
    Failed(ErrorClass),
}

impl Failure {
    pub fn class(self) -> ErrorClass {
        match self {
            Failure::Refused => ErrorClass::Closed,
            Failure::Failed(class) => class,
        }
    }
}
