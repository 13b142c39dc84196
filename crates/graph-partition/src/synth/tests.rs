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

#[test]
fn features_carry_the_class() {
    // Nearest class mean (estimated on the training nodes) must beat chance by a wide margin.
    let cfg = SynthConfig { nodes: 4000, features: 32, classes: 4, ..SynthConfig::default() };
    let d = cfg.generate().unwrap();
    let y = classes(&d);
    let mut means = ndarray::Array2::<f64>::zeros((cfg.classes, cfg.features));
    let mut counts = vec![0.0; cfg.classes];
    for &v in &d.splits.train {
        let c = y[v as usize] as usize;
        counts[c] += 1.0;
        means.row_mut(c).zip_mut_with(&d.features.row(v as usize), |m, &x| *m += x as f64);
    }
    for (c, mut row) in means.rows_mut().into_iter().enumerate() {
        row /= counts[c];
    }
    let correct = d
        .splits
        .test
        .iter()
        .filter(|&&v| {
            let x = d.features.row(v as usize);
            let dist = |c: usize| means.row(c).iter().zip(x).map(|(m, &x)| (m - x as f64).powi(2)).sum::<f64>();
            let best = (0..cfg.classes).min_by(|&a, &b| dist(a).total_cmp(&dist(b))).unwrap();
            best == y[v as usize] as usize
        })
        .count();
    let accuracy = correct as f64 / d.splits.test.len() as f64;
    assert!(accuracy > 0.6, "nearest-mean accuracy {accuracy}");
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
