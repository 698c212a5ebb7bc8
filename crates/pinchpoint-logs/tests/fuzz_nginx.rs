//! Property-based fuzzing of the nginx matcher and parser: arbitrary lines and valid
//! lines with edits (text cut out or put in, numbers made huge or negative, fields
//! padded) give a class, never a panic; matched records hold values in range; valid
//! lines give their values; lines over MAX_PARSE_LINE are unparseable.
//!
//! `PROPTEST_CASES=100000 cargo test -p pinchpoint-logs --release --test fuzz_nginx` runs
//! a long budget.

use pinchpoint_logs::matcher::{match_line, Outcome, Spans};
use pinchpoint_logs::values::MAX_DURATION_S;
use pinchpoint_logs::{Class, Format, Parser, Rows, MAX_PARSE_LINE};
use proptest::prelude::*;

const COMBINED: &str = concat!(
    r#"$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "#,
    r#""$http_referer" "$http_user_agent" rt=$request_time urt=$upstream_response_time "#,
    "msec=$msec"
);
/// Formats with adjacent variables, unquoted text and lists, whose ends are ambiguous.
const FORMATS: [&str; 5] = [
    COMBINED,
    "$status$request_time$upstream_response_time${request_uri}x$msec",
    "$request $status $request_time $http_user_agent $query_string",
    "$upstream_addr, $upstream_status : $request_time $upstream_response_time, $args",
    r#""$request$http_user_agent" $request_time "$args""$http_x_pinchpoint""#,
];
const HOSTILE: [&str; 8] = [
    "1e400",
    "inf",
    "nan",
    "-1",
    "18446744073709551616",
    "340282366920938463463374607431768211456",
    "0.000000000000000000000000000001",
    "99999999999999999999.99999999999999999999",
];

fn combined_line(
    path: &str,
    agent: &str,
    millis: u64,
    status: u16,
    users: u32,
    req: u64,
) -> String {
    format!(
        "10.0.0.1 - - [22/Nov/2026:10:15:00 +0100] \"GET /{path}?pp_run=r1&pp_users={users}\
         &pp_req={req} HTTP/1.1\" {status} 512 \"-\" \"{agent}\" rt={}.{:03} urt=0.010 \
         msec=1795338900.123",
        millis / 1000,
        millis % 1000
    )
}

/// Classifies `line` under `format` and checks what a matched record holds.
fn classify(format: &str, line: &[u8]) -> Class {
    let parser = Parser::new(Format::compile(format).unwrap(), "r1", true);
    let mut rows = Rows::default();
    let class = parser.classify(line, &mut rows);
    assert_eq!(rows.len(), usize::from(class == Class::Matched));
    if class == Class::Matched {
        assert!((0.0..=MAX_DURATION_S).contains(&rows.duration_s[0]));
        assert!(rows.upstream_s[0].is_none_or(|u| (0.0..=MAX_DURATION_S).contains(&u)));
        assert!(rows.status[0].is_none_or(|s| (100..=999).contains(&s)));
        assert!(rows.ts[0].is_none_or(f64::is_finite));
    }
    if line.len() > MAX_PARSE_LINE && line.is_ascii() && !line.iter().all(u8::is_ascii_whitespace) {
        assert_eq!(class, Class::Unparseable);
    }
    class
}

/// Matches `line` and checks the spans lie in it.
fn spans_in_line(format: &str, line: &[u8]) {
    let format = Format::compile(format).unwrap();
    let mut spans = Spans::default();
    if match_line(&format, line, &mut spans) == Outcome::Matched {
        for (start, end) in spans.0.iter().flatten() {
            assert!(start <= end && *end <= line.len());
        }
    }
}

fn valid() -> impl Strategy<Value = String> {
    (
        "[a-zA-Z0-9/._~%-]{0,40}",
        "[a-zA-Z0-9 /.;()_+-]{1,40}",
        0u64..=604_800_000,
        100u16..=999,
        any::<u32>(),
        any::<u64>(),
    )
        .prop_map(|(path, agent, millis, status, users, req)| {
            combined_line(&path, &agent, millis, status, users, req)
        })
}

proptest! {
    #[test]
    fn fuzz_arbitrary_ascii_lines_get_a_class(
        line in proptest::collection::vec(0u8..128, 0..600),
        which in 0..FORMATS.len(),
    ) {
        classify(FORMATS[which], &line);
        spans_in_line(FORMATS[which], &line);
    }

    #[test]
    fn fuzz_valid_lines_with_text_cut_out_or_put_in_get_a_class(
        line in valid(),
        start in 0usize..400,
        len in 0usize..40,
        insert in "[ -~]{0,30}",
        which in 0..FORMATS.len(),
    ) {
        let start = start.min(line.len());
        let stop = (start + len).min(line.len());
        let edited = format!("{}{insert}{}", &line[..start], &line[stop..]);
        classify(FORMATS[which], edited.as_bytes());
        spans_in_line(FORMATS[which], edited.as_bytes());
    }

    #[test]
    fn fuzz_a_number_of_a_valid_line_made_hostile_gets_a_class(
        line in valid(),
        nth in 0usize..20,
        hostile in proptest::sample::select(HOSTILE.to_vec()),
    ) {
        let starts: Vec<usize> = (0..line.len())
            .filter(|&i| line.as_bytes()[i].is_ascii_digit()
                && (i == 0 || !line.as_bytes()[i - 1].is_ascii_digit()))
            .collect();
        let at = starts[nth % starts.len()];
        let end = at + line[at..].bytes().take_while(u8::is_ascii_digit).count();
        let edited = format!("{}{hostile}{}", &line[..at], &line[end..]);
        classify(COMBINED, edited.as_bytes());
    }

    #[test]
    fn fuzz_a_valid_line_padded_by_repeating_a_part_gets_a_class(
        line in valid(),
        start in 0usize..300,
        len in 1usize..8,
        times in 1usize..20_000,
    ) {
        let start = start.min(line.len() - 1);
        let stop = (start + len).min(line.len());
        let edited = format!("{}{}{}", &line[..start], line[start..stop].repeat(times), &line[stop..]);
        let class = classify(COMBINED, edited.as_bytes());
        prop_assert_ne!(class, Class::Defer);
    }

    #[test]
    fn fuzz_valid_lines_give_their_values(
        path in "[a-zA-Z0-9/._~%-]{0,40}",
        agent in "[a-zA-Z0-9/.;()_+-][a-zA-Z0-9 /.;()_+-]{0,40}",
        millis in 0u64..=604_800_000,
        status in 100u16..=999,
        users in any::<u32>(),
        req in any::<u64>(),
    ) {
        let line = combined_line(&path, &agent, millis, status, users, req);
        let parser = Parser::new(Format::compile(COMBINED).unwrap(), "r1", true);
        let mut rows = Rows::default();
        prop_assert_eq!(parser.classify(line.as_bytes(), &mut rows), Class::Matched);
        prop_assert_eq!(rows.users[0], users);
        prop_assert_eq!(rows.req_id[0], Some(req));
        prop_assert_eq!(rows.status[0], Some(i32::from(status)));
        prop_assert!((rows.duration_s[0] - millis as f64 / 1000.0).abs() < 1e-9);
    }
}

#[test]
fn lines_at_and_over_the_cap() {
    let base = combined_line("", "a", 12, 200, 4, 1).len();
    let at_cap = combined_line(&"a".repeat(MAX_PARSE_LINE - base), "a", 12, 200, 4, 1);
    assert_eq!(at_cap.len(), MAX_PARSE_LINE);
    assert_eq!(classify(COMBINED, at_cap.as_bytes()), Class::Matched);
    let over = combined_line(&"a".repeat(MAX_PARSE_LINE - base + 1), "a", 12, 200, 4, 1);
    assert_eq!(classify(COMBINED, over.as_bytes()), Class::Unparseable);
    let megabyte = combined_line(&"a".repeat(1 << 20), "a", 12, 200, 4, 1);
    assert_eq!(classify(COMBINED, megabyte.as_bytes()), Class::Unparseable);
}
