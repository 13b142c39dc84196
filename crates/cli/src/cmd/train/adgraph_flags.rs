//! `--method adgraph`'s own flag; it shares `--partitioner`, `--workers`, `--batch-size`,
//! `--fanouts` and `--lr-scaling` with the other methods.

use trainer::TrainConfig;

/// ADGraph's flags.
#[derive(Debug, clap::Args)]
pub struct AdgraphFlags {
    /// adgraph: hops of in-neighbourhood each part keeps around its training vertices; at
    /// least the number of layers makes every sampled batch the whole graph's [default: 1].
    #[arg(long, value_name = "L")]
    hops: Option<usize>,
}

impl AdgraphFlags {
    /// Writes the flags given over `config`.
    pub fn apply(&self, config: &mut TrainConfig) {
        if let Some(hops) = self.hops {
            config.method.adgraph.hops = hops;
        }
    }
}
