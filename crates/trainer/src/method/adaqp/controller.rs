//! The bit-width assignment between steps (§3.3).
//!
//! Every worker holds, per stream it *receives*, each row's variance trace summed since the last
//! assignment (its codecs' [`QuantProbe`]); it weighs each row by its aggregation weight `beta`
//! from its local graph ([`RowWeights`]: only the receiver knows who reads a halo row, also on a
//! directed graph) and sends the weights to rank 0 (`gather`). Rank 0 builds problem (12) per
//! layer and direction with each pair's time model from the topology, or from `time-fit`'s MPI
//! measurements ([`time_models`]), solves
//! it (or draws random widths for `--bits random`, or solves it within the random widths' bytes
//! for `--bits adaptive-random-budget`), and broadcasts the per-row widths with the
//! assignment's report; every worker then sets the widths of the streams it encodes and decodes
//! in its [`BitTable`], so both ends of a stream read the same widths from the next step on.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use cache_quant::assign::{Assignment, PairGroups, Problem, Solver, solve};
use cache_quant::codec::stochastic::WIDTHS;
use cache_quant::state::put_bytes;
use cache_quant::{
    BitTable, Direction, Knob, QuantProbe, Side, StateError, StateReader, StatsTable, Step, StreamId, Tag,
};
use comm_hierarchy::{CommError, Communicator};
use gnn_core::ConvKind;
use graph_partition::rng::hash_key;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::fit::{FitError, MeasuredFits};
use super::weights::{RowWeights, route_of, time_models};
use crate::config::{AdaqpSettings, Bits};
use crate::error::TrainError;
use crate::method::{ControlCtx, Controller};

/// Ledger phase of the assignment's collectives (outside every step's counts).
const PHASE: &str = "adaqp/assign";

/// One received stream's row weights, as a worker sends them to rank 0.
#[derive(Debug, Serialize, Deserialize)]
struct Received {
    layer: usize,
    backward: bool,
    src: usize,
    width: usize,
    weights: Vec<f64>,
}

/// The widths of one pair's rows, in message order.
#[derive(Debug, Serialize, Deserialize)]
struct Decision {
    layer: usize,
    backward: bool,
    src: usize,
    dst: usize,
    bits: Vec<u8>,
}

/// What rank 0 broadcasts.
#[derive(Debug, Serialize, Deserialize)]
struct Outcome {
    decisions: Vec<Decision>,
    problems: Vec<Value>,
    solve_s: f64,
}

/// Why an assignment failed.
#[derive(Debug, thiserror::Error)]
enum AssignError {
    #[error(transparent)]
    Comm(#[from] CommError),
    #[error(transparent)]
    Solve(#[from] cache_quant::assign::SolveError),
    #[error("adaqp assignment: unreadable message from a worker: {0}")]
    Message(#[from] serde_json::Error),
    #[error(transparent)]
    Fit(#[from] FitError),
}

pub(super) struct AdaqpController {
    settings: AdaqpSettings,
    seed: u64,
    kind: ConvKind,
    bits: Knob<Arc<BitTable>>,
    probe: QuantProbe,
    /// `time-fit`'s fits, read by rank 0 at its first assignment.
    measured: Option<MeasuredFits>,
}

impl AdaqpController {
    pub(super) fn new(
        settings: AdaqpSettings,
        seed: u64,
        kind: ConvKind,
        bits: Knob<Arc<BitTable>>,
        probe: QuantProbe,
    ) -> Self {
        Self { settings, seed, kind, bits, probe, measured: None }
    }

    /// This worker's received rows, weighted.
    fn received(&self, ctx: &ControlCtx<'_>) -> Vec<Received> {
        let weights = RowWeights::new(ctx.graph, self.kind, self.settings.beta);
        let mut out: Vec<Received> = self
            .probe
            .take_traces()
            .into_iter()
            .filter(|(id, _)| id.side == Side::Decode)
            .map(|(id, rows)| Received {
                layer: id.tag.layer,
                backward: id.tag.dir == Direction::Backward,
                src: id.peer,
                width: rows.width,
                weights: rows.rows.iter().zip(&rows.traces).map(|(&g, t)| weights.beta(id.route, g) * t).collect(),
            })
            .collect();
        out.sort_by_key(|r| (r.layer, r.backward, r.src));
        out
    }

    /// Rank 0's part: problem (12) per layer and direction from every worker's rows.
    fn decide(
        &mut self,
        epoch: usize,
        comm: &dyn Communicator,
        all: Vec<(usize, Received)>,
    ) -> Result<Outcome, AssignError> {
        let mut problems: BTreeMap<(usize, bool), Vec<(usize, Received)>> = BTreeMap::new();
        for (dst, r) in all.into_iter().filter(|(_, r)| !r.weights.is_empty()) {
            problems.entry((r.layer, r.backward)).or_default().push((dst, r));
        }
        let (mut decisions, mut reports, mut solve_s) = (Vec::new(), Vec::new(), 0.0);
        for ((layer, backward), rows) in problems {
            let ends: Vec<(usize, usize)> = rows.iter().map(|(dst, r)| (r.src, *dst)).collect();
            if let (Some(path), None) = (&self.settings.time_fit, &self.measured) {
                self.measured = Some(MeasuredFits::load(path)?);
            }
            let times = time_models(comm.topology(), &ends, self.measured.as_ref())?;
            let pairs = rows
                .iter()
                .zip(times)
                .map(|((dst, r), time)| {
                    PairGroups::new(r.src, *dst, r.width, time, &r.weights, self.settings.group_size)
                })
                .collect();
            let mut problem = Problem { workers: comm.size(), lambda: self.settings.lambda, pairs, budget_bytes: None };
            let start = Instant::now();
            let (assignment, solved) = match self.settings.bits {
                Bits::Random => (self.random(epoch, layer, backward, &problem), None),
                bits => {
                    if bits == Bits::AdaptiveRandomBudget {
                        problem.budget_bytes = Some(problem.bytes(&self.random(epoch, layer, backward, &problem)));
                    }
                    let solved = solve(&problem, self.settings.solver_time_limit)?;
                    (solved.assignment, Some((solved.optimal, solved.solver)))
                }
            };
            let seconds = start.elapsed().as_secs_f64();
            solve_s += seconds;
            reports.push(report(layer, backward, &problem, &assignment, solved, seconds));
            for (pair, bits) in problem.pairs.iter().zip(&assignment) {
                let bits = pair.row_bits(bits);
                decisions.push(Decision { layer, backward, src: pair.src, dst: pair.dst, bits });
            }
        }
        Ok(Outcome { decisions, problems: reports, solve_s })
    }

    /// Widths drawn uniformly from {2, 4, 8} per group, keyed by (seed, epoch, layer,
    /// direction, pair, group): the same draw in a `random` run and in the budget of an
    /// `adaptive-random-budget` run of the same seed (the groups depend on the partition only).
    fn random(&self, epoch: usize, layer: usize, backward: bool, problem: &Problem) -> Assignment {
        let key = |p: &PairGroups, g: usize| {
            hash_key(&[
                self.seed,
                epoch as u64,
                layer as u64,
                u64::from(backward),
                p.src as u64,
                p.dst as u64,
                g as u64,
            ])
        };
        problem.pairs.iter().map(|p| (0..p.groups.len()).map(|g| WIDTHS[(key(p, g) % 3) as usize]).collect()).collect()
    }

    /// Gathers the rows at rank 0, decides there, broadcasts, and sets this worker's widths.
    fn assign(&mut self, epoch: usize, ctx: &ControlCtx<'_>) -> Result<Value, AssignError> {
        let start = Instant::now();
        let comm = ctx.comm;
        let mine = serde_json::to_vec(&self.received(ctx))?;
        let mut outcome = match comm.gather(PHASE, 0, mine)? {
            Some(parts) => {
                let mut all = Vec::new();
                for (dst, bytes) in parts.iter().enumerate() {
                    let rows: Vec<Received> = serde_json::from_slice(bytes)?;
                    all.extend(rows.into_iter().map(|r| (dst, r)));
                }
                serde_json::to_vec(&self.decide(epoch, comm, all)?)?
            }
            None => Vec::new(),
        };
        comm.broadcast(PHASE, 0, &mut outcome)?;
        let outcome: Outcome = serde_json::from_slice(&outcome)?;
        let me = comm.rank();
        let mut table = BitTable::uniform(self.settings.bits.initial()).expect("an initial width is a codec width");
        for d in outcome.decisions.iter().filter(|d| d.src == me || d.dst == me) {
            let dir = if d.backward { Direction::Backward } else { Direction::Forward };
            let (peer, side) = if d.src == me { (d.dst, Side::Encode) } else { (d.src, Side::Decode) };
            let id = StreamId { tag: Tag::new(d.layer, dir, Step::Halo), route: route_of(dir), peer, side };
            table.set_stream(id, Arc::from(d.bits.as_slice())).expect("assignments pick codec widths");
        }
        self.bits.set(Arc::new(table));
        Ok(json!({
            "time_s": start.elapsed().as_secs_f64(),
            "solve_s": outcome.solve_s,
            "time_fit": self.settings.time_fit,
            "objective": outcome.problems.iter().filter_map(|p| p["objective"].as_f64()).sum::<f64>(),
            "problems": outcome.problems,
        }))
    }
}

/// The report of one solved problem; `solved` is whether the solver proved the assignment
/// optimal and which solver ran, `None` for drawn widths.
fn report(
    layer: usize,
    backward: bool,
    problem: &Problem,
    assignment: &Assignment,
    solved: Option<(bool, Solver)>,
    seconds: f64,
) -> Value {
    let costs = problem.costs(assignment);
    let (mut rows, mut bit_rows) = (0usize, 0usize);
    for (pair, bits) in problem.pairs.iter().zip(assignment) {
        for (group, &b) in pair.groups.iter().zip(bits) {
            rows += group.len();
            bit_rows += group.len() * b as usize;
        }
    }
    json!({
        "layer": layer,
        "dir": if backward { "bwd" } else { "fwd" },
        "pairs": problem.pairs.len(),
        "groups": problem.pairs.iter().map(|p| p.groups.len()).sum::<usize>(),
        "objective": problem.objective(assignment),
        "objective_uniform_8": problem.objective(&problem.uniform(8)),
        "bytes": problem.bytes(assignment),
        "budget_bytes": problem.budget_bytes,
        "variance": costs.variance,
        "modeled_s": costs.seconds,
        "mean_bits": if rows > 0 { bit_rows as f64 / rows as f64 } else { 0.0 },
        "optimal": solved.map(|(optimal, _)| optimal),
        "solver": solved.map(|(_, solver)| solver.name()),
        "solve_s": seconds,
    })
}

impl Controller for AdaqpController {
    /// The uniform initial widths hold until the first assignment.
    fn settled_after(&self) -> usize {
        if self.settings.bits.assigned() { self.settings.assign_period } else { 0 }
    }

    fn save_state(&self, out: &mut Vec<u8>) -> Result<(), StateError> {
        // The assignment runs at epochs that are multiples of its period, so the table in force
        // and the traces summed since the last assignment are all it carries.
        let mut section = Vec::new();
        self.bits.get().save_state(&mut section);
        put_bytes(out, &section);
        section.clear();
        self.probe.save_state(&mut section);
        put_bytes(out, &section);
        Ok(())
    }

    fn restore_state(&mut self, bytes: &[u8]) -> Result<(), StateError> {
        let mut r = StateReader::new("the adaqp controller", bytes);
        let table = BitTable::restored(r.bytes("the bit-width table")?)?;
        self.probe.restore_state(r.bytes("the variance traces")?)?;
        r.finish()?;
        self.bits.set(Arc::new(table));
        Ok(())
    }

    fn after_step_in(
        &mut self,
        epoch: usize,
        _stats: &StatsTable,
        ctx: &ControlCtx<'_>,
    ) -> Result<Option<Value>, TrainError> {
        let mut quant = [self.probe.take_seconds()];
        ctx.call(|| ctx.comm.all_reduce_sum_f64(PHASE, &mut quant)).map_err(|e| TrainError::Controller(Box::new(e)))?;
        let mut fields = json!({
            "bits": self.settings.bits.as_str(),
            "beta": self.settings.beta.as_str(),
            "quant_s_per_worker": quant[0] / ctx.comm.size() as f64,
        });
        if self.settings.bits.assigned() && epoch.is_multiple_of(self.settings.assign_period) {
            let assignment = ctx.call(|| self.assign(epoch, ctx)).map_err(|e| TrainError::Controller(Box::new(e)))?;
            fields["assignment"] = assignment;
        }
        Ok(Some(fields))
    }
}
