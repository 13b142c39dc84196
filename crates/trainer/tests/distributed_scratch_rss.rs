use std::path::Path;
use trainer::config::{Method, TrainConfig};
use trainer::distributed::{DistributedConfig, LocalOptions, run_with_dataset};
#[test]
fn rss() {
    let cora = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/datasets/cora");
    let config = TrainConfig { dataset: Some(cora.into()), epochs: 200, method: Method::Vanilla,
        distributed: DistributedConfig { workers: 4, hosts: 2, ..Default::default() }, ..TrainConfig::default() };
    let d = trainer::data::prepare_dataset(&config, Path::new(".")).unwrap();
    let r = run_with_dataset(&config, &d, LocalOptions::default(), &mut ()).unwrap();
    eprintln!("RSS {:?} MiB", r.final_.peak_rss_bytes.map(|b| b >> 20));
}
