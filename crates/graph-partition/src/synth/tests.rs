//! Statistical and reproducibility checks of the synthetic generator, on graphs small enough
//! for a quick test run but large enough for stable statistics.

use super::*;
use crate::csr::Csr;

fn fraction_of_edges(g: &Csr, same: impl Fn(usize, usize) -> bool) -> f64 {
    let mut hits = 0usize;
    for v in 0..g.num_rows() {
        hits += g.neighbors(v).iter().filter(|&&u| same(u as usize, v)).count();
    }
    hits as f64 / g.num_edges() as f64
}

fn classes(d: &Dataset) -> &[u32] {
    match &d.labels {
        Labels::Classes(c) => c,
        Labels::MultiLabel(_) => panic!("synthetic labels are single-label"),
    }
}

#[test]
fn reproducible_and_seed_dependent() {
    let cfg = SynthConfig { nodes: 3000, communities: Some(7), ..SynthConfig::default() };
    let a = cfg.generate().unwrap();
    let b = cfg.generate().unwrap();
    assert_eq!(a, b);
    let c = SynthConfig { seed: 1, ..cfg.clone() }.generate().unwrap();
    assert_ne!(a.graph, c.graph);
    assert_ne!(a.features, c.features);
    assert_ne!(a.splits, c.splits);
    // Thread count does not matter: run the same config on a one-thread pool.
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    assert_eq!(pool.install(|| cfg.generate().unwrap()), a);
}

#[test]
fn requested_sizes_are_met() {
    for (nodes, avg_degree, features, classes) in [(100, 4.0, 3, 2), (5000, 10.0, 16, 5), (20000, 20.0, 8, 10)] {
        let cfg = SynthConfig { nodes, avg_degree, features, classes, ..SynthConfig::default() };
        let d = cfg.generate().unwrap();
        d.validate().unwrap();
        assert_eq!((d.num_nodes(), d.num_features(), d.num_classes), (nodes, features, classes));
        assert!(d.graph.is_symmetric());
        assert!((0..nodes).all(|v| !d.graph.neighbors(v).contains(&(v as u32))));
        let mean = d.graph.num_edges() as f64 / nodes as f64;
        assert!((mean - avg_degree).abs() <= 0.1 * avg_degree, "n={nodes}: mean degree {mean}, want {avg_degree}");
        let s = &d.splits;
        assert_eq!(s.train.len() + s.valid.len() + s.test.len(), nodes);
        assert_eq!(s.train.len(), (nodes as f64 * 0.6).round() as usize);
        assert_eq!(s.valid.len(), (nodes as f64 * 0.2).round() as usize);
        let mut all: Vec<u32> = s.train.iter().chain(&s.valid).chain(&s.test).copied().collect();
        all.sort_unstable();
        assert!(all.iter().copied().eq(0..nodes as u32), "split is not a partition of the nodes");
    }
}

#[test]
fn homophily_is_above_chance_and_tracks_the_parameter() {
    let base = SynthConfig { nodes: 8000, classes: 5, ..SynthConfig::default() };
    for homophily in [0.9, 0.5] {
        let d = SynthConfig { homophily, ..base.clone() }.generate().unwrap();
        let y = classes(&d);
        let measured = fraction_of_edges(&d.graph, |u, v| y[u] == y[v]);
        assert!((measured - homophily).abs() < 0.05, "homophily {homophily}: measured {measured}");
        assert!(measured > 1.0 / 5.0 + 0.2);
    }
}

#[test]
fn community_fraction_is_close_to_requested() {
    for intra_community in [0.8, 0.3] {
        let cfg = SynthConfig { nodes: 8000, communities: Some(10), intra_community, ..SynthConfig::default() };
        let d = cfg.generate().unwrap();
        let comm = features::balanced_groups(cfg.nodes, 10, cfg.seed, features::COMMUNITY_TAG);
        let measured = fraction_of_edges(&d.graph, |u, v| comm[u] == comm[v]);
        assert!((measured - intra_community).abs() < 0.05, "intra {intra_community}: measured {measured}");
        let y = classes(&d);
        let homophily = fraction_of_edges(&d.graph, |u, v| y[u] == y[v]);
        assert!((homophily - cfg.homophily).abs() < 0.06, "homophily with communities: {homophily}");
        let mean = d.graph.num_edges() as f64 / cfg.nodes as f64;
        assert!((mean - cfg.avg_degree).abs() <= 0.1 * cfg.avg_degree, "mean degree {mean}");
    }
}

#[test]
fn degrees_are_heavy_tailed() {
    let d = SynthConfig { nodes: 20000, avg_degree: 10.0, ..SynthConfig::default() }.generate().unwrap();
    let stats = d.summary().degree;
    assert!(stats.max as f64 > 8.0 * stats.mean, "max {} vs mean {}", stats.max, stats.mean);
    // Power law: the median sits well below the mean.
    assert!(stats.median < 0.8 * stats.mean, "median {} vs mean {}", stats.median, stats.mean);
}

/// Per-class feature means over the training nodes.
fn class_means(d: &Dataset) -> ndarray::Array2<f64> {
    let y = classes(d);
    let mut means = ndarray::Array2::<f64>::zeros((d.num_classes, d.num_features()));
    let mut counts = vec![0.0; d.num_classes];
    for &v in &d.splits.train {
        let c = y[v as usize] as usize;
        counts[c] += 1.0;
        means.row_mut(c).zip_mut_with(&d.features.row(v as usize), |m, &x| *m += x as f64);
    }
    for (c, mut row) in means.rows_mut().into_iter().enumerate() {
        row /= counts[c];
    }
    means
}

/// Test accuracy of the nearest class mean (estimated on the training nodes).
fn nearest_mean_accuracy(d: &Dataset) -> f64 {
    let (y, means) = (classes(d), class_means(d));
    let correct = d
        .splits
        .test
        .iter()
        .filter(|&&v| {
            let x = d.features.row(v as usize);
            let dist = |c: usize| means.row(c).iter().zip(x).map(|(m, &x)| (m - x as f64).powi(2)).sum::<f64>();
            let best = (0..d.num_classes).min_by(|&a, &b| dist(a).total_cmp(&dist(b))).unwrap();
            best == y[v as usize] as usize
        })
        .count();
    correct as f64 / d.splits.test.len() as f64
}

#[test]
fn features_carry_the_class() {
    // Nearest class mean must beat chance by a wide margin.
    let d = SynthConfig { nodes: 4000, features: 32, classes: 4, ..SynthConfig::default() }.generate().unwrap();
    let accuracy = nearest_mean_accuracy(&d);
    assert!(accuracy > 0.6, "nearest-mean accuracy {accuracy}");
}

#[test]
fn block_signal_lies_in_the_class_block_only() {
    let cfg = SynthConfig { nodes: 8000, features: 30, classes: 8, signal_blocks: Some(4), ..SynthConfig::default() };
    let d = cfg.generate().unwrap();
    let accuracy = nearest_mean_accuracy(&d);
    assert!(accuracy > 0.6, "the full rows still classify: nearest-mean accuracy {accuracy}");
    // Blocks of 8, 8, 7, 7 columns, as the feature cut of 4 parts; class c's signal in block c % 4.
    let cut = crate::partition::feature_cut(30, 4).unwrap();
    let means = class_means(&d);
    for (c, mean) in means.rows().into_iter().enumerate() {
        let block = &cut[c % 4];
        // About 1000 training nodes per class: noise of a mean about 0.03.
        let outside = mean.iter().enumerate().filter(|(j, _)| !block.contains(j)).map(|(_, m)| m.abs());
        assert!(outside.clone().all(|m| m < 0.15), "class {c}: signal outside block {block:?}: {mean}");
        // The centroid keeps the separation: its squared norm in the block is about 3^2 / 2.
        let inside: f64 = block.clone().map(|j| mean[j].powi(2)).sum();
        assert!((1.0..10.0).contains(&inside), "class {c}: squared centroid norm {inside} in {block:?}");
    }
    // Block 0 alone cannot tell apart the classes whose signal lies elsewhere (1, 2, 3, 5, 6, 7).
    let block0 = |c: usize| means.row(c).slice(ndarray::s![cut[0].clone()]).to_owned();
    let gap = (&block0(1) - &block0(2)).mapv(|x| x * x).sum();
    assert!(gap < 0.1, "classes 1 and 2 differ in block 0 by {gap}");
    assert!((&block0(0) - &block0(4)).mapv(|x| x * x).sum() > 1.0, "classes 0 and 4 both live in block 0");
}

#[test]
fn tiny_and_degenerate_configs() {
    let one = SynthConfig { nodes: 1, avg_degree: 0.0, classes: 1, ..SynthConfig::default() }.generate().unwrap();
    assert_eq!((one.num_nodes(), one.graph.num_edges()), (1, 0));
    // Every node its own community with all edges inside: nothing can be drawn but self loops.
    let cfg =
        SynthConfig { nodes: 50, avg_degree: 4.0, communities: Some(50), intra_community: 1.0, ..Default::default() };
    assert_eq!(cfg.generate().unwrap().graph.num_edges(), 0);
    // A complete graph is reachable.
    let full = SynthConfig { nodes: 12, avg_degree: 11.0, classes: 2, ..SynthConfig::default() }.generate().unwrap();
    assert!(full.graph.num_edges() as f64 >= 0.9 * 12.0 * 11.0, "{}", full.graph.num_edges());
}

#[test]
fn invalid_configs_name_the_field() {
    let cases = [
        (SynthConfig { nodes: 0, ..SynthConfig::default() }, "nodes"),
        (SynthConfig { avg_degree: -1.0, ..SynthConfig::default() }, "avg_degree"),
        (SynthConfig { avg_degree: f64::NAN, ..SynthConfig::default() }, "avg_degree"),
        (SynthConfig { nodes: 10, avg_degree: 10.0, ..SynthConfig::default() }, "avg_degree"),
        (SynthConfig { features: 0, ..SynthConfig::default() }, "features"),
        (SynthConfig { classes: 0, ..SynthConfig::default() }, "classes"),
        (SynthConfig { communities: Some(0), ..SynthConfig::default() }, "communities"),
        (SynthConfig { communities: Some(1001), ..SynthConfig::default() }, "communities"),
        (SynthConfig { intra_community: 1.5, ..SynthConfig::default() }, "intra_community"),
        (SynthConfig { homophily: -0.1, ..SynthConfig::default() }, "homophily"),
        (SynthConfig { signal_blocks: Some(0), ..SynthConfig::default() }, "signal_blocks"),
        (SynthConfig { signal_blocks: Some(33), ..SynthConfig::default() }, "signal_blocks"),
    ];
    for (cfg, field) in cases {
        let err = cfg.generate().unwrap_err();
        assert_eq!(err.field, field);
        assert!(err.to_string().contains(field), "{err}");
    }
}

#[test]
fn written_synthetic_dataset_loads_back_identically() {
    let d = SynthConfig { nodes: 500, communities: Some(4), ..SynthConfig::default() }.generate().unwrap();
    let dir = tempfile::tempdir().unwrap();
    d.write_ogb(dir.path()).unwrap();
    assert!(dir.path().join("split/random/train.csv.gz").is_file());
    let opts = crate::dataset::LoadOptions { cache: crate::dataset::CacheMode::Off, ..Default::default() };
    assert_eq!(Dataset::load(dir.path(), &opts).unwrap(), d);
}
