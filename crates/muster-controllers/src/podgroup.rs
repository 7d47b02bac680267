//! The gang-wait verdict: how long a gang has waited for its pods against muster's gang wait
//! timeout (`--gang-wait-timeout`; Kubernetes has no such field — its only wait was a fixed
//! Permit timeout). A controller's decision, not the scheduler's: the scheduler only says that a
//! gang waits (fewer than `minCount` pods exist); this says, given the time, whether the wait is
//! over. No clock is read: `now` comes from the caller (`--now` in a plan, the virtual clock in a
//! simulation).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Where a waiting gang stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GangWait {
    /// It has waited no longer than the timeout.
    Waiting,
    /// It has waited `waited_seconds`, more than the timeout: `PodGroupInitiallyScheduled=False`,
    /// reason `GangWaitTimeout`.
    TimedOut { waited_seconds: i64 },
    /// Undecided: no time was given.
    NeedsNow,
    /// Undecided: the PodGroup has no `creationTimestamp`.
    NoCreationTime,
}

/// The verdict for a gang created at `created`, at `now`, with a timeout of `timeout_seconds`.
pub fn gang_wait(created: Option<&Time>, now: Option<&Time>, timeout_seconds: u64) -> GangWait {
    match (now, created) {
        (None, _) => GangWait::NeedsNow,
        (Some(_), None) => GangWait::NoCreationTime,
        (Some(now), Some(created)) => {
            let waited_seconds = now.0.as_second() - created.0.as_second();
            if waited_seconds > i64::try_from(timeout_seconds).unwrap_or(i64::MAX) {
                GangWait::TimedOut { waited_seconds }
            } else {
                GangWait::Waiting
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Time {
        Time(s.parse().unwrap())
    }

    #[test]
    fn a_gang_times_out_only_after_more_than_the_timeout() {
        let created = at("2026-01-01T00:00:00Z");
        assert_eq!(gang_wait(Some(&created), Some(&at("2026-01-01T00:05:00Z")), 300), GangWait::Waiting);
        assert_eq!(
            gang_wait(Some(&created), Some(&at("2026-01-01T00:05:01Z")), 300),
            GangWait::TimedOut { waited_seconds: 301 }
        );
        assert_eq!(gang_wait(Some(&created), None, 300), GangWait::NeedsNow);
        assert_eq!(gang_wait(None, Some(&created), 300), GangWait::NoCreationTime);
    }
}
