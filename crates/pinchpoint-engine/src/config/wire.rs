//! How the configuration's types are written as data (the keys Python's
//! `load/engine_config.py` sends) where that differs from the engine's own types:
//! durations in seconds, a think time, a phase or a protocol as one record. Each
//! `…Fields` record is the data; its `TryFrom` or `From` makes the engine's type of it.
//! (A flow's captures and checks are written as triples: `flow.rs`.)

use std::path::PathBuf;
use std::time::Duration;

use serde::de::{Error, IgnoredAny, Visitor};
use serde::{Deserialize, Deserializer};

use crate::config::{HookHandle, HttpVersion, Protocol, Think, TlsOptions};
use crate::schedule::{Arrivals, Phase};

fn duration(name: &str, value: f64) -> Result<Duration, String> {
    in_seconds(value).map_err(|e| format!("{name}: {e}"))
}

fn in_seconds(value: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(value).map_err(|_| format!("{value} is not a duration in seconds"))
}

/// A duration given in seconds.
pub(crate) fn seconds<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    Ok(Seconds::deserialize(d)?.0)
}

/// A duration given in seconds, or None.
pub(crate) fn seconds_or_none<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    Ok(Option::<Seconds>::deserialize(d)?.map(|s| s.0))
}

struct Seconds(Duration);

// Checked inside the visit, so that an error is placed at the value, not at the end
// of the record holding it.
impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_f64(SecondsVisitor)
    }
}

struct SecondsVisitor;

impl Visitor<'_> for SecondsVisitor {
    type Value = Seconds;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a duration in seconds")
    }

    fn visit_f64<E: Error>(self, v: f64) -> Result<Seconds, E> {
        in_seconds(v).map(Seconds).map_err(E::custom)
    }

    fn visit_i64<E: Error>(self, v: i64) -> Result<Seconds, E> {
        self.visit_f64(v as f64)
    }

    fn visit_u64<E: Error>(self, v: u64) -> Result<Seconds, E> {
        self.visit_f64(v as f64)
    }
}

/// The hook is a function, not data: the binding attaches it after the rest is read,
/// so whatever the data holds under `hook` is passed over.
pub(crate) fn hook_apart<'de, D: Deserializer<'de>>(d: D) -> Result<Option<HookHandle>, D::Error> {
    Option::<IgnoredAny>::deserialize(d)?;
    Ok(None)
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum ArrivalsName {
    Uniform,
    Poisson,
}

pub(crate) fn arrivals<'de, D: Deserializer<'de>>(d: D) -> Result<Arrivals, D::Error> {
    Ok(match ArrivalsName::deserialize(d)? {
        ArrivalsName::Uniform => Arrivals::Uniform,
        ArrivalsName::Poisson => Arrivals::Poisson,
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum ThinkKind {
    Constant,
    Uniform,
    Exponential,
}

/// A think time: constant (`value_s`), uniform (`min_s` to `max_s`) or exponential
/// (mean `value_s`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ThinkFields {
    kind: ThinkKind,
    value_s: f64,
    min_s: f64,
    max_s: f64,
}

impl TryFrom<ThinkFields> for Think {
    type Error = String;

    fn try_from(t: ThinkFields) -> Result<Self, String> {
        Ok(match t.kind {
            ThinkKind::Constant => Think::Constant(duration("think time", t.value_s)?),
            ThinkKind::Uniform => {
                Think::Uniform { min: duration("think time min", t.min_s)?, max: duration("think time max", t.max_s)? }
            }
            ThinkKind::Exponential => Think::Exponential { mean: duration("think time mean", t.value_s)? },
        })
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum PhaseName {
    Rate,
    Pause,
    Count,
}

/// An open-loop phase: a rate (`rate`, to `ramp_to` if set), a pause, or a count.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PhaseFields {
    kind: PhaseName,
    duration_s: f64,
    rate: f64,
    ramp_to: Option<f64>,
    count: u64,
}

impl TryFrom<PhaseFields> for Phase {
    type Error = String;

    fn try_from(p: PhaseFields) -> Result<Self, String> {
        let d = in_seconds(p.duration_s)?;
        Ok(match p.kind {
            PhaseName::Rate => Phase::ramp(p.rate, p.ramp_to.unwrap_or(p.rate), d),
            PhaseName::Pause => Phase::pause(d),
            PhaseName::Count => Phase::count(p.count, d),
        })
    }
}

// Phase belongs to the scheduler, which knows nothing of how a plan writes it.
impl<'de> Deserialize<'de> for Phase {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        PhaseFields::deserialize(d)?.try_into().map_err(D::Error::custom)
    }
}

/// `http` "1.1" or "2"; with `tls`, the certificate is checked against the default
/// roots and `ca_file`, or not at all with `insecure`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProtocolFields {
    http: HttpVersion,
    tls: bool,
    ca_file: Option<PathBuf>,
    insecure: bool,
    streams_per_connection: u32,
}

impl From<ProtocolFields> for Protocol {
    fn from(p: ProtocolFields) -> Self {
        let tls = p.tls.then_some(TlsOptions { ca_file: p.ca_file, insecure: p.insecure });
        Protocol { http: p.http, tls, streams_per_connection: p.streams_per_connection }
    }
}
