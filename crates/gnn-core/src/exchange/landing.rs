//! Moving rows between a local block and message buffers in parallel.
//!
//! Rows leave a block in a peer's list order ([`gather_rows`]) and arrive in another list order;
//! a [`Landing`] indexes, for every local row, the incoming rows that land on it, so that landing
//! runs in parallel over local rows while each row still combines its sources in ascending peer
//! order: the result does not depend on the thread count.

use rayon::prelude::*;

use crate::dense::MIN_PAR_ROWS;

/// How received rows land in the local block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Apply {
    Overwrite,
    Add,
    Max,
}

impl Apply {
    /// Lands the row `src` on `dst`.
    pub(crate) fn combine(self, dst: &mut [f32], src: &[f32]) {
        match self {
            Apply::Overwrite => dst.copy_from_slice(src),
            Apply::Add => dst.iter_mut().zip(src).for_each(|(d, s)| *d += *s),
            Apply::Max => dst.iter_mut().zip(src).for_each(|(d, s)| *d = d.max(*s)),
        }
    }
}

/// Copies rows `rows` of the row-major `data` (`width` columns) into `out[..rows.len() * width]`,
/// growing `out` if needed (never shrinking it, so alternating widths do not refill it).
pub(crate) fn gather_rows<'o>(data: &[f32], rows: &[u32], width: usize, out: &'o mut Vec<f32>) -> &'o [f32] {
    let len = rows.len() * width;
    if out.len() < len {
        out.resize(len, 0.0);
    }
    let packed = &mut out[..len];
    if width > 0 {
        packed.par_chunks_mut(width).zip(rows.par_iter()).with_min_len(MIN_PAR_ROWS).for_each(|(dst, &r)| {
            dst.copy_from_slice(&data[r as usize * width..][..width]);
        });
    }
    packed
}

/// For every local row, the `(peer, position in peer's message)` of each incoming row that lands
/// on it, peers ascending.
#[derive(Debug)]
pub(crate) struct Landing {
    /// `sources[ptr[v]..ptr[v + 1]]` land on local row `v`.
    ptr: Vec<usize>,
    sources: Vec<(u32, u32)>,
}

impl Landing {
    /// The index of messages whose rows land on `lists[p]` (local ids, message order) for every
    /// peer `p`, over a block of `num_local` rows.
    ///
    /// # Panics
    /// If a list names a row `>= num_local` (partition books are validated on load).
    pub(crate) fn new(num_local: usize, lists: &[&[u32]]) -> Self {
        let mut ptr = vec![0usize; num_local + 1];
        for &local in lists.iter().flat_map(|l| l.iter()) {
            ptr[local as usize + 1] += 1;
        }
        for v in 0..num_local {
            ptr[v + 1] += ptr[v];
        }
        let mut next = ptr.clone();
        let mut sources = vec![(0u32, 0u32); ptr[num_local]];
        // Peers in ascending order fill each row's slots in ascending order.
        for (peer, list) in lists.iter().enumerate() {
            for (pos, &local) in list.iter().enumerate() {
                let slot = &mut next[local as usize];
                sources[*slot] = (peer as u32, pos as u32);
                *slot += 1;
            }
        }
        Self { ptr, sources }
    }

    /// Lands the buffered messages on `data` (row-major, `width` columns): every local row
    /// combines, with `apply`, the rows of `messages[peer]` (`None`: that peer's rows already
    /// landed, or there are none) that land on it, peers ascending.
    pub(crate) fn land(&self, data: &mut [f32], width: usize, messages: &[Option<&[f32]>], apply: Apply) {
        if width == 0 {
            return;
        }
        data.par_chunks_mut(width).enumerate().with_min_len(MIN_PAR_ROWS).for_each(|(v, dst)| {
            for &(peer, pos) in &self.sources[self.ptr[v]..self.ptr[v + 1]] {
                let Some(message) = messages[peer as usize] else { continue };
                apply.combine(dst, &message[pos as usize * width..][..width]);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gather_copies_rows_in_list_order_and_keeps_capacity() {
        let data: Vec<f32> = (0..12).map(|v| v as f32).collect();
        let mut buf = Vec::new();
        assert_eq!(gather_rows(&data, &[2, 0], 3, &mut buf), &[6.0, 7.0, 8.0, 0.0, 1.0, 2.0]);
        assert_eq!(gather_rows(&data, &[3], 2, &mut buf), &[6.0, 7.0]);
        assert_eq!(buf.len(), 6, "the buffer is not shrunk");
    }

    #[test]
    fn rows_combine_their_sources_in_peer_order() {
        // Peer 0 sends rows [1, 3], peer 1 nothing, peer 2 rows [3, 0]; width 2.
        let lists: [&[u32]; 3] = [&[1, 3], &[], &[3, 0]];
        let landing = Landing::new(4, &lists);
        let from0 = [1.0, 2.0, 3.0, 4.0];
        let from2 = [10.0, 20.0, 30.0, 40.0];
        let messages = [Some(&from0[..]), None, Some(&from2[..])];
        let mut data = vec![0.5f32; 8];
        landing.land(&mut data, 2, &messages, Apply::Add);
        assert_eq!(data, [30.5, 40.5, 1.5, 2.5, 0.5, 0.5, 13.5, 24.5]);
        let mut data = vec![0.5f32; 8];
        landing.land(&mut data, 2, &messages, Apply::Overwrite);
        assert_eq!(data, [30.0, 40.0, 1.0, 2.0, 0.5, 0.5, 10.0, 20.0], "the later peer wins");
        let mut data = vec![5.0f32; 8];
        landing.land(&mut data, 2, &messages, Apply::Max);
        assert_eq!(data, [30.0, 40.0, 5.0, 5.0, 5.0, 5.0, 10.0, 20.0]);
        // A peer whose rows landed elsewhere is skipped.
        let mut data = vec![0.0f32; 8];
        landing.land(&mut data, 2, &[None, None, Some(&from2[..])], Apply::Add);
        assert_eq!(data, [30.0, 40.0, 0.0, 0.0, 0.0, 0.0, 10.0, 20.0]);
    }
}
