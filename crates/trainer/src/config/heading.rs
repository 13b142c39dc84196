//! The sections of `halo train --help`: each key's flag sits under one of these, set where the
//! key is defined; a method's keys sit under `Method <name>`, set in [`super::MethodConfig`]. A
//! flattened table leaves its heading in force, so a key after one names its heading.

pub const DATA: &str = "Data";
pub const MODEL: &str = "Model";
pub const OPTIMIZATION: &str = "Optimization";
pub const COMPUTE: &str = "Compute";
pub const DISTRIBUTED: &str = "Distributed";
pub const RELIABILITY: &str = "Reliability";
pub const OUTPUT: &str = "Output";
