//! Where an upload's bytes go in a page-locked staging buffer that is reused round-robin (the
//! copy stream's uploads, `Device::copy_device`): each copy is placed after the previous one,
//! at [`ALIGN`]; a copy that does not fit in what is left restarts the buffer at 0 once the
//! copies in flight are done; a copy larger than the whole buffer grows it (doubling, at least
//! to the copy) once they are done. So a copy never overwrites bytes a copy in flight reads.

/// Placement alignment of a copy in the buffer, in bytes (DMA-friendly).
pub const ALIGN: usize = 256;
/// The first buffer's size, in bytes.
const FIRST: usize = 1 << 20;

/// Where the next copy goes, and what must happen first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// At this offset; nothing to wait for.
    At(usize),
    /// At offset 0, after waiting for the copies in flight.
    Restart,
    /// At offset 0 of a new buffer of `capacity` bytes, allocated after waiting for the copies
    /// in flight.
    Grow { capacity: usize },
}

/// The staging buffer's cursor.
#[derive(Debug, Clone, Default)]
pub struct Arena {
    capacity: usize,
    used: usize,
}

impl Arena {
    /// Places a copy of `bytes` bytes.
    pub fn place(&mut self, bytes: usize) -> Place {
        let start = self.used.next_multiple_of(ALIGN);
        if bytes > self.capacity {
            self.capacity = bytes.max(self.capacity * 2).max(FIRST);
            self.used = bytes;
            return Place::Grow { capacity: self.capacity };
        }
        match start.checked_add(bytes).filter(|&end| end <= self.capacity) {
            Some(end) => {
                self.used = end;
                Place::At(start)
            }
            None => {
                self.used = bytes;
                Place::Restart
            }
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Between two waits (restart or growth) the copies lie inside the buffer, aligned and
    /// disjoint; growth at least doubles and holds the copy.
    #[test]
    fn copies_between_waits_are_disjoint_aligned_and_inside() {
        let mut arena = Arena::default();
        let mut in_flight: Vec<(usize, usize)> = Vec::new();
        let mut state = 12345u64;
        for i in 0..5000 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let bytes = match i % 97 {
                0 => (state >> 40) as usize % (8 << 20),
                _ => (state >> 44) as usize % 300_000,
            };
            let before = arena.capacity();
            let offset = match arena.place(bytes) {
                Place::At(offset) => offset,
                Place::Restart => {
                    in_flight.clear();
                    0
                }
                Place::Grow { capacity } => {
                    assert!(capacity >= bytes && capacity >= 2 * before && capacity == arena.capacity());
                    in_flight.clear();
                    0
                }
            };
            assert_eq!(offset % ALIGN, 0);
            assert!(offset + bytes <= arena.capacity(), "copy {i}");
            for &(a, len) in &in_flight {
                assert!(offset >= a + len || offset + bytes <= a, "copy {i} overlaps one in flight");
            }
            in_flight.push((offset, bytes));
        }
    }

    #[test]
    fn small_copies_fill_the_first_buffer_before_restarting() {
        let mut arena = Arena::default();
        assert_eq!(arena.place(10), Place::Grow { capacity: FIRST });
        assert_eq!(arena.place(10), Place::At(ALIGN));
        assert_eq!(arena.place(FIRST - 2 * ALIGN), Place::At(2 * ALIGN));
        assert_eq!(arena.place(1), Place::Restart);
        assert_eq!(arena.place(0), Place::At(ALIGN));
    }
}
