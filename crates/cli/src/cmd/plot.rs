//! `halo plot REPORT.json... --out FILE.svg|png`: the epochs of one or several runs, one colour
//! per report, so what a method saves and what it costs shows at a glance: loss; train,
//! validation and test accuracy; bytes per epoch (intra- and inter-host); modeled communication
//! and epoch time; and every numeric method field (eps, rows sent, bit-widths, tau, ...) that
//! changes in some run (the fields constant across every run, and the per-worker timings, in
//! seconds, which change by the noise of the measured compute, are left out unless asked for).
//! Byte axes start at 0. Each report's line is drawn thinner than the one before it, with markers
//! at staggered epochs, so that runs whose curves coincide all stay visible.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail};
use graph_partition::fs::write_atomic;
use plotters::coord::Shift;
use plotters::prelude::*;
use serde_json::Value;

use super::output::{Place, check_writable, flag_error, refuse_clashes};
use super::reports::{self, LoadedReport};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Reports written by `halo train --report`, drawn one colour each.
    #[arg(value_name = "REPORT.json", required = true, num_args = 1..)]
    reports: Vec<PathBuf>,
    /// The picture: `.svg` or `.png`.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Method fields to draw, by a part of their dotted name (`controller.eps`,
    /// `codec.total.rows_sent_fraction`); repeatable [default: the first ones found that are not
    /// constant across every run].
    #[arg(long = "field", value_name = "NAME")]
    fields: Vec<String>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let mut places: Vec<Place> = args.reports.iter().map(|path| Place::input("report", path)).collect();
    places.push(Place::output("--out", &args.out));
    refuse_clashes(&places)?;
    let reports = reports::load(&args.reports)?;
    let (panels, left_out) = panels(&reports, &args.fields);
    draw(&args.out, &reports, &panels, "--out")?;
    let some = |fields: &[String]| fields.iter().take(5).map(String::as_str).collect::<Vec<_>>().join(", ");
    if !left_out.timings.is_empty() {
        let n = left_out.timings.len();
        eprintln!("{n} method timings (seconds) not drawn (pick them with --field), e.g. {}", some(&left_out.timings));
    }
    if !left_out.constant.is_empty() {
        let n = left_out.constant.len();
        eprintln!("{n} method fields constant across every run not drawn (pick them with --field), e.g. {}", {
            some(&left_out.constant)
        });
    }
    if !left_out.past_max.is_empty() {
        eprintln!(
            "{} method fields not drawn (at most {MAX_METHOD_PANELS}; pick them with --field), e.g. {}",
            left_out.past_max.len(),
            some(&left_out.past_max)
        );
    }
    println!("wrote {}", args.out.display());
    Ok(())
}

/// Method fields drawn at most; a report with more names the rest on stderr.
const MAX_METHOD_PANELS: usize = 9;
const COLUMNS: usize = 3;
const PANEL_SIZE: (u32, u32) = (520, 340);
const LEGEND_HEIGHT: u32 = 44;
const FONT: &str = "sans-serif";

/// The pictures a report set draws into: one chart each.
pub struct Panel {
    title: String,
    lines: Vec<Line>,
    /// The y axis starts at 0 (byte counts).
    from_zero: bool,
}

impl Panel {
    /// Whether every point of every line has one value (and there are at least two points).
    fn constant(&self) -> bool {
        let mut values = self.lines.iter().flat_map(|l| &l.points).map(|p| p.1);
        let Some(first) = values.next() else { return false };
        let mut rest = values.peekable();
        rest.peek().is_some() && rest.all(|v| v == first)
    }
}

/// Method fields not drawn: timings, constant across every run, or past [`MAX_METHOD_PANELS`].
#[derive(Debug, Default)]
pub struct LeftOut {
    pub timings: Vec<String>,
    pub constant: Vec<String>,
    pub past_max: Vec<String>,
}

/// Whether a method field (its key path) holds seconds: a key ending in `_s` or naming `_s_`
/// (`compute_s_per_worker`).
fn is_timing(path: &[String]) -> bool {
    path.iter().any(|key| key.ends_with("_s") || key.contains("_s_"))
}

/// One report's series on a panel.
struct Line {
    report: usize,
    dashed: bool,
    points: Vec<(f64, f64)>,
}

/// The series of every epoch field `value` picks out, per report: a solid and optionally a dashed one.
fn panel(reports: &[LoadedReport], title: &str, solid: &str, dashed: Option<&str>) -> Panel {
    let mut lines = Vec::new();
    for (report, r) in reports.iter().enumerate() {
        for (field, is_dashed) in std::iter::once((solid, false)).chain(dashed.map(|d| (d, true))) {
            let points = series(r.epochs(), |e| e.pointer(field).and_then(Value::as_f64));
            if !points.is_empty() {
                lines.push(Line { report, dashed: is_dashed, points });
            }
        }
    }
    Panel { title: title.to_string(), lines, from_zero: title.contains("bytes") }
}

fn series(epochs: &[Value], value: impl Fn(&Value) -> Option<f64>) -> Vec<(f64, f64)> {
    epochs.iter().filter_map(|e| Some((e["epoch"].as_f64()?, value(e)?))).filter(|(_, v)| v.is_finite()).collect()
}

/// The fixed panels, then one per numeric method field (in first-seen order over the reports)
/// that is not constant across every run; also the fields left out. Non-empty `wanted` keeps
/// only the fields whose dotted name contains one of its entries, constant or not.
pub fn panels(reports: &[LoadedReport], wanted: &[String]) -> (Vec<Panel>, LeftOut) {
    let mut out = vec![
        panel(reports, "training loss", "/loss", None),
        panel(reports, "train accuracy", "/train_acc", None),
        panel(reports, "validation accuracy", "/val_acc", None),
        panel(reports, "test accuracy", "/test_acc", None),
        panel(reports, "bytes per epoch (solid intra-host, dashed inter-host)", "/bytes_intra", Some("/bytes_inter")),
        panel(
            reports,
            "modeled s per epoch (solid epoch, dashed communication)",
            "/modeled_epoch_s",
            Some("/modeled_comm_s"),
        ),
    ];
    let mut fields: Vec<Vec<String>> = Vec::new();
    for r in reports {
        for e in r.epochs() {
            numeric_leaves(&e["method"], &mut Vec::new(), &mut fields);
        }
    }
    if !wanted.is_empty() {
        fields.retain(|path| wanted.iter().any(|w| path.join(".").contains(w.as_str())));
    }
    let mut left_out = LeftOut::default();
    for path in fields {
        // JSON pointers escape `~` and `/`, which method keys (ledger phases) contain.
        let pointer: String = path.iter().map(|k| format!("/{}", k.replace('~', "~0").replace('/', "~1"))).collect();
        let name = path.join(".");
        let field = panel(reports, &format!("method: {name}"), &format!("/method{pointer}"), None);
        if wanted.is_empty() && is_timing(&path) {
            left_out.timings.push(name);
        } else if wanted.is_empty() && field.constant() {
            left_out.constant.push(name);
        } else if out.len() >= FIXED_PANELS + MAX_METHOD_PANELS {
            left_out.past_max.push(name);
        } else {
            out.push(field);
        }
    }
    (out, left_out)
}

/// The panels every plot has before the method fields.
const FIXED_PANELS: usize = 6;

/// The key paths (below `value`) of its numeric leaves, added to `out` once each.
fn numeric_leaves(value: &Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match value {
        Value::Number(_) if !out.contains(path) => out.push(path.clone()),
        Value::Object(map) => {
            for (key, child) in map {
                path.push(key.clone());
                numeric_leaves(child, path, out);
                path.pop();
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                path.push(i.to_string());
                numeric_leaves(child, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

/// Renders `panels` into `path`, SVG or PNG by its extension; `flag` names the path in errors.
/// The picture is drawn beside the target and renamed onto it ([`write_atomic`]), so no
/// half-drawn file is left.
pub fn draw(path: &Path, reports: &[LoadedReport], panels: &[Panel], flag: &str) -> anyhow::Result<()> {
    let extension = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    let svg = match extension.as_deref() {
        Some("svg") => true,
        Some("png") => false,
        _ => bail!("{flag} {}: the picture must end in .svg or .png", path.display()),
    };
    check_writable(path, flag)?;
    register_font()?;
    let rows = panels.len().div_ceil(COLUMNS) as u32;
    let size = (PANEL_SIZE.0 * COLUMNS as u32, LEGEND_HEIGHT + PANEL_SIZE.1 * rows);
    let labels: Vec<&str> = reports.iter().map(|r| r.label.as_str()).collect();
    write_atomic(path, |tmp| {
        let drawn = if svg {
            render(SVGBackend::new(tmp, size).into_drawing_area(), &labels, panels)
        } else {
            render(BitMapBackend::new(tmp, size).into_drawing_area(), &labels, panels)
        };
        drawn.map_err(std::io::Error::other)
    })
    .map_err(|e| flag_error(e, path, flag))
}

/// Text needs a font; the one bundled keeps pictures identical on machines without fonts.
fn register_font() -> anyhow::Result<()> {
    static DEJAVU_SANS: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");
    plotters::style::register_font(FONT, FontStyle::Normal, DEJAVU_SANS)
        .map_err(|_| anyhow!("the bundled font assets/DejaVuSans.ttf cannot be read"))
}

fn colour(report: usize) -> RGBColor {
    const COLOURS: [RGBColor; 8] = [
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
        RGBColor(44, 160, 44),
        RGBColor(255, 127, 14),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(23, 190, 207),
    ];
    COLOURS[report % COLOURS.len()]
}

fn render<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, labels: &[&str], panels: &[Panel]) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let failed = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("{e}");
    root.fill(&WHITE).map_err(failed)?;
    let (legend, body) = root.split_vertically(LEGEND_HEIGHT);
    let mut x = 16;
    for (i, label) in labels.iter().enumerate() {
        let c = colour(i);
        let style = TextStyle::from((FONT, 18).into_font()).color(&c);
        legend.draw(&Rectangle::new([(x, 16), (x + 24, 28)], colour(i).filled())).map_err(failed)?;
        legend.draw(&Text::new(label.to_string(), (x + 30, 13), style)).map_err(failed)?;
        x += 30 + 11 * label.chars().count() as i32 + 30;
    }
    let rows = panels.len().div_ceil(COLUMNS);
    for (area, panel) in body.split_evenly((rows, COLUMNS)).iter().zip(panels) {
        chart(area, panel).map_err(failed)?;
    }
    root.present().map_err(failed)
}

fn chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let points = panel.lines.iter().flat_map(|l| &l.points);
    let (x_max, y_min, y_max) = points
        .fold((1.0f64, f64::INFINITY, f64::NEG_INFINITY), |(x, lo, hi), &(e, v)| (x.max(e), lo.min(v), hi.max(v)));
    let (y_min, y_max) = match (y_min.is_finite(), y_max > y_min) {
        (false, _) => (0.0, 1.0),
        (true, false) => (y_min - 0.5 * y_min.abs().max(1.0), y_max + 0.5 * y_max.abs().max(1.0)),
        (true, true) => (y_min - 0.05 * (y_max - y_min), y_max + 0.05 * (y_max - y_min)),
    };
    let (y_min, y_max) = if panel.from_zero { (0.0, y_max.max(1.0)) } else { (y_min, y_max) };
    let decimals = label_decimals(y_max - y_min);
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, (FONT, 15))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(64)
        .build_cartesian_2d(1.0..x_max.max(2.0), y_min..y_max)?;
    chart
        .configure_mesh()
        .x_desc("epoch")
        .label_style((FONT, 12))
        .x_label_formatter(&|e| format!("{e:.0}"))
        .y_label_formatter(&|v| short(*v, decimals))
        .light_line_style(WHITE)
        .draw()?;
    let reports = panel.lines.iter().map(|l| l.report + 1).max().unwrap_or(1);
    for line in &panel.lines {
        let colour = colour(line.report);
        let style = colour.stroke_width(line_width(line.report, reports));
        if line.dashed {
            chart.draw_series(DashedLineSeries::new(line.points.iter().copied(), 6, 4, style))?;
        } else {
            chart.draw_series(LineSeries::new(line.points.iter().copied(), style))?;
        }
        let n = line.points.len();
        let markers = line.points.iter().enumerate().filter(|(i, _)| marked(*i, n, line.report, reports));
        chart.draw_series(markers.map(|(_, &p)| Circle::new(p, 3, colour.filled())))?;
    }
    Ok(())
}

/// Line widths from thick (the first report, drawn first) to 2 px (the last), so that a line
/// drawn over an equal one leaves its edges showing.
fn line_width(report: usize, reports: usize) -> u32 {
    2 + 2 * (reports - 1 - report.min(reports - 1)) as u32
}

/// Whether point `i` of `n` carries a marker: about 12 per line, each report's shifted by a
/// fraction of the spacing so that coinciding lines show every colour.
fn marked(i: usize, n: usize, report: usize, reports: usize) -> bool {
    let every = n.div_ceil(12).max(reports);
    i % every == (report * every / reports) % every
}

/// Ticks an axis has about; the decimals of its labels tell ticks this far apart apart.
const TICKS: f64 = 10.0;

/// The decimals that tell apart the ticks of an axis `span` wide (none for steps of 1 or more).
fn label_decimals(span: f64) -> usize {
    let step = span / TICKS;
    // Less a rounding error, so that a step of exactly 0.1 takes one decimal, not two.
    if step.is_finite() && step > 0.0 { (-step.log10() - 1e-9).ceil().clamp(0.0, 9.0) as usize } else { 0 }
}

/// An axis label short enough for the label area: thousands as k/M/G, smaller values with
/// `decimals` decimals, and a value that rounds to zero as zero (never `-0.000`).
fn short(v: f64, decimals: usize) -> String {
    let a = v.abs();
    match a {
        a if a >= 1e9 => format!("{:.2}G", v / 1e9),
        a if a >= 1e6 => format!("{:.2}M", v / 1e6),
        a if a >= 1e4 => format!("{:.1}k", v / 1e3),
        a if a < 0.5 * 10f64.powi(-(decimals as i32)) => format!("{:.decimals$}", 0.0),
        _ => format!("{v:.decimals$}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::reports::tests::{report, write};

    fn loaded(dir: &Path) -> Vec<LoadedReport> {
        let a = write(dir, "a.json", &report("vanilla", &[0.5, 0.7, 0.8], 4000));
        let b = write(dir, "b.json", &report("cdfgnn", &[0.4, 0.6, 0.79], 1000));
        reports::load(&[a, b]).unwrap()
    }

    #[test]
    fn method_fields_get_a_panel_each_and_every_report_a_line() {
        let dir = tempfile::tempdir().unwrap();
        let (panels, left_out) = panels(&loaded(dir.path()), &[]);
        let titles: Vec<&str> = panels.iter().map(|p| p.title.as_str()).collect();
        assert_eq!(titles[6..], ["method: eps"]);
        assert_eq!((left_out.constant, left_out.past_max), (vec!["rows.fwd/0".to_string()], vec![]));
        let (picked, _) = super::panels(&loaded(dir.path()), &["rows".to_string()]);
        assert_eq!(picked.last().map(|p| p.title.as_str()), Some("method: rows.fwd/0"));
        assert_eq!(picked[6].lines.len(), 2, "a key holding `/` is found");
        assert_eq!(picked.len(), 7, "the fixed panels and the one field asked for");
        let bytes = &panels[4];
        assert_eq!(bytes.lines.len(), 4, "intra and inter per report");
        assert_eq!(bytes.lines[1].points, vec![(1.0, 1000.0), (2.0, 1000.0), (3.0, 1000.0)]);
        assert!(bytes.lines[1].dashed && !bytes.lines[0].dashed);
        assert_eq!(panels[6].lines[1].points[2], (3.0, 0.03));
    }

    #[test]
    fn svg_and_png_are_written_and_other_extensions_refused() {
        let dir = tempfile::tempdir().unwrap();
        let reports = loaded(dir.path());
        let (panels, _) = panels(&reports, &[]);
        for name in ["runs.svg", "runs.png"] {
            let path = dir.path().join(name);
            draw(&path, &reports, &panels, "--out").unwrap();
            let bytes = std::fs::read(&path).unwrap();
            assert!(bytes.len() > 1000, "{name}: {} bytes", bytes.len());
        }
        let svg = std::fs::read_to_string(dir.path().join("runs.svg")).unwrap();
        assert!(svg.contains("<svg") && svg.contains("cdfgnn") && svg.contains("test accuracy"));
        assert!(std::fs::read(dir.path().join("runs.png")).unwrap().starts_with(b"\x89PNG"));
        let err = draw(&dir.path().join("runs.pdf"), &reports, &panels, "--out").unwrap_err().to_string();
        assert!(err.contains("--out") && err.contains(".svg or .png"), "{err}");
        let leftovers = std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with('.'));
        assert_eq!(leftovers.count(), 0, "no temporary file is left");
    }

    #[test]
    fn constant_fields_are_left_out_unless_asked_for_and_byte_axes_start_at_0() {
        let dir = tempfile::tempdir().unwrap();
        let mut flat = report("vanilla", &[0.5, 0.7, 0.8], 4000);
        for e in flat["epochs"].as_array_mut().unwrap() {
            e["method"]["bits"] = serde_json::json!(8);
        }
        let reports = reports::load(&[write(dir.path(), "flat.json", &flat)]).unwrap();
        let (drawn, left_out) = panels(&reports, &[]);
        let mut constant = left_out.constant;
        constant.sort();
        assert_eq!(constant, ["bits", "rows.fwd/0"]);
        assert!(drawn.iter().all(|p| !p.title.contains("bits")), "the constant field is not drawn");
        let (asked, left_out) = panels(&reports, &["bits".to_string()]);
        assert!(left_out.constant.is_empty() && asked.last().unwrap().title == "method: bits");
        assert!(drawn[4].from_zero && !drawn[0].from_zero, "bytes from 0, loss from its range");
    }

    /// A vanilla run's method fields are per-worker timings: none is drawn unless asked for.
    #[test]
    fn timings_are_left_out_unless_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        let mut timed = report("vanilla", &[0.5, 0.7, 0.8], 4000);
        for (i, e) in timed["epochs"].as_array_mut().unwrap().iter_mut().enumerate() {
            e["method"] = serde_json::json!({"compute_s_max": 0.1 + 0.01 * i as f64,
                "compute_s_per_worker": [0.1, 0.2 + 0.01 * i as f64], "overlap": {"bound_s": 0.3 * i as f64}});
        }
        let reports = reports::load(&[write(dir.path(), "timed.json", &timed)]).unwrap();
        let (drawn, left_out) = panels(&reports, &[]);
        assert_eq!(drawn.len(), FIXED_PANELS, "no method panel");
        let timings = ["compute_s_max", "compute_s_per_worker.0", "compute_s_per_worker.1", "overlap.bound_s"];
        assert_eq!(left_out.timings, timings);
        let (asked, _) = panels(&reports, &["bound_s".to_string()]);
        assert_eq!(asked.last().unwrap().title, "method: overlap.bound_s");
    }

    #[test]
    fn coinciding_lines_keep_every_colour_visible() {
        assert_eq!((line_width(0, 3), line_width(1, 3), line_width(2, 3)), (6, 4, 2));
        // Two reports of 24 epochs: 12 markers each, never on the same epoch.
        let a: Vec<usize> = (0..24).filter(|&i| marked(i, 24, 0, 2)).collect();
        let b: Vec<usize> = (0..24).filter(|&i| marked(i, 24, 1, 2)).collect();
        assert_eq!((a.len(), b.len()), (12, 12));
        assert!(a.iter().all(|i| !b.contains(i)), "{a:?} {b:?}");
    }

    #[test]
    fn axis_labels_stay_short_and_tell_their_ticks_apart() {
        assert_eq!(short(2.5e9, 0), "2.50G");
        assert_eq!(short(12_345.0, 0), "12.3k");
        assert_eq!(short(0.8123, label_decimals(1.0)), "0.8");
        assert_eq!(short(0.0, 0), "0");
        assert_eq!(short(250.0, label_decimals(400.0)), "250");
        // Ticks 0.00002 apart: five decimals, no two alike.
        let decimals = label_decimals(0.0002);
        let ticks: Vec<String> = (0..10).map(|i| short(0.001 + 2e-5 * i as f64, decimals)).collect();
        assert!(ticks.windows(2).all(|w| w[0] != w[1]), "{ticks:?}");
        assert_eq!(ticks[1], "0.00102");
        assert_eq!(short(-1e-9, label_decimals(0.01)), "0.000", "no -0.000");
        assert_eq!(short(-0.002, label_decimals(0.01)), "-0.002");
    }
}
