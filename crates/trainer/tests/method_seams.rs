//! The composition point end to end: a method made of parts plugs a stateful codec stack and its
//! controller into the one training path, and the exchange gives that stack the context it
//! needs (stream, global row ids, pass) while keeping evaluation exact.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use cache_quant::{Codec, CodecError, CodecStats, IdentityCodec, Knob, Mode, Pass, Side, StatsTable, Stream, StreamId};
use gnn_core::ConvKind;
use graph_partition::Dataset;
use graph_partition::book::{CutKind, PartitionBook};
use graph_partition::partition::{PartitionConfig, partition_graph};
use serde_json::{Value, json};
use trainer::config::{DistributedConfig, Method, MethodConfig, TrainConfig};
use trainer::method::{Controller, DataPlan, ExchangeStack, HaloFeatures, MethodDef, Parts};
use trainer::{LocalOptions, Report, Source, data, run_method, run_on};

const EPOCHS: usize = 3;

fn config(model: ConvKind, cut: CutKind) -> TrainConfig {
    TrainConfig {
        model,
        hidden: 8,
        heads: 2,
        epochs: EPOCHS,
        seed: 5,
        method: MethodConfig::named(Method::Vanilla),
        distributed: DistributedConfig { cut, workers: 4, hosts: 2, ..DistributedConfig::default() },
        ..TrainConfig::default()
    }
}

/// The built-in synthetic graph.
fn dataset() -> &'static Dataset {
    static DATA: OnceLock<Dataset> = OnceLock::new();
    DATA.get_or_init(|| {
        data::prepare_dataset(&TrainConfig::default(), Path::new("."), &Default::default()).expect("synthetic graph")
    })
}

/// What every codec instance saw, across all workers.
#[derive(Default)]
struct Log {
    /// Stacks made so far: a worker's number.
    workers: AtomicUsize,
    /// Calls per (worker, stream, evaluation?).
    calls: Mutex<HashMap<(usize, StreamId, bool), usize>>,
    /// Each stream's global row ids, as the exchange announced them.
    streams: Mutex<Vec<(StreamId, Vec<u32>)>>,
}

/// Identity transport behind a header of the worker's knob and the stream's message count, which
/// the decoder checks against its own: any difference in settings or state fails the run.
struct Counting {
    worker: usize,
    id: StreamId,
    knob: Knob<u64>,
    messages: u64,
    log: Arc<Log>,
    stats: CodecStats,
}

impl Counting {
    fn count(&mut self, pass: Pass) {
        *self.log.calls.lock().unwrap().entry((self.worker, self.id, pass.mode == Mode::Eval)).or_default() += 1;
        self.messages += 1;
    }
}

impl Codec for Counting {
    fn name(&self) -> String {
        "counting".into()
    }

    fn encode(&mut self, pass: Pass, rows: &[f32], width: usize, out: &mut Vec<u8>) -> Result<(), CodecError> {
        self.count(pass);
        out.extend(self.knob.get().to_le_bytes());
        out.extend(self.messages.to_le_bytes());
        self.stats.bits[32] += (rows.len() / width.max(1)) as u64;
        IdentityCodec.encode(pass, rows, width, out)
    }

    fn decode(&mut self, pass: Pass, bytes: &[u8], width: usize, out: &mut [f32]) -> Result<(), CodecError> {
        self.count(pass);
        let field = |i: usize| u64::from_le_bytes(bytes[8 * i..8 * i + 8].try_into().unwrap());
        let (knob, messages) = (field(0), field(1));
        if knob != self.knob.get() || messages != self.messages {
            let detail = format!(
                "sender at knob {knob}, message {messages}; receiver at {}, {}",
                self.knob.get(),
                self.messages
            );
            return Err(CodecError::Malformed { codec: "counting", detail });
        }
        IdentityCodec.decode(pass, &bytes[16..], width, out)
    }

    fn take_stats(&mut self) -> CodecStats {
        std::mem::take(&mut self.stats)
    }
}

/// Sets the knob to the rows all workers sent in the step.
struct RowsKnob(Knob<u64>);

impl Controller for RowsKnob {
    fn after_step(&mut self, _epoch: usize, stats: &StatsTable) -> Option<Value> {
        self.0.set(stats.total().rows);
        Some(json!({ "knob": self.0.get() }))
    }
}

/// Vanilla's data plan with the counting stack.
struct CountingMethod(Arc<Log>);

impl MethodDef for CountingMethod {
    fn name(&self) -> &str {
        "counting"
    }

    fn parts(&self, config: &TrainConfig) -> Parts {
        let log = Arc::clone(&self.0);
        Parts {
            exchange: Some(Arc::new(move || {
                let knob = Knob::new(0u64);
                let worker = log.workers.fetch_add(1, Ordering::SeqCst);
                let (log, codec_knob) = (Arc::clone(&log), knob.clone());
                let codecs = Arc::new(move |stream: &Stream| {
                    log.streams.lock().unwrap().push((stream.id, stream.rows.to_vec()));
                    let log = Arc::clone(&log);
                    Box::new(Counting {
                        worker,
                        id: stream.id,
                        knob: codec_knob.clone(),
                        messages: 0,
                        log,
                        stats: CodecStats::default(),
                    }) as Box<dyn Codec>
                });
                ExchangeStack { codecs, controller: Some(Box::new(RowsKnob(knob))), replica_cache: None }
            })),
            ..Parts::exact(DataPlan::Cut(config.distributed.cut))
        }
    }
}

fn run_counting(config: &TrainConfig) -> (Report, Arc<Log>) {
    let log = Arc::new(Log::default());
    let method = CountingMethod(Arc::clone(&log));
    let report = run_method(&method, config, Source::Given(dataset()), LocalOptions::default(), &mut ())
        .expect("counting run")
        .expect("in-process runs report");
    (report, log)
}

fn losses(report: &Report) -> Vec<f64> {
    report.epochs.iter().map(|e| e.loss).collect()
}

#[test]
fn evaluation_never_touches_codec_state_and_training_equals_vanilla() {
    for cut in [CutKind::EdgeCut, CutKind::VertexCut] {
        let config = config(ConvKind::Gcn, cut);
        let (report, log) = run_counting(&config);
        let calls = log.calls.lock().unwrap();
        assert!(!calls.is_empty(), "{cut}: the codecs saw no message");
        assert!(calls.keys().all(|(_, _, eval)| !eval), "{cut}: an evaluation pass reached a codec");
        // One message per stream per training pass: every stream's state advanced once an epoch.
        assert!(calls.values().all(|&n| n == EPOCHS), "{cut}: {calls:?}");
        let vanilla = run_on(&config, dataset(), LocalOptions::default(), &mut ()).unwrap();
        assert_eq!(losses(&report), losses(&vanilla), "{cut}: identity transport changes nothing");
        assert_eq!(report.method, "counting");
    }
}

#[test]
fn lossy_evaluation_goes_through_the_codecs_when_asked() {
    let mut config = config(ConvKind::Sage, CutKind::EdgeCut);
    config.distributed.lossy_eval = true;
    let (_, log) = run_counting(&config);
    let calls = log.calls.lock().unwrap();
    assert!(calls.keys().any(|(_, _, eval)| *eval), "lossy-eval must send evaluation passes through the codecs");
    // Training and evaluation passes of every stream advanced one shared state (the decoder's
    // checks would have failed the run otherwise).
    assert!(calls.iter().filter(|((_, _, eval), _)| *eval).all(|(_, &n)| n == EPOCHS));
}

#[test]
fn codecs_learn_the_partition_books_global_ids() {
    let config = config(ConvKind::Sage, CutKind::EdgeCut);
    let (_, log) = run_counting(&config);
    let d = &config.distributed;
    let pconfig = PartitionConfig {
        hosts: d.hosts,
        seed: config.seed,
        ..PartitionConfig::new(d.algorithm_for(d.cut), d.workers)
    };
    let graph = &dataset().graph;
    let book = PartitionBook::build(graph, &partition_graph(graph, &pconfig).unwrap()).unwrap();
    let globals = |p: usize, locals: &[u32]| -> Vec<u32> {
        locals.iter().map(|&l| book.parts()[p].local_to_global()[l as usize]).collect()
    };
    // Every stream a book defines, as (route, peer, side, rows); the log must hold exactly these
    // for every exchange point.
    let mut expected: Vec<(String, usize, Side, Vec<u32>)> = Vec::new();
    for p in 0..d.workers {
        for q in (0..d.workers).filter(|&q| q != p) {
            let part = &book.parts()[p];
            expected.push(("to-copies".into(), q, Side::Encode, globals(p, part.send(q))));
            expected.push(("to-copies".into(), q, Side::Decode, globals(p, part.recv(q))));
            expected.push(("to-primary".into(), q, Side::Encode, globals(p, part.recv(q))));
            expected.push(("to-primary".into(), q, Side::Decode, globals(p, part.send(q))));
        }
    }
    expected.sort();
    let streams = log.streams.lock().unwrap();
    let mut tags: Vec<_> = streams.iter().map(|(id, _)| id.tag).collect();
    tags.sort();
    tags.dedup();
    assert!(!tags.is_empty());
    for tag in tags {
        let mut seen: Vec<(String, usize, Side, Vec<u32>)> = streams
            .iter()
            .filter(|(id, _)| id.tag == tag)
            .map(|(id, rows)| (id.route.to_string(), id.peer, id.side, rows.clone()))
            .collect();
        seen.sort();
        let routes: Vec<&str> = seen.iter().map(|s| s.0.as_str()).collect();
        let wanted: Vec<_> = expected.iter().filter(|e| routes.contains(&e.0.as_str())).cloned().collect();
        assert_eq!(seen, wanted, "{tag}: streams and their global ids");
    }
}

#[test]
fn codec_stats_and_controller_fields_reach_the_report() {
    let (report, _) = run_counting(&config(ConvKind::Gcn, CutKind::EdgeCut));
    let mut rows = 0;
    for epoch in &report.epochs {
        let method = epoch.method.as_ref().expect("method fields");
        let total = &method["codec"]["total"];
        let sent = total["rows"].as_u64().unwrap();
        assert!(sent > 0);
        assert_eq!(total["bits"]["32"].as_u64(), Some(sent), "the codec's own stats are summed in");
        assert_eq!(total["rows_sent_fraction"].as_f64(), Some(1.0));
        assert_eq!(method["controller"]["knob"].as_u64(), Some(sent), "the controller saw the global stats");
        rows += sent;
    }
    let fin = report.final_.method.as_ref().expect("final method fields");
    assert_eq!(fin["codec"], "counting");
    assert_eq!(fin["codec_stats"]["total"]["rows"].as_u64(), Some(rows));
}

#[test]
fn skip_repeats_is_lossless_and_skips_the_rows_that_repeat() {
    // GraphSAGE pulls its raw input rows (the narrower side): without input dropout they repeat
    // every epoch, so all but the first epoch's layer-0 rows are skipped.
    let config = TrainConfig { dropout: 0.0, hidden: 64, ..config(ConvKind::Sage, CutKind::EdgeCut) };
    let plain = run_on(&config, dataset(), LocalOptions::default(), &mut ()).unwrap();
    let mut skipping = config.clone();
    skipping.method.vanilla.skip_repeats = true;
    let report = run_on(&skipping, dataset(), LocalOptions::default(), &mut ()).unwrap();
    assert_eq!(losses(&report), losses(&plain));
    let fin = report.final_.method.as_ref().unwrap();
    assert_eq!(fin["codec"], "skip-repeats(identity)");
    let layer0 = &fin["codec_stats"]["fwd/0/to-copies"];
    assert_eq!(
        layer0["rows_skipped"].as_u64().unwrap() * EPOCHS as u64,
        layer0["rows"].as_u64().unwrap() * (EPOCHS as u64 - 1)
    );
    assert!(report.final_.bytes_exchange < plain.final_.bytes_exchange);
}

#[test]
fn overlapped_exchanges_train_identically_and_model_no_longer_epochs() {
    let mut config = config(ConvKind::Gcn, CutKind::EdgeCut);
    let blocking = run_on(&config, dataset(), LocalOptions::default(), &mut ()).unwrap();
    config.distributed.overlap = true;
    let split = run_on(&config, dataset(), LocalOptions::default(), &mut ()).unwrap();
    assert_eq!(losses(&split), losses(&blocking), "split exchanges give the blocking results");
    for (b, s) in blocking.epochs.iter().zip(&split.epochs) {
        let without = |e: &trainer::report::EpochRecord| {
            e.method.as_ref().unwrap()["modeled_epoch_s_no_overlap"].as_f64().unwrap()
        };
        assert_eq!(b.modeled_epoch_s, without(b), "nothing overlaps in blocking runs");
        assert!(s.modeled_epoch_s <= without(s), "overlap never lengthens the modeled epoch");
        // The bar: at most the blocking epoch minus half of sum_k min(central compute,
        // marginal communication), per split call.
        let bound = s.method.as_ref().unwrap()["overlap"]["bound_s"].as_f64().unwrap();
        assert!(bound > 0.0 && s.modeled_epoch_s <= without(s) - 0.5 * bound, "bound {bound}");
        assert!(s.method.as_ref().unwrap()["overlapped_compute_s_sum"].as_f64().unwrap() > 0.0);
    }
}

/// Exact edge-cut training whose halo rows' input features are fetched once (the part ecgraph
/// uses, for any method).
struct CachedHalo;

impl MethodDef for CachedHalo {
    fn name(&self) -> &str {
        "cached-halo"
    }

    fn parts(&self, config: &TrainConfig) -> Parts {
        Parts { halo_features: HaloFeatures::Cached, ..Parts::exact(DataPlan::Cut(config.distributed.cut)) }
    }
}

#[test]
fn any_edge_cut_method_can_cache_its_halo_features_and_a_vertex_cut_refuses() {
    let config = config(ConvKind::Sage, CutKind::EdgeCut);
    let run = |c: &TrainConfig| run_method(&CachedHalo, c, Source::Given(dataset()), LocalOptions::default(), &mut ());
    let cached = run(&config).unwrap().expect("in-process runs report");
    let vanilla = run_on(&config, dataset(), LocalOptions::default(), &mut ()).unwrap();
    for (c, v) in cached.epochs.iter().zip(&vanilla.epochs) {
        assert!((c.loss - v.loss).abs() <= 1e-4 * v.loss.abs(), "epoch {}: {} vs {}", c.epoch, c.loss, v.loss);
        assert!(!c.bytes_by_phase.keys().any(|p| p == "fwd/0" || p == "bwd/0"), "layer 0 exchanged");
        assert!(v.bytes_by_phase["fwd/0"] > 0 && c.bytes_by_phase["fwd/1"] == v.bytes_by_phase["fwd/1"]);
    }
    let err = run(&TrainConfig {
        distributed: DistributedConfig { cut: CutKind::VertexCut, ..config.distributed.clone() },
        ..config
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("halo feature cache"), "{err}");
}
