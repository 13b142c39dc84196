//! Seeds per step: the epoch's order of the training vertices, global batches, and each data-
//! parallel worker's share of a global batch.
//!
//! Data-parallel training (K workers together take one global batch per step) needs no
//! communication to agree on batches: every worker builds the same [`BatchPlan`] from the same
//! (seed, epoch) and takes its [`Share`] of each global batch. Shares are disjoint, cover the
//! batch, and every worker takes [`BatchPlan::num_steps`] steps per epoch.
//!
//! The remainder: an epoch over `n` vertices with global batch `B` has `n % B` vertices left
//! after its full batches. With [`Remainder::Keep`] (DGL's `drop_last=False`) they form a last,
//! smaller global batch; its shares are as even as the others (sizes differ by at most one),
//! and when fewer than K vertices remain some shares are empty: those workers still take the
//! step (no seeds, zero loss, zero gradient) so that every all-reduce has all K workers. With
//! [`Remainder::Drop`] the last partial batch is skipped; the shuffle changes every epoch, so
//! no vertex is skipped for good.

use rayon::prelude::*;

use super::StepKey;
use crate::rng::hash_key;

/// Separates the epoch shuffle from every other keyed stream ("shuffle").
const SHUFFLE_DOMAIN: u64 = 0x0073_6875_6666_6c65;

/// What happens to the `n % batch_size` vertices left after an epoch's full batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Remainder {
    /// They form a last, smaller batch.
    #[default]
    Keep,
    /// They are skipped this epoch.
    Drop,
}

/// Why a batch plan or a share was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("batch size must be at least 1")]
    ZeroBatchSize,
    #[error("data-parallel training needs at least one worker")]
    ZeroWorkers,
    #[error("worker {worker} does not exist among {workers} workers (workers are numbered from 0)")]
    WorkerOutOfRange { worker: usize, workers: usize },
}

/// Worker `worker`'s part of every global batch, among `workers` data-parallel workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share {
    worker: usize,
    workers: usize,
}

impl Share {
    pub fn new(worker: usize, workers: usize) -> Result<Self, PlanError> {
        if workers == 0 {
            return Err(PlanError::ZeroWorkers);
        }
        if worker >= workers {
            return Err(PlanError::WorkerOutOfRange { worker, workers });
        }
        Ok(Self { worker, workers })
    }

    /// The whole batch (a single worker).
    pub fn whole() -> Self {
        Self { worker: 0, workers: 1 }
    }

    pub fn worker(&self) -> usize {
        self.worker
    }

    pub fn workers(&self) -> usize {
        self.workers
    }

    /// This worker's contiguous slice of `batch`: the batch cut into `workers` runs whose sizes
    /// differ by at most one, the longer ones first.
    pub fn of<'a>(&self, batch: &'a [u32]) -> &'a [u32] {
        let (base, extra) = (batch.len() / self.workers, batch.len() % self.workers);
        let start = self.worker * base + self.worker.min(extra);
        let len = base + usize::from(self.worker < extra);
        &batch[start..start + len]
    }
}

/// One step of an epoch: the key its draws use and the seeds it samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step<'a> {
    pub key: StepKey,
    pub seeds: &'a [u32],
}

/// One epoch's batches (see the module docs for data-parallel shares and the remainder).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchPlan {
    epoch: u64,
    order: Vec<u32>,
    batch_size: usize,
    num_steps: usize,
}

impl BatchPlan {
    /// The epoch's batches over `vertices` in a random order keyed by (seed, epoch): vertex `v`
    /// is ranked by `hash_key(domain, seed, epoch, v)`, so the order depends only on the set of
    /// vertices, not on the order they are listed in.
    pub fn shuffled(
        vertices: &[u32],
        batch_size: usize,
        seed: u64,
        epoch: u64,
        remainder: Remainder,
    ) -> Result<Self, PlanError> {
        let mut ranked: Vec<(u64, u32)> =
            vertices.par_iter().map(|&v| (hash_key(&[SHUFFLE_DOMAIN, seed, epoch, u64::from(v)]), v)).collect();
        ranked.par_sort_unstable();
        Self::in_order(ranked.into_iter().map(|(_, v)| v).collect(), batch_size, epoch, remainder)
    }

    /// Batches over `vertices` in the given order (evaluation, or a caller's own order).
    /// `epoch` only keys the draws of the steps.
    pub fn in_order(order: Vec<u32>, batch_size: usize, epoch: u64, remainder: Remainder) -> Result<Self, PlanError> {
        if batch_size == 0 {
            return Err(PlanError::ZeroBatchSize);
        }
        let num_steps = match remainder {
            Remainder::Keep => order.len().div_ceil(batch_size),
            Remainder::Drop => order.len() / batch_size,
        };
        Ok(Self { epoch, order, batch_size, num_steps })
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Every vertex of the epoch in batch order (dropped remainder included, at the end).
    pub fn order(&self) -> &[u32] {
        &self.order
    }

    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// Steps per epoch, the same for every worker.
    pub fn num_steps(&self) -> usize {
        self.num_steps
    }

    /// The global batch of `step`, or `None` past the last step.
    pub fn batch(&self, step: usize) -> Option<&[u32]> {
        (step < self.num_steps).then(|| {
            let start = step * self.batch_size;
            &self.order[start..(start + self.batch_size).min(self.order.len())]
        })
    }

    /// The epoch's steps with `share`'s seeds (use [`Share::whole`] for single-process
    /// training). Step `i` is keyed by (epoch, `i`) for every worker, so a vertex's sample does
    /// not depend on which worker takes it.
    pub fn steps(&self, share: Share) -> impl ExactSizeIterator<Item = Step<'_>> + Clone + Send + '_ {
        (0..self.num_steps).map(move |step| Step {
            key: StepKey { epoch: self.epoch, step: step as u64 },
            seeds: share.of(self.batch(step).expect("step < num_steps")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffle_is_a_keyed_permutation_of_the_set() {
        let vertices: Vec<u32> = (0..1000).map(|v| v * 7).collect();
        let plan = BatchPlan::shuffled(&vertices, 64, 3, 0, Remainder::Keep).unwrap();
        let mut sorted = plan.order().to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, vertices);
        assert_ne!(plan.order(), &vertices[..]);
        assert_eq!(plan, BatchPlan::shuffled(&vertices, 64, 3, 0, Remainder::Keep).unwrap());
        let reversed: Vec<u32> = vertices.iter().rev().copied().collect();
        assert_eq!(plan.order(), BatchPlan::shuffled(&reversed, 64, 3, 0, Remainder::Keep).unwrap().order());
        assert_ne!(plan.order(), BatchPlan::shuffled(&vertices, 64, 3, 1, Remainder::Keep).unwrap().order());
        assert_ne!(plan.order(), BatchPlan::shuffled(&vertices, 64, 4, 0, Remainder::Keep).unwrap().order());
    }

    #[test]
    fn remainder_keep_and_drop() {
        let vertices: Vec<u32> = (0..10).collect();
        let keep = BatchPlan::in_order(vertices.clone(), 4, 0, Remainder::Keep).unwrap();
        assert_eq!(keep.num_steps(), 3);
        assert_eq!(keep.batch(2), Some(&[8, 9][..]));
        assert_eq!(keep.batch(3), None);
        let drop = BatchPlan::in_order(vertices, 4, 0, Remainder::Drop).unwrap();
        assert_eq!(drop.num_steps(), 2);
        assert_eq!(drop.batch(1), Some(&[4, 5, 6, 7][..]));
        assert_eq!(drop.batch(2), None);
        assert_eq!(BatchPlan::in_order(vec![], 4, 0, Remainder::Keep).unwrap().num_steps(), 0);
        assert_eq!(BatchPlan::in_order(vec![1], 0, 0, Remainder::Keep), Err(PlanError::ZeroBatchSize));
    }

    #[test]
    fn shares_partition_every_batch_with_equal_step_counts() {
        let plan = BatchPlan::shuffled(&(0..103).collect::<Vec<_>>(), 20, 9, 2, Remainder::Keep).unwrap();
        for workers in 1..=7 {
            let per_worker: Vec<Vec<Step<'_>>> =
                (0..workers).map(|w| plan.steps(Share::new(w, workers).unwrap()).collect()).collect();
            assert!(per_worker.iter().all(|steps| steps.len() == plan.num_steps()));
            for step in 0..plan.num_steps() {
                let shares: Vec<&[u32]> = per_worker.iter().map(|steps| steps[step].seeds).collect();
                assert_eq!(shares.concat(), plan.batch(step).unwrap(), "{workers} workers, step {step}");
                let (min, max) = (shares.iter().map(|s| s.len()).min(), shares.iter().map(|s| s.len()).max());
                assert!(max.unwrap() - min.unwrap() <= 1);
                assert!(per_worker.iter().all(|steps| steps[step].key == StepKey { epoch: 2, step: step as u64 }));
            }
        }
        // The last batch holds 3 vertices: with 5 workers, two take an empty step.
        let last: Vec<usize> = (0..5).map(|w| Share::new(w, 5).unwrap().of(plan.batch(5).unwrap()).len()).collect();
        assert_eq!(last, [1, 1, 1, 0, 0]);
    }

    #[test]
    fn share_rejects_bad_workers() {
        assert_eq!(Share::new(0, 0), Err(PlanError::ZeroWorkers));
        assert_eq!(Share::new(4, 4), Err(PlanError::WorkerOutOfRange { worker: 4, workers: 4 }));
        assert_eq!(Share::whole().of(&[1, 2, 3]), &[1, 2, 3]);
    }
}
