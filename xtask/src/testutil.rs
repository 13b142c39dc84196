//! Test fixtures: OGB-shaped zips built in a temp dir, and a loopback HTTP/1.1 server that
//! honours (or, on request, ignores or breaks) `Range`. Nothing here touches the network.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread;

use flate2::Compression;
use flate2::write::GzEncoder;
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipWriter};

/// Gzips `text`, as OGB stores every CSV.
pub fn gz(text: &str) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
    enc.write_all(text.as_bytes()).unwrap();
    enc.finish().unwrap()
}

/// Writes a deflated zip holding `entries` (name, contents); parent folders get their own entries,
/// as in OGB's zips.
pub fn write_zip(path: &Path, entries: &[(String, Vec<u8>)]) {
    let mut zip = ZipWriter::new(File::create(path).unwrap());
    let options = SimpleFileOptions::default().compression_method(CompressionMethod::Deflated);
    let mut dirs: Vec<String> = Vec::new();
    for (name, data) in entries {
        for (i, _) in name.match_indices('/') {
            let dir = &name[..=i];
            if !dirs.iter().any(|d| d == dir) {
                zip.add_directory(dir, options).unwrap();
                dirs.push(dir.to_owned());
            }
        }
        zip.start_file(name.as_str(), options).unwrap();
        zip.write_all(data).unwrap();
    }
    zip.finish().unwrap();
}

/// A tiny ogbn-arxiv in OGB's zip layout (`arxiv/raw/*.csv.gz`, `arxiv/split/time/*.csv.gz`),
/// minus the files named in `omit` (relative to `arxiv/`).
pub fn arxiv_entries(omit: &[&str]) -> Vec<(String, Vec<u8>)> {
    let files = [
        ("raw/edge.csv.gz", "0,1\n1,2\n2,0\n"),
        ("raw/node-feat.csv.gz", "0.5,1.0,-0.25\n0.0,0.0,1.0\n1.0,2.0,3.0\n"),
        ("raw/node-label.csv.gz", "3\n0\n1\n"),
        ("raw/node_year.csv.gz", "2015\n2018\n2019\n"),
        ("raw/num-node-list.csv.gz", "3\n"),
        ("raw/num-edge-list.csv.gz", "3\n"),
        ("split/time/train.csv.gz", "0\n"),
        ("split/time/valid.csv.gz", "1\n"),
        ("split/time/test.csv.gz", "2\n"),
    ];
    let mut entries: Vec<(String, Vec<u8>)> = files
        .iter()
        .filter(|(name, _)| !omit.contains(name))
        .map(|(name, text)| (format!("arxiv/{name}"), gz(text)))
        .collect();
    entries.push(("arxiv/RELEASE_v1.txt".to_owned(), b"ogbn-arxiv fixture\n".to_vec()));
    entries
}

/// How the loopback server answers one connection.
#[derive(Debug, Clone, Copy)]
pub enum Behaviour {
    /// 206 for a satisfiable `Range`, 416 past the end, 200 without one.
    Honour,
    /// Always 200 with the whole body, whatever `Range` says.
    Ignore,
    /// Like `Honour`, but the connection drops after this many body bytes.
    CutAfter(usize),
    /// 404.
    NotFound,
}

/// A server answering one connection per scripted [`Behaviour`], then stopping.
pub struct Server {
    pub url: String,
    ranges: Arc<Mutex<Vec<Option<String>>>>,
}

impl Server {
    /// The `Range` header of each request served so far (`None` where there was none).
    pub fn ranges(&self) -> Vec<Option<String>> {
        self.ranges.lock().unwrap().clone()
    }
}

/// Serves `body` on 127.0.0.1 at an ephemeral port, following `script`.
pub fn serve(body: Vec<u8>, script: Vec<Behaviour>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/dataset.zip", listener.local_addr().unwrap());
    let ranges = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&ranges);
    thread::spawn(move || {
        for behaviour in script {
            let (mut stream, _) = listener.accept().unwrap();
            let range = read_range_header(&mut BufReader::new(&stream));
            seen.lock().unwrap().push(range.clone());
            let start = range.as_deref().and_then(|r| r.strip_prefix("bytes=")?.strip_suffix('-')?.parse().ok());
            let len = body.len();
            let (head, slice) = match (behaviour, start) {
                (Behaviour::NotFound, _) => ("HTTP/1.1 404 Not Found\r\n".to_owned(), &body[..0]),
                (Behaviour::Honour | Behaviour::CutAfter(_), Some(s)) if s >= len => {
                    (format!("HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{len}\r\n"), &body[..0])
                }
                (Behaviour::Honour | Behaviour::CutAfter(_), Some(s)) => (
                    format!("HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {s}-{}/{len}\r\n", len - 1),
                    &body[s..],
                ),
                _ => ("HTTP/1.1 200 OK\r\n".to_owned(), &body[..]),
            };
            let sent = match behaviour {
                Behaviour::CutAfter(n) => &slice[..n.min(slice.len())],
                _ => slice,
            };
            let head = format!("{head}Content-Length: {}\r\nConnection: close\r\n\r\n", slice.len());
            // The client may hang up early (e.g. on a 416); that is not the server's failure.
            let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(sent));
        }
    });
    Server { url, ranges }
}

/// Reads request lines up to the blank line; returns the `Range` header's value, if any.
fn read_range_header(reader: &mut impl BufRead) -> Option<String> {
    let mut range = None;
    let mut line = String::new();
    while reader.read_line(&mut line).unwrap() > 0 && line != "\r\n" {
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("range")
        {
            range = Some(value.trim().to_owned());
        }
        line.clear();
    }
    range
}
