//! The mix of the plan's requests: each is sent in proportion to its weight, in an
//! interleaved, repeating order (smooth weighted round robin, as nginx balances).

/// Longest cycle of the mix; the weights' sum may not exceed it.
pub const MAX_CYCLE: u64 = 100_000;

/// One cycle of request indices: index `i` appears `weights[i]` times, spread out.
pub fn cycle(weights: &[u32]) -> Vec<u32> {
    let total: i64 = weights.iter().map(|&w| i64::from(w)).sum();
    let mut current = vec![0i64; weights.len()];
    let mut out = Vec::with_capacity(total.max(0) as usize);
    for _ in 0..total {
        let mut best = 0;
        for (i, &w) in weights.iter().enumerate() {
            current[i] += i64::from(w);
            if current[i] > current[best] {
                best = i;
            }
        }
        current[best] -= total;
        out.push(best as u32);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::cycle;

    #[test]
    fn each_request_in_proportion_and_interleaved() {
        assert_eq!(cycle(&[1]), [0]);
        assert_eq!(cycle(&[1, 1, 1]), [0, 1, 2]);
        let c = cycle(&[5, 1, 1]);
        assert_eq!(c.len(), 7);
        assert_eq!(c.iter().filter(|&&i| i == 0).count(), 5);
        assert_eq!(c, [0, 0, 1, 0, 2, 0, 0]);
        assert_eq!(cycle(&[0, 3]), [1, 1, 1]);
    }
}
