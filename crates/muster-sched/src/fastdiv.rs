//! Exact division by an invariant divisor with a multiply and shifts (Granlund & Montgomery,
//! "Division by Invariant Integers using Multiplication", 1994, figure 4.1).
//!
//! Score plugins divide by each node's allocatable for every pod; the divisor never changes
//! during a plan, and a hardware 64-bit division costs an order of magnitude more than this.

/// A precomputed unsigned 64-bit divisor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Divisor {
    magic: u64,
    /// ceil(log2(d)); 0 means d == 1.
    shift: u32,
}

impl Divisor {
    /// # Panics
    /// When `d` is zero.
    pub fn new(d: u64) -> Self {
        assert!(d > 0, "division by zero");
        let shift = 64 - (d - 1).leading_zeros();
        let magic = (((1u128 << 64) * ((1u128 << shift) - d as u128)) / d as u128 + 1) as u64;
        Divisor { magic, shift }
    }

    /// `n / d`, exactly, for every `n`.
    #[inline]
    pub fn divide(self, n: u64) -> u64 {
        if self.shift == 0 {
            return n;
        }
        let t1 = ((self.magic as u128 * n as u128) >> 64) as u64;
        (t1 + ((n - t1) >> 1)) >> (self.shift - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::Divisor;

    #[test]
    fn matches_hardware_division() {
        let divisors =
            [1u64, 2, 3, 5, 7, 10, 100, 1000, 4000, 15_800, 34_359_738_368, 2_147_483_648_000, u64::MAX / 3, u64::MAX];
        let numerators = [0u64, 1, 2, 99, 100, 101, 399_900, 3_435_973_836_800, u64::MAX / 2, u64::MAX - 1, u64::MAX];
        for d in divisors {
            let div = Divisor::new(d);
            for n in numerators {
                assert_eq!(div.divide(n), n / d, "{n} / {d}");
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn exact_for_random_operands(n in proptest::num::u64::ANY, d in 1u64..) {
            proptest::prop_assert_eq!(Divisor::new(d).divide(n), n / d);
        }
    }
}
