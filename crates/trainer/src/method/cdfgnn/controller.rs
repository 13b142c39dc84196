//! The cache threshold eps between epochs (CDFGNN eq. 6-7), four ways ([`EpsRule`]).
//!
//! Eq. 6 as printed relaxes eps (`min(lambda1 eps, eps + xi)`, while `eps < nu1`) when training
//! accuracy falls more than mu1 below its moving average and tightens it (`max(lambda2 eps,
//! eps - xi)`, while `eps > nu2`) when accuracy rises more than mu2 above it; the prose says the
//! opposite (relax on a large enough rise, tighten on even a small drop), which `prose` follows
//! with the same conditions on mu2 and mu1. Eq. 7's moving average, `mean = 0.8 mean + 0.2 acc`,
//! starts at the first epoch's accuracy and is compared before it takes in the new one.
//! Accuracy is the training-set accuracy of the evaluation after each step (all-reduced, so
//! identical on every rank, as is eps: every rank's cache reads the same threshold).

use cache_quant::state::{put_f64, put_opt_f64};
use cache_quant::{Knob, Route, StateError, StateReader, StatsTable};
use serde_json::{Value, json};

use crate::config::{CdfgnnSettings, EpsRule};
use crate::method::Controller;
use crate::train_loop::EvalStats;

/// What a controller did to eps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Move {
    Relax,
    Tighten,
    Hold,
}

impl Move {
    fn as_str(self) -> &'static str {
        match self {
            Move::Relax => "relax",
            Move::Tighten => "tighten",
            Move::Hold => "hold",
        }
    }
}

/// Sets the cache threshold of every stream of one worker.
pub(super) struct EpsController {
    settings: CdfgnnSettings,
    knob: Knob<f32>,
    eps: f64,
    mean_acc: Option<f64>,
    /// The last move and the measured relative cache error of the last step.
    last: Move,
    cache_error: Option<f64>,
}

impl EpsController {
    pub(super) fn new(settings: &CdfgnnSettings, knob: Knob<f32>) -> Self {
        knob.set(settings.eps as f32);
        Self {
            settings: settings.clone(),
            knob,
            eps: settings.eps,
            mean_acc: None,
            last: Move::Hold,
            cache_error: None,
        }
    }

    /// Applies `step` to eps, unless the bound that gates it is reached.
    fn apply(&mut self, step: Move) {
        let s = &self.settings;
        (self.eps, self.last) = match step {
            Move::Relax if self.eps < s.nu1 => ((s.lambda1 * self.eps).min(self.eps + s.xi), step),
            Move::Tighten if self.eps > s.nu2 => ((s.lambda2 * self.eps).max(self.eps - s.xi), step),
            _ => (self.eps, Move::Hold),
        };
        self.knob.set(self.eps as f32);
    }

    /// Eq. 6's decision for training accuracy `acc` against the moving average `mean`.
    fn accuracy_move(&self, acc: f64, mean: f64) -> Move {
        let s = &self.settings;
        let (rose, fell) = (acc > mean + s.mu2, acc < mean - s.mu1);
        match (self.settings.eps_controller, rose, fell) {
            (EpsRule::Prose, true, _) | (EpsRule::Printed, _, true) => Move::Relax,
            (EpsRule::Prose, _, true) | (EpsRule::Printed, true, _) => Move::Tighten,
            _ => Move::Hold,
        }
    }
}

/// The relative error of what the masters counted for the mirrors' partials (the cache's
/// staleness plus quantization), over every layer and direction; `None` without rows.
fn cache_error(stats: &StatsTable) -> Option<f64> {
    let (mut err, mut reference) = (0.0, 0.0);
    for (_, s) in stats.entries().filter(|(k, _)| k.route == Route::ToPrimary) {
        err += s.err_sq;
        reference += s.ref_sq;
    }
    (reference > 0.0).then(|| (err / reference).sqrt())
}

impl Controller for EpsController {
    fn save_state(&self, out: &mut Vec<u8>) -> Result<(), StateError> {
        put_f64(out, self.eps);
        put_opt_f64(out, self.mean_acc);
        put_opt_f64(out, self.cache_error);
        out.push(self.last as u8);
        Ok(())
    }

    fn restore_state(&mut self, bytes: &[u8]) -> Result<(), StateError> {
        let mut r = StateReader::new("the eps controller", bytes);
        let eps = r.f64("eps")?;
        let mean_acc = r.opt_f64("the mean training accuracy")?;
        let cache_error = r.opt_f64("the cache error")?;
        let last = match r.u8("the last move")? {
            0 => Move::Relax,
            1 => Move::Tighten,
            2 => Move::Hold,
            m => return Err(StateError(format!("the eps controller's saved last move {m} names no move"))),
        };
        r.finish()?;
        (self.eps, self.mean_acc, self.cache_error, self.last) = (eps, mean_acc, cache_error, last);
        self.knob.set(eps as f32);
        Ok(())
    }

    fn after_step(&mut self, _epoch: usize, stats: &StatsTable) -> Option<Value> {
        let used = self.eps;
        self.cache_error = cache_error(stats);
        if self.settings.eps_controller == EpsRule::ErrorTarget {
            let step = match self.cache_error {
                Some(e) if e > self.settings.error_target => Move::Tighten,
                Some(e) if e < self.settings.error_target => Move::Relax,
                _ => Move::Hold,
            };
            self.apply(step);
        }
        Some(json!({
            "rule": self.settings.eps_controller.as_str(),
            "eps": used,
            "cache_error": self.cache_error,
            "mean_train_acc": self.mean_acc,
            "last_move": self.last.as_str(),
        }))
    }

    fn after_eval(&mut self, eval: &EvalStats) {
        if !matches!(self.settings.eps_controller, EpsRule::Prose | EpsRule::Printed) {
            return;
        }
        let acc = eval.train_acc;
        let mean = self.mean_acc.unwrap_or(acc);
        let step = self.accuracy_move(acc, mean);
        self.apply(step);
        let decay = self.settings.acc_decay;
        self.mean_acc = Some(decay * mean + (1.0 - decay) * acc);
    }
}

#[cfg(test)]
mod tests {
    use cache_quant::{CodecStats, Direction, StatsKey};

    use super::*;

    fn controller(rule: EpsRule, eps: f64) -> (EpsController, Knob<f32>) {
        let knob = Knob::new(0.0);
        let settings = CdfgnnSettings { eps_controller: rule, eps, ..CdfgnnSettings::default() };
        (EpsController::new(&settings, knob.clone()), knob)
    }

    fn eval(train_acc: f64) -> EvalStats {
        EvalStats { train_acc, ..EvalStats::default() }
    }

    /// A step whose mirrors' partials reached their masters with relative error `error`.
    fn stats(error: f64) -> StatsTable {
        let mut t = StatsTable::default();
        let key = |route| StatsKey { layer: 0, dir: Direction::Forward, route };
        t.add(key(Route::ToPrimary), &CodecStats { rows: 4, err_sq: error * error, ref_sq: 1.0, ..Default::default() });
        // The masters' replies are not the cache's error.
        t.add(key(Route::ToCopies), &CodecStats { rows: 4, err_sq: 9.0, ref_sq: 1.0, ..Default::default() });
        t
    }

    /// Feeds `accs` and returns eps after each.
    fn run(rule: EpsRule, eps: f64, accs: &[f64]) -> Vec<f64> {
        let (mut c, knob) = controller(rule, eps);
        accs.iter()
            .map(|&a| {
                c.after_eval(&eval(a));
                assert_eq!(f64::from(knob.get()), f64::from(c.eps as f32), "the knob follows eps");
                c.eps
            })
            .collect()
    }

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-12)
    }

    #[test]
    fn prose_relaxes_on_a_rise_tightens_on_a_drop_and_holds_otherwise() {
        // Epoch 1 seeds the average (hold); +0.1 rises past mu2 (relax: min(1.05 * 0.1, 0.11));
        // the average is now 0.52, so 0.5 falls past mu1 (tighten: max(0.9 * 0.105, 0.095)).
        let got = run(EpsRule::Prose, 0.1, &[0.5, 0.6, 0.5]);
        assert!(close(&got, &[0.1, 0.105, 0.095]), "{got:?}");
        // Within (mean - mu1, mean + mu2): hold.
        assert!(close(&run(EpsRule::Prose, 0.1, &[0.5, 0.51]), &[0.1, 0.1]));
    }

    #[test]
    fn printed_does_the_opposite() {
        let got = run(EpsRule::Printed, 0.1, &[0.5, 0.6, 0.5]);
        assert!(close(&got, &[0.1, 0.09, 0.0945]), "{got:?}");
        assert!(close(&run(EpsRule::Printed, 0.1, &[0.5, 0.51]), &[0.1, 0.1]));
    }

    #[test]
    fn steps_are_capped_by_xi_and_gated_by_the_bounds() {
        // lambda1 eps = 0.294 > eps + xi = 0.29: the step is xi.
        assert!(close(&run(EpsRule::Prose, 0.28, &[0.5, 0.6]), &[0.28, 0.29]));
        // lambda2 eps = 0.252 < eps - xi = 0.27: the step is xi.
        assert!(close(&run(EpsRule::Prose, 0.28, &[0.5, 0.4]), &[0.28, 0.27]));
        // At or above nu1 = 0.3 eps no longer relaxes, at or below nu2 = 0.001 no longer tightens.
        assert!(close(&run(EpsRule::Prose, 0.3, &[0.5, 0.6]), &[0.3, 0.3]));
        assert!(close(&run(EpsRule::Prose, 0.001, &[0.5, 0.4]), &[0.001, 0.001]));
        assert!(close(&run(EpsRule::Printed, 0.3, &[0.5, 0.4]), &[0.3, 0.3]));
        assert!(close(&run(EpsRule::Printed, 0.001, &[0.5, 0.6]), &[0.001, 0.001]));
    }

    #[test]
    fn the_moving_average_is_eq_7() {
        let (mut c, _) = controller(EpsRule::Prose, 0.1);
        c.after_eval(&eval(0.5));
        c.after_eval(&eval(1.0));
        assert!((c.mean_acc.unwrap() - (0.8 * 0.5 + 0.2 * 1.0)).abs() < 1e-12);
    }

    #[test]
    fn fixed_never_moves() {
        let (mut c, knob) = controller(EpsRule::Fixed, 0.07);
        for acc in [0.1, 0.9, 0.1] {
            c.after_eval(&eval(acc));
            let fields = c.after_step(1, &stats(1.0)).unwrap();
            assert_eq!(fields["eps"], 0.07);
        }
        assert_eq!(knob.get(), 0.07);
    }

    #[test]
    fn error_target_tightens_above_relaxes_below_and_holds_at_the_target_or_without_rows() {
        let (mut c, knob) = controller(EpsRule::ErrorTarget, 0.1);
        let fields = c.after_step(1, &stats(0.2)).unwrap();
        assert_eq!((fields["eps"].as_f64(), fields["rule"].as_str()), (Some(0.1), Some("error-target")));
        assert_eq!(c.last, Move::Tighten);
        assert!((fields["cache_error"].as_f64().unwrap() - 0.2).abs() < 1e-12, "{fields}");
        assert!((c.eps - 0.09).abs() < 1e-12);
        c.after_step(2, &stats(0.01)).unwrap();
        assert!((c.eps - 0.0945).abs() < 1e-12);
        c.after_step(3, &stats(0.05)).unwrap();
        assert_eq!(c.last, Move::Hold);
        c.after_step(4, &StatsTable::default()).unwrap();
        assert!((c.eps - 0.0945).abs() < 1e-12);
        assert_eq!(f64::from(knob.get()), f64::from(0.0945f32));
        // Accuracy does not move it.
        c.after_eval(&eval(0.1));
        c.after_eval(&eval(0.9));
        assert!((c.eps - 0.0945).abs() < 1e-12);
    }
}
