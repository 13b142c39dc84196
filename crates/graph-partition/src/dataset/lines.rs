//! Streaming, parallel reading of line files, gzip-compressed (a name ending in `.gz`) or not.
//!
//! A reader thread inflates the file into blocks of whole lines while rayon parses the previous
//! block, so decompression (inherently sequential) overlaps parsing. Memory stays bounded by a
//! few blocks plus the parsed output. Errors carry the 1-based line number.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::sync::mpsc;

use flate2::read::MultiGzDecoder;
use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;

use super::error::{DatasetError, ParseErrorKind};

/// Decompressed bytes per block handed to the parser.
const BLOCK_BYTES: usize = 8 << 20;
/// Smallest slice of a block one rayon task parses.
const MIN_PIECE_BYTES: usize = 64 << 10;
/// Files (compressed) at least this large get a progress bar when one is requested.
const PROGRESS_MIN_BYTES: u64 = 8 << 20;

/// A failure at a 1-based line of the text being parsed.
type LineFailure = (u64, ParseErrorKind);

/// Values parsed from a piece of text and its number of lines.
type Parsed<T> = Result<(Vec<T>, u64), LineFailure>;

/// A block of complete lines, each ending in `\n`, and how many there are.
struct Block {
    data: Vec<u8>,
    lines: u64,
}

/// Parses one line (without its terminator) and appends the values to `out`.
pub(crate) trait LineParser: Sync {
    type Item: Send;
    fn parse_line(&self, line: &str, out: &mut Vec<Self::Item>) -> Result<(), ParseErrorKind>;
}

/// Reads a whole line file with `parser`, returning the values and the number of lines.
/// `capacity` is the expected number of values (a hint that saves regrowing large outputs).
pub(crate) fn read_all<P: LineParser>(
    path: &Path,
    progress: bool,
    capacity: usize,
    parser: &P,
) -> Result<(Vec<P::Item>, u64), DatasetError> {
    read_all_after(path, false, progress, capacity, parser)
}

/// [`read_all`], skipping the first line when `header` says it is one (the count of lines
/// returned includes it, and error line numbers count it).
pub(crate) fn read_all_after<P: LineParser>(
    path: &Path,
    header: bool,
    progress: bool,
    capacity: usize,
    parser: &P,
) -> Result<(Vec<P::Item>, u64), DatasetError> {
    // Cap the hint at 8 values per compressed byte, so a lying first line or node count
    // cannot force a huge allocation up front; files that compress better just regrow.
    let plausible = std::fs::metadata(path).map_or(0, |m| m.len() as usize).saturating_mul(8);
    let mut all = Vec::with_capacity(capacity.min(plausible));
    let lines = for_each_chunk_after(path, header, progress, parser, |mut values, _| {
        all.append(&mut values);
        Ok(())
    })?;
    Ok((all, lines))
}

/// The first line of a text file (without its terminator), `None` if the file is empty.
/// Used to learn the column count before the parallel parse.
pub(crate) fn first_line(path: &Path) -> Result<Option<String>, DatasetError> {
    line_at(path, 0)
}

/// Line `index` (0-based) of a text file, without its terminator; `None` past the end.
pub(crate) fn line_at(path: &Path, index: u64) -> Result<Option<String>, DatasetError> {
    let mut reader = BufReader::new(decoded(path, open(path)?));
    let mut bytes = Vec::new();
    for _ in 0..=index {
        bytes.clear();
        reader.read_until(b'\n', &mut bytes).map_err(|e| DatasetError::io(path, e))?;
        if bytes.is_empty() {
            return Ok(None);
        }
    }
    let text = String::from_utf8(bytes).map_err(|_| parse_error(path, index + 1, ParseErrorKind::NotUtf8))?;
    Ok(Some(trim_line_end(&text).to_string()))
}

fn open(path: &Path) -> Result<File, DatasetError> {
    File::open(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => DatasetError::MissingFile { path: path.to_path_buf(), what: "file".into() },
        _ => DatasetError::io(path, e),
    })
}

/// The contents of `raw`, inflated when `path` names a gzip file.
fn decoded<'a>(path: &Path, raw: impl Read + Send + 'a) -> Box<dyn Read + Send + 'a> {
    if path.extension().is_some_and(|x| x == "gz") { Box::new(MultiGzDecoder::new(raw)) } else { Box::new(raw) }
}

/// Like [`read_all`], but hands each parsed block to `sink` with the 0-based index of its
/// first line instead of collecting everything. Returns the number of lines.
pub(crate) fn for_each_chunk<P: LineParser>(
    path: &Path,
    progress: bool,
    parser: &P,
    sink: impl FnMut(Vec<P::Item>, u64) -> Result<(), DatasetError>,
) -> Result<u64, DatasetError> {
    for_each_chunk_after(path, false, progress, parser, sink)
}

/// [`for_each_chunk`], skipping a first line that is a `header`.
fn for_each_chunk_after<P: LineParser>(
    path: &Path,
    header: bool,
    progress: bool,
    parser: &P,
    mut sink: impl FnMut(Vec<P::Item>, u64) -> Result<(), DatasetError>,
) -> Result<u64, DatasetError> {
    let file = open(path)?;
    let size = file.metadata().map_err(|e| DatasetError::io(path, e))?.len();
    let bar = (progress && size >= PROGRESS_MIN_BYTES).then(|| progress_bar(path, size));
    let raw: Box<dyn Read + Send> = match &bar {
        Some(bar) => Box::new(bar.wrap_read(file)),
        None => Box::new(file),
    };
    let mut decoder = BufReader::with_capacity(1 << 20, decoded(path, BufReader::with_capacity(1 << 20, raw)));
    let mut skipped = 0u64;
    if header {
        decoder.read_until(b'\n', &mut Vec::new()).map_err(|e| DatasetError::io(path, e))?;
        skipped = 1;
    }

    let (block_tx, block_rx) = mpsc::sync_channel::<io::Result<Block>>(2);
    let (recycle_tx, recycle_rx) = mpsc::channel::<Vec<u8>>();
    // Everything the consumer holds is moved into the scope closure: an early error return
    // drops `block_rx`, which unblocks and stops the reader thread before the scope joins it.
    let result = std::thread::scope(move |scope| {
        scope.spawn(move || produce_blocks(decoder, &block_tx, &recycle_rx));
        let mut line = skipped;
        for block in block_rx.iter() {
            let block = block.map_err(|e| DatasetError::io(path, e))?;
            let values = parse_block(&block.data, parser).map_err(|(at, kind)| parse_error(path, line + at, kind))?;
            line += block.lines;
            sink(values, line - block.lines)?;
            // The reader may already be gone after an error; losing the buffer then is fine.
            let _ = recycle_tx.send(block.data);
        }
        Ok(line)
    });
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    result
}

fn parse_error(path: &Path, line: u64, kind: ParseErrorKind) -> DatasetError {
    DatasetError::Parse { path: path.to_path_buf(), line, kind }
}

fn progress_bar(path: &Path, size: u64) -> ProgressBar {
    let bar = ProgressBar::new(size);
    let style = ProgressStyle::with_template("{msg} [{bar:30}] {binary_bytes}/{binary_total_bytes} ({eta})")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    bar.set_style(style);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    bar.set_message(name);
    bar
}

/// Inflates `reader` into blocks of whole lines. Stops quietly when the consumer hangs up.
fn produce_blocks(
    mut reader: impl Read,
    blocks: &mpsc::SyncSender<io::Result<Block>>,
    recycled: &mpsc::Receiver<Vec<u8>>,
) {
    let mut carry: Vec<u8> = Vec::new();
    loop {
        let mut data = recycled.try_recv().unwrap_or_else(|_| Vec::with_capacity(BLOCK_BYTES + (1 << 16)));
        data.clear();
        data.append(&mut carry);
        let eof = match fill_block(&mut reader, &mut data) {
            Ok(eof) => eof,
            Err(e) => {
                let _ = blocks.send(Err(e));
                return;
            }
        };
        if eof {
            if data.last().is_some_and(|&b| b != b'\n') {
                data.push(b'\n');
            }
        } else {
            let cut = data.iter().rposition(|&b| b == b'\n').expect("fill_block stops after a newline") + 1;
            carry.extend_from_slice(&data[cut..]);
            data.truncate(cut);
        }
        if !data.is_empty() {
            let lines = data.iter().filter(|&&b| b == b'\n').count() as u64;
            if blocks.send(Ok(Block { data, lines })).is_err() {
                return;
            }
        }
        if eof {
            return;
        }
    }
}

/// Reads until `data` holds at least a block's worth and a newline, or the input ends.
/// Returns whether the input ended.
fn fill_block(reader: &mut impl Read, data: &mut Vec<u8>) -> io::Result<bool> {
    let mut searched = 0;
    loop {
        let want = BLOCK_BYTES.saturating_sub(data.len()).max(1 << 16);
        let got = reader.by_ref().take(want as u64).read_to_end(data)?;
        if got == 0 {
            return Ok(true);
        }
        if data.len() >= BLOCK_BYTES && data[searched..].contains(&b'\n') {
            return Ok(false);
        }
        if data.len() >= BLOCK_BYTES {
            searched = data.len();
        }
    }
}

/// A line without its `\n` or `\r\n` terminator.
fn trim_line_end(line: &str) -> &str {
    let line = line.strip_suffix('\n').unwrap_or(line);
    line.strip_suffix('\r').unwrap_or(line)
}

/// Parses a block of `\n`-terminated lines in parallel. On failure returns the 1-based line
/// number within the block.
fn parse_block<P: LineParser>(block: &[u8], parser: &P) -> Result<Vec<P::Item>, LineFailure> {
    let pieces = split_pieces(block);
    let parsed: Vec<Parsed<P::Item>> = pieces.par_iter().map(|piece| parse_piece(piece, parser)).collect();
    let mut out = Vec::new();
    let mut line = 0u64;
    for result in parsed {
        match result {
            Ok((mut values, lines)) => {
                if out.is_empty() {
                    out = values;
                } else {
                    out.append(&mut values);
                }
                line += lines;
            }
            Err((at, kind)) => return Err((line + at, kind)),
        }
    }
    Ok(out)
}

/// Cuts a block into roughly equal pieces at line boundaries, a few per thread.
fn split_pieces(block: &[u8]) -> Vec<&[u8]> {
    let target = (block.len() / (rayon::current_num_threads() * 4)).max(MIN_PIECE_BYTES);
    let mut pieces = Vec::new();
    let mut rest = block;
    while rest.len() > target {
        match rest[target..].iter().position(|&b| b == b'\n') {
            Some(p) => {
                let (piece, tail) = rest.split_at(target + p + 1);
                pieces.push(piece);
                rest = tail;
            }
            None => break,
        }
    }
    if !rest.is_empty() {
        pieces.push(rest);
    }
    pieces
}

fn parse_piece<P: LineParser>(piece: &[u8], parser: &P) -> Parsed<P::Item> {
    let text = std::str::from_utf8(piece).map_err(|e| {
        let line = piece[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count() as u64 + 1;
        (line, ParseErrorKind::NotUtf8)
    })?;
    let mut out = Vec::new();
    let mut lines = 0u64;
    for line in text.split_terminator('\n') {
        lines += 1;
        let line = trim_line_end(line);
        if line.is_empty() {
            return Err((lines, ParseErrorKind::EmptyLine));
        }
        parser.parse_line(line, &mut out).map_err(|kind| (lines, kind))?;
    }
    Ok((out, lines))
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use flate2::Compression;
    use flate2::write::GzEncoder;

    use super::*;
    use crate::dataset::numbers::parse_u64;

    fn gz_file(dir: &Path, text: &[u8]) -> std::path::PathBuf {
        let path = dir.join("f.csv.gz");
        let mut enc = GzEncoder::new(File::create(&path).unwrap(), Compression::fast());
        enc.write_all(text).unwrap();
        enc.finish().unwrap();
        path
    }

    struct Ints;

    impl LineParser for Ints {
        type Item = u64;
        fn parse_line(&self, line: &str, out: &mut Vec<u64>) -> Result<(), ParseErrorKind> {
            out.push(parse_u64(line).ok_or_else(|| ParseErrorKind::malformed(line, "integer"))?);
            Ok(())
        }
    }

    #[test]
    fn reads_many_blocks_in_order_with_line_numbers() {
        let dir = tempfile::tempdir().unwrap();
        // About 3 blocks of text, no trailing newline, CRLF line ends.
        let n = 3 * BLOCK_BYTES as u64 / 9;
        let mut text: Vec<u8> = (0..n).flat_map(|i| format!("{i:07}\r\n").into_bytes()).collect();
        text.truncate(text.len() - 2);
        let path = gz_file(dir.path(), &text);
        let mut starts = Vec::new();
        let mut all = Vec::new();
        let lines = for_each_chunk(&path, false, &Ints, |v, first| {
            starts.push(first);
            all.extend(v);
            Ok(())
        })
        .unwrap();
        assert_eq!(lines, n);
        assert!(starts.len() >= 3, "{starts:?}");
        assert!(all.iter().copied().eq(0..n));

        // A bad value deep inside a later block reports its exact line.
        let bad_line = n - 5;
        let mut text: Vec<u8> = (0..n).flat_map(|i| format!("{i:07}\n").into_bytes()).collect();
        let at = (bad_line as usize - 1) * 8;
        text[at] = b'x';
        let path = gz_file(dir.path(), &text);
        let err = read_all(&path, false, 0, &Ints).unwrap_err();
        match err {
            DatasetError::Parse { line, kind: ParseErrorKind::MalformedNumber { .. }, .. } => {
                assert_eq!(line, bad_line)
            }
            other => panic!("unexpected {other}"),
        }
    }

    #[test]
    fn empty_lines_and_bad_utf8_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = gz_file(dir.path(), b"1\n2\n\n4\n");
        let err = read_all(&path, false, 0, &Ints).unwrap_err();
        assert!(matches!(err, DatasetError::Parse { line: 3, kind: ParseErrorKind::EmptyLine, .. }), "{err}");
        let path = gz_file(dir.path(), b"1\n2\xff\n");
        let err = read_all(&path, false, 0, &Ints).unwrap_err();
        assert!(matches!(err, DatasetError::Parse { line: 2, kind: ParseErrorKind::NotUtf8, .. }), "{err}");
    }

    #[test]
    fn first_line_of_empty_and_crlf_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = gz_file(dir.path(), b"");
        let (values, lines) = read_all(&path, false, 0, &Ints).unwrap();
        assert_eq!((values.len(), lines), (0, 0));
        assert_eq!(first_line(&path).unwrap(), None);
        let path = gz_file(dir.path(), b"1,2,3\r\n4\n");
        assert_eq!(first_line(&path).unwrap().as_deref(), Some("1,2,3"));
    }

    #[test]
    fn not_gzip_is_an_io_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plain.csv.gz");
        std::fs::write(&path, b"1\n2\n").unwrap();
        let err = read_all(&path, false, 0, &Ints).unwrap_err();
        assert!(matches!(err, DatasetError::Io { .. }), "{err}");
        assert!(err.to_string().contains("plain.csv.gz"), "{err}");
    }
}
