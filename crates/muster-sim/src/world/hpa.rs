//! The HorizontalPodAutoscaler controller's normalization of a raw recommendation
//! (`pkg/controller/podautoscaler/horizontal.go`), with the time an input:
//!
//! - without `behavior` (`normalizeDesiredReplicas`): the highest recommendation of the
//!   downscale stabilization window (the raw one included), then at most `max(2 × current, 4)`
//!   and within `[minReplicas, maxReplicas]`;
//! - with one (`normalizeDesiredReplicasWithBehaviors`): the current count brought within the
//!   lowest recommendation of the scale-up window and the highest of the scale-down window, then
//!   each direction's policies limit the change against the replicas at the start of each
//!   policy's period (the scale events of the period undone), `selectPolicy` picking the largest
//!   change (`Max`), the smallest (`Min`) or none (`Disabled`).
//!
//! A recommendation or event exactly one window or period old is counted without `behavior`
//! and not with it, as upstream's `Before`/`After` comparisons have it. The first sync records
//! the replicas then as a recommendation (so a scale-up window holds an HPA created over zero
//! replicas at zero until the window has passed, as upstream's does).

use std::collections::VecDeque;

use crate::trace::Millis;
use crate::trace::behavior::{Behavior, Rules, Select};

/// What an HPA remembers between syncs.
#[derive(Clone, Debug, Default)]
pub(super) struct HpaMemory {
    /// Raw recommendations, oldest first (the first: the replicas when the HPA was first seen,
    /// `recordInitialRecommendation`).
    recommendations: VecDeque<(Millis, u32)>,
    seen: bool,
    /// Replicas added and removed by its scales (with `behavior` only), oldest first.
    up_events: VecDeque<(Millis, u32)>,
    down_events: VecDeque<(Millis, u32)>,
}

/// `t` is within `span` before `now`, excluded (`t.After(now - span)`).
fn within(t: Millis, span: Millis, now: Millis) -> bool {
    t + span > now
}

impl HpaMemory {
    /// `recordInitialRecommendation`: at the HPA's first sync, its current replicas.
    pub(super) fn first_sync(&mut self, now: Millis, current: u32) {
        if !self.seen {
            self.seen = true;
            self.recommendations.push_back((now, current));
        }
    }

    /// `normalizeDesiredReplicas`.
    pub(super) fn normalize(&mut self, now: Millis, window: Millis, current: u32, raw: u32, bounds: (u32, u32)) -> u32 {
        // `stabilizeRecommendation`: samples older than the window are dropped.
        self.recommendations.retain(|(at, _)| at + window >= now);
        let stabilized = self.recommendations.iter().map(|(_, r)| *r).fold(raw, u32::max);
        self.recommendations.push_back((now, raw));
        // `convertDesiredReplicasWithRules`.
        let up_limit = current.saturating_mul(2).max(4);
        let (min, max) = bounds;
        if stabilized < min { min } else { stabilized.min(max.min(up_limit)) }
    }

    /// `normalizeDesiredReplicasWithBehaviors`; `down_window` is the controller's window, for a
    /// scale-down without its own.
    pub(super) fn normalize_with(
        &mut self,
        b: &Behavior,
        down_window: Millis,
        now: Millis,
        current: u32,
        raw: u32,
        bounds: (u32, u32),
    ) -> u32 {
        let up_w = b.scale_up.window.unwrap_or(0);
        let down_w = b.scale_down.window.unwrap_or(down_window);
        let (mut up, mut down) = (raw, raw);
        for &(at, r) in &self.recommendations {
            if within(at, up_w, now) {
                up = up.min(r);
            }
            if within(at, down_w, now) {
                down = down.max(r);
            }
        }
        // Samples older than both windows are dropped.
        self.recommendations.retain(|(at, _)| at + up_w.max(down_w) >= now);
        self.recommendations.push_back((now, raw));
        let stabilized = current.max(up).min(down);
        let (min, max) = bounds;
        if stabilized > current {
            let limit = self.up_limit(current, &b.scale_up, now).max(current);
            stabilized.min(max.min(limit))
        } else if stabilized < current {
            let limit = self.down_limit(current, &b.scale_down, now).min(current);
            stabilized.max(min.max(limit))
        } else {
            stabilized
        }
    }

    /// The replicas at the start of a `period` ending now: the scales within it undone.
    fn period_start(&self, current: u32, period: Millis, now: Millis) -> i64 {
        let sum = |events: &VecDeque<(Millis, u32)>| -> i64 {
            events.iter().filter(|(at, _)| within(*at, period, now)).map(|(_, n)| i64::from(*n)).sum()
        };
        i64::from(current) - sum(&self.up_events) + sum(&self.down_events)
    }

    /// `calculateScaleUpLimitWithScalingRules`.
    fn up_limit(&self, current: u32, rules: &Rules, now: Millis) -> u32 {
        let proposals = rules.policies.iter().map(|p| {
            let start = self.period_start(current, p.period, now);
            if p.percent {
                (start as f64 * (1.0 + f64::from(p.value) / 100.0)).ceil() as i64
            } else {
                start + i64::from(p.value)
            }
        });
        let limit = match rules.select {
            Select::Disabled => return current,
            Select::Max => proposals.max(),
            Select::Min => proposals.min(),
        };
        limit.unwrap_or(i64::from(current)).clamp(0, i64::from(u32::MAX)) as u32
    }

    /// `calculateScaleDownLimitWithBehaviors`.
    fn down_limit(&self, current: u32, rules: &Rules, now: Millis) -> u32 {
        let proposals = rules.policies.iter().map(|p| {
            let start = self.period_start(current, p.period, now);
            if p.percent {
                (start as f64 * (1.0 - f64::from(p.value) / 100.0)) as i64
            } else {
                start - i64::from(p.value)
            }
        });
        let limit = match rules.select {
            Select::Disabled => return current,
            Select::Max => proposals.min(),
            Select::Min => proposals.max(),
        };
        limit.unwrap_or(i64::from(current)).clamp(0, i64::from(u32::MAX)) as u32
    }

    /// `storeScaleEvent`: a scale from `before` to `after` at `now`; events older than the
    /// direction's longest policy period are dropped.
    pub(super) fn scaled(&mut self, b: &Behavior, before: u32, after: u32, now: Millis) {
        let (events, rules, n) = match after.cmp(&before) {
            std::cmp::Ordering::Greater => (&mut self.up_events, &b.scale_up, after - before),
            std::cmp::Ordering::Less => (&mut self.down_events, &b.scale_down, before - after),
            std::cmp::Ordering::Equal => return,
        };
        let longest = rules.policies.iter().map(|p| p.period).max().unwrap_or(0);
        events.retain(|(at, _)| at + longest >= now);
        events.push_back((now, n));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::behavior::Policy;

    fn behavior(up: Vec<Policy>, down: Vec<Policy>, windows: (Option<Millis>, Option<Millis>)) -> Behavior {
        let rules = |policies, window| Rules { window, select: Select::Max, policies, tolerance: None };
        Behavior { scale_up: rules(up, windows.0), scale_down: rules(down, windows.1) }
    }

    fn pods(value: u32, seconds: u64) -> Policy {
        Policy { percent: false, value, period: seconds * 1_000 }
    }

    fn percent(value: u32, seconds: u64) -> Policy {
        Policy { percent: true, value, period: seconds * 1_000 }
    }

    #[test]
    fn without_behavior_the_window_holds_the_highest_and_scale_up_at_most_doubles_or_reaches_four() {
        let mut m = HpaMemory::default();
        assert_eq!(m.normalize(0, 300_000, 0, 10, (0, 20)), 4, "from zero: 4");
        assert_eq!(m.normalize(15_000, 300_000, 4, 10, (0, 20)), 8, "then double");
        assert_eq!(m.normalize(30_000, 300_000, 1, 3, (0, 20)), 4, "the window's 10, at most max(2 × 1, 4)");
    }

    #[test]
    fn the_window_of_the_old_rules_counts_a_sample_exactly_its_length_old() {
        let mut m = HpaMemory::default();
        m.normalize(0, 300_000, 5, 5, (0, 20));
        assert_eq!(m.normalize(300_000, 300_000, 5, 1, (0, 20)), 5, "the sample at 0 still counts at 300 s");
        let mut m = HpaMemory::default();
        m.normalize(0, 300_000, 5, 5, (0, 20));
        assert_eq!(m.normalize(300_001, 300_000, 5, 1, (0, 20)), 1);
    }

    #[test]
    fn policies_limit_each_direction_per_period() {
        let b = behavior(vec![pods(2, 60)], vec![percent(50, 60)], (Some(0), Some(0)));
        let mut m = HpaMemory::default();
        assert_eq!(m.normalize_with(&b, 300_000, 0, 4, 20, (1, 20)), 6, "+2 per minute");
        m.scaled(&b, 4, 6, 0);
        assert_eq!(m.normalize_with(&b, 300_000, 15_000, 6, 20, (1, 20)), 6, "the minute's 2 are spent");
        assert_eq!(m.normalize_with(&b, 300_000, 60_000, 6, 20, (1, 20)), 8, "a new minute");
        // Down: half of the replicas at the period's start.
        assert_eq!(m.normalize_with(&b, 300_000, 120_000, 8, 1, (1, 20)), 4);
        m.scaled(&b, 8, 4, 120_000);
        assert_eq!(m.normalize_with(&b, 300_000, 150_000, 4, 1, (1, 20)), 4, "8 at the period's start: 4");
        assert_eq!(m.normalize_with(&b, 300_000, 180_000, 4, 1, (1, 20)), 2);
    }

    #[test]
    fn select_policy_picks_the_largest_or_smallest_change_or_none() {
        let mut b = behavior(vec![pods(4, 15), percent(100, 15)], vec![percent(100, 15)], (Some(0), Some(0)));
        let mut m = HpaMemory::default();
        assert_eq!(m.normalize_with(&b, 0, 0, 10, 100, (1, 100)), 20, "Max: 100 % beats 4 pods");
        b.scale_up.select = Select::Min;
        assert_eq!(m.normalize_with(&b, 0, 0, 10, 100, (1, 100)), 14, "Min: 4 pods");
        b.scale_up.select = Select::Disabled;
        assert_eq!(m.normalize_with(&b, 0, 0, 10, 100, (1, 100)), 10);
    }

    #[test]
    fn the_first_sync_records_the_replicas_then() {
        let b = behavior(vec![pods(4, 15)], vec![percent(100, 15)], (Some(60_000), None));
        let mut m = HpaMemory::default();
        m.first_sync(0, 0);
        assert_eq!(m.normalize_with(&b, 300_000, 0, 0, 3, (0, 5)), 0, "the 0 of the first sync holds");
        m.first_sync(15_000, 0);
        assert_eq!(m.normalize_with(&b, 300_000, 60_000, 0, 3, (0, 5)), 3, "a minute on");
    }

    #[test]
    fn the_windows_stabilize_both_ways() {
        // Up: the lowest of the last minute; down: the highest of the controller's 5 minutes.
        let b = behavior(vec![percent(1000, 15)], vec![percent(100, 15)], (Some(60_000), None));
        let mut m = HpaMemory::default();
        assert_eq!(m.normalize_with(&b, 300_000, 0, 2, 2, (1, 50)), 2);
        assert_eq!(m.normalize_with(&b, 300_000, 30_000, 2, 10, (1, 50)), 2, "2 a half-minute ago");
        assert_eq!(m.normalize_with(&b, 300_000, 61_000, 2, 10, (1, 50)), 10, "the 2 is out of the minute");
        assert_eq!(m.normalize_with(&b, 300_000, 90_000, 10, 3, (1, 50)), 10, "down: 10 in the window");
    }
}
