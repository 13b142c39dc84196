//! `halo predict --model FILE.safetensors`: runs weights that `halo train --save-model` wrote
//! over a dataset, prints their accuracy on its splits and writes one prediction per vertex.
//!
//! The dataset is the one the model trained on (named in the sidecar), or `--dataset`; it is
//! prepared as for training (the sidecar's feature normalisation and split).

use std::path::{Path, PathBuf};

use anyhow::Context;
use trainer::export;

use super::load::LoadArgs;
use super::output::{check_writable, write_atomically};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Weights written by `halo train --save-model` (their `.json` sidecar must lie beside them).
    #[arg(long, value_name = "FILE.safetensors")]
    model: PathBuf,
    /// Dataset directory in the OGB raw layout, or a name under `datasets/` [default: the one the
    /// model trained on].
    #[arg(long, value_name = "PATH")]
    dataset: Option<String>,
    /// Write the predictions here as CSV (`node,prediction`; multi-label: the labels predicted,
    /// separated by spaces).
    #[arg(long, value_name = "FILE.csv")]
    out: Option<PathBuf>,
    #[command(flatten)]
    load: LoadArgs,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if let Some(out) = &args.out {
        check_writable(out, "--out")?;
    }
    let (mut model, sidecar) = export::load(&args.model).context("--model")?;
    let mut config = sidecar.train.clone();
    if args.dataset.is_some() {
        config.dataset.clone_from(&args.dataset);
    }
    let dataset = trainer::data::prepare_dataset(&config, Path::new("datasets"), &args.load.options(None, false))
        .context(if args.dataset.is_some() { "--dataset" } else { "the dataset named in the model's sidecar" })?;
    let predictions = export::predict(&mut model, &dataset)?;
    let e = predictions.eval;
    println!(
        "{}: train acc {:.4}, val acc {:.4}, test acc {:.4} (training measured val {:.4}, test {:.4} at epoch {})",
        dataset.name, e.train_acc, e.val_acc, e.test_acc, sidecar.val_acc, sidecar.test_acc, sidecar.epoch
    );
    if let Some(out) = &args.out {
        let mut csv = String::from("node,prediction\n");
        for (node, labels) in predictions.labels.iter().enumerate() {
            let labels: Vec<String> = labels.iter().map(u32::to_string).collect();
            csv += &format!("{node},{}\n", labels.join(" "));
        }
        write_atomically(out, &csv, "--out")?;
        println!("wrote {} predictions to {}", predictions.labels.len(), out.display());
    }
    Ok(())
}
