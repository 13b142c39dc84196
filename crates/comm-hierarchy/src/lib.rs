//! comm-hierarchy
