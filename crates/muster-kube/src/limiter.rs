//! Client-side rate limiting of API calls: a token bucket of `burst` tokens refilled at `qps`
//! per second (client-go's flowcontrol, which kube-scheduler's `clientConnection.qps`/`burst`
//! set). `qps` 0 means no limit.

use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

pub struct Limiter {
    qps: f64,
    burst: f64,
    bucket: Mutex<(f64, Instant)>,
}

impl Limiter {
    pub fn new(qps: f64, burst: u32) -> Limiter {
        let burst = f64::from(burst.max(1));
        Limiter { qps, burst, bucket: Mutex::new((burst, Instant::now())) }
    }

    /// Waits for a token.
    pub async fn acquire(&self) {
        if self.qps <= 0.0 {
            return;
        }
        let wait = {
            let mut b = self.bucket.lock().await;
            let now = Instant::now();
            let (tokens, last) = *b;
            let tokens = (tokens + now.duration_since(last).as_secs_f64() * self.qps).min(self.burst) - 1.0;
            *b = (tokens, now);
            // A negative balance is a debt paid by waiting; later callers wait behind it.
            if tokens < 0.0 { Duration::from_secs_f64(-tokens / self.qps) } else { Duration::ZERO }
        };
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_burst_passes_then_calls_are_spaced_by_the_rate() {
        let l = Limiter::new(10.0, 3);
        let t0 = Instant::now();
        for _ in 0..3 {
            l.acquire().await;
        }
        assert_eq!(t0.elapsed(), Duration::ZERO);
        l.acquire().await;
        l.acquire().await;
        let waited = t0.elapsed().as_secs_f64();
        assert!((0.19..0.21).contains(&waited), "{waited}");
    }

    #[tokio::test(start_paused = true)]
    async fn zero_qps_is_unlimited() {
        let l = Limiter::new(0.0, 1);
        let t0 = Instant::now();
        for _ in 0..1000 {
            l.acquire().await;
        }
        assert_eq!(t0.elapsed(), Duration::ZERO);
    }
}
