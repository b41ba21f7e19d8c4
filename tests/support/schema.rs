//! The committed JSON Schemas (`schemas/`), checked against real outputs with the kit's
//! checker (`viewerfleet_kit::json_schema`: the subset of JSON Schema those files use).

use std::path::Path;

/// Parses `text` (the whole of a command's stdout) as one JSON document and checks it
/// against `schemas/<file>`; panics with every violation.
pub fn assert_valid(file: &str, text: &str) -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("schemas")
        .join(file);
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let doc: serde_json::Value = serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{text}"));
    let errors = viewerfleet_kit::json_schema::validate(&schema, &doc);
    assert!(
        errors.is_empty(),
        "{file}: the output does not match its schema:\n{}\n{text}",
        errors.join("\n")
    );
    doc
}
