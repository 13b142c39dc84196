//! Run a method from the trainer: vanilla distributed training of GraphSAGE on Cora with 4
//! in-process workers on 2 hosts, the same run single-process, and what the workers exchanged.
//!
//!     cargo run -p trainer --example method --release

use std::path::Path;

use graph_partition::LoadOptions;
use trainer::config::Method;
use trainer::{Source, TrainConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let datasets = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../datasets"));
    let mut config = TrainConfig::from_toml_str(
        "dataset = \"cora\"\nmodel = \"sage\"\nepochs = 30\n[distributed]\nworkers = 4\nhosts = 2\n",
        "example",
    )?;
    let load = LoadOptions { cache: graph_partition::CacheMode::Off, ..LoadOptions::default() };
    for method in [Method::Single, Method::Vanilla] {
        config.method.name = method;
        let report = trainer::run(&config, Source::Load(datasets, &load), &mut ())?.expect("in-process runs report");
        let f = &report.final_;
        println!(
            "{:>7}: test acc {:.4} at epoch {}, {} bytes exchanged, {} bytes of gradient sync",
            report.method, f.test_acc_at_best_val, f.best_epoch, f.bytes_exchange, f.bytes_grad_sync
        );
    }
    Ok(())
}
