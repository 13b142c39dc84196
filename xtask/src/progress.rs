//! Plain stderr progress lines (bytes done / total, rate): no terminal tricks, so logs stay readable.

use std::io::{self, Write};
use std::time::{Duration, Instant};

/// How often a line is printed while bytes keep arriving.
const INTERVAL: Duration = Duration::from_secs(2);

/// Counts bytes for one transfer and prints a line at most every [`INTERVAL`].
pub struct Progress {
    label: String,
    total: Option<u64>,
    done: u64,
    /// Bytes already present when this run started (a resumed download): not part of the rate.
    resumed_from: u64,
    started: Instant,
    last_print: Instant,
}

impl Progress {
    /// Starts counting at `done` bytes (non-zero when resuming) out of `total`, if known.
    pub fn new(label: impl Into<String>, done: u64, total: Option<u64>) -> Self {
        let now = Instant::now();
        Self { label: label.into(), total, done, resumed_from: done, started: now, last_print: now }
    }

    /// Records `n` more bytes, printing a line if the last one is old enough.
    pub fn advance(&mut self, n: u64) {
        self.done += n;
        if self.last_print.elapsed() >= INTERVAL {
            self.last_print = Instant::now();
            eprintln!("{}", self.line());
        }
    }

    /// Bytes counted so far, including any resumed prefix.
    pub fn done(&self) -> u64 {
        self.done
    }

    /// Wraps `inner` so that every byte written to it is counted here.
    pub fn track<W: Write>(&mut self, inner: W) -> Tracked<'_, W> {
        Tracked { inner, progress: self }
    }

    /// Prints the closing line.
    pub fn finish(&self) {
        eprintln!("{} done", self.line());
    }

    fn line(&self) -> String {
        let rate = (self.done - self.resumed_from) as f64 / self.started.elapsed().as_secs_f64().max(1e-3);
        format_line(&self.label, self.done, self.total, rate)
    }
}

/// A writer that reports the bytes it accepts to a [`Progress`].
pub struct Tracked<'a, W> {
    inner: W,
    progress: &'a mut Progress,
}

impl<W> Tracked<'_, W> {
    /// The wrapped writer.
    pub fn into_inner(self) -> W {
        self.inner
    }
}

impl<W: Write> Write for Tracked<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.progress.advance(n as u64);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// `label: 12.0 MiB / 80.0 MiB (15.0%), 4.0 MiB/s`; the total and percentage only when known.
pub fn format_line(label: &str, done: u64, total: Option<u64>, bytes_per_s: f64) -> String {
    let amount = match total {
        Some(t) if t > 0 => {
            format!(
                "{} / {} ({:.1}%)",
                format_bytes(done as f64),
                format_bytes(t as f64),
                100.0 * done as f64 / t as f64
            )
        }
        _ => format_bytes(done as f64),
    };
    format!("{label}: {amount}, {}/s", format_bytes(bytes_per_s))
}

/// Binary units with one decimal: `1.5 KiB`, `57.0 GiB`.
pub fn format_bytes(bytes: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{value:.0} B") } else { format!("{value:.1} {}", UNITS[unit]) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracked_writer_counts_what_it_passes_on() {
        let mut progress = Progress::new("t", 10, None);
        let mut sink = Vec::new();
        let mut w = progress.track(&mut sink);
        w.write_all(b"hello").unwrap();
        w.flush().unwrap();
        assert_eq!(progress.done(), 15);
        assert_eq!(sink, b"hello");
    }

    #[test]
    fn bytes_use_binary_units() {
        assert_eq!(format_bytes(0.0), "0 B");
        assert_eq!(format_bytes(1023.0), "1023 B");
        assert_eq!(format_bytes(1536.0), "1.5 KiB");
        assert_eq!(format_bytes(57.0 * 1024.0 * 1024.0 * 1024.0), "57.0 GiB");
    }

    #[test]
    fn line_shows_total_and_share_only_when_known() {
        let mib = 1024 * 1024;
        assert_eq!(
            format_line("ogbn-arxiv", 12 * mib, Some(80 * mib), 4.0 * mib as f64),
            "ogbn-arxiv: 12.0 MiB / 80.0 MiB (15.0%), 4.0 MiB/s"
        );
        assert_eq!(format_line("x", 2048, None, 0.0), "x: 2.0 KiB, 0 B/s");
    }
}
