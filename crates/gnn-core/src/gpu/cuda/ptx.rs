//! The PTX of every `kernels/*.cu`, embedded at build time. gnn-core's build script generates
//! the table and refuses to build when the PTX is missing or older than its source.

pub use manifest::REBUILD;

#[allow(dead_code)] // the build script uses the rest of the shared manifest code
#[path = "../../../../../kernels/manifest.rs"]
mod manifest;

include!(concat!(env!("OUT_DIR"), "/ptx_table.rs"));

/// The index of `module` in [`MODULES`].
pub fn index(module: &str) -> Option<usize> {
    MODULES.iter().position(|(name, _)| *name == module)
}
