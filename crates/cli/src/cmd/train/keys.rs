//! The configuration's keys as `halo train` flags. Each key is defined once, in trainer's
//! configuration: its field gives the flag and the TOML key, its doc comment the help, and the
//! configuration's `Default` the default the help shows. This module finishes them for the
//! command line and tells which of them the command line gave.
//!
//! No flag is required, so an unset flag keeps the file's value; a switch is `--key [on|off]`; the
//! help ends with the default.

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Args as _, Command};
use trainer::config::{TrainConfig, default_text, sections_of};

/// A key the command line gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Given {
    /// The flag's name, without `--` (`method`).
    pub flag: String,
    /// The key it sets (`name`, of `[method]`).
    pub key: String,
}

/// `command` with every configuration key as a flag, none required (unset keys keep what the
/// configuration file or the defaults say).
pub fn augment(command: Command) -> Command {
    TrainConfig::augment_args_for_update(command).mut_args(|arg| match key_of(&arg) {
        Some(key) => finish(arg, &key),
        None => arg,
    })
}

/// The key an argument sets (its id is the configuration field's name), if it sets one.
pub fn key_of(arg: &Arg) -> Option<String> {
    let key = arg.get_id().as_str().replace('_', "-");
    (!sections_of(&key).is_empty()).then_some(key)
}

/// One key's flag for the command line:
/// - a switch is `--key`, `--key on` or `--key off`, and is unset when not given (so that it
///   does not override the configuration file);
/// - a value may start with `-`, so that `--epochs -1` is refused naming the flag, not taken
///   for an unknown flag;
/// - the help ends with the default, where the key has one.
fn finish(arg: Arg, key: &str) -> Arg {
    let arg = if matches!(arg.get_action(), ArgAction::SetTrue) {
        arg.action(ArgAction::Set).num_args(0..=1).default_missing_value("on").value_parser(on_off).value_name("on|off")
    } else {
        arg.allow_negative_numbers(true)
    };
    match default_text(key) {
        Some(default) => {
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            arg.help(format!("{help} [default: {default}]"))
        }
        None => arg,
    }
}

/// Parses `on` / `off`.
fn on_off(text: &str) -> Result<bool, String> {
    match text {
        "on" => Ok(true),
        "off" => Ok(false),
        other => Err(format!("expected on or off, got `{other}`")),
    }
}

/// The keys `matches` got from the command line, with the flags that gave them.
pub fn given(command: &Command, matches: &ArgMatches) -> Vec<Given> {
    command
        .get_arguments()
        .filter(|arg| matches.value_source(arg.get_id().as_str()) == Some(ValueSource::CommandLine))
        .filter_map(|arg| Some(Given { key: key_of(arg)?, flag: arg.get_long()?.to_string() }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command() -> Command {
        augment(Command::new("t").no_binary_name(true))
    }

    #[test]
    fn switches_take_on_off_or_nothing_and_stay_unset_when_not_given() {
        let matches = command().try_get_matches_from(["--overlap", "--halo-cache", "off"]).unwrap();
        assert_eq!(matches.get_one::<bool>("overlap"), Some(&true));
        assert_eq!(matches.get_one::<bool>("halo_cache"), Some(&false));
        assert!(!matches.contains_id("layer_norm"), "an unset switch keeps the file's value");
        let err = command().try_get_matches_from(["--reqec", "maybe"]).unwrap_err().to_string();
        assert!(err.contains("--reqec") && err.contains("expected on or off"), "{err}");
    }

    #[test]
    fn help_shows_each_default_once() {
        let command = command();
        let help = |long: &str| {
            let arg = command.get_arguments().find(|a| a.get_long() == Some(long)).unwrap();
            arg.get_help().unwrap().to_string()
        };
        assert!(help("weight-decay").ends_with("[default: 0.0005]"), "{}", help("weight-decay"));
        assert!(help("halo-cache").ends_with("[default: on]"), "{}", help("halo-cache"));
        assert!(help("lr-warmup").ends_with("[default: 0]"), "{}", help("lr-warmup"));
        for arg in command.get_arguments() {
            let text = arg.get_help().map(ToString::to_string).unwrap_or_default();
            assert!(text.matches("[default:").count() <= 1, "--{:?}: {text}", arg.get_long());
        }
    }

    /// Every key of the configuration is a flag: a new key needs nothing here.
    #[test]
    fn every_key_is_a_flag() {
        fn leaves(value: &serde_json::Value, out: &mut Vec<String>) {
            for (key, value) in value.as_object().into_iter().flatten() {
                if value.is_object() { leaves(value, out) } else { out.push(key.clone()) }
            }
        }
        let mut keys = Vec::new();
        leaves(&serde_json::to_value(TrainConfig::default()).unwrap(), &mut keys);
        let command = command();
        let flags: Vec<String> = command.get_arguments().filter_map(key_of).collect();
        assert!(keys.len() > 80, "{} keys", keys.len());
        for key in keys {
            assert!(flags.contains(&key), "`{key}` has no flag");
        }
    }

    #[test]
    fn given_names_the_flag_and_its_key() {
        let command = command();
        let matches = command.clone().try_get_matches_from(["--method", "vanilla", "--lr-warmup", "2"]).unwrap();
        let mut given = given(&command, &matches);
        given.sort_by(|a, b| a.flag.cmp(&b.flag));
        let expected = [("lr-warmup", "lr-warmup-epochs"), ("method", "name")]
            .map(|(flag, key)| Given { flag: flag.to_string(), key: key.to_string() });
        assert_eq!(given, expected);
    }
}
