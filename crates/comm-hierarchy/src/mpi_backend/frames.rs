//! How one of Halo's messages crosses MPI: a header of 8 bytes (the message's length, little
//! endian), then the message in chunks of at most [`CHUNK`] bytes, every piece with the
//! message's tag. MPI does not overtake between a sender and a receiver on one tag, so the
//! pieces arrive in order, and the receiver lays each chunk at its offset in one buffer.
//!
//! Why chunks: Open MPI over TCP sends a message above its eager limit (64 KiB by default)
//! only after the receiver has matched it (the rendezvous), and moves it in one pipelined put;
//! two ranks doing that to each other at once, or several ranks through one host's link, fill
//! the link only part of the time (measured on the emulated cluster: an all-to-all of 4 MiB
//! per pair took 1.3-2.0x its link time). A chunk within the eager limit goes out as soon as
//! it is posted, and each rank's progress thread keeps its chunks moving. A rank raises the
//! TCP transport's eager limit to a chunk ([`super::TCP_DEFAULTS`]), unless told otherwise.

/// The largest chunk of a message, in bytes.
pub(super) const CHUNK: usize = 4 << 20;

/// Bytes of the header that opens a message.
pub(super) const HEADER: usize = 8;

/// The header of a message of `len` bytes.
pub(super) fn header(len: usize) -> [u8; HEADER] {
    (len as u64).to_le_bytes()
}

/// The length a header announces, or `None` for a piece that is not a header.
pub(super) fn announced(piece: &[u8]) -> Option<usize> {
    let bytes: [u8; HEADER] = piece.try_into().ok()?;
    usize::try_from(u64::from_le_bytes(bytes)).ok()
}

/// The byte ranges of a message of `len` bytes that travel as its chunks, in order.
pub(super) fn chunks(len: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    (0..len.div_ceil(CHUNK)).map(move |i| i * CHUNK..((i + 1) * CHUNK).min(len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_travels_as_a_header_and_chunks_that_cover_it_once() {
        assert_eq!(announced(&header(0)), Some(0));
        assert_eq!(announced(&header(CHUNK * 3 + 5)), Some(CHUNK * 3 + 5));
        assert_eq!(announced(&[1, 2, 3]), None, "a chunk is never taken for a header");
        assert_eq!(chunks(0).count(), 0);
        assert!(chunks(10).eq(std::iter::once(0..10)));
        assert!(chunks(CHUNK).eq(std::iter::once(0..CHUNK)));
        let pieces: Vec<_> = chunks(2 * CHUNK + 1).collect();
        assert_eq!(pieces, [0..CHUNK, CHUNK..2 * CHUNK, 2 * CHUNK..2 * CHUNK + 1]);
    }
}
