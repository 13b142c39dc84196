//! The exchange hooks sit where distributed training needs them: a model trained on a graph split
//! across workers (threads here) with an in-process `Exchange` gives the same logits, losses and
//! gradients as single-process training, for GCN, GraphSAGE and GAT, edge-cut and vertex-cut.
//!
//! The test exchange implements the trait's semantics literally, by gathering every worker's block
//! on a shared board. Halo feature rows of edge-cut workers are filled with garbage, so any read
//! of a neighbour row before `pull_halo` shows up as a mismatch. Under the halo feature cache
//! (`Cut::EdgeCached`) they hold their true features instead, and layer 0 runs on a view that
//! holds them and must exchange nothing.

use std::collections::HashMap;
use std::sync::{Barrier, Mutex};

use gnn_core::exchange::{Call, Footprint};
use gnn_core::{
    Activation, Adam, AggGraph, ConvKind, Exchange, ExchangeError, ForwardCtx, LayerOrder, Model, ModelConfig,
    NoExchange, Tag, softmax_cross_entropy,
};
use graph_partition::rng::SplitMix64;
use graph_partition::{Csr, EdgeListOptions};
use ndarray::Array2;

const NODES: usize = 60;
const PARTS: usize = 3;
const EPOCHS: u64 = 3;
const DROPOUT_SEED: u64 = 99;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    Edge,
    /// Edge-cut with the halo rows' input features held (fetched once): layer 0 exchanges nothing.
    EdgeCached,
    Vertex,
}

/// The whole problem, as a single process sees it.
struct Problem {
    csr: Csr,
    x: Array2<f32>,
    labels: Vec<u32>,
    train: Vec<bool>,
}

impl Problem {
    fn new() -> Self {
        let mut r = SplitMix64::new(17);
        // Directed edges (in- and out-degrees differ), vertex NODES-1 isolated.
        let m = (NODES - 1) as u64;
        let edges: Vec<(u32, u32)> = (0..240).map(|_| (r.below(m) as u32, r.below(m) as u32)).collect();
        let csr =
            Csr::from_edges(NODES, &edges, EdgeListOptions { symmetrize: false, remove_self_loops: true }).unwrap();
        let x = Array2::from_shape_simple_fn((NODES, 16), || r.next_f64() as f32 - 0.5);
        let labels = (0..NODES).map(|_| r.below(3) as u32).collect();
        let train = (0..NODES).map(|v| v % 4 != 0).collect();
        Self { csr, x, labels, train }
    }

    fn train_count(&self) -> usize {
        self.train.iter().filter(|&&t| t).count()
    }

    fn degrees(&self) -> (Vec<f32>, Vec<f32>) {
        let din = self.csr.degrees().into_iter().map(|d| d as f32).collect();
        let dout = self.csr.column_counts().into_iter().map(|d| d as f32).collect();
        (din, dout)
    }
}

/// One worker's share: local graph, local features, labels and training rows.
struct Part {
    graph: AggGraph,
    /// Under the halo feature cache, layer 0's view: it holds the halo rows' inputs.
    first: Option<AggGraph>,
    x: Array2<f32>,
    labels: Vec<u32>,
    train_rows: Vec<u32>,
}

/// Builds a worker's view from its owned vertices, its copies and its in-edges (global ids).
/// Edge-cut halo copies (`halo: Some(cached)`) are pulled, never computed, so they get garbage
/// features that would show if a layer read them before the pull, unless `cached`: then they hold
/// their features and layer 0 runs on a view that holds them.
fn make_part(p: &Problem, owned: &[u32], copies: &[u32], edges: &[(u32, u32)], halo: Option<bool>) -> Part {
    let halo_copies = halo.is_some();
    let cached = halo == Some(true);
    let gids: Vec<u32> = owned.iter().chain(copies).copied().collect();
    let local: HashMap<u32, u32> = gids.iter().enumerate().map(|(l, &g)| (g, l as u32)).collect();
    let mut rows: Vec<Vec<u32>> = vec![Vec::new(); gids.len()];
    for &(src, dst) in edges {
        rows[local[&dst] as usize].push(local[&src]);
    }
    let mut indptr = vec![0u64];
    let mut indices = Vec::new();
    for mut row in rows {
        row.sort_unstable();
        indices.extend(row);
        indptr.push(indices.len() as u64);
    }
    let csr = Csr::try_new(gids.len(), gids.len(), indptr, indices).unwrap();
    let (din, dout) = p.degrees();
    let pick = |d: &[f32]| gids.iter().map(|&g| d[g as usize]).collect::<Vec<f32>>();
    let graph = AggGraph::new(csr, owned.len(), gids.clone(), pick(&din), pick(&dout)).unwrap();
    let graph = if halo_copies { graph.with_pulled_halo().unwrap() } else { graph };
    let mut x = Array2::zeros((gids.len(), p.x.ncols()));
    for (l, &g) in gids.iter().enumerate() {
        if halo_copies && !cached && l >= owned.len() {
            x.row_mut(l).fill(1e3);
        } else {
            x.row_mut(l).assign(&p.x.row(g as usize));
        }
    }
    let labels = gids.iter().map(|&g| p.labels[g as usize]).collect();
    let train_rows = (0..owned.len() as u32).filter(|&l| p.train[gids[l as usize] as usize]).collect();
    let first = cached.then(|| graph.clone().with_held_halo().unwrap());
    Part { graph, first, x, labels, train_rows }
}

fn all_edges(csr: &Csr) -> Vec<(u32, u32)> {
    (0..csr.num_rows()).flat_map(|v| csr.neighbors(v).iter().map(move |&u| (u, v as u32))).collect()
}

/// Edge-cut: vertices dealt to owners at random; each part stores its owned vertices' in-edges,
/// and the remote sources are its halo.
fn edge_cut(p: &Problem, cached: bool) -> (Vec<Part>, Vec<usize>) {
    let mut r = SplitMix64::new(5);
    let owner: Vec<usize> = (0..NODES).map(|_| r.below(PARTS as u64) as usize).collect();
    let edges = all_edges(&p.csr);
    let parts = (0..PARTS)
        .map(|q| {
            let owned: Vec<u32> = (0..NODES as u32).filter(|&v| owner[v as usize] == q).collect();
            let mine: Vec<(u32, u32)> = edges.iter().copied().filter(|&(_, d)| owner[d as usize] == q).collect();
            let mut halo: Vec<u32> = mine.iter().map(|&(s, _)| s).filter(|&s| owner[s as usize] != q).collect();
            halo.sort_unstable();
            halo.dedup();
            make_part(p, &owned, &halo, &mine, Some(cached))
        })
        .collect();
    (parts, owner)
}

/// Vertex-cut: edges dealt to parts at random; a vertex is replicated on every part holding one
/// of its edges (isolated vertices go to part `id % PARTS`); its master is the lowest such part.
fn vertex_cut(p: &Problem) -> (Vec<Part>, Vec<usize>) {
    let mut r = SplitMix64::new(6);
    let edges = all_edges(&p.csr);
    let edge_part: Vec<usize> = edges.iter().map(|_| r.below(PARTS as u64) as usize).collect();
    let mut holders = vec![Vec::new(); NODES];
    for (&(s, d), &q) in edges.iter().zip(&edge_part) {
        holders[s as usize].push(q);
        holders[d as usize].push(q);
    }
    for (v, h) in holders.iter_mut().enumerate() {
        if h.is_empty() {
            h.push(v % PARTS);
        }
        h.sort_unstable();
        h.dedup();
    }
    let master: Vec<usize> = holders.iter().map(|h| h[0]).collect();
    let parts = (0..PARTS)
        .map(|q| {
            let held: Vec<u32> = (0..NODES as u32).filter(|&v| holders[v as usize].contains(&q)).collect();
            let (owned, mirrors): (Vec<u32>, Vec<u32>) = held.iter().partition(|&&v| master[v as usize] == q);
            let mine: Vec<(u32, u32)> =
                edges.iter().zip(&edge_part).filter(|&(_, &ep)| ep == q).map(|(&e, _)| e).collect();
            make_part(p, &owned, &mirrors, &mine, None)
        })
        .collect();
    (parts, master)
}

/// What a worker posts: the exchange it is in (`None` for the gradient all-reduce) and its block.
type Post = (Option<Tag>, Array2<f32>);

/// A shared board the workers post blocks on; every exchange is an all-gather of blocks.
struct Bus {
    cut: Cut,
    barrier: Barrier,
    board: Mutex<Vec<Option<Post>>>,
    /// Per part: global id -> local row.
    local_of: Vec<HashMap<u32, usize>>,
    num_primary: Vec<usize>,
    /// Owner (edge-cut) or master (vertex-cut) part of every global vertex.
    owner: Vec<usize>,
}

impl Bus {
    fn new(cut: Cut, parts: &[Part], owner: Vec<usize>) -> Self {
        Self {
            cut,
            barrier: Barrier::new(parts.len()),
            board: Mutex::new(vec![None; parts.len()]),
            local_of: parts
                .iter()
                .map(|p| p.graph.global_ids().iter().enumerate().map(|(l, &g)| (g, l)).collect())
                .collect(),
            num_primary: parts.iter().map(|p| p.graph.num_primary()).collect(),
            owner,
        }
    }

    /// Posts `block`, waits for everyone, returns all blocks in rank order. Every worker sees the
    /// same tags, so a call-order mismatch fails on all of them at once (no deadlock).
    fn all_gather(&self, rank: usize, tag: Option<Tag>, block: &Array2<f32>) -> Result<Vec<Array2<f32>>, Option<Tag>> {
        self.board.lock().unwrap()[rank] = Some((tag, block.clone()));
        self.barrier.wait();
        let posted: Vec<Post> =
            self.board.lock().unwrap().iter().map(|s| s.clone().expect("every worker posted")).collect();
        self.barrier.wait();
        if posted.iter().any(|(t, _)| *t != posted[0].0) {
            return Err(tag);
        }
        Ok(posted.into_iter().map(|(_, b)| b).collect())
    }
}

struct BusExchange<'a> {
    bus: &'a Bus,
    rank: usize,
    gids: Vec<u32>,
    /// Exchange calls made, for checking that the cut-specific paths ran.
    calls: HashMap<&'static str, usize>,
}

impl BusExchange<'_> {
    fn gather(&mut self, what: &'static str, tag: Tag, x: &Array2<f32>) -> Result<Vec<Array2<f32>>, ExchangeError> {
        *self.calls.entry(what).or_default() += 1;
        if tag.layer == 0 {
            *self.calls.entry("layer 0").or_default() += 1;
        }
        self.bus
            .all_gather(self.rank, Some(tag), x)
            .map_err(|_| ExchangeError::Protocol { tag, message: "workers called different exchanges".into() })
    }

    /// Row of global vertex `g` in part `q`'s block, if `q` holds it.
    fn row_in<'b>(&self, blocks: &'b [Array2<f32>], q: usize, g: u32) -> Option<ndarray::ArrayView1<'b, f32>> {
        self.bus.local_of[q].get(&g).map(|&l| blocks[q].row(l))
    }

    fn combine_replicas(
        &mut self,
        what: &'static str,
        tag: Tag,
        x: &mut Array2<f32>,
        f: fn(f32, f32) -> f32,
    ) -> Result<(), ExchangeError> {
        if self.bus.cut != Cut::Vertex {
            return Ok(());
        }
        let blocks = self.gather(what, tag, x)?;
        for (l, &g) in self.gids.iter().enumerate() {
            let mut acc: Option<Vec<f32>> = None;
            for q in 0..blocks.len() {
                if let Some(row) = self.row_in(&blocks, q, g) {
                    acc = Some(match acc {
                        None => row.to_vec(),
                        Some(a) => a.iter().zip(row.iter()).map(|(&a, &b)| f(a, b)).collect(),
                    });
                }
            }
            x.row_mut(l).assign(&ndarray::Array1::from(acc.expect("a vertex has at least one replica")));
        }
        Ok(())
    }
}

impl Exchange for BusExchange<'_> {
    /// This bus gathers whole blocks and is never staged: it declares no rows.
    fn footprint(&self, _call: Call) -> Footprint<'_> {
        Footprint::NONE
    }

    fn pull_halo(&mut self, tag: Tag, x: &mut Array2<f32>) -> Result<(), ExchangeError> {
        if self.bus.cut == Cut::Vertex {
            return Ok(());
        }
        let blocks = self.gather("pull", tag, x)?;
        for l in self.bus.num_primary[self.rank]..self.gids.len() {
            let g = self.gids[l];
            let owner_row = self.row_in(&blocks, self.bus.owner[g as usize], g).expect("owner holds its vertex");
            x.row_mut(l).assign(&owner_row);
        }
        Ok(())
    }

    fn push_halo_grad(&mut self, tag: Tag, g: &mut Array2<f32>) -> Result<(), ExchangeError> {
        if self.bus.cut == Cut::Vertex {
            return Ok(());
        }
        let blocks = self.gather("push", tag, g)?;
        let owned = self.bus.num_primary[self.rank];
        for l in 0..owned {
            let gid = self.gids[l];
            for q in (0..blocks.len()).filter(|&q| q != self.rank) {
                if let Some(&ql) = self.bus.local_of[q].get(&gid) {
                    assert!(ql >= self.bus.num_primary[q], "a vertex has one owner");
                    let add = blocks[q].row(ql).to_owned();
                    let mut row = g.row_mut(l);
                    row += &add;
                }
            }
        }
        g.slice_mut(ndarray::s![owned.., ..]).fill(0.0);
        Ok(())
    }

    fn sum_replicas(&mut self, tag: Tag, x: &mut Array2<f32>) -> Result<(), ExchangeError> {
        self.combine_replicas("sum", tag, x, |a, b| a + b)
    }

    fn max_replicas(&mut self, tag: Tag, x: &mut Array2<f32>) -> Result<(), ExchangeError> {
        self.combine_replicas("max", tag, x, f32::max)
    }
}

/// Per epoch: summed loss, logits of owned rows by global id, and (all-reduced) gradients.
struct Trace {
    losses: Vec<f64>,
    logits: Vec<HashMap<u32, Vec<f32>>>,
    grads: Vec<Vec<f32>>,
    calls: HashMap<&'static str, usize>,
}

/// Trains `EPOCHS` epochs of Adam on one worker; `reduce` all-reduces the gradient buffer.
fn train(
    cfg: &ModelConfig,
    part: &Part,
    global_train: usize,
    exchange: &mut dyn Exchange,
    mut reduce: impl FnMut(&mut [f32]),
) -> Result<Trace, ExchangeError> {
    let mut model = Model::new(cfg.clone()).unwrap();
    let mut adam = Adam::new(0.01, 5e-4);
    let (mut losses, mut logits_seen, mut grads_seen) = (Vec::new(), Vec::new(), Vec::new());
    // Under the halo feature cache: layer 0 on the view holding its halo inputs, the rest pulling.
    let layers: Option<Vec<AggGraph>> = part.first.as_ref().map(|first| {
        std::iter::once(first.clone()).chain(std::iter::repeat_n(part.graph.clone(), cfg.layers - 1)).collect()
    });
    for epoch in 0..EPOCHS {
        model.zero_grad();
        let ctx = ForwardCtx::train(DROPOUT_SEED, epoch);
        let logits = match &layers {
            Some(graphs) => model.forward_layers(graphs, &part.x, exchange, ctx),
            None => model.forward(&part.graph, &part.x, exchange, ctx),
        };
        let logits = match logits {
            Ok(l) => l,
            Err(gnn_core::ModelError::Exchange(e)) => return Err(e),
            Err(e) => panic!("forward: {e}"),
        };
        let owned = part.graph.num_primary();
        logits_seen.push((0..owned).map(|l| (part.graph.global_ids()[l], logits.row(l).to_vec())).collect());
        let (loss, mut d) = softmax_cross_entropy(logits, &part.labels, &part.train_rows).unwrap();
        d /= global_train as f32;
        let backward = match &layers {
            Some(graphs) => model.backward_layers(graphs, d, exchange),
            None => model.backward(&part.graph, d, exchange),
        };
        match backward {
            Ok(()) => {}
            Err(gnn_core::ModelError::Exchange(e)) => return Err(e),
            Err(e) => panic!("backward: {e}"),
        }
        reduce(model.grads_mut());
        losses.push(loss / global_train as f64);
        grads_seen.push(model.grads().to_vec());
        model.step(&mut adam).unwrap();
    }
    Ok(Trace { losses, logits: logits_seen, grads: grads_seen, calls: HashMap::new() })
}

fn single_process(cfg: &ModelConfig, p: &Problem) -> Trace {
    let graph = AggGraph::single(&p.csr).unwrap();
    let part = Part {
        graph,
        first: None,
        x: p.x.clone(),
        labels: p.labels.clone(),
        train_rows: (0..NODES as u32).filter(|&v| p.train[v as usize]).collect(),
    };
    train(cfg, &part, p.train_count(), &mut NoExchange, |_| {}).unwrap()
}

fn distributed(cfg: &ModelConfig, p: &Problem, cut: Cut) -> Trace {
    let (parts, owner) = match cut {
        Cut::Edge => edge_cut(p, false),
        Cut::EdgeCached => edge_cut(p, true),
        Cut::Vertex => vertex_cut(p),
    };
    let bus = Bus::new(cut, &parts, owner);
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = parts
            .iter()
            .enumerate()
            .map(|(rank, part)| {
                let bus = &bus;
                s.spawn(move || {
                    let mut ex =
                        BusExchange { bus, rank, gids: part.graph.global_ids().to_vec(), calls: HashMap::new() };
                    let reduce = |g: &mut [f32]| {
                        let block = Array2::from_shape_vec((1, g.len()), g.to_vec()).unwrap();
                        let all = bus.all_gather(rank, None, &block).expect("gradient all-reduce");
                        g.fill(0.0);
                        for b in &all {
                            g.iter_mut().zip(b.iter()).for_each(|(a, v)| *a += v);
                        }
                    };
                    let out = train(cfg, part, p.train_count(), &mut ex, reduce);
                    (out, ex.calls)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("worker thread")).collect()
    });
    let mut trace = Trace {
        losses: vec![0.0; EPOCHS as usize],
        logits: vec![HashMap::new(); EPOCHS as usize],
        grads: Vec::new(),
        calls: HashMap::new(),
    };
    for (out, calls) in results {
        let Trace { losses, logits, grads, .. } = out.unwrap_or_else(|e| panic!("{cut:?}: {e}"));
        for (e, l) in losses.iter().enumerate() {
            trace.losses[e] += l;
        }
        for (e, rows) in logits.into_iter().enumerate() {
            for (g, row) in rows {
                assert!(trace.logits[e].insert(g, row).is_none(), "vertex {g} owned twice");
            }
        }
        trace.grads = grads; // identical on every worker after the all-reduce
        for (k, v) in calls {
            *trace.calls.entry(k).or_default() += v;
        }
    }
    trace
}

fn assert_close(what: &str, got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let scale = want.iter().fold(1.0f32, |m, v| m.max(v.abs()));
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol * scale, "{what}[{i}]: {g} vs {w}");
    }
}

fn check_equivalence(cfg: &ModelConfig) {
    let p = Problem::new();
    let single = single_process(cfg, &p);
    for cut in [Cut::Edge, Cut::EdgeCached, Cut::Vertex] {
        let dist = distributed(cfg, &p, cut);
        let label = format!("{:?} {cut:?}-cut", cfg.kind);
        let expected_calls: &[&str] = match cut {
            Cut::Edge => &["pull", "push", "layer 0"],
            Cut::EdgeCached => &["pull", "push"],
            Cut::Vertex => &["sum"],
        };
        if cut == Cut::EdgeCached {
            assert_eq!(dist.calls.get("layer 0"), None, "{label}: layer 0 holds its halo inputs, yet exchanged");
        }
        for call in expected_calls {
            assert!(dist.calls.get(call).copied().unwrap_or(0) > 0, "{label}: no {call} exchange ran");
        }
        if cfg.kind == ConvKind::Gat && cut == Cut::Vertex {
            assert!(dist.calls.get("max").copied().unwrap_or(0) > 0, "{label}: GAT never synced its maximum");
        }
        for e in 0..EPOCHS as usize {
            let (d, s) = (dist.losses[e], single.losses[e]);
            assert!((d - s).abs() <= 1e-5 * s.abs(), "{label} epoch {e}: loss {d} vs {s}");
            assert_eq!(dist.logits[e].len(), NODES, "{label}: every vertex has one owner");
            for (g, row) in &dist.logits[e] {
                assert_close(&format!("{label} epoch {e} logits of {g}"), row, &single.logits[e][g], 1e-4);
            }
            assert_close(&format!("{label} epoch {e} gradients"), &dist.grads[e], &single.grads[e], 1e-4);
        }
    }
}

/// 3 layers: the first two exchange their inputs (widening), the last its transformed rows.
fn deep(kind: ConvKind) -> ModelConfig {
    ModelConfig {
        kind,
        in_dim: 16,
        hidden: 20,
        out_dim: 3,
        layers: 3,
        heads: 2,
        out_heads: 2,
        dropout: 0.3,
        input_dropout: 0.2,
        attn_dropout: 0.3,
        layer_norm: true,
        activation: Activation::Elu { alpha: 1.0 },
        // AdaQP's order: its split exchange runs under this model.
        layer_order: LayerOrder::DropoutFirst,
        seed: 4,
    }
}

/// 2 layers that both exchange transformed rows (narrowing), no LayerNorm.
fn narrow(kind: ConvKind) -> ModelConfig {
    ModelConfig { hidden: 3, layers: 2, layer_norm: false, activation: Activation::Relu, ..deep(kind) }
}

#[test]
fn gcn_split_matches_single_process() {
    check_equivalence(&deep(ConvKind::Gcn));
    check_equivalence(&narrow(ConvKind::Gcn));
}

#[test]
fn sage_split_matches_single_process() {
    check_equivalence(&deep(ConvKind::Sage));
    check_equivalence(&narrow(ConvKind::Sage));
}

#[test]
fn gat_split_matches_single_process() {
    check_equivalence(&deep(ConvKind::Gat));
    check_equivalence(&narrow(ConvKind::Gat));
}

#[test]
fn exchange_points_cover_both_choices() {
    use gnn_core::ExchangePoint::{Input, Transformed};
    for kind in [ConvKind::Gcn, ConvKind::Sage, ConvKind::Gat] {
        let points =
            |cfg: ModelConfig| Model::new(cfg).unwrap().convs().map(|c| c.exchange_point()).collect::<Vec<_>>();
        assert_eq!(points(deep(kind)), [Input, Input, Transformed], "{kind:?} deep");
        assert_eq!(points(narrow(kind))[0], Transformed, "{kind:?} narrow");
    }
}
