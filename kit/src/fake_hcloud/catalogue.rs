//! The fake's server types and prices, shaped like today's `/server_types` and `/pricing`:
//! each type lists the locations where it is supported, with a `deprecation` per location
//! (`announced`, `unavailable_after`); the old top-level `deprecated` / `deprecation` fields
//! are still sent, as the real API does while it phases them out.
//!
//! The line-up follows Hetzner's at the end of 2025: cx22/cx32/cx42/cx52 withdrawn (deprecated,
//! no longer orderable); cx23/cx33/cx43/cx53 (EU only) and cpx22…cpx62 current; cpx21…cpx51
//! deprecated but still orderable in the EU (current in the US); ccx13…ccx63 everywhere;
//! cax (Arm) in the EU. Prices are the fake's own (EUR, near the list prices); real runs read
//! live prices.

use serde_json::{json, Value};

pub const LOCATIONS: &[&str] = &["fsn1", "nbg1", "hel1", "ash", "hil", "sin"];
const EU: &[&str] = &["fsn1", "nbg1", "hel1"];
const ALL: &[&str] = LOCATIONS;

/// Where a type stands.
#[derive(Debug, Clone, Copy)]
enum Life {
    Current,
    /// Deprecated everywhere, `unavailable_after` passed: listed but not orderable.
    Withdrawn,
    /// Deprecated in these locations with `unavailable_after` still ahead: orderable there
    /// for now, current elsewhere.
    Retiring(&'static [&'static str]),
}

struct TypeDef {
    name: &'static str,
    cpu: &'static str,
    arch: &'static str,
    category: &'static str,
    cores: i64,
    memory: f64,
    disk: i64,
    /// EUR net per hour in the EU; elsewhere 20% more.
    hourly: f64,
    locations: &'static [&'static str],
    life: Life,
}

/// `(cores, memory GB, disk GB)`.
type Size = (i64, f64, i64);

const fn t(
    name: &'static str,
    cpu: &'static str,
    (cores, memory, disk): Size,
    hourly: f64,
    locations: &'static [&'static str],
    life: Life,
) -> TypeDef {
    let (arch, category) = match name.as_bytes() {
        [b'c', b'a', b'x', ..] => ("arm", "cost_optimized"),
        [b'c', b'c', b'x', ..] => ("x86", "general_purpose"),
        [b'c', b'p', b'x', ..] => ("x86", "regular_purpose"),
        _ => ("x86", "cost_optimized"),
    };
    TypeDef {
        name,
        cpu,
        arch,
        category,
        cores,
        memory,
        disk,
        hourly,
        locations,
        life,
    }
}

#[rustfmt::skip]
const TYPES: &[TypeDef] = &[
    t("cx22", "shared", (2, 4.0, 40), 0.0060, EU, Life::Withdrawn),
    t("cx32", "shared", (4, 8.0, 80), 0.0113, EU, Life::Withdrawn),
    t("cx42", "shared", (8, 16.0, 160), 0.0273, EU, Life::Withdrawn),
    t("cx52", "shared", (16, 32.0, 320), 0.0540, EU, Life::Withdrawn),
    t("cx23", "shared", (2, 4.0, 40), 0.0053, EU, Life::Current),
    t("cx33", "shared", (4, 8.0, 80), 0.0087, EU, Life::Current),
    t("cx43", "shared", (8, 16.0, 160), 0.0222, EU, Life::Current),
    t("cx53", "shared", (16, 32.0, 320), 0.0444, EU, Life::Current),
    t("cpx21", "shared", (3, 4.0, 80), 0.0143, ALL, Life::Retiring(EU)),
    t("cpx31", "shared", (4, 8.0, 160), 0.0224, ALL, Life::Retiring(EU)),
    t("cpx41", "shared", (8, 16.0, 240), 0.0409, ALL, Life::Retiring(EU)),
    t("cpx51", "shared", (16, 32.0, 360), 0.0842, ALL, Life::Retiring(EU)),
    t("cpx22", "shared", (2, 4.0, 80), 0.0104, ALL, Life::Current),
    t("cpx32", "shared", (4, 8.0, 160), 0.0176, ALL, Life::Current),
    t("cpx42", "shared", (8, 16.0, 320), 0.0320, ALL, Life::Current),
    t("cpx52", "shared", (12, 24.0, 480), 0.0448, ALL, Life::Current),
    t("cpx62", "shared", (16, 32.0, 640), 0.0592, ALL, Life::Current),
    t("ccx13", "dedicated", (2, 8.0, 80), 0.0200, ALL, Life::Current),
    t("ccx23", "dedicated", (4, 16.0, 160), 0.0392, ALL, Life::Current),
    t("ccx33", "dedicated", (8, 32.0, 240), 0.0777, ALL, Life::Current),
    t("ccx43", "dedicated", (16, 64.0, 360), 0.1553, ALL, Life::Current),
    t("ccx53", "dedicated", (32, 128.0, 600), 0.3105, ALL, Life::Current),
    t("ccx63", "dedicated", (48, 192.0, 960), 0.4658, ALL, Life::Current),
    t("cax11", "shared", (2, 4.0, 40), 0.0060, EU, Life::Current),
    t("cax21", "shared", (4, 8.0, 80), 0.0104, EU, Life::Current),
    t("cax31", "shared", (8, 16.0, 160), 0.0207, EU, Life::Current),
    t("cax41", "shared", (16, 32.0, 320), 0.0400, EU, Life::Current),
];

fn day(offset_days: i64) -> String {
    (chrono::Utc::now() + chrono::Duration::days(offset_days))
        .format("%Y-%m-%dT00:00:00Z")
        .to_string()
}

/// `{announced, unavailable_after}`; dates relative to today so the fake never ages.
fn deprecation(unavailable_in_days: i64) -> Value {
    json!({"announced": day(unavailable_in_days - 180), "unavailable_after": day(unavailable_in_days)})
}

impl TypeDef {
    /// The deprecation of this type in `location`, if it is deprecated there.
    fn deprecation_in(&self, location: &str) -> Option<Value> {
        match self.life {
            Life::Current => None,
            Life::Withdrawn => Some(deprecation(-60)),
            Life::Retiring(places) => places.contains(&location).then(|| deprecation(90)),
        }
    }

    fn hourly_in(&self, location: &str) -> f64 {
        if EU.contains(&location) {
            self.hourly
        } else {
            self.hourly * 1.2
        }
    }
}

fn price(net: f64) -> Value {
    json!({"net": format!("{net:.10}"), "gross": format!("{:.10}", net * 1.19)})
}

fn location_prices(def: &TypeDef) -> Vec<Value> {
    def.locations
        .iter()
        .map(|loc| {
            let h = def.hourly_in(loc);
            let eu = EU.contains(loc);
            json!({"location": loc, "price_hourly": price(h),
                   "price_monthly": price((h * 730.0 * 100.0).round() / 100.0 - 0.0001),
                   "included_traffic": if eu { 21990232555520i64 } else { 1099511627776i64 },
                   "price_per_tb_traffic": price(1.0)})
        })
        .collect()
}

fn location_id(name: &str) -> usize {
    LOCATIONS.iter().position(|l| *l == name).unwrap_or(0) + 1
}

/// One server type as `GET /server_types` shows it.
fn type_json(id: usize, def: &TypeDef) -> Value {
    let withdrawn = matches!(def.life, Life::Withdrawn);
    json!({
        "id": id, "name": def.name, "description": def.name.to_uppercase(),
        "cores": def.cores, "memory": def.memory, "disk": def.disk,
        "cpu_type": def.cpu, "storage_type": "local", "architecture": def.arch,
        "category": def.category,
        // Deprecated fields, still sent: the per-location deprecation is authoritative.
        "deprecated": withdrawn,
        "deprecation": if withdrawn { deprecation(-60) } else { Value::Null },
        "locations": def.locations.iter().map(|l| json!({
            "id": location_id(l), "name": l, "deprecation": def.deprecation_in(l),
        })).collect::<Vec<_>>(),
        "prices": location_prices(def),
    })
}

/// Every server type.
pub fn server_types() -> Vec<Value> {
    TYPES
        .iter()
        .enumerate()
        .map(|(i, d)| type_json(i + 1, d))
        .collect()
}

/// The type named `name`, as embedded in a server.
pub fn server_type(name: &str) -> Option<Value> {
    TYPES
        .iter()
        .enumerate()
        .find(|(_, d)| d.name == name)
        .map(|(i, d)| type_json(i + 1, d))
}

/// Why `name` cannot be ordered in `location`, if it cannot: Hetzner's error code and message.
pub fn refuse_order(name: &str, location: &str) -> Option<(&'static str, String)> {
    let Some(def) = TYPES.iter().find(|d| d.name == name) else {
        return Some((
            "invalid_input",
            format!("invalid input in field 'server_type': server type {name} not found"),
        ));
    };
    if !def.locations.contains(&location) {
        return Some((
            "invalid_input",
            "unsupported location for server type".to_string(),
        ));
    }
    if matches!(def.life, Life::Withdrawn) {
        return Some((
            "invalid_input",
            format!("server type {name} is deprecated and no longer available in {location}"),
        ));
    }
    None
}

/// `GET /pricing`.
pub fn pricing() -> Value {
    let types: Vec<Value> = TYPES
        .iter()
        .enumerate()
        .map(|(i, d)| json!({"id": i + 1, "name": d.name, "prices": location_prices(d)}))
        .collect();
    let per_loc = |monthly: f64| -> Vec<Value> {
        LOCATIONS
            .iter()
            .map(|l| json!({"location": l, "price_hourly": price(monthly / 730.0), "price_monthly": price(monthly)}))
            .collect()
    };
    json!({"pricing": {
        "currency": "EUR", "vat_rate": "19.00",
        "image": {"price_per_gb_month": price(0.0119)},
        "floating_ip": {"price_monthly": price(3.0)},
        "floating_ips": [{"type": "ipv4", "prices": LOCATIONS.iter().map(|l| json!({"location": l, "price_monthly": price(3.0)})).collect::<Vec<_>>()}],
        "primary_ips": [{"type": "ipv4", "prices": per_loc(0.5)}, {"type": "ipv6", "prices": per_loc(0.0)}],
        "server_backup": {"percentage": "20.00"},
        "volume": {"price_per_gb_month": price(0.044)},
        "load_balancer_types": [],
        "server_types": types,
    }})
}

/// A location as embedded in a server.
pub fn location(name: &str) -> Value {
    let (city, country, zone) = match name {
        "nbg1" => ("Nuremberg", "DE", "eu-central"),
        "hel1" => ("Helsinki", "FI", "eu-central"),
        "ash" => ("Ashburn, VA", "US", "us-east"),
        "hil" => ("Hillsboro, OR", "US", "us-west"),
        "sin" => ("Singapore", "SG", "ap-southeast"),
        _ => ("Falkenstein", "DE", "eu-central"),
    };
    json!({"id": location_id(name), "name": name, "description": format!("{city} DC"), "city": city,
           "country": country, "latitude": 50.47612, "longitude": 12.370071, "network_zone": zone})
}
