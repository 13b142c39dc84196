//! One module per `halo` subcommand, plus [`load`]: the dataset-loading flags they share.

pub mod bench;
pub mod datasets;
pub mod experiment;
pub mod load;
pub mod partition;
pub mod train;
