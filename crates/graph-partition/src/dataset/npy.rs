//! NumPy arrays: `.npy` files and `.npz` archives (a zip of `.npy` members, stored or
//! deflated), as PyG, DGL and OGB export them.
//!
//! Supported: format versions 1 to 3, C order, and the little-endian dtypes `bool`, `uint8`,
//! `int32`, `int64`, `float32` and `float64`. Anything else (Fortran order, big-endian, other
//! dtypes) is refused with the dtype named. Arrays are read in chunks of elements converted as
//! they come, so an array larger than memory streams through. Malformed input gives an
//! [`NpyError`], never a panic, and no allocation larger than the data actually read.

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, Write};
use std::path::{Path, PathBuf};

use zip::ZipArchive;
use zip::read::ZipFile;
use zip::write::SimpleFileOptions;

use super::error::{DatasetError, NpyError};

const MAGIC: &[u8; 6] = b"\x93NUMPY";
/// Longest header accepted (NumPy itself writes a few hundred bytes at most).
const MAX_HEADER_BYTES: usize = 1 << 16;
/// Elements a `read_all` reserves up front; beyond that the vector grows with the data read.
const MAX_RESERVE: u64 = 1 << 20;

/// An element type Halo reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    Bool,
    U8,
    I32,
    I64,
    F32,
    F64,
}

impl Dtype {
    /// The dtype of a header's `descr`, `None` when it is not supported.
    fn parse(descr: &str) -> Option<Self> {
        Some(match descr {
            "|b1" | "<b1" => Self::Bool,
            "|u1" | "<u1" => Self::U8,
            "<i4" => Self::I32,
            "<i8" => Self::I64,
            "<f4" => Self::F32,
            "<f8" => Self::F64,
            _ => return None,
        })
    }

    fn descr(self) -> &'static str {
        match self {
            Self::Bool => "|b1",
            Self::U8 => "|u1",
            Self::I32 => "<i4",
            Self::I64 => "<i8",
            Self::F32 => "<f4",
            Self::F64 => "<f8",
        }
    }

    /// NumPy's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Bool => "bool",
            Self::U8 => "uint8",
            Self::I32 => "int32",
            Self::I64 => "int64",
            Self::F32 => "float32",
            Self::F64 => "float64",
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Self::Bool | Self::U8 => 1,
            Self::I32 | Self::F32 => 4,
            Self::I64 | Self::F64 => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, Self::F32 | Self::F64)
    }
}

/// A NumPy shape as Python prints it: `(2708, 1433)`, `(2708,)`.
pub fn shape_text(shape: &[u64]) -> String {
    match shape {
        [one] => format!("({one},)"),
        _ => format!("({})", shape.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")),
    }
}

/// An array being read: its header has been parsed, its elements follow.
pub struct NpyReader<R> {
    reader: R,
    dtype: Dtype,
    shape: Vec<u64>,
    len: u64,
    read: u64,
    bytes: Vec<u8>,
}

impl<R: Read> NpyReader<R> {
    /// Reads and checks the header.
    pub fn new(mut reader: R) -> Result<Self, NpyError> {
        let mut lead = [0u8; 8];
        read_header_bytes(&mut reader, &mut lead)?;
        if &lead[..6] != MAGIC {
            return Err(NpyError::BadMagic);
        }
        let header_len = match lead[6] {
            1 => {
                let mut len = [0u8; 2];
                read_header_bytes(&mut reader, &mut len)?;
                u16::from_le_bytes(len) as usize
            }
            2 | 3 => {
                let mut len = [0u8; 4];
                read_header_bytes(&mut reader, &mut len)?;
                u32::from_le_bytes(len) as usize
            }
            _ => return Err(NpyError::Version(lead[6], lead[7])),
        };
        if header_len > MAX_HEADER_BYTES {
            return Err(NpyError::Header(format!("{header_len} bytes long")));
        }
        let mut text = vec![0u8; header_len];
        read_header_bytes(&mut reader, &mut text)?;
        let text = String::from_utf8(text).map_err(|_| NpyError::Header("not text".into()))?;
        let (descr, fortran, shape) = parse_header(&text)?;
        let dtype = Dtype::parse(&descr).ok_or(NpyError::Dtype(descr))?;
        if fortran {
            return Err(NpyError::FortranOrder);
        }
        let len = shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d));
        let len = len
            .filter(|&len| len.checked_mul(dtype.size() as u64).is_some_and(|b| usize::try_from(b).is_ok()))
            .ok_or_else(|| NpyError::TooLarge(shape_text(&shape)))?;
        Ok(Self { reader, dtype, shape, len, read: 0, bytes: Vec::new() })
    }

    pub fn dtype(&self) -> Dtype {
        self.dtype
    }

    pub fn shape(&self) -> &[u64] {
        &self.shape
    }

    /// Elements in the array.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Elements read so far (the flat index of the next one).
    pub fn position(&self) -> u64 {
        self.read
    }

    /// Appends up to `max` more elements, as `f32` (`float64` rounded, integers converted).
    /// Returns how many were appended, 0 at the end.
    pub fn read_f32(&mut self, max: usize, out: &mut Vec<f32>) -> Result<usize, NpyError> {
        self.read_with(max, out, |v| v as f32, |v| v as f32)
    }

    /// Appends up to `max` more elements as `f64` (exact for every supported dtype but
    /// `int64` beyond 2^53).
    pub fn read_f64(&mut self, max: usize, out: &mut Vec<f64>) -> Result<usize, NpyError> {
        self.read_with(max, out, |v| v as f64, |v| v)
    }

    /// Appends up to `max` more elements of an integer or bool array as `i64`.
    pub fn read_i64(&mut self, max: usize, out: &mut Vec<i64>) -> Result<usize, NpyError> {
        if self.dtype.is_float() {
            return Err(NpyError::NotInteger { found: self.dtype.name() });
        }
        self.read_with(max, out, |v| v, |v| v as i64)
    }

    /// The whole (rest of the) array as `f64`.
    pub fn read_all_f64(&mut self) -> Result<Vec<f64>, NpyError> {
        let mut out = Vec::with_capacity((self.len - self.read).min(MAX_RESERVE) as usize);
        while self.read_f64(1 << 16, &mut out)? > 0 {}
        Ok(out)
    }

    /// The whole (rest of the) array as `i64`.
    pub fn read_all_i64(&mut self) -> Result<Vec<i64>, NpyError> {
        let mut out = Vec::with_capacity((self.len - self.read).min(MAX_RESERVE) as usize);
        while self.read_i64(1 << 16, &mut out)? > 0 {}
        Ok(out)
    }

    fn read_with<T>(
        &mut self,
        max: usize,
        out: &mut Vec<T>,
        int: impl Fn(i64) -> T,
        float: impl Fn(f64) -> T,
    ) -> Result<usize, NpyError> {
        let count = (self.len - self.read).min(max as u64) as usize;
        let size = self.dtype.size();
        self.bytes.resize(count * size, 0);
        let got = fill(&mut self.reader, &mut self.bytes)?;
        if got < self.bytes.len() {
            return Err(NpyError::Truncated { read: self.read + (got / size) as u64, expected: self.len });
        }
        let bytes = &self.bytes;
        match self.dtype {
            Dtype::Bool | Dtype::U8 => out.extend(bytes.iter().map(|&b| int(b as i64))),
            Dtype::I32 => out.extend(bytes.chunks_exact(4).map(|c| int(i32::from_le_bytes(word(c)) as i64))),
            Dtype::I64 => out.extend(bytes.chunks_exact(8).map(|c| int(i64::from_le_bytes(word(c))))),
            Dtype::F32 => out.extend(bytes.chunks_exact(4).map(|c| float(f32::from_le_bytes(word(c)) as f64))),
            Dtype::F64 => out.extend(bytes.chunks_exact(8).map(|c| float(f64::from_le_bytes(word(c))))),
        }
        self.read += count as u64;
        Ok(count)
    }
}

/// A fixed-size word from a chunk of exactly that size.
fn word<const N: usize>(chunk: &[u8]) -> [u8; N] {
    chunk.try_into().expect("chunks_exact yields chunks of the word size")
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn fill(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match reader.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

fn read_header_bytes(reader: &mut impl Read, buf: &mut [u8]) -> Result<(), NpyError> {
    if fill(reader, buf)? < buf.len() {
        return Err(NpyError::Header("the file ends inside the header".into()));
    }
    Ok(())
}

/// A value in the header's Python dict literal.
enum Value {
    Str(String),
    Ident(String),
    Tuple(Vec<u64>),
    /// A list (a structured dtype), kept as text to name it in the error.
    Raw(String),
}

/// `descr`, `fortran_order` and `shape` of a header such as
/// `{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }`.
fn parse_header(text: &str) -> Result<(String, bool, Vec<u64>), NpyError> {
    let mut p = Cursor { s: text.as_bytes(), i: 0 };
    p.expect(b'{')?;
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    loop {
        p.skip_blank();
        if p.eat(b'}') {
            break;
        }
        let Value::Str(key) = p.value()? else { return Err(p.error("expected a quoted key")) };
        p.skip_blank();
        p.expect(b':')?;
        p.skip_blank();
        match (key.as_str(), p.value()?) {
            ("descr", Value::Str(s) | Value::Raw(s)) => descr = Some(s),
            ("fortran_order", Value::Ident(b)) if b == "True" || b == "False" => fortran = Some(b == "True"),
            ("shape", Value::Tuple(dims)) => shape = Some(dims),
            ("descr" | "fortran_order" | "shape", _) => return Err(p.error(&format!("bad value for `{key}`"))),
            _ => {}
        }
        p.skip_blank();
        if !p.eat(b',') {
            p.skip_blank();
            p.expect(b'}')?;
            break;
        }
    }
    match (descr, fortran, shape) {
        (Some(d), Some(f), Some(s)) => Ok((d, f, s)),
        _ => Err(NpyError::Header("needs `descr`, `fortran_order` and `shape`".into())),
    }
}

struct Cursor<'a> {
    s: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, b: u8) -> bool {
        let hit = self.peek() == Some(b);
        self.i += usize::from(hit);
        hit
    }

    fn expect(&mut self, b: u8) -> Result<(), NpyError> {
        if self.eat(b) { Ok(()) } else { Err(self.error(&format!("expected `{}`", b as char))) }
    }

    fn skip_blank(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_whitespace()) {
            self.i += 1;
        }
    }

    fn error(&self, what: &str) -> NpyError {
        NpyError::Header(format!("{what} at byte {}", self.i))
    }

    fn value(&mut self) -> Result<Value, NpyError> {
        match self.peek() {
            Some(q @ (b'\'' | b'"')) => {
                self.i += 1;
                let start = self.i;
                while self.peek().is_some_and(|b| b != q) {
                    self.i += 1;
                }
                let text = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
                self.expect(q)?;
                Ok(Value::Str(text))
            }
            Some(b'(') => {
                self.i += 1;
                let mut dims = Vec::new();
                loop {
                    self.skip_blank();
                    if self.eat(b')') {
                        return Ok(Value::Tuple(dims));
                    }
                    let start = self.i;
                    while self.peek().is_some_and(|b| b.is_ascii_digit()) {
                        self.i += 1;
                    }
                    let digits = std::str::from_utf8(&self.s[start..self.i]).unwrap_or_default();
                    dims.push(digits.parse().map_err(|_| self.error("expected a dimension"))?);
                    self.skip_blank();
                    if !self.eat(b',') {
                        self.skip_blank();
                        self.expect(b')')?;
                        return Ok(Value::Tuple(dims));
                    }
                }
            }
            Some(b'[') => {
                let start = self.i;
                let mut depth = 0usize;
                while let Some(b) = self.peek() {
                    self.i += 1;
                    depth = match b {
                        b'[' | b'(' => depth + 1,
                        b']' | b')' => depth.saturating_sub(1),
                        _ => depth,
                    };
                    if depth == 0 {
                        return Ok(Value::Raw(String::from_utf8_lossy(&self.s[start..self.i]).into_owned()));
                    }
                }
                Err(self.error("unclosed list"))
            }
            Some(b) if b.is_ascii_alphabetic() => {
                let start = self.i;
                while self.peek().is_some_and(|b| b.is_ascii_alphanumeric()) {
                    self.i += 1;
                }
                Ok(Value::Ident(String::from_utf8_lossy(&self.s[start..self.i]).into_owned()))
            }
            _ => Err(self.error("expected a value")),
        }
    }
}

/// An `.npz` archive open for reading arrays by name.
pub struct Npz {
    path: PathBuf,
    archive: ZipArchive<BufReader<File>>,
}

impl Npz {
    pub fn open(path: &Path) -> Result<Self, DatasetError> {
        let file = File::open(path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => DatasetError::MissingFile { path: path.to_path_buf(), what: "file".into() },
            _ => DatasetError::io(path, e),
        })?;
        let archive = ZipArchive::new(BufReader::with_capacity(1 << 20, file))
            .map_err(|e| DatasetError::io(path, io::Error::other(format!("not a readable .npz (zip) archive: {e}"))))?;
        Ok(Self { path: path.to_path_buf(), archive })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The names of the arrays, sorted.
    pub fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> =
            self.archive.file_names().filter_map(|n| n.ok()?.strip_suffix(".npy").map(str::to_string)).collect();
        keys.sort();
        keys
    }

    pub fn contains(&self, key: &str) -> bool {
        self.archive.index_for_name(&format!("{key}.npy")).is_some()
    }

    /// Opens array `key`; a missing one is an error listing the arrays there are.
    pub fn array(&mut self, key: &str) -> Result<NpyReader<ZipFile<'_, BufReader<File>>>, DatasetError> {
        if !self.contains(key) {
            let what = format!("array `{key}` (the archive holds: {})", self.keys().join(", "));
            return Err(DatasetError::MissingFile { path: self.path.clone(), what });
        }
        let path = self.path.clone();
        let member = self.archive.by_name(&format!("{key}.npy")).map_err(|e| DatasetError::Npy {
            path: path.clone(),
            array: Some(key.to_string()),
            error: Box::new(NpyError::Io(io::Error::other(e.to_string()))),
        })?;
        NpyReader::new(member).map_err(|error| DatasetError::Npy {
            path,
            array: Some(key.to_string()),
            error: Box::new(error),
        })
    }
}

/// Opens a `.npy` file.
pub fn open_npy(path: &Path) -> Result<NpyReader<BufReader<File>>, DatasetError> {
    let file = File::open(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => DatasetError::MissingFile { path: path.to_path_buf(), what: "file".into() },
        _ => DatasetError::io(path, e),
    })?;
    NpyReader::new(BufReader::with_capacity(1 << 20, file)).map_err(|error| DatasetError::Npy {
        path: path.to_path_buf(),
        array: None,
        error: Box::new(error),
    })
}

/// A Rust type stored as one of the supported dtypes.
pub trait Element: Copy {
    const DTYPE: Dtype;
    fn put(self, out: &mut Vec<u8>);
}

macro_rules! element {
    ($t:ty, $d:expr, $v:ident => $bytes:expr) => {
        impl Element for $t {
            const DTYPE: Dtype = $d;
            fn put(self, out: &mut Vec<u8>) {
                let $v = self;
                out.extend_from_slice(&$bytes);
            }
        }
    };
}

element!(bool, Dtype::Bool, v => [u8::from(v)]);
element!(u8, Dtype::U8, v => [v]);
element!(i32, Dtype::I32, v => v.to_le_bytes());
element!(i64, Dtype::I64, v => v.to_le_bytes());
element!(f32, Dtype::F32, v => v.to_le_bytes());
element!(f64, Dtype::F64, v => v.to_le_bytes());

/// The header NumPy writes (version 1.0, padded so the data starts 64-byte aligned).
pub fn npy_header(dtype: Dtype, shape: &[u64]) -> Vec<u8> {
    let dict = format!("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", dtype.descr(), shape_text(shape));
    let unpadded = MAGIC.len() + 4 + dict.len() + 1;
    let pad = unpadded.next_multiple_of(64) - unpadded;
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&((dict.len() + pad + 1) as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.extend(std::iter::repeat_n(b' ', pad));
    out.push(b'\n');
    out
}

/// Writes a whole array as a `.npy` stream.
pub fn write_npy<T: Element>(w: &mut impl Write, shape: &[u64], data: &[T]) -> io::Result<()> {
    w.write_all(&npy_header(T::DTYPE, shape))?;
    write_values(w, data)
}

fn write_values<T: Element>(w: &mut impl Write, data: &[T]) -> io::Result<()> {
    let mut bytes = Vec::with_capacity(data.len().min(1 << 16) * T::DTYPE.size());
    for chunk in data.chunks(1 << 16) {
        bytes.clear();
        chunk.iter().for_each(|&v| v.put(&mut bytes));
        w.write_all(&bytes)?;
    }
    Ok(())
}

/// Writes an `.npz` archive the way `numpy.savez` (stored) or `numpy.savez_compressed`
/// (deflated) does: one `KEY.npy` member per array. Large arrays are written in pieces:
/// [`NpzWriter::start`], then [`NpzWriter::values`] as often as needed.
pub struct NpzWriter<W: Write + Seek> {
    zip: zip::ZipWriter<W>,
    options: SimpleFileOptions,
}

impl NpzWriter<File> {
    pub fn create(path: &Path, compressed: bool) -> io::Result<Self> {
        Ok(Self::new(File::create(path)?, compressed))
    }
}

impl<W: Write + Seek> NpzWriter<W> {
    pub fn new(w: W, compressed: bool) -> Self {
        let method = if compressed { zip::CompressionMethod::Deflated } else { zip::CompressionMethod::Stored };
        Self { zip: zip::ZipWriter::new(w), options: SimpleFileOptions::default().compression_method(method) }
    }

    /// Adds a whole array.
    pub fn add<T: Element>(&mut self, key: &str, shape: &[u64], data: &[T]) -> io::Result<()> {
        self.start::<T>(key, shape)?;
        self.values(data)
    }

    /// Starts array `key` of `shape`; its elements follow through [`NpzWriter::values`].
    pub fn start<T: Element>(&mut self, key: &str, shape: &[u64]) -> io::Result<()> {
        let bytes = shape.iter().product::<u64>().saturating_mul(T::DTYPE.size() as u64);
        let options = self.options.large_file(bytes >= u32::MAX as u64 / 2);
        self.zip.start_file(format!("{key}.npy"), options).map_err(io::Error::other)?;
        self.zip.write_all(&npy_header(T::DTYPE, shape))
    }

    /// The next elements of the array started last.
    pub fn values<T: Element>(&mut self, data: &[T]) -> io::Result<()> {
        write_values(&mut self.zip, data)
    }

    pub fn finish(self) -> io::Result<W> {
        self.zip.finish().map_err(io::Error::other)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn npy<T: Element>(shape: &[u64], data: &[T]) -> Vec<u8> {
        let mut out = Vec::new();
        write_npy(&mut out, shape, data).unwrap();
        out
    }

    /// A file with a hand-written header dict and raw data bytes.
    fn with_header(dict: &str, data: &[u8]) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        out.extend_from_slice(dict.as_bytes());
        out.extend_from_slice(data);
        out
    }

    #[test]
    fn every_dtype_round_trips() {
        let bytes = npy(&[2, 3], &[1.5f32, -2.0, 0.0, 7.25, 1e-30, 3.0]);
        let mut r = NpyReader::new(&bytes[..]).unwrap();
        assert_eq!((r.dtype(), r.shape(), r.len()), (Dtype::F32, &[2u64, 3][..], 6));
        let mut out = Vec::new();
        assert_eq!(r.read_f32(4, &mut out).unwrap(), 4);
        assert_eq!(r.read_f32(4, &mut out).unwrap(), 2);
        assert_eq!(r.read_f32(4, &mut out).unwrap(), 0);
        assert_eq!(out, [1.5, -2.0, 0.0, 7.25, 1e-30, 3.0]);

        let f64s = [0.1f64, f64::NAN, 2.0];
        let got = NpyReader::new(&npy(&[3], &f64s)[..]).unwrap().read_all_f64().unwrap();
        assert_eq!(got[0].to_bits(), 0.1f64.to_bits());
        assert!(got[1].is_nan());
        let ints = [-1i64, 1 << 40, 3];
        assert_eq!(NpyReader::new(&npy(&[3], &ints)[..]).unwrap().read_all_i64().unwrap(), ints);
        let ints = [-7i32, 9];
        assert_eq!(NpyReader::new(&npy(&[2, 1], &ints)[..]).unwrap().read_all_i64().unwrap(), [-7, 9]);
        let bytes = [0u8, 255];
        assert_eq!(NpyReader::new(&npy(&[2], &bytes)[..]).unwrap().read_all_i64().unwrap(), [0, 255]);
        let mask = [true, false, true];
        let bytes = npy(&[3], &mask);
        let mut r = NpyReader::new(&bytes[..]).unwrap();
        assert_eq!(r.dtype(), Dtype::Bool);
        assert_eq!(r.read_all_i64().unwrap(), [1, 0, 1]);
        // Integers read as floats too; floats do not read as ids.
        assert_eq!(NpyReader::new(&npy(&[1], &[5i64])[..]).unwrap().read_all_f64().unwrap(), [5.0]);
        let err = NpyReader::new(&npy(&[1], &[5.0f64])[..]).unwrap().read_all_i64().unwrap_err();
        assert_eq!(err.to_string(), "has dtype float64; node ids need an integer dtype");
    }

    #[test]
    fn headers_numpy_writes_are_read() {
        // Version 1.0 as numpy 1.x writes it, with a scalar and an empty array.
        let scalar = with_header("{'descr': '<i8', 'fortran_order': False, 'shape': (), }\n", &[0; 8]);
        assert_eq!(NpyReader::new(&scalar[..]).unwrap().len(), 1);
        let empty = with_header("{\"descr\":\"|u1\",\"fortran_order\":False,\"shape\":(0, 4)}", &[]);
        assert!(NpyReader::new(&empty[..]).unwrap().is_empty());
        let header = npy_header(Dtype::F64, &[2708, 1433]);
        assert_eq!(header.len() % 64, 0, "data starts aligned");
    }

    #[test]
    fn unsupported_layouts_are_named() {
        let cases = [
            ("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", "unsupported dtype `>f4`"),
            ("{'descr': '<f2', 'fortran_order': False, 'shape': (1,), }", "unsupported dtype `<f2`"),
            ("{'descr': '<U10', 'fortran_order': False, 'shape': (1,), }", "unsupported dtype `<U10`"),
            (
                "{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (1,), }",
                "unsupported dtype `[('a', '<i4')]`",
            ),
            ("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", "Fortran-order"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", "more elements"),
            ("{'descr': '<f4', 'shape': (1,), }", "needs `descr`"),
            ("{'descr': '<f4', 'fortran_order': None, 'shape': (1,), }", "bad value for `fortran_order`"),
            ("{'descr': '<f4', 'fortran_order': 0, 'shape': (1,), }", "expected a value at byte 34"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (1, x), }", "expected a dimension"),
            ("'descr'", "expected `{`"),
        ];
        for (dict, expected) in cases {
            let err = NpyReader::new(&with_header(dict, &[0; 16])[..]).err().unwrap_or_else(|| panic!("{dict} read"));
            assert!(err.to_string().contains(expected), "{dict}: {err}");
        }
        let mut bytes = npy(&[1], &[1.0f32]);
        bytes[6] = 4;
        assert_eq!(
            NpyReader::new(&bytes[..]).err().unwrap().to_string(),
            ".npy format version 4.0 is not supported (1.0, 2.0 and 3.0 are)"
        );
        assert!(matches!(NpyReader::new(&b"PK\x03\x04 not npy"[..]), Err(NpyError::BadMagic)));
    }

    /// Files NumPy 2.4 wrote (`numpy.savez_compressed` and `numpy.save`), so the reader is
    /// checked against NumPy's own output and not only against the writer here.
    #[test]
    fn files_numpy_wrote_are_read() {
        let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src/dataset/testdata"));
        let mut npz = Npz::open(&dir.join("numpy_savez_compressed.npz")).unwrap();
        assert_eq!(npz.keys(), ["edge_index", "train_mask", "x", "y"]);
        {
            let mut edges = npz.array("edge_index").unwrap();
            assert_eq!((edges.dtype(), edges.shape()), (Dtype::I64, &[2u64, 3][..]));
            assert_eq!(edges.read_all_i64().unwrap(), [0, 1, 2, 1, 2, 0]);
        }
        let mut values = Vec::new();
        npz.array("x").unwrap().read_f32(100, &mut values).unwrap();
        assert_eq!(values, [0.1, -2.5, 3.0, 1e-3, 7.0, 8.5]);
        assert_eq!(npz.array("train_mask").unwrap().read_all_i64().unwrap(), [1, 0, 0]);
        let mut r = open_npy(&dir.join("numpy_float64.npy")).unwrap();
        assert_eq!((r.dtype(), r.shape()), (Dtype::F64, &[2u64, 3][..]));
        assert_eq!(r.read_all_f64().unwrap(), [0.1, 0.2, 0.3, 1.0, 2.0, 3.0]);
    }

    #[test]
    fn truncated_data_says_how_far_it_got() {
        let bytes = npy(&[4], &[1i32, 2, 3, 4]);
        let mut r = NpyReader::new(&bytes[..bytes.len() - 6]).unwrap();
        let err = r.read_all_i64().unwrap_err();
        assert_eq!(err.to_string(), "ends after 2 of its 4 elements (truncated)");
    }

    #[test]
    fn npz_members_stored_and_deflated() {
        let dir = tempfile::tempdir().unwrap();
        for compressed in [false, true] {
            let path = dir.path().join(format!("a{compressed}.npz"));
            let mut w = NpzWriter::create(&path, compressed).unwrap();
            w.add("x", &[2, 2], &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
            w.start::<i64>("y", &[3]).unwrap();
            w.values(&[7i64]).unwrap();
            w.values(&[8i64, 9]).unwrap();
            w.finish().unwrap();
            let mut npz = Npz::open(&path).unwrap();
            assert_eq!(npz.keys(), ["x", "y"]);
            assert_eq!(npz.array("y").unwrap().read_all_i64().unwrap(), [7, 8, 9]);
            assert_eq!(npz.array("x").unwrap().read_all_f64().unwrap(), [1.0, 2.0, 3.0, 4.0]);
            let err = npz.array("z").err().unwrap().to_string();
            assert!(err.contains("array `z` (the archive holds: x, y)") && err.contains(".npz"), "{err}");
        }
        let not_zip = dir.path().join("bad.npz");
        std::fs::write(&not_zip, b"hello").unwrap();
        let err = Npz::open(&not_zip).err().unwrap().to_string();
        assert!(err.contains("bad.npz") && err.contains("not a readable .npz"), "{err}");
    }

    proptest! {
        /// Corrupt or truncated headers and data give an error, never a panic or a huge
        /// allocation.
        #[test]
        fn corrupt_npy_never_panics(edits in proptest::collection::vec((0usize..200, any::<u8>()), 0..6), cut in 0usize..260) {
            let mut bytes = npy(&[3, 5], &[0.5f64; 15]);
            for (at, value) in edits {
                if let Some(b) = bytes.get_mut(at) {
                    *b = value;
                }
            }
            bytes.truncate(cut.min(bytes.len()));
            if let Ok(mut r) = NpyReader::new(&bytes[..]) {
                let _ = r.read_all_f64();
            }
        }
    }
}
