//! What a run with more than one worker sent, and what it cost on the modeled cluster, for the
//! summary line: the traffic per epoch; as the method has them, its layers' exchange against the
//! exact one (bytes and their fraction, rows sent, mean bits of the sent rows), the verdict of the
//! judge of compression's cost (`trainer::method::compress`), featpart's tau and fetches, what
//! `--overlap` saved; then the modeled epoch and its communication share, with the
//! compute measure it was built on (`trainer::measure`).

use serde_json::Value;
use trainer::report::Report;

use crate::cmd::output::{bytes, seconds};

/// The traffic and modeled-time clauses of `report`'s summary, `None` for a single-process run.
pub fn traffic(report: &Report) -> Option<String> {
    if report.workers <= 1 && report.final_.bytes_total == 0 {
        return None;
    }
    let f = &report.final_;
    let epochs = report.epochs.len().max(1) as f64;
    let per_epoch = |total: f64| total / epochs;
    let intra: u64 = report.epochs.iter().map(|e| e.bytes_intra).sum();
    let inter: u64 = report.epochs.iter().map(|e| e.bytes_inter).sum();
    let mut clauses = vec![format!(
        "per epoch {} sent ({} intra-host, {} inter-host)",
        bytes(per_epoch(f.bytes_total as f64)),
        bytes(per_epoch(intra as f64)),
        bytes(per_epoch(inter as f64)),
    )];
    let method = f.method.as_ref().unwrap_or(&Value::Null);
    if f.bytes_exchange > 0 {
        clauses.push(exchange(per_epoch(f.bytes_exchange as f64), method));
    }
    if let Some(verdict) = compress(method) {
        clauses.push(verdict);
    }
    if let Some(tau) = tau(method) {
        clauses.push(tau);
    }
    let modeled = per_epoch(f.modeled_train_s);
    if report.config.distributed.overlap {
        let blocking: Option<f64> =
            report.epochs.iter().map(|e| e.method.as_ref()?.get("modeled_epoch_s_no_overlap")?.as_f64()).sum();
        if let Some(blocking) = blocking.map(per_epoch).filter(|b| *b > 0.0) {
            let saved = blocking - modeled;
            clauses.push(format!("overlap saved {} per epoch ({:.1}%)", seconds(saved), 100.0 * saved / blocking));
        }
    }
    let share = if f.modeled_train_s > 0.0 { (f.modeled_comm_s_total / f.modeled_train_s).min(1.0) } else { 0.0 };
    clauses.push(format!(
        "modeled epoch {}, modeled comm {} ({:.0}% of it)",
        seconds(modeled),
        seconds(per_epoch(f.modeled_comm_s_total)),
        100.0 * share,
    ));
    if let Some(measure) = &f.compute_measure {
        *clauses.last_mut().expect("the modeled epoch") += &format!(", compute measured as {measure}");
    }
    clauses.extend(too_small_to_show(share, report.config.method.name.rules().cuts_traffic));
    Some(clauses.join("; "))
}

/// A modeled communication share under which a method's cut in traffic is lost in the noise of
/// the measured compute.
const SMALL_SHARE: f64 = 0.05;

/// For a method that cuts traffic (`cuts_traffic`), a note when communication is too small a
/// share of the modeled epoch for the cut to show, naming what would show it.
fn too_small_to_show(share: f64, cuts_traffic: bool) -> Option<String> {
    (cuts_traffic && share < SMALL_SHARE).then(|| {
        "communication is too small a share of the modeled epoch for the method's savings to show in its time: \
         a slower modeled network (--topology, --bandwidth-scale below 1) or a run on a cluster shows them"
            .to_string()
    })
}

/// The layers' exchange per epoch and, when its codecs counted them, the fraction of the exact
/// exchange's bytes it sent, the rows it sent and their mean bit-width.
fn exchange(per_epoch: f64, method: &Value) -> String {
    let mut line = format!("exchange {} per epoch", bytes(per_epoch));
    let total = &method["codec_stats"]["total"];
    if let Some(fraction) = total["bytes_fraction"].as_f64().filter(|_| total["exact_bytes"].as_u64() > Some(0)) {
        line += &format!(", {fraction:.3}x the exact exchange's bytes");
    }
    if let Some(sent) = method["rows_sent_fraction"].as_f64().filter(|s| *s < 1.0) {
        line += &format!(", {:.1}% of its rows sent", 100.0 * sent);
    }
    if let Some(bits) = mean_bits(&total["bits"]) {
        line += &format!(", {bits:.2} bits a value");
    }
    line
}

/// What the judge of compression's cost decided and why (`None` for a method it does not judge):
/// exact rows from an epoch, or the codecs kept; a run too short for it says when it would have.
fn compress(method: &Value) -> Option<String> {
    let judge = method["controller"].get("compress")?;
    match (judge["reason"].as_str(), judge["decides_after_epoch"].as_u64()) {
        (Some(reason), _) => Some(reason.to_string()),
        (None, Some(after)) => Some(format!("compression not judged (the judge decides after epoch {after})")),
        (None, None) => None,
    }
}

/// The mean bit-width of a `{bits: rows}` histogram (`None` when empty).
fn mean_bits(histogram: &Value) -> Option<f64> {
    let (rows, weighted) = histogram.as_object()?.iter().fold((0.0, 0.0), |(rows, weighted), (bits, n)| {
        let (bits, n) = (bits.parse::<f64>().unwrap_or(0.0), n.as_f64().unwrap_or(0.0));
        (rows + n, weighted + bits * n)
    });
    (rows > 0.0).then(|| weighted / rows)
}

/// Featpart's tau (with the reading of eq. 20 under `auto`), its medians over the first and
/// last tenth of the iterations, and how many iterations fetched (`None` for the other methods).
fn tau(method: &Value) -> Option<String> {
    let tau = method["tau"].as_str()?;
    let mut line = format!("tau {tau}");
    let reading: Vec<String> = ["tau_rule", "bias_estimate", "eq20_step"]
        .iter()
        .filter_map(|key| Some(format!("--{} {}", key.replace('_', "-"), method[*key].as_str()?)))
        .collect();
    if tau == "auto" && !reading.is_empty() {
        line += &format!(" [{}]", reading.join(" "));
    }
    if let (Some(first), Some(last)) =
        (method["tau_median_first_10pct"].as_f64(), method["tau_median_last_10pct"].as_f64())
    {
        line += &format!(" (median {first} first, {last} last)");
    }
    if let (Some(fetches), Some(locals)) = (method["fetch_iterations"].as_u64(), method["local_iterations"].as_u64()) {
        line += &format!(", fetched at {fetches} of {} iterations", fetches + locals);
    }
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_exchange_names_its_fraction_rows_and_bits() {
        let method = json!({
            "codec_stats": {"total": {"bytes_fraction": 0.137, "exact_bytes": 1000, "bits": {"8": 30, "4": 10}}},
            "rows_sent_fraction": 0.31,
        });
        let line = exchange(2048.0, &method);
        assert!(line.contains("0.137x the exact exchange's bytes"), "{line}");
        assert!(line.contains("31.0% of its rows sent") && line.contains("7.00 bits a value"), "{line}");
        // An exact exchange counts no codec stats: bytes only.
        assert_eq!(exchange(2048.0, &Value::Null), "exchange 2.0 KiB per epoch");
    }

    #[test]
    fn the_judges_verdict_is_told_as_it_reads() {
        let reason = "exact rows from epoch 5: codec 1.200 ms a step > 0.100 ms of wire saved";
        let judged = json!({"controller": {"bits": "adaptive", "compress": {"exact": true, "reason": reason}}});
        assert_eq!(compress(&judged).as_deref(), Some(reason));
        let early = json!({"controller": {"compress": {"exact": false, "decides_after_epoch": 4}}});
        assert_eq!(compress(&early).unwrap(), "compression not judged (the judge decides after epoch 4)");
        assert_eq!(compress(&json!({"controller": {"bits": "8"}})), None, "compress = always: no judge");
        assert_eq!(compress(&Value::Null), None);
    }

    #[test]
    fn a_small_communication_share_of_a_method_names_what_would_show_it() {
        let note = too_small_to_show(0.012, true).unwrap();
        assert!(note.starts_with("communication is too small a share of the modeled epoch"), "{note}");
        assert!(
            note.contains("--topology") && note.contains("--bandwidth-scale") && note.contains("cluster"),
            "{note}"
        );
        assert_eq!(too_small_to_show(0.3, true), None, "a share that shows the savings");
        assert_eq!(too_small_to_show(0.012, false), None, "exact training saves nothing to show");
    }

    #[test]
    fn featpart_names_tau_and_its_fetches() {
        let method = json!({"tau": "auto", "tau_median_first_10pct": 2.0, "tau_median_last_10pct": 5.0,
                            "fetch_iterations": 3, "local_iterations": 9});
        assert_eq!(tau(&method).unwrap(), "tau auto (median 2 first, 5 last), fetched at 3 of 12 iterations");
        // Under auto the line names the reading of eq. 20 that ran, as flags.
        let read = json!({"tau": "auto", "tau_rule": "eq20", "bias_estimate": "running-max", "eq20_step": "lr"});
        assert_eq!(tau(&read).unwrap(), "tau auto [--tau-rule eq20 --bias-estimate running-max --eq20-step lr]");
        let fixed = json!({"tau": "4", "tau_rule": "eq20", "bias_estimate": "running-max", "eq20_step": "lr"});
        assert_eq!(tau(&fixed).unwrap(), "tau 4", "a fixed tau reads no eq. 20");
        assert_eq!(tau(&json!({})), None);
        assert_eq!(mean_bits(&json!({})), None);
    }
}
