//! How the command fails: one line on stderr and an exit code of the kind of failure.

use sam2::Error;

/// Exit codes (also in `sam2 --help` and docs/cli.md).
pub(crate) mod exit {
    pub const INTERNAL: u8 = 1;
    pub const USAGE: u8 = 2;
    pub const INPUT: u8 = 3;
    pub const MODEL: u8 = 4;
    pub const RUNTIME: u8 = 5;
    pub const OUTPUT: u8 = 6;
    /// A batch ran to its end, but one input or more failed (each named, with its own code, in
    /// the summary).
    pub const BATCH: u8 = 7;
}

/// A failure: one line on stderr and an exit code.
pub(crate) struct Failure {
    pub(crate) code: u8,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(code: u8, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }

    /// A library error, with the code its kind calls for (`io` for a file-system error, whose
    /// meaning depends on which file it was).
    pub(crate) fn of(error: Error, io: u8) -> Self {
        let code = match &error {
            Error::RuntimeNotFound(_)
            | Error::OnnxRuntime(_)
            | Error::EnvironmentConfiguration(_)
            | Error::OutOfMemory { .. } => exit::RUNTIME,
            Error::Model { .. } | Error::ModelMismatch(_) => exit::MODEL,
            Error::EmbeddingFormat(_) | Error::InvalidArgument { .. } | Error::NullArgument(_) => {
                exit::INPUT
            }
            Error::Io { .. } => io,
            _ => exit::INTERNAL,
        };
        let mut message = error.to_string();
        if matches!(error, Error::EnvironmentConfiguration(_)) {
            message
                .push_str(" (with this command: --onnxruntime LIB names the ONNX Runtime to load)");
        }
        Failure::new(code, message)
    }
}
