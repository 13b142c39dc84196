//! One module per `halo` subcommand, plus [`load`]: the dataset-loading flags they share, and
//! [`output`]: output paths checked up front and written atomically.

pub mod bench;
pub mod compare;
pub mod datasets;
pub mod experiment;
pub mod load;
pub mod output;
pub mod partition;
pub mod plot;
pub mod predict;
pub mod reports;
pub mod train;
