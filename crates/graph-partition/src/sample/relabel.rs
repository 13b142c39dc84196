//! Global -> local id assignment for one block, in order of first appearance.
//!
//! A dense map over every vertex of the graph (`u32::MAX` = unassigned) makes a lookup one
//! load, which matters: the input block of a 3-layer sample relabels hundreds of thousands of
//! edges. Allocating and clearing a graph-sized map per batch would cost more than the
//! sampling on a large graph, so maps are pooled per sampler and reset through the list of ids
//! they assigned (touched entries only).

use std::sync::Mutex;

const UNASSIGNED: u32 = u32::MAX;

/// Graph-sized maps, all `UNASSIGNED`, ready for reuse.
#[derive(Debug, Default)]
pub(super) struct MapPool {
    free: Mutex<Vec<Vec<u32>>>,
}

impl MapPool {
    /// A map over `num_nodes` vertices, from the pool when one is free.
    pub(super) fn take(&self, num_nodes: usize) -> LocalIds<'_> {
        // A poisoned lock only means another sampling call panicked; the maps in the pool are
        // all reset (a map is reset before it is returned), so they stay usable.
        let pooled = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let map = pooled.filter(|m| m.len() == num_nodes).unwrap_or_else(|| vec![UNASSIGNED; num_nodes]);
        LocalIds { map, ids: Vec::new(), pool: self }
    }
}

/// Local ids being assigned for one block: `ids[local] = global`, `map[global] = local`.
/// Dropping it resets the map and returns it to the pool.
#[derive(Debug)]
pub(super) struct LocalIds<'p> {
    map: Vec<u32>,
    ids: Vec<u32>,
    pool: &'p MapPool,
}

impl LocalIds<'_> {
    /// Assigns the next local id to `gid`; `false` when it already had one.
    pub(super) fn insert_new(&mut self, gid: u32) -> bool {
        let slot = &mut self.map[gid as usize];
        if *slot != UNASSIGNED {
            return false;
        }
        *slot = self.ids.len() as u32;
        self.ids.push(gid);
        true
    }

    /// The local id of `gid`, assigning the next one on first sight.
    pub(super) fn local_or_insert(&mut self, gid: u32) -> u32 {
        let slot = &mut self.map[gid as usize];
        if *slot == UNASSIGNED {
            *slot = self.ids.len() as u32;
            self.ids.push(gid);
        }
        *slot
    }

    /// The global ids in local order; the map is reset for the next block.
    pub(super) fn finish(&mut self) -> Vec<u32> {
        self.reset();
        std::mem::take(&mut self.ids)
    }

    fn reset(&mut self) {
        for &gid in &self.ids {
            self.map[gid as usize] = UNASSIGNED;
        }
    }
}

impl Drop for LocalIds<'_> {
    fn drop(&mut self) {
        self.reset();
        let map = std::mem::take(&mut self.map);
        self.pool.free.lock().unwrap_or_else(|e| e.into_inner()).push(map);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_appearance_order_and_reuse() {
        let pool = MapPool::default();
        {
            let mut ids = pool.take(10);
            assert!(ids.insert_new(7));
            assert!(!ids.insert_new(7));
            assert_eq!([3, 7, 3, 9].map(|g| ids.local_or_insert(g)), [1, 0, 1, 2]);
            assert_eq!(ids.finish(), vec![7, 3, 9]);
            // After `finish` the same map assigns from scratch.
            assert_eq!(ids.local_or_insert(9), 0);
        }
        // The map came back reset, even though 9 was assigned when it was dropped.
        let mut ids = pool.take(10);
        assert!(ids.insert_new(9));
        assert_eq!(ids.finish(), vec![9]);
    }
}
