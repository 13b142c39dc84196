//! HTTP(S) download into `<dest>.part`, resumed with a `Range` request when that file exists.
//!
//! The decision of what to do with the server's answer is the pure function [`plan`], so it can be
//! tested without a network; [`fetch`] only moves bytes.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::progress::{Progress, format_bytes};

/// What to do with a response to a (possibly ranged) GET, given `part_len` bytes already on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// The body continues the partial file at `offset`; the whole file has `total` bytes if known.
    Append { offset: u64, total: Option<u64> },
    /// The body is the whole file (no range was asked for, or the server ignored it).
    Restart { total: Option<u64> },
    /// The partial file already holds every byte: nothing to transfer.
    Complete,
    /// The partial file is longer than the server's file, so it is not a prefix of it: discard it.
    Discard,
}

/// The `Range` header value asking for everything after the first `part_len` bytes.
pub fn range_header(part_len: u64) -> Option<String> {
    (part_len > 0).then(|| format!("bytes={part_len}-"))
}

/// Decides how to treat a response with `status`, `Content-Range` and `Content-Length` headers.
pub fn plan(part_len: u64, status: u16, content_range: Option<&str>, content_length: Option<u64>) -> Result<Plan> {
    match status {
        200 => Ok(Plan::Restart { total: content_length }),
        206 => {
            let header = content_range.context("HTTP 206 without a Content-Range header")?;
            let (range, total) = parse_content_range(header)?;
            let (start, _) = range.with_context(|| format!("HTTP 206 with unsatisfied Content-Range `{header}`"))?;
            if start != part_len {
                bail!("asked to resume at byte {part_len} but the server sent bytes from {start} (`{header}`)");
            }
            Ok(Plan::Append { offset: start, total: total.or(content_length.map(|n| start + n)) })
        }
        416 if part_len > 0 => match content_range.map(parse_content_range).transpose()? {
            Some((_, Some(total))) if total == part_len => Ok(Plan::Complete),
            _ => Ok(Plan::Discard),
        },
        _ => bail!("HTTP {status}"),
    }
}

/// The byte range (inclusive) and the full length from `bytes a-b/total`, `bytes a-b/*` or `bytes */total`.
type ContentRange = (Option<(u64, u64)>, Option<u64>);

fn parse_content_range(header: &str) -> Result<ContentRange> {
    let bad = || format!("malformed Content-Range `{header}`");
    let spec = header.trim().strip_prefix("bytes ").with_context(bad)?;
    let (range, total) = spec.split_once('/').with_context(bad)?;
    let total = if total == "*" { None } else { Some(total.parse().with_context(bad)?) };
    let range = if range == "*" {
        None
    } else {
        let (a, b) = range.split_once('-').with_context(bad)?;
        Some((a.parse().with_context(bad)?, b.parse().with_context(bad)?))
    };
    Ok((range, total))
}

/// The partial file that a download of `dest` writes to.
pub fn part_path(dest: &Path) -> PathBuf {
    let mut name = dest.file_name().unwrap_or_default().to_os_string();
    name.push(".part");
    dest.with_file_name(name)
}

/// An HTTP agent for large downloads: no overall timeout (a 57 GB zip takes hours), but bounded
/// waits for the connection and the response headers, and status codes handed to [`plan`].
/// `env_proxy` honours `HTTPS_PROXY` and friends; tests turn it off to stay on loopback.
pub fn agent(env_proxy: bool) -> ureq::Agent {
    let mut config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(Duration::from_secs(30)))
        .timeout_recv_response(Some(Duration::from_secs(60)))
        .user_agent(concat!("halo-xtask/", env!("CARGO_PKG_VERSION")));
    if !env_proxy {
        config = config.proxy(None);
    }
    ureq::Agent::new_with_config(config.build())
}

/// Downloads `url` to `dest` via `<dest>.part`, resuming from that file when it exists. On an
/// interrupted transfer the partial file stays, so running again picks up where this one stopped.
pub fn fetch(agent: &ureq::Agent, url: &str, dest: &Path, label: &str) -> Result<()> {
    let part = part_path(dest);
    if !transfer(agent, url, &part, label)? {
        eprintln!("{label}: {} is not a prefix of the server's file; starting over", part.display());
        fs::remove_file(&part).with_context(|| format!("removing {}", part.display()))?;
        if !transfer(agent, url, &part, label)? {
            bail!("{url}: the server rejected a request for the whole file");
        }
    }
    fs::rename(&part, dest).with_context(|| format!("renaming {} to {}", part.display(), dest.display()))
}

/// One request; returns false when the partial file must be discarded ([`Plan::Discard`]).
fn transfer(agent: &ureq::Agent, url: &str, part: &Path, label: &str) -> Result<bool> {
    let part_len = match fs::metadata(part) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
        Err(e) => return Err(e).with_context(|| format!("reading {}", part.display())),
    };
    let mut request = agent.get(url);
    if let Some(range) = range_header(part_len) {
        request = request.header("Range", range);
    }
    let response = request.call().with_context(|| format!("requesting {url}"))?;
    let content_range = response.headers().get("content-range").and_then(|v| v.to_str().ok());
    let decision = plan(part_len, response.status().as_u16(), content_range, response.body().content_length())
        .with_context(|| format!("downloading {url}"))?;
    let (file, offset, total) = match decision {
        Plan::Complete => {
            eprintln!("{label}: {} already holds the whole file", part.display());
            return Ok(true);
        }
        Plan::Discard => return Ok(false),
        Plan::Restart { total } => {
            if part_len > 0 {
                eprintln!("{label}: the server does not resume downloads; starting over");
            }
            (File::create(part), 0, total)
        }
        Plan::Append { offset, total } => {
            if offset > 0 {
                eprintln!("{label}: resuming {} at {}", part.display(), format_bytes(offset as f64));
            }
            (OpenOptions::new().create(true).append(true).open(part), offset, total)
        }
    };
    let file = file.with_context(|| format!("opening {}", part.display()))?;
    let mut progress = Progress::new(label, offset, total);
    let written = copy_body(response.into_body().into_reader(), file, &mut progress)
        .with_context(|| format!("downloading {url} into {} (rerun to resume)", part.display()))?;
    progress.finish();
    if let Some(total) = total
        && offset + written != total
    {
        bail!(
            "downloading {url}: the connection closed at byte {} of {total}; rerun to resume from {}",
            offset + written,
            part.display()
        );
    }
    Ok(true)
}

/// Streams `body` into `file`, keeping every byte received even when the stream fails midway.
fn copy_body(mut body: impl Read, file: File, progress: &mut Progress) -> Result<u64> {
    let before = progress.done();
    let mut out = BufWriter::with_capacity(1 << 20, progress.track(file));
    let outcome = io::copy(&mut body, &mut out);
    // Flush before reporting a read error: the bytes already received are what a resume builds on.
    let file = out.into_inner().map_err(|e| e.into_error())?.into_inner();
    file.sync_all()?;
    let written = progress.done() - before;
    outcome.with_context(|| format!("connection failed after {} this run", format_bytes(written as f64)))?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{Behaviour, serve};

    #[test]
    fn range_is_asked_only_for_a_non_empty_part() {
        assert_eq!(range_header(0), None);
        assert_eq!(range_header(1234).as_deref(), Some("bytes=1234-"));
    }

    #[test]
    fn plan_covers_every_server_answer() {
        assert_eq!(plan(0, 200, None, Some(10)).unwrap(), Plan::Restart { total: Some(10) });
        // A server that ignores Range sends the whole file with 200: start over.
        assert_eq!(plan(4, 200, None, None).unwrap(), Plan::Restart { total: None });
        assert_eq!(plan(4, 206, Some("bytes 4-9/10"), Some(6)).unwrap(), Plan::Append { offset: 4, total: Some(10) });
        assert_eq!(plan(4, 206, Some("bytes 4-9/*"), Some(6)).unwrap(), Plan::Append { offset: 4, total: Some(10) });
        assert_eq!(plan(10, 416, Some("bytes */10"), None).unwrap(), Plan::Complete);
        assert_eq!(plan(12, 416, Some("bytes */10"), None).unwrap(), Plan::Discard);
        assert_eq!(plan(12, 416, None, None).unwrap(), Plan::Discard);

        let wrong_start = plan(4, 206, Some("bytes 0-9/10"), None).unwrap_err().to_string();
        assert!(wrong_start.contains("resume at byte 4") && wrong_start.contains("from 0"), "{wrong_start}");
        assert!(plan(4, 206, None, None).unwrap_err().to_string().contains("without a Content-Range"));
        assert!(plan(4, 206, Some("bytes x-9/10"), None).unwrap_err().to_string().contains("malformed"));
        assert!(plan(0, 416, Some("bytes */10"), None).unwrap_err().to_string().contains("416"));
        assert!(plan(0, 404, None, None).unwrap_err().to_string().contains("HTTP 404"));
    }

    #[test]
    fn part_path_appends_a_suffix() {
        assert_eq!(part_path(Path::new("d/ogbn-arxiv.zip")), Path::new("d/ogbn-arxiv.zip.part"));
    }

    fn payload() -> Vec<u8> {
        (0..200_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect()
    }

    #[test]
    fn fetches_a_whole_file_without_leaving_a_part() {
        let dir = tempfile::tempdir().unwrap();
        let body = payload();
        let server = serve(body.clone(), vec![Behaviour::Honour]);
        let dest = dir.path().join("f.zip");
        fetch(&agent(false), &server.url, &dest, "test").unwrap();
        assert_eq!(fs::read(&dest).unwrap(), body);
        assert!(!part_path(&dest).exists());
        assert_eq!(server.ranges(), vec![None]);
    }

    #[test]
    fn resumes_from_an_existing_part_with_a_range_request() {
        let dir = tempfile::tempdir().unwrap();
        let body = payload();
        let dest = dir.path().join("f.zip");
        fs::write(part_path(&dest), &body[..70_000]).unwrap();
        let server = serve(body.clone(), vec![Behaviour::Honour]);
        fetch(&agent(false), &server.url, &dest, "test").unwrap();
        assert_eq!(fs::read(&dest).unwrap(), body);
        assert_eq!(server.ranges(), vec![Some("bytes=70000-".to_owned())]);
    }

    #[test]
    fn starts_over_when_the_server_ignores_range() {
        let dir = tempfile::tempdir().unwrap();
        let body = payload();
        let dest = dir.path().join("f.zip");
        fs::write(part_path(&dest), b"stale bytes from another file").unwrap();
        let server = serve(body.clone(), vec![Behaviour::Ignore]);
        fetch(&agent(false), &server.url, &dest, "test").unwrap();
        assert_eq!(fs::read(&dest).unwrap(), body);
    }

    #[test]
    fn an_interrupted_download_keeps_its_bytes_and_resumes_on_the_next_run() {
        let dir = tempfile::tempdir().unwrap();
        let body = payload();
        let dest = dir.path().join("f.zip");
        let server = serve(body.clone(), vec![Behaviour::CutAfter(50_000), Behaviour::Honour]);
        let err = fetch(&agent(false), &server.url, &dest, "test").unwrap_err();
        assert!(format!("{err:#}").contains("rerun to resume"), "{err:#}");
        assert!(!dest.exists());
        assert_eq!(fs::read(part_path(&dest)).unwrap(), &body[..50_000]);

        fetch(&agent(false), &server.url, &dest, "test").unwrap();
        assert_eq!(fs::read(&dest).unwrap(), body);
        assert_eq!(server.ranges(), vec![None, Some("bytes=50000-".to_owned())]);
    }

    #[test]
    fn a_complete_part_is_finished_without_a_transfer_and_an_overlong_one_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let body = payload();
        let dest = dir.path().join("f.zip");
        fs::write(part_path(&dest), &body).unwrap();
        let server = serve(body.clone(), vec![Behaviour::Honour]);
        fetch(&agent(false), &server.url, &dest, "test").unwrap();
        assert_eq!(fs::read(&dest).unwrap(), body);

        let mut overlong = body.clone();
        overlong.extend_from_slice(b"trailing garbage");
        fs::write(part_path(&dest), &overlong).unwrap();
        let server = serve(body.clone(), vec![Behaviour::Honour, Behaviour::Honour]);
        fetch(&agent(false), &server.url, &dest, "test").unwrap();
        assert_eq!(fs::read(&dest).unwrap(), body);
        assert_eq!(server.ranges(), vec![Some(format!("bytes={}-", overlong.len())), None]);
    }

    #[test]
    fn an_http_error_names_the_status_and_url() {
        let dir = tempfile::tempdir().unwrap();
        let server = serve(Vec::new(), vec![Behaviour::NotFound]);
        let err = fetch(&agent(false), &server.url, &dir.path().join("f.zip"), "test").unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains("HTTP 404") && msg.contains(&server.url), "{msg}");
    }
}
