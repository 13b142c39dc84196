//! The error of a run whose estimated peak memory exceeds its ceiling.

/// A run whose estimated peak exceeds its ceiling.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemoryError {
    #[error(
        "the estimated peak memory {estimate} exceeds the ceiling of {limit} ({source_}), checked {when}; \
         estimate:\n{breakdown}\n{suggestion}"
    )]
    OverLimit {
        estimate: String,
        limit: String,
        source_: &'static str,
        when: &'static str,
        breakdown: String,
        suggestion: String,
    },
}
