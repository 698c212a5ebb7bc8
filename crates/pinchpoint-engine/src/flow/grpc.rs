//! gRPC calls: the method found in the plan's .proto (compiled by protox when the run is
//! configured), the request message written as JSON (a template, rendered then encoded
//! by reflection), and the answer's messages decoded to JSON for checks and captures.
//! A server-streaming call's messages are records of their own, at the endpoint after
//! the call's.

use std::path::Path;

use bytes::Bytes;
use prost::Message as _;
use prost_reflect::{DynamicMessage, Kind, MessageDescriptor, MethodDescriptor, SerializeOptions};
use serde_json::Value;

use crate::client::grpc::frame;
use crate::config::{GrpcSpec, RequestSpec};
use crate::flow::template::{Into, Template};

pub struct Call {
    pub method: MethodDescriptor,
    /// The record endpoint of each message a server-streaming call receives.
    pub message_endpoint: Option<u16>,
    /// The request message framed once, when it has no variables (an open-loop arrival's).
    pub fixed: Option<Bytes>,
}

/// The gRPC call of `request`, if it is one; a server-streaming call's messages take
/// the endpoint `endpoint` is at (which is left past it).
pub fn compile(request: &RequestSpec, endpoint: &mut usize) -> Result<Option<Call>, String> {
    let Some(spec) = &request.grpc else { return Ok(None) };
    if request.ws {
        return Err("a request is a WebSocket or a gRPC call, not both".into());
    }
    if request.method != "POST" {
        return Err(format!("a gRPC call is a POST, not {}", request.method));
    }
    if request.path != format!("/{}", spec.method) {
        return Err(format!("a gRPC call's path is /{}, not {}", spec.method, request.path));
    }
    let method = method(spec).map_err(|(_, why)| why)?;
    let data = std::str::from_utf8(&request.body).map_err(|_| "the request message is not UTF-8".to_string())?;
    check_data(&method.input(), data)?;
    let fixed = match Template::parse(data, &|_| None) {
        Ok(literal) => {
            let mut json = Vec::with_capacity(data.len());
            let _ = literal.render(&[], Into::Json, &mut json);
            Some(encode(&method, &json)?)
        }
        Err(_) => None,
    };
    let message_endpoint = if method.is_server_streaming() {
        let at = u16::try_from(*endpoint).map_err(|_| "too many requests and messages".to_string())?;
        *endpoint += 1;
        Some(at)
    } else {
        None
    };
    Ok(Some(Call { method, message_endpoint, fixed }))
}

/// The method `spec` names, its .proto compiled now; Err: the plan's field at fault
/// (`proto` or `grpc`) and why.
pub fn method(spec: &GrpcSpec) -> Result<MethodDescriptor, (&'static str, String)> {
    let proto = &spec.proto;
    if !proto.is_file() {
        return Err(("proto", format!("{}: no such file", proto.display())));
    }
    let own = proto.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    // The import paths first: a file under one is named from it, as protoc names it.
    let includes: Vec<&Path> = spec.import_paths.iter().map(|p| p.as_path()).chain([own]).collect();
    let mut compiler = protox::Compiler::new(includes).map_err(|e| ("proto", e.to_string()))?;
    compiler.open_file(proto).map_err(|e| ("proto", format!("{}: {}", proto.display(), one_line(&e))))?;
    let pool = compiler.descriptor_pool();
    let Some((service, name)) = spec.method.split_once('/') else {
        return Err(("grpc", format!("{:?} is not package.Service/Method", spec.method)));
    };
    let Some(found) = pool.get_service_by_name(service) else {
        let known: Vec<String> = pool.services().map(|s| s.full_name().to_string()).collect();
        return Err(("grpc", format!("{} declares no service {service} (it has: {})", proto.display(), list(&known))));
    };
    let Some(method) = found.methods().find(|m| m.name() == name) else {
        let known: Vec<String> = found.methods().map(|m| m.name().to_string()).collect();
        return Err(("grpc", format!("service {service} has no method {name} (it has: {})", list(&known))));
    };
    if method.is_client_streaming() {
        return Err(("grpc", format!("{} streams its requests: only unary and server-streaming calls are sent", spec.method)));
    }
    Ok(method)
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

fn one_line(e: &protox::Error) -> String {
    e.to_string().split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Err(why) when `data` (JSON whose strings may hold `${name}`) is not a message of
/// `desc`: every field it does not have (named by its path), then the first value of the
/// wrong type among the others, joined by "; ". A string holding a template stands for a
/// value of its field's type.
pub fn check_data(desc: &MessageDescriptor, data: &str) -> Result<(), String> {
    let mut value: Value = serde_json::from_str(data).map_err(|e| format!("the request message is not JSON: {e}"))?;
    if !value.is_object() {
        return Err(format!("the request message is a JSON object of {}'s fields", desc.full_name()));
    }
    let mut faults = Vec::new();
    stand_in_message(desc, &mut value, "", &mut faults);
    if let Err(e) = DynamicMessage::deserialize(desc.clone(), value) {
        faults.push(format!("not a {}: {e}", desc.full_name()));
    }
    if faults.is_empty() {
        Ok(())
    } else {
        Err(faults.join("; "))
    }
}

/// Stands in for the templates of a message's fields; a field the message does not have
/// is a fault, taken out so that the rest is still read.
fn stand_in_message(desc: &MessageDescriptor, value: &mut Value, at: &str, faults: &mut Vec<String>) {
    if desc.full_name().starts_with("google.protobuf.") {
        return;
    }
    let Value::Object(fields) = value else { return };
    let mut unknown = Vec::new();
    for (key, v) in fields.iter_mut() {
        let path = if at.is_empty() { key.clone() } else { format!("{at}.{key}") };
        let Some(field) = desc.get_field_by_json_name(key).or_else(|| desc.get_field_by_name(key)) else {
            let known: Vec<String> = desc.fields().map(|f| f.name().to_string()).collect();
            faults.push(format!("{path}: {} has no field {key} (it has: {})", desc.full_name(), list(&known)));
            unknown.push(key.clone());
            continue;
        };
        match v {
            Value::Array(items) if field.is_list() => {
                for (i, item) in items.iter_mut().enumerate() {
                    stand_in(&field.kind(), item, &format!("{path}[{i}]"), faults);
                }
            }
            Value::Object(entries) if field.is_map() => {
                let Kind::Message(entry) = field.kind() else { continue };
                let kind = entry.map_entry_value_field().kind();
                for (k, item) in entries.iter_mut() {
                    stand_in(&kind, item, &format!("{path}.{k}"), faults);
                }
            }
            _ => stand_in(&field.kind(), v, &path, faults),
        }
    }
    for key in unknown {
        fields.remove(&key);
    }
}

/// A string holding a template replaced by a value of `kind`; a message looked into.
fn stand_in(kind: &Kind, value: &mut Value, at: &str, faults: &mut Vec<String>) {
    if let Value::String(s) = value {
        if s.contains("${") {
            *value = match kind {
                Kind::String | Kind::Bytes => Value::String(String::new()),
                Kind::Bool => Value::Bool(false),
                Kind::Message(_) => Value::Null,
                _ => Value::from(0),
            };
        }
        return;
    }
    if let Kind::Message(m) = kind {
        stand_in_message(m, value, at, faults);
    }
}

/// The request message `json` (rendered) encoded and framed for `method`.
pub fn encode(method: &MethodDescriptor, json: &[u8]) -> Result<Bytes, String> {
    let mut de = serde_json::Deserializer::from_slice(json);
    let message = DynamicMessage::deserialize(method.input(), &mut de).and_then(|m| de.end().map(|()| m));
    let message = message.map_err(|e| format!("the request message is not a {}: {e}", method.input().full_name()))?;
    Ok(frame(&message.encode_to_vec()))
}

/// Appends a message of `desc` as JSON to `out`: every field, by its .proto name.
pub fn decode_into(desc: &MessageDescriptor, payload: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    let message = DynamicMessage::decode(desc.clone(), payload).map_err(|e| format!("a message that is not a {}: {e}", desc.full_name()))?;
    let options = SerializeOptions::new().skip_default_fields(false).use_proto_field_name(true);
    let mut ser = serde_json::Serializer::new(out);
    message.serialize_with_options(&mut ser, &options).map_err(|e| e.to_string())
}
