//! Writes a random graph in OGB's binary layout, the one ogbn-papers100M ships in, to measure
//! `halo datasets import` on it (docs/BENCHMARKS.md, "Import"):
//!
//!     cargo run --release -p graph-partition --example ogb_bin_graph -- OUT NODES EDGES FEATURES
//!
//! `raw/data.npz` (deflated, as `numpy.savez_compressed` writes it) holds `edge_index` (2, E)
//! int64 with directed random edges, `node_feat` (N, F) float32 uniform in [-1, 1),
//! `num_nodes_list` and `num_edges_list`; `raw/node-label.npz` holds `node_label` (N, 1)
//! float64 with 172 classes and every fourth node unlabelled (NaN); `split/time/` holds a
//! 60/20/20 split of the labelled nodes. Everything is streamed: memory stays small whatever
//! the size.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use graph_partition::dataset::npy::NpzWriter;
use graph_partition::rng::{SplitMix64, uniform_f32};

const SEED: u64 = 0x0b1;
const CLASSES: u64 = 172;
const CHUNK: u64 = 1 << 16;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [out, nodes, edges, features] = args.as_slice() else {
        return Err("usage: ogb_bin_graph OUT NODES EDGES FEATURES".into());
    };
    let (out, n, e, f): (&Path, u64, u64, u64) = (Path::new(out), nodes.parse()?, edges.parse()?, features.parse()?);
    std::fs::create_dir_all(out.join("raw"))?;

    let mut data = NpzWriter::create(&out.join("raw/data.npz"), true)?;
    data.start::<i64>("edge_index", &[2, e])?;
    // Edge k joins the nodes drawn at counters 2k and 2k + 1: sources first, then targets.
    for end in 0..2 {
        for start in (0..e).step_by(CHUNK as usize) {
            let ids: Vec<i64> = (start..(start + CHUNK).min(e))
                .map(|k| (SplitMix64::output_at(SEED, 2 * k + end) % n) as i64)
                .collect();
            data.values(&ids)?;
        }
    }
    data.start::<f32>("node_feat", &[n, f])?;
    let mut row = Vec::with_capacity(f as usize);
    for v in 0..n {
        row.clear();
        row.extend((0..f).map(|j| uniform_f32(&[SEED, v, j]) * 2.0 - 1.0));
        data.values(&row)?;
    }
    data.add("num_nodes_list", &[1], &[n as i64])?;
    data.add("num_edges_list", &[1], &[e as i64])?;
    data.finish()?;

    let class = |v: u64| (v % 4 != 3).then(|| SplitMix64::output_at(SEED + 1, v) % CLASSES);
    let mut labels = NpzWriter::create(&out.join("raw/node-label.npz"), true)?;
    labels.start::<f64>("node_label", &[n, 1])?;
    for start in (0..n).step_by(CHUNK as usize) {
        let chunk: Vec<f64> =
            (start..(start + CHUNK).min(n)).map(|v| class(v).map_or(f64::NAN, |c| c as f64)).collect();
        labels.values(&chunk)?;
    }
    labels.finish()?;

    let split = out.join("split/time");
    std::fs::create_dir_all(&split)?;
    let mut parts = ["train", "valid", "test"].map(|part| {
        let file = File::create(split.join(format!("{part}.csv.gz"))).expect("split file");
        flate2::write::GzEncoder::new(BufWriter::new(file), flate2::Compression::fast())
    });
    for v in (0..n).filter(|&v| class(v).is_some()) {
        let part = match SplitMix64::output_at(SEED + 2, v) % 5 {
            0..=2 => 0,
            3 => 1,
            _ => 2,
        };
        writeln!(parts[part], "{v}")?;
    }
    for part in parts {
        part.finish()?.flush()?;
    }
    println!("wrote {}: {n} nodes, {e} edges, {f} features", out.display());
    Ok(())
}
