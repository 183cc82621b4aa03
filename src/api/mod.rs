//! The control API: its JSON shapes (`dto`), its error (`error`), the book
//! operations' requests and trait (`books`; the service itself is
//! `src/books.rs`, beside the store), an ask's one sequence (`ask`), and
//! the client the CLI reaches a running daemon with (`client`). Nothing here knows the
//! daemon: the server side of the socket lives in `daemon::control`.

pub mod ask;
pub mod books;
pub mod client;
pub mod dto;
pub mod error;
pub mod prefix;
pub mod routes;

pub use error::{ApiError, ErrorKind};
