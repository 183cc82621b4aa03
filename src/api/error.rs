//! The control API's error: what kind of failure (mapped to an HTTP status
//! by the server and back by the client) and the message the operator sees.

use serde::{Deserialize, Serialize};

/// What kind of failure an operation met; the daemon maps it to an HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    BadRequest,
    NotFound,
    Conflict,
    Unavailable,
    Internal,
    /// The daemon could not be reached to send the request (it stopped
    /// after the client found it): nothing was done, and the CLI may do it
    /// itself.
    NotSent,
    /// The connection ended after the request went out and before the
    /// answer came: whether it took effect is unknown until checked.
    Lost,
}

impl ErrorKind {
    /// The HTTP status code a kind travels as.
    pub fn status(self) -> u16 {
        match self {
            ErrorKind::BadRequest => 400,
            ErrorKind::NotFound => 404,
            ErrorKind::Conflict => 409,
            ErrorKind::Unavailable | ErrorKind::NotSent | ErrorKind::Lost => 503,
            ErrorKind::Internal => 500,
        }
    }

    /// The kind an HTTP status code stands for (any other failure is internal).
    pub fn from_status(status: u16) -> ErrorKind {
        match status {
            400 => ErrorKind::BadRequest,
            404 => ErrorKind::NotFound,
            409 => ErrorKind::Conflict,
            503 => ErrorKind::Unavailable,
            _ => ErrorKind::Internal,
        }
    }
}

/// A failed operation, with the message the operator sees.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub kind: ErrorKind,
    pub message: String,
}

impl ApiError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> ApiError {
        ApiError {
            kind,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorKind::BadRequest, message)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorKind::NotFound, message)
    }

    pub fn conflict(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorKind::Conflict, message)
    }

    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorKind::Unavailable, message)
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorKind::Internal, message)
    }
}

/// An error answer of the control API.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
}
