//! Partition a graph and inspect the book: EBV vertex-cut of Cora into 4 parts on 2 hosts.
//!
//!     cargo run -p graph-partition --example partition [DATASET_DIR]

use std::path::PathBuf;

use graph_partition::book::PartitionBook;
use graph_partition::metrics::PartitionMetrics;
use graph_partition::partition::{Algorithm, PartitionConfig, partition_graph};
use graph_partition::{CacheMode, Dataset, LoadOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args_os()
        .nth(1)
        .map_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../datasets/cora")), PathBuf::from);
    let dataset = Dataset::load(&dir, &LoadOptions { cache: CacheMode::Off, ..LoadOptions::default() })?;
    println!("{}: {} vertices, {} edges", dataset.name, dataset.num_nodes(), dataset.graph.num_edges());

    let config = PartitionConfig { hosts: 2, ..PartitionConfig::new(Algorithm::Ebv, 4) };
    let partition = partition_graph(&dataset.graph, &config)?;
    let book = PartitionBook::build(&dataset.graph, &partition)?;
    let metrics = PartitionMetrics::of(&book, &config.layout()?)?;
    println!(
        "replication factor {:.3}, edge imbalance {:.3}, most messages across hosts per sync {}",
        metrics.replication_factor, metrics.edge_imbalance, metrics.max_outer_connections
    );
    for part in book.parts() {
        let peers: usize = (0..part.num_parts()).map(|p| part.send(p).len()).sum();
        println!(
            "part {}: {} vertices ({} primaries, {} copies), {} edges, {} rows sent per sync",
            part.part(),
            part.num_local(),
            part.num_primary(),
            part.num_copies(),
            part.num_edges(),
            peers
        );
    }
    Ok(())
}
