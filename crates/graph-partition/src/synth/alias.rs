//! Weighted node sampling restricted to a group (class, community, or both), O(1) per draw
//! with Walker's alias method; groups are found by binary search over their keys.

use std::ops::Range;

use rayon::prelude::*;

use crate::rng::SplitMix64;

/// Alias tables for every group of nodes sharing a key, laid out group after group.
pub(super) struct GroupedAlias {
    /// Sorted distinct keys of the non-empty groups.
    keys: Vec<u64>,
    /// Group `g` occupies `starts[g]..starts[g + 1]` of `slots`.
    starts: Vec<usize>,
    slots: Vec<Slot>,
}

/// One alias-table entry, packed so a draw touches a single cache line.
#[derive(Debug, Clone, Copy)]
struct Slot {
    /// Probability of taking `node` rather than `alias`.
    keep: f32,
    node: u32,
    alias: u32,
}

impl GroupedAlias {
    /// Groups nodes `0..weights.len()` by `key_of` and builds one table per group.
    pub fn new(weights: &[f64], key_of: impl Fn(usize) -> u64 + Sync) -> Self {
        let mut nodes: Vec<u32> = (0..weights.len() as u32).collect();
        nodes.par_sort_unstable_by_key(|&v| (key_of(v as usize), v));
        let mut keys = Vec::new();
        let mut starts = Vec::new();
        for (i, &v) in nodes.iter().enumerate() {
            let key = key_of(v as usize);
            if keys.last() != Some(&key) {
                keys.push(key);
                starts.push(i);
            }
        }
        starts.push(nodes.len());
        let tables: Vec<Vec<Slot>> = starts.par_windows(2).map(|w| build_table(&nodes[w[0]..w[1]], weights)).collect();
        Self { keys, starts, slots: tables.concat() }
    }

    /// The slots of the group with `key`, if it has any node.
    pub fn group(&self, key: u64) -> Option<Range<usize>> {
        let g = self.keys.binary_search(&key).ok()?;
        Some(self.starts[g]..self.starts[g + 1])
    }

    /// All slots (sampling over every node).
    pub fn all(&self) -> Range<usize> {
        0..self.slots.len()
    }

    /// A node of `slots` (a non-empty group range) drawn proportionally to its weight.
    pub fn sample(&self, slots: &Range<usize>, rng: &mut SplitMix64) -> u32 {
        let slot = self.slots[slots.start + rng.below(slots.len() as u64) as usize];
        if (rng.next_f64() as f32) < slot.keep { slot.node } else { slot.alias }
    }
}

/// Vose's construction for the table of one group of nodes.
fn build_table(group: &[u32], weights: &[f64]) -> Vec<Slot> {
    let m = group.len();
    let total: f64 = group.iter().map(|&v| weights[v as usize]).sum();
    let mut scaled: Vec<f64> = group.iter().map(|&v| weights[v as usize] * m as f64 / total).collect();
    let mut slots: Vec<Slot> = group.iter().map(|&v| Slot { keep: 1.0, node: v, alias: v }).collect();
    let (mut small, mut large): (Vec<usize>, Vec<usize>) = (0..m).partition(|&i| scaled[i] < 1.0);
    while let (Some(&s), Some(&l)) = (small.last(), large.last()) {
        small.pop();
        slots[s].keep = scaled[s] as f32;
        slots[s].alias = group[l];
        scaled[l] -= 1.0 - scaled[s];
        if scaled[l] < 1.0 {
            large.pop();
            small.push(l);
        }
    }
    // Leftovers are 1 up to rounding: they keep their own node (already the default).
    slots
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_follow_weights_within_groups() {
        let weights = [1.0, 2.0, 3.0, 4.0, 10.0, 0.5];
        // Groups: even nodes (key 0) and odd nodes (key 1).
        let table = GroupedAlias::new(&weights, |v| (v % 2) as u64);
        assert_eq!(table.group(2), None);
        let odd = table.group(1).unwrap();
        let mut rng = SplitMix64::new(5);
        let mut counts = [0usize; 6];
        let draws = 200_000;
        for _ in 0..draws {
            counts[table.sample(&odd, &mut rng) as usize] += 1;
        }
        let odd_total = 2.0 + 4.0 + 0.5;
        for v in [1, 3, 5] {
            let freq = counts[v] as f64 / draws as f64;
            assert!((freq - weights[v] / odd_total).abs() < 0.01, "node {v}: {freq}");
        }
        assert_eq!(counts[0] + counts[2] + counts[4], 0);
        let all = table.all();
        assert!((0..1000).all(|_| (table.sample(&all, &mut rng) as usize) < weights.len()));
    }
}
