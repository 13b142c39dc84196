//! trainer
