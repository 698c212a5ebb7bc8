//! The keys of every record of the configuration as the engine reads it, found by
//! walking its `Deserialize` (serde hands each struct's field names to its
//! deserializer): what Python's `EngineConfig` and the `TypedDict`s under it are checked
//! against (tests/load/test_engine_config_drift.py).

use std::cell::RefCell;
use std::collections::BTreeMap;

use serde::de::value::StrDeserializer;
use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use crate::config::RunConfig;

/// Each record's keys, by path from the configuration (`flows[].steps[].request`; ""
/// the whole): true for a key whose value may be None.
pub type Records = BTreeMap<String, BTreeMap<&'static str, bool>>;

/// The records of [`RunConfig`].
pub fn run_config_records() -> Result<Records, String> {
    records::<RunConfig>()
}

/// The records of `T`, walked with stand-in values that every field accepts.
pub fn records<'de, T: Deserialize<'de>>() -> Result<Records, String> {
    let found = RefCell::new(Records::new());
    T::deserialize(Probe { found: &found, path: String::new(), field: None }).map_err(|e| e.0)?;
    Ok(found.into_inner())
}

#[derive(Debug)]
pub struct ProbeError(String);

impl std::fmt::Display for ProbeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ProbeError {}

impl de::Error for ProbeError {
    fn custom<M: std::fmt::Display>(msg: M) -> Self {
        ProbeError(msg.to_string())
    }
}

/// A deserializer that records each struct it is asked for, and which fields ask for
/// an Option. `field`: the record and key this value is read for.
struct Probe<'a> {
    found: &'a RefCell<Records>,
    path: String,
    field: Option<(String, &'static str)>,
}

impl<'a> Probe<'a> {
    fn at(&self, path: String, field: Option<(String, &'static str)>) -> Probe<'a> {
        Probe { found: self.found, path, field }
    }
}

macro_rules! stand_in {
    ($($method:ident => $visit:ident($($value:expr)?);)*) => {
        $(fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProbeError> {
            visitor.$visit($($value)?)
        })*
    };
}

impl<'de> de::Deserializer<'de> for Probe<'_> {
    type Error = ProbeError;

    stand_in! {
        deserialize_bool => visit_bool(false);
        deserialize_i8 => visit_i64(1);
        deserialize_i16 => visit_i64(1);
        deserialize_i32 => visit_i64(1);
        deserialize_i64 => visit_i64(1);
        deserialize_u8 => visit_u64(1);
        deserialize_u16 => visit_u64(1);
        deserialize_u32 => visit_u64(1);
        deserialize_u64 => visit_u64(1);
        deserialize_f32 => visit_f64(1.0);
        deserialize_f64 => visit_f64(1.0);
        deserialize_char => visit_char('1');
        // "1": also a status code, for a check of kind status.
        deserialize_str => visit_str("1");
        deserialize_string => visit_str("1");
        deserialize_identifier => visit_str("1");
        deserialize_bytes => visit_bytes(b"1");
        deserialize_byte_buf => visit_bytes(b"1");
        deserialize_unit => visit_unit();
        deserialize_ignored_any => visit_unit();
    }

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, ProbeError> {
        Err(ProbeError(format!("{}: a value of no fixed type", self.path)))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProbeError> {
        if let Some((record, key)) = &self.field {
            self.found.borrow_mut().entry(record.clone()).or_default().insert(key, true);
        }
        let inner = self.at(self.path.clone(), None);
        visitor.visit_some(inner)
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(self, _: &'static str, visitor: V) -> Result<V::Value, ProbeError> {
        visitor.visit_unit()
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _: &'static str, visitor: V) -> Result<V::Value, ProbeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProbeError> {
        let path = format!("{}[]", self.path);
        visitor.visit_seq(Items { probe: self.at(path, None), left: 1 })
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, ProbeError> {
        let path = format!("{}[]", self.path);
        visitor.visit_seq(Items { probe: self.at(path, None), left: len })
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, ProbeError> {
        self.deserialize_tuple(len, visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, _: V) -> Result<V::Value, ProbeError> {
        Err(ProbeError(format!("{}: a map of free keys", self.path)))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ProbeError> {
        let keys = fields.iter().map(|&f| (f, false)).collect();
        if self.found.borrow_mut().insert(self.path.clone(), keys).is_some() {
            return Err(ProbeError(format!("{}: two records at one path", self.path)));
        }
        visitor.visit_map(Keys { probe: self, fields, next: 0 })
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ProbeError> {
        let first: StrDeserializer<'_, ProbeError> = variants[0].into_deserializer();
        visitor.visit_enum(first)
    }
}

/// A sequence of `left` stand-in items.
struct Items<'a> {
    probe: Probe<'a>,
    left: usize,
}

impl<'de> SeqAccess<'de> for Items<'_> {
    type Error = ProbeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, ProbeError> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(self.probe.at(self.probe.path.clone(), None)).map(Some)
    }
}

/// A struct's fields, each once, in order.
struct Keys<'a> {
    probe: Probe<'a>,
    fields: &'static [&'static str],
    next: usize,
}

impl<'de> MapAccess<'de> for Keys<'_> {
    type Error = ProbeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, ProbeError> {
        let Some(&field) = self.fields.get(self.next) else { return Ok(None) };
        let key: StrDeserializer<'_, ProbeError> = field.into_deserializer();
        seed.deserialize(key).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, ProbeError> {
        let field = self.fields[self.next];
        self.next += 1;
        let record = self.probe.path.clone();
        let path = if record.is_empty() { field.to_string() } else { format!("{record}.{field}") };
        seed.deserialize(self.probe.at(path, Some((record, field))))
    }
}

#[cfg(test)]
mod tests {
    use super::run_config_records;

    #[test]
    fn every_record_of_the_configuration_is_found() {
        let records = run_config_records().unwrap();
        let paths: Vec<&str> = records.keys().map(String::as_str).collect();
        assert_eq!(
            paths,
            [
                "",
                "flows[]",
                "flows[].feed",
                "flows[].steps[]",
                "flows[].steps[].request",
                "flows[].steps[].request.grpc",
                "flows[].steps[].request.messages[]",
                "flows[].steps[].think",
                "open",
                "open.phases[]",
                "protocol",
                "requests[]",
                "requests[].grpc",
                "requests[].messages[]",
                "steps[]",
                "think",
            ]
        );
        let root = &records[""];
        assert_eq!(root.get("timeout_s"), Some(&false));
        assert_eq!(root.get("start_at_us"), Some(&true));
        assert_eq!(root.get("hook"), Some(&true));
        assert_eq!(records["requests[]"].get("timeout_s"), Some(&true));
    }
}
