//! Property-based fuzzing of the tag parser: any bytes give a valid tag or none, never a
//! panic; numbers of any length are read by value and refused past their range.
//!
//! `PROPTEST_CASES=100000 cargo test -p pinchpoint-logs --release --test fuzz_tag` runs a
//! long budget.

use pinchpoint_logs::tag::{Fields, Tag};
use proptest::prelude::*;

fn query(text: &[u8]) -> Option<Tag<'_>> {
    let mut fields = Fields::default();
    fields.add_query(text);
    fields.tag()
}

fn header(text: &[u8]) -> Option<Tag<'_>> {
    let mut fields = Fields::default();
    fields.add_header(text);
    fields.tag()
}

fn assert_valid(tag: Option<Tag<'_>>) {
    if let Some(tag) = tag {
        assert!(!tag.run.is_empty());
        assert!(tag
            .run
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(b)));
    }
}

/// The value of a decimal text if it is at most `max`, whatever its length.
fn at_most(text: &str, max: u64) -> Option<u64> {
    let digits = text.trim_start_matches('0');
    if digits.len() > 20 {
        return None;
    }
    digits.parse::<u128>().map_or(Some(0), |v| {
        (v <= u128::from(max)).then(|| u64::try_from(v).unwrap())
    })
}

/// Decimal texts: small, near the limits, thousands of digits, zero-padded.
fn decimal() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<u64>().prop_map(|n| n.to_string()),
        (0u32..=u32::MAX).prop_map(|n| n.to_string()),
        (1usize..6000).prop_map(|n| "9".repeat(n)),
        (0usize..6000, any::<u64>()).prop_map(|(zeros, n)| format!("{}{n}", "0".repeat(zeros))),
    ]
}

proptest! {
    #[test]
    fn fuzz_any_bytes_give_a_valid_tag_or_none(text in proptest::collection::vec(any::<u8>(), 0..400)) {
        assert_valid(query(&text));
        assert_valid(header(&text));
        let mut prefixed = b"pp_run=r&pp_users=".to_vec();
        prefixed.extend_from_slice(&text);
        assert_valid(query(&prefixed));
    }

    #[test]
    fn fuzz_numbers_of_any_length_are_read_by_value(
        run in "[A-Za-z0-9_.-]{1,20}",
        users in decimal(),
        req in decimal(),
    ) {
        let expected = match (at_most(&users, u64::from(u32::MAX)), at_most(&req, u64::MAX)) {
            (Some(u), Some(r)) => Some((run.clone(), u32::try_from(u).unwrap(), Some(r))),
            _ => None,
        };
        let owned = |tag: Option<Tag<'_>>| {
            tag.map(|t| (String::from_utf8(t.run.to_vec()).unwrap(), t.users, t.req))
        };
        let text = format!("/p?pp_run={run}&pp_users={users}&pp_req={req}");
        prop_assert_eq!(owned(query(text.as_bytes())), expected.clone());
        let text = format!("run={run}; users={users}; req={req}");
        prop_assert_eq!(owned(header(text.as_bytes())), expected);
    }
}
