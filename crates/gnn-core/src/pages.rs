//! Zeroing large blocks by handing their memory pages back to the operating system.
//!
//! A worker's halo rows are written only while an exchange's rows are in flight: pulled rows
//! are read by one aggregation, pushed gradients are zeroed once sent. Writing zeros would keep
//! their pages resident for the rest of the run (the buffers are pooled and reused), and at
//! ogbn-products scale those rows outnumber the owned ones several times over. Released pages
//! read as zero and take memory again only when written, so halo rows cost memory only while
//! they are in use.

use std::ops::Range;

/// Blocks smaller than this many bytes are zeroed by writing: the system call would cost more
/// than the writes, and so would the page faults when the block is written again soon.
pub(crate) const MIN_RELEASE_BYTES: usize = 1 << 20;

/// Sets every value of `values` to `0.0`. The whole memory pages inside the block are released
/// to the operating system where it supports that (Linux), the rest are written.
pub(crate) fn zero(values: &mut [f32]) {
    let released = release(values);
    values[..released.start].fill(0.0);
    values[released.end..].fill(0.0);
}

/// Releases the whole pages inside `values` and returns the index range they covered (empty
/// when nothing was released). Afterwards those values read as zero.
#[cfg(target_os = "linux")]
fn release(values: &mut [f32]) -> Range<usize> {
    let bytes = std::mem::size_of_val(values);
    let Some(page) = page_size().filter(|_| bytes >= MIN_RELEASE_BYTES) else {
        return 0..0;
    };
    let start = values.as_mut_ptr() as usize;
    let (first, last) = (start.next_multiple_of(page), (start + bytes) / page * page);
    if last <= first {
        return 0..0;
    }
    // SAFETY: `[first, last)` lies inside `values`, which is borrowed mutably, so no other
    // reference can observe the change, and it covers whole pages, so no byte outside `values`
    // is touched. The allocator hands out private anonymous memory (the system allocator,
    // jemalloc and mimalloc all do), where `MADV_DONTNEED` drops the pages and the next access
    // maps zero-filled ones: the values become `0.0`, a valid `f32`, as if written. A shared or
    // file-backed mapping would keep its data instead; the check below catches that.
    let rc = unsafe { libc::madvise(first as *mut libc::c_void, last - first, libc::MADV_DONTNEED) };
    let range = (first - start) / 4..(last - start) / 4;
    if rc != 0 || values[range.start] != 0.0 || values[range.end - 1] != 0.0 {
        return 0..0;
    }
    range
}

#[cfg(not(target_os = "linux"))]
fn release(_values: &mut [f32]) -> Range<usize> {
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
        let released = release(&mut values[1..]);
        assert!(released.len() * 4 >= (16 << 20) - 2 * page_size().unwrap(), "released {released:?}");
        assert!(values[1 + released.start..1 + released.end].iter().all(|&v| v == 0.0));
        assert_eq!(values[0], 1.0, "the value before the block is kept");
        // Written again, the pages are backed again and hold what was written.
        values.fill(2.0);
        assert!(values.iter().all(|&v| v == 2.0));
    }
}
