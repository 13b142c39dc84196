//! One module per `halo` subcommand.

pub mod datasets;
