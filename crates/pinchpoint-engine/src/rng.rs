//! A small seeded generator (xoshiro256++ seeded by splitmix64): the same seed gives
//! the same arrival times and think times, run after run.

#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        Self { s: [splitmix64(&mut x), splitmix64(&mut x), splitmix64(&mut x), splitmix64(&mut x)] }
    }

    /// An independent stream for one part of the run (a phase, a user) of the same seed.
    pub fn stream(seed: u64, index: u64) -> Self {
        let mut x = seed ^ index.wrapping_mul(0xD1B5_4A32_D192_ED03);
        Self::new(splitmix64(&mut x))
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in (0, 1]: never 0, so its logarithm is finite.
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Exponential with mean 1.
    pub fn exp1(&mut self) -> f64 {
        -self.unit().ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_numbers_and_streams_differ() {
        let a: Vec<u64> = (0..5).map({
            let mut r = Rng::new(7);
            move |_| r.next_u64()
        }).collect();
        let b: Vec<u64> = (0..5).map({
            let mut r = Rng::new(7);
            move |_| r.next_u64()
        }).collect();
        assert_eq!(a, b);
        assert_ne!(Rng::stream(7, 0).next_u64(), Rng::stream(7, 1).next_u64());
    }

    #[test]
    fn unit_and_exp_have_the_right_means() {
        let mut r = Rng::new(1);
        let n = 200_000;
        let (mut u, mut e) = (0.0, 0.0);
        for _ in 0..n {
            let x = r.unit();
            assert!(x > 0.0 && x <= 1.0);
            u += x;
            e += r.exp1();
        }
        assert!((u / n as f64 - 0.5).abs() < 0.005);
        assert!((e / n as f64 - 1.0).abs() < 0.01);
    }
}
