//! The matcher against Python's regex results, format by format.

use super::*;
use crate::format::Field;

fn capture(format: &str, line: &str, field: Field) -> Option<String> {
    let f = Format::compile(format).unwrap();
    let mut spans = Spans::default();
    assert_eq!(
        match_line(&f, line.as_bytes(), &mut spans),
        Outcome::Matched,
        "{line}"
    );
    spans.0[field as usize].map(|(a, b)| line[a..b].to_string())
}

fn matches(format: &str, line: &str) -> Outcome {
    let f = Format::compile(format).unwrap();
    match_line(&f, line.as_bytes(), &mut Spans::default())
}

#[test]
fn lazy_fields_take_the_shortest_end_that_lets_the_rest_match() {
    assert_eq!(
        matches("$request_uri $request_time", "/a b 0.5"),
        Outcome::NoMatch
    );
    assert_eq!(
        capture("$request $request_time", "GET /a b 0.5", Field::Request).unwrap(),
        "GET /a b"
    );
    assert_eq!(
        capture("$args|$request_time", "a|b|1", Field::Args).unwrap(),
        "a|b"
    );
}

#[test]
fn quoted_fields_skip_escapes() {
    let got = capture(
        r#""$request" $status"#,
        r#""GET /\"x\" y" 200"#,
        Field::Request,
    );
    assert_eq!(got.unwrap(), r#"GET /\"x\" y"#);
    // An unescaped quote ends the field: the line does not match.
    assert_eq!(
        matches(r#""$request" $status"#, r#""GET "x" 200"#),
        Outcome::NoMatch
    );
    // A backslash cannot end the line inside a quoted field.
    assert_eq!(
        matches(r#"$status "$request"#, "200 \"a\\"),
        Outcome::NoMatch
    );
}

#[test]
fn greedy_numbers_back_off_for_the_literal_after() {
    // `\d+(\.\d+)?` then `5`: the number gives back its last digit.
    assert_eq!(
        capture("${request_time}5", "0.125", Field::RequestTime).unwrap(),
        "0.12"
    );
    assert_eq!(
        capture("${request_time}.5", "10.5", Field::RequestTime).unwrap(),
        "10"
    );
}

#[test]
fn upstream_lists_hold_retries_and_groups() {
    let f = "$request_time $upstream_response_time x";
    let got = capture(f, "1 0.010, 0.020 : -, 0.3 x", Field::UpstreamResponseTime);
    assert_eq!(got.unwrap(), "0.010, 0.020 : -, 0.3");
    assert_eq!(
        capture(f, "1 - x", Field::UpstreamResponseTime).unwrap(),
        "-"
    );
    assert_eq!(matches(f, "1 0.010,, x"), Outcome::NoMatch);
}

#[test]
fn address_lists_try_more_addresses_first() {
    let f = "$upstream_addr|$request_time";
    assert_eq!(
        matches(f, "127.0.0.1:1, 127.0.0.1:2 : unix:/x|0.1"),
        Outcome::Matched
    );
    let f = "${upstream_addr}${request_time}";
    // Python's order for `a, b`: ends after `b`, after `a`, after `a,`.
    assert_eq!(capture(f, "a, b7", Field::RequestTime).unwrap(), "7");
}

#[test]
fn times_have_their_shapes() {
    let f = "[$time_local] $time_iso8601 $request_time";
    let line = "[22/Nov/2026:10:15:00 +0100] 2026-11-22T10:15:00+01:00 0.1";
    assert_eq!(
        capture(f, line, Field::TimeIso8601).unwrap(),
        "2026-11-22T10:15:00+01:00"
    );
    assert_eq!(
        matches(f, "[22/Nov/2026:10:15:00] 2026-11-22T10:15:00Z 0.1"),
        Outcome::NoMatch
    );
    assert_eq!(
        capture("$time_iso8601$args", "2026-11-22T10:15:00Z", Field::Args).unwrap(),
        ""
    );
}

#[test]
fn the_whole_line_must_match() {
    let f = "$status $request_time";
    assert_eq!(matches(f, "200 0.1"), Outcome::Matched);
    assert_eq!(matches(f, "200 0.1 "), Outcome::NoMatch);
    assert_eq!(matches(f, "20 0.1"), Outcome::NoMatch);
    assert_eq!(matches(f, ""), Outcome::NoMatch);
}

#[test]
fn a_text_variable_keeps_its_end_once_what_follows_it_matched() {
    // `$http_a` ends before the first ` 200 `; `$uri` then cannot take `b 200 /x`.
    let f = "$http_a $status $uri $request_time";
    assert_eq!(matches(f, "a b 200 /x 0.5"), Outcome::Matched);
    assert_eq!(matches(f, "a 200 b 200 /x 0.5"), Outcome::NoMatch);
    // Free text followed by a word shares its group: it ends at the last space.
    assert_eq!(
        capture(
            "$http_a $uri $request_time",
            "x y z 0.5",
            Field::RequestTime
        )
        .unwrap(),
        "0.5"
    );
    // Typed variables after a text variable still make it try further ends.
    assert_eq!(
        capture("$http_a $status $uri", "a b 200 /x", Field::Status).unwrap(),
        "200"
    );
}

#[test]
fn many_text_variables_on_a_line_that_does_not_match_are_not_too_hard() {
    let f = "$http_a $http_b $http_c $http_d $http_e $http_f $request_time";
    let line = "x ".repeat(30_000);
    assert_eq!(matches(f, &line), Outcome::NoMatch);
    let f = "$uri$args$request_uri$request_time";
    assert_eq!(matches(f, &"1".repeat(60_000)), Outcome::Matched);
    assert_eq!(
        matches(f, &format!("{}x", "1".repeat(60_000))),
        Outcome::NoMatch
    );
}

#[test]
fn numbers_take_at_most_twenty_digits_a_side() {
    let f = "$request_time|";
    let twenty = "9".repeat(20);
    assert_eq!(matches(f, &format!("{twenty}.{twenty}|")), Outcome::Matched);
    assert_eq!(matches(f, &format!("9{twenty}|")), Outcome::NoMatch);
    assert_eq!(matches(f, &format!("1.{twenty}9|")), Outcome::NoMatch);
    assert_eq!(
        matches("$body_bytes_sent|", &format!("9{twenty}|")),
        Outcome::NoMatch
    );
}

#[test]
fn a_list_too_long_to_follow_is_too_hard() {
    let line = format!("{}1 x", "1, ".repeat(1_000));
    assert_eq!(
        matches("$upstream_response_time x", &line),
        Outcome::TooHard
    );
}
