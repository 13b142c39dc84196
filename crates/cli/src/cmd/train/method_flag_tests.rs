//! Each method's flags set its `[method.<name>]` table, and bad values are refused naming the
//! flag or key.

use gnn_core::LayerOrder;
use trainer::config::{Beta, BiasEstimate, Bits, EpsRule, Eq20Step, Method, Tau, TauRule, TrainConfig};

use super::config_from_flags;

fn flags(argv: &[&str]) -> anyhow::Result<TrainConfig> {
    config_from_flags(&argv.iter().map(|s| s.to_string()).collect::<Vec<_>>())
}

#[test]
fn adaqp_flags_set_the_method_table_and_layer_norm() {
    let argv = ["--method", "adaqp", "--bits", "4", "--group-size", "10", "--lambda", "0.25"];
    let c = flags(&[&argv[..], &["--assign-period", "5", "--beta", "square-of-sum", "--layer-norm", "on"]].concat())
        .unwrap();
    let s = &c.method.adaqp;
    assert_eq!((c.method.name, s.bits, s.group_size, s.assign_period), (Method::Adaqp, Bits::Four, 10, 5));
    assert_eq!((s.lambda, s.beta, c.layer_norm), (0.25, Beta::SquareOfSum, true));
    assert_eq!(c.layer_order(), LayerOrder::DropoutFirst, "adaqp's default order");
    let c = flags(&["--method", "adaqp", "--layer-order", "dropout-last"]).unwrap();
    assert_eq!(c.layer_order(), LayerOrder::DropoutLast);
    assert_eq!(flags(&["--method", "vanilla"]).unwrap().layer_order(), LayerOrder::DropoutLast);
    let err = flags(&["--layer-order", "paper"]).unwrap_err();
    assert!(format!("{err:#}").contains("--layer-order"), "{err:#}");
    let err = flags(&["--method", "adaqp", "--lambda", "2"]).unwrap_err();
    assert!(format!("{err:#}").contains("`lambda`"), "{err:#}");
    let err = flags(&["--method", "adaqp", "--time-fit", "fit.json"]).unwrap_err();
    assert!(format!("{err:#}").contains("`time-fit`") && format!("{err:#}").contains("mpi"), "{err:#}");
    let c = flags(&["--method", "adaqp", "--backend", "mpi", "--time-fit", "fit.json"]).unwrap();
    assert_eq!(c.method.adaqp.time_fit.as_deref(), Some(std::path::Path::new("fit.json")));
    let err = flags(&["--bits", "3"]).unwrap_err();
    assert!(err.to_string().contains("--bits"), "{err}");
}

#[test]
fn cdfgnn_flags_set_the_method_table() {
    let argv =
        ["--method", "cdfgnn", "--replica-cache", "off", "--quant-bits", "4", "--eps-controller", "error-target"];
    let c = flags(&[&argv[..], &["--eps", "0.2", "--mu1", "0.01"]].concat()).unwrap();
    let s = &c.method.cdfgnn;
    assert_eq!((s.replica_cache, s.quant_bits, s.eps_controller, s.eps), (false, 4, EpsRule::ErrorTarget, 0.2));
    assert_eq!(s.mu1, 0.01, "every key is a flag, the eq. 6 constants too");
    assert!(flags(&["--method", "cdfgnn"]).unwrap().method.cdfgnn.replica_cache, "on unless turned off");
    let err = flags(&["--method", "cdfgnn", "--replica-cache", "maybe"]).unwrap_err();
    assert!(err.to_string().contains("--replica-cache"), "{err}");
}

#[test]
fn featpart_flags_set_the_method_table() {
    let base = ["--method", "featpart", "--batch-size", "8"];
    let c = flags(&[&base[..], &["--tau", "inf", "--tau-max", "12", "--target-acc", "0.7"]].concat()).unwrap();
    let s = &c.method.featpart;
    assert_eq!((s.tau, s.tau_max, s.tau_rule, s.target_acc, s.trials), (Tau::Never, 12, TauRule::Eq20, Some(0.7), 8));
    let c = flags(&[&base[..], &["--tau-rule", "non-increasing", "--fetch-trials", "3"]].concat()).unwrap();
    assert_eq!((c.method.featpart.tau_rule, c.method.featpart.trials), (TauRule::NonIncreasing, 3));
    let c = flags(&[&base[..], &["--bias-estimate", "running-max", "--eq20-step", "effective"]].concat()).unwrap();
    let s = &c.method.featpart;
    assert_eq!((s.bias_estimate, s.eq20_step), (BiasEstimate::RunningMax, Eq20Step::Effective));
    for (flag, value) in [("--bias-estimate", "max"), ("--eq20-step", "adam")] {
        let err = flags(&[&base[..], &[flag, value]].concat()).unwrap_err().to_string();
        assert!(err.contains(flag) && err.contains(value), "{err}");
    }
    let err = flags(&[&base[..], &["--tau", "often"]].concat()).unwrap_err().to_string();
    assert!(err.contains("often") && err.contains("auto"), "{err}");
}

#[test]
fn featpart_defaults_to_the_running_max_and_names_eq20_as_printed() {
    let base = ["--method", "featpart", "--batch-size", "8"];
    let reading = |c: &TrainConfig| {
        let s = &c.method.featpart;
        (s.tau, s.tau_rule, s.bias_estimate, s.eq20_step)
    };
    let c = flags(&base).unwrap();
    assert_eq!(reading(&c), (Tau::Auto, TauRule::Eq20, BiasEstimate::RunningMax, Eq20Step::Lr));
    let c = flags(&[&base[..], &["--tau-rule", "eq20", "--bias-estimate", "trials"]].concat()).unwrap();
    assert_eq!(reading(&c), (Tau::Auto, TauRule::Eq20, BiasEstimate::Trials, Eq20Step::Lr));
}

#[test]
fn ecgraph_flags_set_the_method_table() {
    let argv = ["--method", "ecgraph", "--fp-bits", "4", "--bp-bits", "8", "--trend", "5", "--send-change-rate"];
    let c = flags(&[&argv[..], &["--resec", "off", "--tuner-up", "0.7"]].concat()).unwrap();
    let s = &c.method.ecgraph;
    assert_eq!((c.method.name, s.fp_bits, s.bp_bits, s.trend), (Method::Ecgraph, 4, 8, 5));
    assert_eq!((s.send_change_rate, s.resec, s.reqec, s.tuner_up), (true, false, true, 0.7));
    assert!(s.halo_cache, "on unless turned off");
    let c = flags(&["--method", "ecgraph", "--halo-cache", "off"]).unwrap();
    assert!(!c.method.ecgraph.halo_cache);
    let off = ["--method", "ecgraph", "--fp-bits", "32", "--bp-bits", "32", "--reqec", "off", "--resec", "off"];
    assert!(flags(&[&off[..], &["--bit-tuner", "off"]].concat()).is_ok());
    let err = flags(&off).unwrap_err();
    assert!(format!("{err:#}").contains("`fp-bits`"), "{err:#}");
    let err = flags(&["--method", "ecgraph", "--reqec", "maybe"]).unwrap_err();
    assert!(err.to_string().contains("--reqec"), "{err}");
}

/// A switch given on the command line overrides the file both ways; one not given keeps it.
#[test]
fn switches_override_the_config_file_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.toml");
    std::fs::write(
        &path,
        "[method]\nname = \"ecgraph\"\n[method.ecgraph]\nhalo-cache = false\nreqec = false\nbit-tuner = false\n",
    )
    .unwrap();
    let file = path.to_str().unwrap();
    let c = flags(&["--config", file]).unwrap();
    assert!(!c.method.ecgraph.halo_cache && !c.method.ecgraph.reqec, "the file's values kept");
    let c = flags(&["--config", file, "--halo-cache"]).unwrap();
    assert!(c.method.ecgraph.halo_cache && !c.method.ecgraph.reqec);
    std::fs::write(&path, "[distributed]\noverlap = true\nworkers = 2\n").unwrap();
    let c = flags(&["--config", file, "--method", "vanilla", "--overlap", "off"]).unwrap();
    assert!(!c.distributed.overlap);
}
