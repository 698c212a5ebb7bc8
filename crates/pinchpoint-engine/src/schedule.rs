//! Arrival times of an open-loop run: when each request is meant to be sent,
//! phase by phase, whatever the target does.
//!
//! A phase's arrival rate is λ(t) (constant, or linear from one rate to another) and
//! its cumulative Λ(t) = ∫₀ᵗ λ. With uniform arrivals the k-th request of the phase is
//! meant for Λ⁻¹(k), k = 0, 1, … while below Λ(duration): a phase of rate r over d
//! seconds sends ⌈r·d⌉ requests, a ramp the integral of its rate. With Poisson arrivals
//! the unit-rate Poisson process (sums of exponential gaps) is mapped through Λ⁻¹, which
//! gives a Poisson process of rate λ(t). `Count` phases send exactly their count: evenly
//! spaced (uniform) or at sorted uniformly random times (Poisson, conditioned on the count).

use std::time::Duration;

use crate::rng::Rng;

/// How the requests of a phase are spread in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrivals {
    /// Evenly spaced at the phase's rate.
    Uniform,
    /// Exponential gaps at the phase's rate (seeded).
    Poisson,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PhaseKind {
    /// Requests per second going linearly from `from` to `to` over the phase
    /// (`from == to`: a constant rate).
    Rate { from: f64, to: f64 },
    /// No request for the phase's duration.
    Pause,
    /// Exactly `count` requests spread over the phase.
    Count { count: u64 },
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Phase {
    pub kind: PhaseKind,
    pub duration: Duration,
}

/// Below this difference of Λ from a whole number, the number is taken as whole:
/// 0.1 req/s over 30 s is 3 requests, not 4 from 3.0000000000000004.
const EPS: f64 = 1e-9;

impl Phase {
    pub fn rate(rate: f64, duration: Duration) -> Self {
        Self { kind: PhaseKind::Rate { from: rate, to: rate }, duration }
    }

    pub fn ramp(from: f64, to: f64, duration: Duration) -> Self {
        Self { kind: PhaseKind::Rate { from, to }, duration }
    }

    pub fn pause(duration: Duration) -> Self {
        Self { kind: PhaseKind::Pause, duration }
    }

    pub fn count(count: u64, duration: Duration) -> Self {
        Self { kind: PhaseKind::Count { count }, duration }
    }

    /// Requests the phase is expected to send: Λ(duration).
    pub fn expected(&self) -> f64 {
        let d = self.duration.as_secs_f64();
        match self.kind {
            PhaseKind::Rate { from, to } => (from + to) / 2.0 * d,
            PhaseKind::Pause => 0.0,
            PhaseKind::Count { count } => count as f64,
        }
    }

    /// The phase's load level: its mean target rate in requests per second.
    pub fn level(&self) -> f64 {
        let d = self.duration.as_secs_f64();
        if d > 0.0 {
            self.expected() / d
        } else {
            0.0
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.duration.is_zero() {
            return Err("duration must be above zero".into());
        }
        if let PhaseKind::Rate { from, to } = self.kind {
            for (name, r) in [("rate", from), ("ramp_to", to)] {
                if !r.is_finite() || r < 0.0 {
                    return Err(format!("{name} must be a rate of zero or more requests per second, not {r}"));
                }
            }
        }
        Ok(())
    }

    /// Λ⁻¹(y) in seconds from the phase start, for 0 ≤ y ≤ Λ(duration).
    fn inverse(&self, y: f64) -> f64 {
        let d = self.duration.as_secs_f64();
        match self.kind {
            PhaseKind::Rate { from, to } => {
                let slope = (to - from) / d;
                if slope.abs() < 1e-12 {
                    return if from > 0.0 { y / from } else { d };
                }
                // Λ(t) = from·t + slope·t²/2; this root form is stable when `from` is 0.
                let root = (from * from + 2.0 * slope * y).max(0.0).sqrt();
                let denom = from + root;
                if denom <= 0.0 {
                    0.0
                } else {
                    (2.0 * y / denom).min(d)
                }
            }
            PhaseKind::Pause => d,
            PhaseKind::Count { count } => y / count as f64 * d,
        }
    }
}

/// The arrival times of one phase, in seconds from its start, in order.
pub struct PhaseArrivals {
    phase: Phase,
    arrivals: Arrivals,
    rng: Rng,
    total: f64,
    /// Arrivals given so far.
    k: u64,
    /// Uniform: how many arrivals the phase has.
    n: u64,
    /// Poisson: the running sum of unit exponential gaps.
    sum: f64,
    /// Poisson count phases: the sum of the `count + 1` gaps, to normalise by.
    norm: f64,
}

impl PhaseArrivals {
    pub fn new(phase: Phase, arrivals: Arrivals, rng: Rng) -> Self {
        let total = phase.expected();
        let n = match phase.kind {
            PhaseKind::Pause => 0,
            PhaseKind::Count { count } => count,
            PhaseKind::Rate { .. } => {
                if total <= EPS {
                    0
                } else {
                    (total - EPS).ceil() as u64
                }
            }
        };
        let norm = match (phase.kind, arrivals) {
            (PhaseKind::Count { count }, Arrivals::Poisson) => {
                // Sorted uniform times: partial sums of count + 1 exponential gaps over
                // their total. A clone of the generator gives the total first.
                let mut r = rng.clone();
                (0..=count).map(|_| r.exp1()).sum()
            }
            _ => 0.0,
        };
        Self { phase, arrivals, rng, total, k: 0, n, sum: 0.0, norm }
    }
}

impl Iterator for PhaseArrivals {
    type Item = f64;

    fn next(&mut self) -> Option<f64> {
        let d = self.phase.duration.as_secs_f64();
        match (self.phase.kind, self.arrivals) {
            (PhaseKind::Pause, _) => None,
            (_, Arrivals::Uniform) => {
                if self.k >= self.n {
                    return None;
                }
                let t = self.phase.inverse(self.k as f64);
                self.k += 1;
                Some(t.min(d))
            }
            (PhaseKind::Count { count }, Arrivals::Poisson) => {
                if self.k >= count {
                    return None;
                }
                self.sum += self.rng.exp1();
                self.k += 1;
                Some((self.sum / self.norm * d).min(d))
            }
            (PhaseKind::Rate { .. }, Arrivals::Poisson) => {
                self.sum += self.rng.exp1();
                if self.sum >= self.total {
                    return None;
                }
                self.k += 1;
                Some(self.phase.inverse(self.sum).min(d))
            }
        }
    }
}

/// One intended send of the run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Arrival {
    pub phase: u32,
    /// Seconds from the start of the run.
    pub at: f64,
}

/// Every arrival of a run, phase after phase; phase `i` starts when phase `i - 1` ends.
pub struct Schedule {
    phases: Vec<Phase>,
    arrivals: Arrivals,
    seed: u64,
    index: usize,
    start: f64,
    current: Option<PhaseArrivals>,
}

impl Schedule {
    pub fn new(phases: Vec<Phase>, arrivals: Arrivals, seed: u64) -> Self {
        Self { phases, arrivals, seed, index: 0, start: 0.0, current: None }
    }

    /// From `at` seconds until `end`, arrivals at a constant `rate` as phase `phase`,
    /// spread as the run's arrivals are: the phases from `phase` on are dropped, and the
    /// arrivals of earlier ones not yet given.
    pub fn switch(&mut self, phase: usize, at: f64, rate: f64, end: f64) {
        self.phases.truncate(phase);
        self.phases.push(Phase::rate(rate, Duration::from_secs_f64((end - at).max(0.0))));
        self.index = phase;
        self.start = at;
        self.current = None;
    }

    /// When each phase starts and ends, in seconds from the start of the run.
    pub fn bounds(phases: &[Phase]) -> Vec<(f64, f64)> {
        let mut t = 0.0;
        phases
            .iter()
            .map(|p| {
                let start = t;
                t += p.duration.as_secs_f64();
                (start, t)
            })
            .collect()
    }
}

impl Iterator for Schedule {
    type Item = Arrival;

    fn next(&mut self) -> Option<Arrival> {
        loop {
            let phase = *self.phases.get(self.index)?;
            let current = self.current.get_or_insert_with(|| {
                PhaseArrivals::new(phase, self.arrivals, Rng::stream(self.seed, self.index as u64))
            });
            if let Some(t) = current.next() {
                return Some(Arrival { phase: self.index as u32, at: self.start + t });
            }
            self.start += phase.duration.as_secs_f64();
            self.index += 1;
            self.current = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    fn times(phase: Phase, arrivals: Arrivals, seed: u64) -> Vec<f64> {
        PhaseArrivals::new(phase, arrivals, Rng::new(seed)).collect()
    }

    #[test]
    fn constant_rate_is_evenly_spaced_and_exact() {
        let t = times(Phase::rate(5.0, secs(30.0)), Arrivals::Uniform, 1);
        assert_eq!(t.len(), 150);
        for (k, x) in t.iter().enumerate() {
            assert!((x - k as f64 * 0.2).abs() < 1e-9);
        }
        assert_eq!(times(Phase::rate(0.1, secs(30.0)), Arrivals::Uniform, 1).len(), 3);
        assert_eq!(times(Phase::rate(0.0, secs(30.0)), Arrivals::Uniform, 1).len(), 0);
    }

    #[test]
    fn ramp_count_is_the_integral_and_rate_grows() {
        // 5 → 10 req/s over 30 s: (5 + 10) / 2 · 30 = 225.
        let t = times(Phase::ramp(5.0, 10.0, secs(30.0)), Arrivals::Uniform, 1);
        assert_eq!(t.len(), 225);
        let first = t.iter().filter(|&&x| x < 10.0).count() as f64;
        let last = t.iter().filter(|&&x| x >= 20.0).count() as f64;
        // ∫₀¹⁰ = 58.3, ∫₂₀³⁰ = 91.7
        assert!((first - 58.3).abs() <= 1.0, "{first}");
        assert!((last - 91.7).abs() <= 1.0, "{last}");
        assert!(t.windows(2).all(|w| w[1] > w[0]));
        // Down, and from zero.
        assert_eq!(times(Phase::ramp(30.0, 20.0, secs(30.0)), Arrivals::Uniform, 1).len(), 750);
        let up = times(Phase::ramp(0.0, 10.0, secs(10.0)), Arrivals::Uniform, 1);
        assert_eq!(up.len(), 50);
        assert!(up.iter().all(|&x| (0.0..=10.0).contains(&x)));
    }

    #[test]
    fn count_is_exact_both_ways() {
        let u = times(Phase::count(100, secs(120.0)), Arrivals::Uniform, 1);
        assert_eq!(u.len(), 100);
        assert!((u[1] - 1.2).abs() < 1e-9);
        let p = times(Phase::count(100, secs(120.0)), Arrivals::Poisson, 3);
        assert_eq!(p.len(), 100);
        assert!(p.windows(2).all(|w| w[1] >= w[0]));
        assert!(p.iter().all(|&x| (0.0..=120.0).contains(&x)));
    }

    #[test]
    fn pause_has_no_arrival() {
        assert!(times(Phase::pause(secs(10.0)), Arrivals::Uniform, 1).is_empty());
        assert!(times(Phase::pause(secs(10.0)), Arrivals::Poisson, 1).is_empty());
    }

    #[test]
    fn poisson_has_the_mean_rate_and_exponential_gaps() {
        let t = times(Phase::rate(1000.0, secs(100.0)), Arrivals::Poisson, 42);
        let n = t.len() as f64;
        // 100 000 expected, standard deviation 316.
        assert!((n - 100_000.0).abs() < 1_600.0, "{n}");
        let gaps: Vec<f64> = t.windows(2).map(|w| w[1] - w[0]).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        let cv = var.sqrt() / mean;
        assert!((mean - 0.001).abs() < 0.00002, "{mean}");
        assert!((cv - 1.0).abs() < 0.02, "coefficient of variation {cv}");
        // Seeded: the same seed gives the same times, another seed others.
        assert_eq!(t[..50], times(Phase::rate(1000.0, secs(100.0)), Arrivals::Poisson, 42)[..50]);
        assert_ne!(t[..50], times(Phase::rate(1000.0, secs(100.0)), Arrivals::Poisson, 43)[..50]);
    }

    #[test]
    fn poisson_ramp_follows_the_integral() {
        let t = times(Phase::ramp(0.0, 2000.0, secs(100.0)), Arrivals::Poisson, 5);
        let n = t.len() as f64;
        assert!((n - 100_000.0).abs() < 1_600.0, "{n}");
        let first_half = t.iter().filter(|&&x| x < 50.0).count() as f64;
        assert!((first_half - 25_000.0).abs() < 800.0, "{first_half}");
    }

    #[test]
    fn schedule_chains_phases() {
        let phases = vec![
            Phase::rate(2.0, secs(1.0)),
            Phase::pause(secs(1.0)),
            Phase::count(3, secs(3.0)),
        ];
        let all: Vec<Arrival> = Schedule::new(phases.clone(), Arrivals::Uniform, 0).collect();
        let got: Vec<(u32, f64)> = all.iter().map(|a| (a.phase, a.at)).collect();
        assert_eq!(got, [(0, 0.0), (0, 0.5), (2, 2.0), (2, 3.0), (2, 4.0)]);
        assert_eq!(Schedule::bounds(&phases), [(0.0, 1.0), (1.0, 2.0), (2.0, 5.0)]);
    }

    #[test]
    fn a_switch_ends_the_phase_and_holds_the_new_rate_until_the_end() {
        let phases = vec![Phase::rate(2.0, secs(2.0)), Phase::rate(8.0, secs(2.0))];
        let mut schedule = Schedule::new(phases, Arrivals::Uniform, 0);
        assert_eq!(schedule.next(), Some(Arrival { phase: 0, at: 0.0 }));
        schedule.switch(1, 0.25, 4.0, 4.0);
        let rest: Vec<(u32, f64)> = schedule.map(|a| (a.phase, a.at)).collect();
        // 4 req/s from 0.25 s to 4 s: 15 arrivals, 0.25 s apart.
        assert_eq!(rest.len(), 15);
        for (k, &(phase, at)) in rest.iter().enumerate() {
            assert_eq!(phase, 1);
            assert!((at - (0.25 + k as f64 * 0.25)).abs() < 1e-9, "{at}");
        }
    }

    #[test]
    fn a_switch_keeps_poisson_arrivals() {
        let mut schedule = Schedule::new(vec![Phase::rate(10.0, secs(20.0))], Arrivals::Poisson, 7);
        schedule.switch(1, 1.0, 1000.0, 11.0);
        let t: Vec<f64> = schedule.map(|a| a.at).collect();
        // 10 000 expected, standard deviation 100; exponential gaps of 1 ms.
        assert!((t.len() as f64 - 10_000.0).abs() < 500.0, "{}", t.len());
        assert!(t.iter().all(|&x| (1.0..=11.0).contains(&x)));
        let gaps: Vec<f64> = t.windows(2).map(|w| w[1] - w[0]).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64).sqrt();
        assert!((mean - 0.001).abs() < 0.00005 && (sd / mean - 1.0).abs() < 0.05, "{mean} {sd}");
    }

    #[test]
    fn bad_phases_are_refused() {
        assert!(Phase::rate(5.0, Duration::ZERO).validate().is_err());
        assert!(Phase::ramp(-1.0, 5.0, secs(1.0)).validate().is_err());
        assert!(Phase::ramp(1.0, f64::NAN, secs(1.0)).validate().is_err());
        assert!(Phase::ramp(1.0, 5.0, secs(1.0)).validate().is_ok());
    }
}
