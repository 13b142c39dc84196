//! Memory pages of large blocks: zeroing by handing them back to the operating system, and
//! asking for huge pages where a block is read at random.
//!
//! A worker's halo rows are written only while an exchange's rows are in flight: pulled rows
//! are read by one aggregation, pushed gradients are zeroed once sent. Writing zeros would keep
//! their pages resident for the rest of the run (the buffers are pooled and reused), and at
//! ogbn-products scale those rows outnumber the owned ones several times over. Released pages
//! read as zero and take memory again only when written, so halo rows cost memory only while
//! they are in use.

use std::ops::Range;

/// `len` zeros in a fresh allocation, marked for huge pages where it is large
/// ([`graph_partition::pages::huge_capacity`]): for the per-vertex buffers whose rows are read
/// at random (an aggregation's neighbour rows) and all written at each use.
pub(crate) fn zeroed(len: usize) -> Vec<f32> {
    let mut values = graph_partition::pages::huge_capacity(len);
    values.resize(len, 0.0);
    values
}

/// Blocks smaller than this many bytes are zeroed by writing: the system call would cost more
/// than the writes, and so would the page faults when the block is written again soon.
pub(crate) const MIN_RELEASE_BYTES: usize = 1 << 20;

/// Sets every value of `values` to `0.0`. The whole memory pages inside the block are released
/// to the operating system where it supports that (Linux), the rest are written.
pub(crate) fn zero(values: &mut [f32]) {
    // SAFETY: the pointer and length come from a slice borrowed mutably for this call.
    let released = unsafe { release(values.as_mut_ptr(), values.len()) };
    values[..released.start].fill(0.0);
    values[released.end..].fill(0.0);
}

/// Lengthens `values` to `len` values (at most its capacity) with zeros. Where the new values
/// span whole pages and at least [`MIN_RELEASE_BYTES`], those pages are released instead of
/// written, so they take memory only once written, as a fresh allocation's would, while the
/// allocation and its other pages are kept.
///
/// # Panics
/// If `len` exceeds the capacity of `values`.
pub(crate) fn extend_zeroed(values: &mut Vec<f32>, len: usize) {
    let old = values.len();
    assert!(len <= values.capacity(), "extend_zeroed: {len} values past a capacity of {}", values.capacity());
    if len <= old {
        return;
    }
    let spare = &mut values.spare_capacity_mut()[..len - old];
    // SAFETY: the pointer and length come from the spare capacity, borrowed mutably for this
    // call; `MaybeUninit<f32>` has the layout of `f32`.
    let released = unsafe { release(spare.as_mut_ptr().cast::<f32>(), spare.len()) };
    let (head, rest) = spare.split_at_mut(released.start);
    let tail = &mut rest[released.len()..];
    for v in head.iter_mut().chain(tail) {
        v.write(0.0);
    }
    // SAFETY: every value in `old..len` is initialised: the ones outside `released` were
    // written just above, the ones inside lie in pages `release` handed back and checked to
    // read zero (a zero-filled page holds the bits of `0.0`); `len` is within the capacity.
    unsafe { values.set_len(len) };
}

/// Releases the whole pages inside the `len` values at `start` and returns the index range
/// they covered (empty when nothing was released). Afterwards those values read as zero.
///
/// # Safety
/// `start..start + len` must be valid for writes and not accessed through any other pointer
/// during the call.
#[cfg(target_os = "linux")]
unsafe fn release(start: *mut f32, len: usize) -> Range<usize> {
    let bytes = len * 4;
    let Some(page) = page_size().filter(|_| bytes >= MIN_RELEASE_BYTES) else {
        return 0..0;
    };
    let base = start as usize;
    let (first, last) = (base.next_multiple_of(page), (base + bytes) / page * page);
    if last <= first {
        return 0..0;
    }
    // SAFETY: `[first, last)` lies inside the block, which the caller lets this call alone
    // access, and covers whole pages, so no byte outside it is touched. The allocator hands out
    // private anonymous memory (the system allocator, jemalloc and mimalloc all do), where
    // `MADV_DONTNEED` drops the pages and the next access maps zero-filled ones: the values
    // become `0.0`, a valid `f32`, as if written. A shared or file-backed mapping would keep
    // its data instead; the check below catches that.
    let rc = unsafe { libc::madvise(first as *mut libc::c_void, last - first, libc::MADV_DONTNEED) };
    let range = (first - base) / 4..(last - base) / 4;
    // SAFETY: both values lie inside the block and were initialised by the system call above
    // (zero-filled pages) or hold what the mapping kept, read back to tell which.
    let zeroed = rc == 0 && unsafe { start.add(range.start).read() == 0.0 && start.add(range.end - 1).read() == 0.0 };
    if !zeroed {
        return 0..0;
    }
    range
}

// SAFETY: nothing is released here, so the pointer is never used; the function is `unsafe`
// only to keep the Linux version's signature and contract for its callers.
#[cfg(not(target_os = "linux"))]
unsafe fn release(_start: *mut f32, _len: usize) -> Range<usize> {
    0..0
}

/// The size of a memory page, or `None` if the system does not say.
#[cfg(target_os = "linux")]
fn page_size() -> Option<usize> {
    static PAGE: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: `sysconf` only reads a configuration value.
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(size).ok().filter(|&s| s.is_power_of_two() && s >= 4)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fresh blocks read zero, below and above the huge-page threshold.
    #[test]
    fn zeroed_blocks_read_zero() {
        for len in [0, 5, 3 << 20] {
            let values = zeroed(len);
            assert_eq!(values.len(), len);
            assert!(values.iter().all(|&v| v.to_bits() == 0), "{len} values read zero");
        }
    }

    /// Every value in the zeroed range reads zero and no value outside it changes, for blocks
    /// that start and end inside pages and blocks below the release threshold.
    #[test]
    fn zero_clears_exactly_the_block() {
        for (len, from, to) in [(3_000_000, 1_234_567, 2_999_999), (3_000_000, 7, 3_000_000), (4096, 100, 4000)] {
            let mut values: Vec<f32> = (0..len).map(|i| i as f32 + 1.0).collect();
            zero(&mut values[from..to]);
            for (i, &v) in values.iter().enumerate() {
                let want = if (from..to).contains(&i) { 0.0 } else { i as f32 + 1.0 };
                assert_eq!(v, want, "value {i} of a block zeroed over {from}..{to}");
            }
        }
    }

    /// A large block is released rather than written (Linux), reads zero, and holds what is
    /// written to it afterwards.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_large_block_is_released_and_reads_zero() {
        let mut values = vec![1.0f32; 4 << 20];
        // SAFETY: a block inside `values`, borrowed mutably here.
        let released = unsafe { release(values[1..].as_mut_ptr(), values.len() - 1) };
        assert!(released.len() * 4 >= (16 << 20) - 2 * page_size().unwrap(), "released {released:?}");
        assert!(values[1 + released.start..1 + released.end].iter().all(|&v| v == 0.0));
        assert_eq!(values[0], 1.0, "the value before the block is kept");
        // Written again, the pages are backed again and hold what was written.
        values.fill(2.0);
        assert!(values.iter().all(|&v| v == 2.0));
    }

    /// Lengthening inside the capacity keeps the allocation and the values there, and the new
    /// values read zero, for extensions above and below the release threshold; a spare
    /// capacity written before (not zero) shows that the released pages were not left as they
    /// were.
    #[test]
    fn extend_zeroed_keeps_the_allocation_and_reads_zero() {
        for (kept, len) in [(1_000_000, 3_000_000), (10, 20), (5, 5)] {
            let mut values = vec![7.0f32; 3_000_000];
            values.truncate(kept);
            let ptr = values.as_ptr();
            extend_zeroed(&mut values, len);
            assert_eq!((values.len(), values.as_ptr()), (len, ptr));
            assert!(values[..kept].iter().all(|&v| v == 7.0), "kept values, {kept}..{len}");
            assert!(values[kept..].iter().all(|&v| v == 0.0), "new values, {kept}..{len}");
        }
    }
}
