//! What can be ordered where, and at what price: `GET /server_types` (cores, memory, the
//! locations each type is supported in, a deprecation per location, prices per location)
//! and `GET /pricing` (currency, VAT, the primary IPv4 that IPv6-only nodes save).
//!
//! Hetzner withdraws types over time (cx22…cx52 in 2025): a type is orderable in a location
//! when it lists that location and its deprecation there (if any) has not reached
//! `unavailable_after`. A deprecated type that is still orderable is kept but never chosen
//! by default. No type name is built in: every default is "what the API sells today".

use super::api::HcloudApi;
use super::CloudError;
use hcloud::models;

/// One server type as sold in one location.
#[derive(Debug, Clone, PartialEq)]
pub struct Offer {
    pub name: String,
    pub cores: u32,
    pub memory_gb: f64,
    /// `shared` or `dedicated`.
    pub cpu_type: String,
    /// `x86` or `arm`.
    pub architecture: String,
    pub hourly_net: f64,
    pub hourly_gross: f64,
    pub monthly_net: f64,
    /// Deprecated in this location, orderable until this date (RFC 3339).
    pub unavailable_after: Option<String>,
}

impl Offer {
    /// Current (not deprecated) and x86, like the machines the per-viewer budget was measured on.
    pub fn default_choice(&self) -> bool {
        self.unavailable_after.is_none() && self.architecture == "x86"
    }

    /// `cx33 (4 shared cores, 8 GB, 0.0087 EUR/h)`.
    pub fn describe(&self, currency: &str) -> String {
        let retiring = match &self.unavailable_after {
            Some(date) => format!(
                ", deprecated: orderable until {}",
                &date[..date.len().min(10)]
            ),
            None => String::new(),
        };
        format!(
            "{} ({} {} cores, {:.0} GB, {:.4} {currency}/h{retiring})",
            self.name, self.cores, self.cpu_type, self.memory_gb, self.hourly_net
        )
    }
}

/// A type the API lists that cannot be ordered in the location, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct NotOrderable {
    pub name: String,
    pub why: String,
}

/// What can be ordered in one location.
#[derive(Debug, Clone, PartialEq)]
pub struct Catalogue {
    pub location: String,
    pub currency: String,
    pub vat_rate: String,
    /// Orderable here, cheapest first.
    pub offers: Vec<Offer>,
    /// Listed by the API but not orderable here.
    pub not_orderable: Vec<NotOrderable>,
    /// A primary IPv4 per hour (net); IPv6-only servers do not pay it.
    pub ipv4_hourly_net: f64,
}

impl Catalogue {
    pub fn offer(&self, name: &str) -> Option<&Offer> {
        self.offers.iter().find(|o| o.name == name)
    }

    /// The orderable types, for error messages: `cx23 (…), cx33 (…), …`.
    pub fn orderable(&self) -> String {
        self.offers
            .iter()
            .map(|o| o.describe(&self.currency))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `type` as a `fleet.<field>` setting: orderable here, or an error saying why not and
    /// listing what is.
    pub(crate) fn require(&self, field: &str, name: &str) -> Result<&Offer, CloudError> {
        if let Some(offer) = self.offer(name) {
            return Ok(offer);
        }
        let why = self
            .not_orderable
            .iter()
            .find(|n| n.name == name)
            .map(|n| n.why.clone())
            .unwrap_or_else(|| "Hetzner lists no server type of that name".into());
        Err(CloudError::Invalid {
            field: field.into(),
            message: format!(
                "`{name}` cannot be ordered in {}: {why}. Orderable there now: {}",
                self.location,
                self.orderable()
            ),
        })
    }
}

fn num(s: &str) -> f64 {
    s.trim().parse().unwrap_or(0.0)
}

/// Whether an RFC 3339 date lies in the past.
fn passed(date: &str) -> bool {
    chrono::DateTime::parse_from_rfc3339(date)
        .map(|d| d.timestamp() <= chrono::Utc::now().timestamp())
        .unwrap_or(false)
}

/// How `t` stands in `location`: `Ok(deprecated-until)` when orderable, `Err(why)` if not.
fn standing(t: &models::ServerType, location: &str) -> Result<Option<String>, String> {
    let Some(here) = t.locations.iter().find(|l| l.name == location) else {
        let places: Vec<&str> = t.locations.iter().map(|l| l.name.as_str()).collect();
        return Err(format!("not offered there (only in {})", places.join(", ")));
    };
    // The per-location deprecation is authoritative (the top-level `deprecated` and
    // `deprecation` fields are being phased out and say nothing about one location).
    match here.deprecation.as_deref() {
        Some(d) if passed(&d.unavailable_after) => Err(format!(
            "deprecated (announced {}), unavailable since {}",
            &d.announced[..d.announced.len().min(10)],
            &d.unavailable_after[..d.unavailable_after.len().min(10)]
        )),
        Some(d) => Ok(Some(d.unavailable_after.clone())),
        None => Ok(None),
    }
}

/// Reads server types and prices for `location`.
pub async fn fetch(api: &HcloudApi, location: &str) -> Result<Catalogue, CloudError> {
    let pricing: models::ListPricesResponse = api
        .get("read prices (GET /pricing)", "/pricing", &[])
        .await?;
    let pricing = pricing.pricing;
    let types: Vec<models::ServerType> = api
        .list("list server types", "/server_types", "server_types", &[])
        .await?;
    let mut offers = Vec::new();
    let mut not_orderable = Vec::new();
    for t in types {
        let unavailable_after = match standing(&t, location) {
            Ok(until) => until,
            Err(why) => {
                not_orderable.push(NotOrderable { name: t.name, why });
                continue;
            }
        };
        let price = t.prices.iter().find(|p| p.location == location).map(|p| {
            (
                num(&p.price_hourly.net),
                num(&p.price_hourly.gross),
                num(&p.price_monthly.net),
            )
        });
        let price = price.or_else(|| {
            let listed = pricing.server_types.iter().find(|p| p.name == t.name)?;
            let p = listed.prices.iter().find(|p| p.location == location)?;
            Some((
                num(&p.price_hourly.net),
                num(&p.price_hourly.gross),
                num(&p.price_monthly.net),
            ))
        });
        let Some((hourly_net, hourly_gross, monthly_net)) = price else {
            not_orderable.push(NotOrderable {
                name: t.name,
                why: "no price for this location".into(),
            });
            continue;
        };
        offers.push(Offer {
            name: t.name.clone(),
            cores: t.cores.max(0) as u32,
            memory_gb: t.memory,
            cpu_type: match t.cpu_type {
                models::server_type::CpuType::Dedicated => "dedicated".into(),
                models::server_type::CpuType::Shared => "shared".into(),
            },
            architecture: match t.architecture {
                models::Architecture::Arm => "arm".into(),
                models::Architecture::X86 => "x86".into(),
            },
            hourly_net,
            hourly_gross,
            monthly_net,
            unavailable_after,
        });
    }
    offers.sort_by(|a, b| {
        a.hourly_net
            .total_cmp(&b.hourly_net)
            .then(a.name.cmp(&b.name))
    });
    if offers.is_empty() {
        return Err(CloudError::Invalid {
            field: "location".into(),
            message: format!(
                "no server type can be ordered in `{location}`; use e.g. fsn1, nbg1, hel1, ash, hil or sin"
            ),
        });
    }
    let ipv4_hourly_net = pricing
        .primary_ips
        .iter()
        .filter(|p| matches!(p.r#type, models::IpType::Ipv4))
        .flat_map(|p| p.prices.iter())
        .find(|p| p.location == location)
        .map(|p| num(&p.price_hourly.net))
        .unwrap_or(0.0);
    Ok(Catalogue {
        location: location.to_string(),
        currency: pricing.currency.clone(),
        vat_rate: pricing.vat_rate.clone(),
        offers,
        not_orderable,
        ipv4_hourly_net,
    })
}
