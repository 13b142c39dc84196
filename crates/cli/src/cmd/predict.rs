//! `halo predict --model FILE.safetensors`: runs weights that `halo train --save-model` wrote
//! over a dataset, prints their accuracy on its splits and writes one prediction per vertex.
//!
//! The dataset is `--dataset`, else the one the model trained on: the absolute directory the
//! sidecar records, else its name. It is prepared as for training (the sidecar's feature
//! normalisation and split).

use std::path::{Path, PathBuf};

use anyhow::Context;
use graph_partition::Dataset;
use trainer::export;

use super::load::{DATASETS, LoadArgs};
use super::output::{Place, check_writable, refuse_clashes, write_atomically};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Weights written by `halo train --save-model` (their sidecar, the same name ending in
    /// `.json`, must lie beside them).
    #[arg(long, value_name = "FILE.safetensors")]
    model: PathBuf,
    /// Dataset directory in the OGB raw layout, or a name under `datasets/` [default: the one the
    /// model trained on, by the absolute directory its sidecar records].
    #[arg(long, value_name = "PATH")]
    dataset: Option<String>,
    /// Write the predictions here as CSV (`node,prediction`; multi-label: the labels predicted,
    /// separated by spaces).
    #[arg(long, value_name = "FILE.csv")]
    out: Option<PathBuf>,
    #[command(flatten)]
    load: LoadArgs,
}

/// Warns when the dataset `config` names is not the one the model trained on: the fingerprint
/// of its files differs from the sidecar's.
fn warn_if_changed(config: &trainer::TrainConfig, trained_on: Option<u64>) {
    let Some((spec, trained_on)) = config.dataset.as_deref().zip(trained_on) else { return };
    let Ok(dir) = trainer::data::resolve_dataset_dir(spec, Path::new(DATASETS)) else { return };
    if Dataset::source_fingerprint(&dir).is_ok_and(|now| now != trained_on) {
        eprintln!(
            "warning: the files of dataset {} changed since the model trained on it; its accuracies may differ",
            dir.display()
        );
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if let Some(out) = &args.out {
        check_writable(out, "--out")?;
        let model = Place::input("--model", &args.model);
        let sidecar = Place::input("--model's sidecar", &export::sidecar_path(&args.model));
        refuse_clashes(&[model, sidecar, Place::output("--out", out)])?;
    }
    let (mut model, sidecar) = export::load(&args.model).context("--model")?;
    let mut config = sidecar.train.clone();
    if args.dataset.is_some() {
        config.dataset.clone_from(&args.dataset);
    } else {
        if let Some(dir) = sidecar.dataset_dir.as_ref().filter(|dir| dir.is_dir()) {
            config.dataset = Some(dir.to_string_lossy().into_owned());
        }
        warn_if_changed(&config, sidecar.dataset_fingerprint);
    }
    let dataset = trainer::data::prepare_dataset(&config, Path::new(DATASETS), &args.load.options(None, false))
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
