//! One module per `halo` subcommand.

pub mod bench;
pub mod datasets;
pub mod experiment;
pub mod partition;
pub mod train;
