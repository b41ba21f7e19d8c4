//! Server types and prices, read from the API (`/server_types` for cores and memory,
//! `/pricing` for what they cost in the chosen location, and the primary IPv4 price that
//! IPv6-only nodes save).

use super::api::{all_pages, HcloudApi};
use super::CloudError;
use hcloud::apis::{pricing_api, server_types_api};

/// One server type as sold in one location.
#[derive(Debug, Clone, PartialEq)]
pub struct Offer {
    pub name: String,
    pub cores: u32,
    pub memory_gb: f64,
    /// `shared` or `dedicated`.
    pub cpu_type: String,
    pub hourly_net: f64,
    pub hourly_gross: f64,
    pub monthly_net: f64,
}

/// Prices in one location.
#[derive(Debug, Clone, PartialEq)]
pub struct Catalogue {
    pub location: String,
    pub currency: String,
    pub vat_rate: String,
    pub offers: Vec<Offer>,
    /// A primary IPv4 per hour (net); IPv6-only servers do not pay it.
    pub ipv4_hourly_net: f64,
}

impl Catalogue {
    pub fn offer(&self, name: &str) -> Option<&Offer> {
        self.offers.iter().find(|o| o.name == name)
    }
}

fn num(s: &str) -> f64 {
    s.trim().parse().unwrap_or(0.0)
}

/// Reads server types and prices for `location`.
pub async fn fetch(api: &HcloudApi, location: &str) -> Result<Catalogue, CloudError> {
    let pricing = api
        .call("read prices (GET /pricing)", |c| async move {
            pricing_api::list_prices(&c).await
        })
        .await?
        .pricing;
    let types = all_pages(|page| async move {
        let resp = api
            .call("list server types", |c| async move {
                server_types_api::list_server_types(
                    &c,
                    server_types_api::ListServerTypesParams {
                        page: Some(page),
                        per_page: Some(50),
                        ..Default::default()
                    },
                )
                .await
            })
            .await?;
        Ok((resp.server_types, resp.meta.pagination.next_page))
    })
    .await?;
    let mut offers = Vec::new();
    for t in types {
        if t.deprecated == Some(true) {
            continue;
        }
        let Some(prices) = pricing.server_types.iter().find(|p| p.name == t.name) else {
            continue;
        };
        let Some(p) = prices.prices.iter().find(|p| p.location == location) else {
            continue;
        };
        offers.push(Offer {
            name: t.name.clone(),
            cores: t.cores.max(0) as u32,
            memory_gb: t.memory,
            cpu_type: match t.cpu_type {
                hcloud::models::server_type::CpuType::Dedicated => "dedicated".into(),
                hcloud::models::server_type::CpuType::Shared => "shared".into(),
            },
            hourly_net: num(&p.price_hourly.net),
            hourly_gross: num(&p.price_hourly.gross),
            monthly_net: num(&p.price_monthly.net),
        });
    }
    if offers.is_empty() {
        return Err(CloudError::Invalid {
            field: "location".into(),
            message: format!(
                "no server type is sold in `{location}`; use e.g. fsn1, nbg1, hel1, ash or hil"
            ),
        });
    }
    let ipv4_hourly_net = pricing
        .primary_ips
        .iter()
        .filter(|p| matches!(p.r#type, hcloud::models::IpType::Ipv4))
        .flat_map(|p| p.prices.iter())
        .find(|p| p.location == location)
        .map(|p| num(&p.price_hourly.net))
        .unwrap_or(0.0);
    Ok(Catalogue {
        location: location.to_string(),
        currency: pricing.currency.clone(),
        vat_rate: pricing.vat_rate.clone(),
        offers,
        ipv4_hourly_net,
    })
}
