//! The one error type of the engine.
//!
//! Every refusal the engine makes is an [`Error`] with a [`ErrorCode`]; the napi skin turns the
//! code into the JS `err.code` and the message into `err.message`. Messages name the offending
//! value so that a caller can tell what to fix. Nothing here knows about napi.

use std::fmt;

/// The `code` a JS caller sees on a rejected promise (API.md §1, §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// Bad parameters, or a refusal the gateway answers with `INVALID_REQUEST`.
    InvalidRequest,
    /// The SQLite file could not be opened, read or written.
    StoreError,
    /// The store was closed.
    Closed,
    /// A config that fails validation.
    InvalidConfig,
    /// The gateway's `UNAVAILABLE`: a transient condition, worth retrying.
    Unavailable,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidRequest => "INVALID_REQUEST",
            ErrorCode::StoreError => "STORE_ERROR",
            ErrorCode::Closed => "CLOSED",
            ErrorCode::InvalidConfig => "INVALID_CONFIG",
            ErrorCode::Unavailable => "UNAVAILABLE",
        }
    }
}

/// A caller's value as quoted in an error message: at most 200 characters, then `…`.
pub fn clip(value: &str) -> String {
    const MAX: usize = 200;
    match value.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}…", &value[..at]),
        None => value.to_owned(),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    code: ErrorCode,
    message: String,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Error { code, message: message.into() }
    }
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }
    pub fn invalid_config(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidConfig, message)
    }
    pub fn store(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::StoreError, message)
    }
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unavailable, message)
    }
    pub fn closed() -> Self {
        Self::new(ErrorCode::Closed, "the session store is closed")
    }
    pub fn code(&self) -> ErrorCode {
        self.code
    }
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        Error::store(format!("sqlite: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::clip;

    #[test]
    fn long_values_are_clipped_in_messages_on_a_char_boundary() {
        assert_eq!(clip("short"), "short");
        let long = "é".repeat(300);
        let c = clip(&long);
        assert_eq!(c.chars().count(), 201);
        assert!(c.ends_with('…'));
    }
}
