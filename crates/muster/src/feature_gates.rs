//! `--feature-gates`, read as kube-scheduler reads it: `Name=true|false`, comma-separated. Only
//! the gates muster models are accepted; any other name is an error, so that nobody believes a
//! gate changed what it did not.

use muster_sched::SchedulerConfig;

/// The gates muster models.
const KNOWN: [&str; 1] = ["SchedulerPopFromBackoffQ"];

/// Feature gates as given on the command line, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FeatureGates(Vec<(&'static str, bool)>);

impl FeatureGates {
    /// Parses `Name=bool[,Name=bool...]`; the error names the part that is wrong.
    pub fn parse(value: &str) -> Result<FeatureGates, String> {
        let mut gates = Vec::new();
        for part in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((name, on)) = part.split_once('=') else {
                return Err(format!("{part}: expected Name=true or Name=false"));
            };
            let Some(known) = KNOWN.iter().find(|k| **k == name.trim()) else {
                return Err(format!("unrecognized feature gate: {name} (muster models {})", KNOWN.join(", ")));
            };
            let on = match on.trim() {
                "true" => true,
                "false" => false,
                other => return Err(format!("invalid value of {name}={other}: true or false")),
            };
            gates.push((*known, on));
        }
        Ok(FeatureGates(gates))
    }

    /// Sets what the gates switch in `config`; the last value of a gate given twice wins.
    pub fn apply(&self, config: &mut SchedulerConfig) {
        for (name, on) in &self.0 {
            if *name == "SchedulerPopFromBackoffQ" {
                config.backoff.pop_from_backoff_q = *on;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_known_gate_is_switched_and_others_are_refused() {
        let mut config = SchedulerConfig::default();
        assert!(config.backoff.pop_from_backoff_q, "on by default, as in 1.37");
        FeatureGates::parse("SchedulerPopFromBackoffQ=false").unwrap().apply(&mut config);
        assert!(!config.backoff.pop_from_backoff_q);
        FeatureGates::parse("SchedulerPopFromBackoffQ=false, SchedulerPopFromBackoffQ=true")
            .unwrap()
            .apply(&mut config);
        assert!(config.backoff.pop_from_backoff_q, "the last one wins");
        assert_eq!(
            FeatureGates::parse("GangScheduling=true").unwrap_err(),
            "unrecognized feature gate: GangScheduling (muster models SchedulerPopFromBackoffQ)"
        );
        assert_eq!(
            FeatureGates::parse("SchedulerPopFromBackoffQ=no").unwrap_err(),
            "invalid value of SchedulerPopFromBackoffQ=no: true or false"
        );
        assert_eq!(
            FeatureGates::parse("SchedulerPopFromBackoffQ").unwrap_err(),
            "SchedulerPopFromBackoffQ: expected Name=true or Name=false"
        );
    }
}
