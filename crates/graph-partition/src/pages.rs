//! Memory pages of large arrays: the huge-page hint for arrays read at random.
//!
//! A row read at random (a neighbour's features, a sampled vertex's adjacency) costs, on 4 KiB
//! pages, a TLB miss and a page walk once the array outgrows what the TLB maps (a few MiB); a
//! 2 MiB page covers hundreds of rows. Linux backs a range with transparent huge pages when it
//! is marked so before it is written (THP in `madvise` mode, the common default).
//!
//! [`huge_capacity`] gives such vectors: the dataset cache's arrays, and gnn-core's per-vertex
//! buffers.

/// Arrays from this many bytes up get the hint: two huge pages, so that at least one whole
/// huge page lies inside whatever the alignment.
pub const MIN_HUGE_BYTES: usize = 4 << 20;

/// Huge pages are 2 MiB on x86-64 and on aarch64 with 4 KiB pages; the hint covers the whole
/// ones inside a block.
#[cfg(target_os = "linux")]
const HUGE_PAGE: usize = 2 << 20;

/// An empty vector with room for `len` values whose allocation, from [`MIN_HUGE_BYTES`] up,
/// is marked for huge pages before anything is written to it. A hint: the vector behaves as
/// `Vec::with_capacity(len)`'s whatever the system does with it (no THP support, THP off).
/// Worth it for arrays read at random and written whole: a huge page is backed whole as soon
/// as any of it is written.
pub fn huge_capacity<T>(len: usize) -> Vec<T> {
    let mut values = Vec::with_capacity(len);
    let bytes = values.capacity().saturating_mul(size_of::<T>());
    if bytes >= MIN_HUGE_BYTES {
        advise(values.as_mut_ptr() as usize, bytes);
    }
    values
}

/// Marks the whole huge pages inside `bytes` bytes at `base`, one allocation's, for huge pages.
#[cfg(target_os = "linux")]
fn advise(base: usize, bytes: usize) {
    let (first, last) = (base.next_multiple_of(HUGE_PAGE), (base + bytes) / HUGE_PAGE * HUGE_PAGE);
    if last > first {
        // SAFETY: `[first, last)` lies inside an allocation that the caller holds, and
        // `MADV_HUGEPAGE` changes only how its pages are backed, never what they hold; a
        // refusal is ignored (the hint is optional).
        unsafe { libc::madvise(first as *mut libc::c_void, last - first, libc::MADV_HUGEPAGE) };
    }
}

#[cfg(not(target_os = "linux"))]
fn advise(_base: usize, _bytes: usize) {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Small and large vectors hold what is pushed; on Linux with transparent huge pages, a
    /// large one's allocation is marked (the kernel lists the hint as `hg` in the `VmFlags` of
    /// its mapping in `/proc/self/smaps`).
    #[test]
    fn large_allocations_ask_for_huge_pages() {
        for len in [0, 5, MIN_HUGE_BYTES / 4 - 1, 3 * MIN_HUGE_BYTES / 4 + 3] {
            let mut values: Vec<f32> = huge_capacity(len);
            assert!(values.is_empty() && values.capacity() >= len);
            values.extend((0..len).map(|i| i as f32));
            assert!(values.iter().enumerate().all(|(i, &v)| v == i as f32), "{len} values");
        }
        // A kernel without transparent huge pages refuses the hint (and has no such folder).
        #[cfg(target_os = "linux")]
        if std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
            let values: Vec<f32> = huge_capacity(3 * MIN_HUGE_BYTES / 4);
            let addr = values.as_ptr() as usize + MIN_HUGE_BYTES;
            let smaps = std::fs::read_to_string("/proc/self/smaps").expect("Linux has /proc/self/smaps");
            let flags = vma_flags(&smaps, addr).expect("the block is mapped");
            assert!(flags.split_whitespace().any(|f| f == "hg"), "VmFlags {flags}");
        }
    }

    /// The `VmFlags` line of the mapping of `/proc/self/smaps` that holds `addr`.
    #[cfg(target_os = "linux")]
    fn vma_flags(smaps: &str, addr: usize) -> Option<&str> {
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ')
                && let Some((lo, hi)) = range.split_once('-')
                && let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            {
                inside = (lo..hi).contains(&addr);
            } else if inside && let Some(flags) = line.strip_prefix("VmFlags:") {
                return Some(flags);
            }
        }
        None
    }
}
