//! The library's errors, by what the user must do about them.
//!
//! A record that cannot be used is not an error: it is a counted skip ([`crate::source::Skip`]) and
//! the run goes on. An [`Error`] ends the run, and nothing is committed.

use std::io;

/// Why a run (or a tool) stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting, flag or job key is wrong: change it.
    #[error("{0}")]
    Config(String),
    /// The inputs cannot be used as given (missing, unreadable, or no usable record).
    #[error("{0}")]
    Input(String),
    /// An output cannot be written where asked (a directory, an input, locked, unwritable).
    #[error("{0}")]
    Output(String),
    /// Reading or writing a file failed.
    #[error("{context}: {cause}")]
    Io {
        /// What was being done.
        context: String,
        /// The system's error (in the message, not a chained source, so that it is said once).
        cause: io::Error,
    },
    /// The processes of a cluster cannot work together (unreachable, mismatched, one was lost).
    #[error("{0}")]
    Cluster(String),
    /// The run would take more memory or time than it may: change a budget or k.
    #[error("{0}")]
    Resource(String),
    /// A bug in neardup.
    #[error("internal error (a bug in neardup, please report it): {0}")]
    Internal(String),
}

/// A result with the library's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Adds what was being done to an I/O error.
pub trait IoContext<T> {
    /// Turns an I/O error into [`Error::Io`] with `context()`.
    fn io_context(self, context: impl FnOnce() -> String) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn io_context(self, context: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|cause| Error::Io {
            context: context(),
            cause,
        })
    }
}

/// Returns early with an error of the given kind: `bail!(Config, "k must be at most {}", n)`.
#[macro_export]
macro_rules! bail {
    ($kind:ident, $($arg:tt)*) => {
        return Err($crate::error::Error::$kind(format!($($arg)*)))
    };
}

/// Returns early with an error of the given kind unless the condition holds.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $kind:ident, $($arg:tt)*) => {
        if !$cond {
            $crate::bail!($kind, $($arg)*);
        }
    };
}
