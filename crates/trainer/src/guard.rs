//! Stops a run at the first non-finite loss, gradient or parameter, naming the epoch and where
//! the value first appeared, instead of training on NaN and reporting a best epoch from before.
//!
//! On distributed runs the loss and the gradients are all-reduced and the parameters updated
//! identically, so every worker reaches the same verdict at the same step.

use gnn_core::{AggGraph, Model};

use crate::error::{Site, TrainError};

/// The first layer whose output is non-finite, looked at only when this worker's loss is
/// (call after the loss, before backward, while the hidden outputs are intact). The logits are
/// the loss gradient by then ([`Model::take_logits`]); a loss over finite logits is finite, so
/// when every hidden output is finite the output layer's is not.
pub(crate) fn bad_layer(local_loss: f64, model: &Model, graph: &AggGraph) -> Option<usize> {
    if local_loss.is_finite() {
        return None;
    }
    Some(model.first_nonfinite_output(graph).unwrap_or(model.config().layers - 1))
}

/// Checks the (global) loss of the step and the model's (summed) gradients before the update;
/// `layer` is [`bad_layer`]'s finding.
pub(crate) fn check_loss_and_grads(
    epoch: usize,
    loss: f64,
    layer: Option<usize>,
    model: &Model,
    lr: f32,
) -> Result<(), TrainError> {
    if !loss.is_finite() {
        return Err(non_finite(epoch, Site::Loss { layer }, lr));
    }
    check_grads(epoch, model, lr)
}

/// Checks the model's (summed) gradients before the update.
pub(crate) fn check_grads(epoch: usize, model: &Model, lr: f32) -> Result<(), TrainError> {
    check_grad_values(epoch, model, model.grads(), lr)
}

/// Checks gradients laid out like `model`'s parameters, held elsewhere (a device model's,
/// brought down), naming the parameter at fault from `model`'s layout.
pub(crate) fn check_grad_values(epoch: usize, model: &Model, grads: &[f32], lr: f32) -> Result<(), TrainError> {
    match first_nonfinite(model, grads) {
        Some(param) => Err(non_finite(epoch, Site::Gradient { param }, lr)),
        None => Ok(()),
    }
}

/// Checks the parameters after the optimizer step.
pub(crate) fn check_params(epoch: usize, model: &Model, lr: f32) -> Result<(), TrainError> {
    match first_nonfinite(model, model.params()) {
        Some(param) => Err(non_finite(epoch, Site::Parameter { param }, lr)),
        None => Ok(()),
    }
}

/// The name of the first parameter with a non-finite entry in `values` (a buffer laid out like
/// the parameters).
fn first_nonfinite(model: &Model, values: &[f32]) -> Option<String> {
    let bad = values.iter().position(|v| !v.is_finite())?;
    let info = model.param_info().iter().find(|p| (p.slot.offset..p.slot.offset + p.slot.len()).contains(&bad));
    Some(info.map_or_else(|| format!("#{bad}"), |p| p.name.clone()))
}

fn non_finite(epoch: usize, site: Site, lr: f32) -> TrainError {
    let hint = format!(
        "the learning rate may be too high (--lr {lr:e}), or the input features hold extreme values \
         (normalise them with --feature-norm row)"
    );
    TrainError::NonFinite { epoch, site, hint }
}
