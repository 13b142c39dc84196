//! Problem (12) as a mixed-integer linear program, solved by microlp through `good_lp`.
//!
//! Binary `x[p][g][k]`: group `g` of pair `p` travels at `WIDTHS[k]`; one width per group.
//! Continuous `Z_r`: round `r`'s duration, at least every pair of the round's
//! `theta * MB + gamma`. Minimised: `lambda / span_V * sum W_g x / (2^b - 1)^2 +
//! (1 - lambda) / span_T * sum Z_r` (problem (12)'s objective less its constant offsets).
//! With a byte budget, the bytes of every pair together are at most the budget.

use good_lp::solvers::microlp::microlp;
use good_lp::{
    Expression, ProblemVariables, ResolutionError, Solution, SolutionStatus, SolverModel, Variable, WithTimeLimit,
    variable,
};
use thiserror::Error;

use super::{Assignment, Problem, Solved, Solver, variance_factor};
use crate::codec::stochastic::{WIDTHS, row_bytes};

/// Why problem (12) was not solved.
#[derive(Debug, Error)]
#[error("bit-width assignment: the MILP solver failed: {0}")]
pub struct SolveError(#[from] ResolutionError);

/// Minimises [`Problem::objective`] over every assignment (within the budget, if any) by
/// microlp's branch and bound.
pub fn solve_milp(problem: &Problem, time_limit_s: f64) -> Result<Solved, SolveError> {
    let solved = |assignment, optimal| Solved { assignment, optimal, solver: Solver::Milp };
    if problem.pairs.is_empty() {
        return Ok(solved(Vec::new(), true));
    }
    let (_, span) = problem.scales();
    let (lv, lt) = (problem.lambda / span.variance, (1.0 - problem.lambda) / span.seconds);
    let mut vars = ProblemVariables::new();
    let x: Vec<Vec<[Variable; 3]>> = problem
        .pairs
        .iter()
        .map(|p| p.groups.iter().map(|_| [(); 3].map(|_| vars.add(variable().binary()))).collect())
        .collect();
    let rounds: Vec<Variable> = (0..problem.workers).map(|_| vars.add(variable().min(0.0))).collect();
    let mut objective = Expression::default();
    for (p, xp) in problem.pairs.iter().zip(&x) {
        for (w, xg) in p.weights.iter().zip(xp) {
            for (k, &b) in WIDTHS.iter().enumerate() {
                objective.add_mul(lv * w * variance_factor(b), xg[k]);
            }
        }
    }
    rounds.iter().for_each(|&z| objective.add_mul(lt, z));
    let mut model = vars.minimise(objective).using(microlp).with_time_limit(time_limit_s);
    let mut total_bytes = Expression::default();
    for (p, xp) in problem.pairs.iter().zip(&x) {
        let mut megabytes = Expression::default();
        for (group, xg) in p.groups.iter().zip(xp) {
            model.add_constraint(xg.iter().copied().sum::<Expression>().eq(1.0));
            for (k, &b) in WIDTHS.iter().enumerate() {
                let bytes = (group.len() * row_bytes(p.width, b)) as f64;
                megabytes.add_mul(bytes * 1e-6, xg[k]);
                total_bytes.add_mul(bytes, xg[k]);
            }
        }
        let seconds = megabytes * p.time.theta_s_per_mb + p.time.gamma_s;
        model.add_constraint(Expression::from(rounds[problem.round(p)]).geq(seconds));
    }
    if let Some(budget) = problem.budget_bytes {
        // Bytes are integers: half a byte of slack absorbs the solver's tolerance without
        // admitting one byte more.
        model.add_constraint(total_bytes.leq(budget as f64 + 0.5));
    }
    let solution = match model.solve() {
        Ok(solution) => solution,
        // good_lp's one signal that microlp's time ran out before any integer-feasible point
        // (large problems, loaded machines): a uniform width is always feasible.
        Err(ResolutionError::Other(message)) if message.starts_with("Time limit") => {
            return Ok(solved(best_uniform(problem), false));
        }
        Err(e) => return Err(e.into()),
    };
    let optimal = matches!(solution.status(), SolutionStatus::Optimal);
    let assignment = x
        .iter()
        .map(|xp| {
            xp.iter()
                .map(|xg| {
                    let k = (0..3).max_by(|&a, &b| solution.value(xg[a]).total_cmp(&solution.value(xg[b])));
                    WIDTHS[k.unwrap_or(2)]
                })
                .collect()
        })
        .collect();
    Ok(solved(assignment, optimal))
}

/// The uniform width with the least objective among those within the budget (all-2-bit when
/// none is: the tightest a budget can feasibly be).
fn best_uniform(problem: &Problem) -> Assignment {
    WIDTHS
        .iter()
        .map(|&b| problem.uniform(b))
        .filter(|a| problem.budget_bytes.is_none_or(|budget| problem.bytes(a) <= budget))
        .min_by(|a, b| problem.objective(a).total_cmp(&problem.objective(b)))
        .unwrap_or_else(|| problem.uniform(WIDTHS[0]))
}
