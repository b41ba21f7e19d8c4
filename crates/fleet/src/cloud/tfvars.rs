//! `plan --tfvars FILE`: the plan as Terraform variables for `terraform/`, so a user who
//! manages servers with Terraform takes the sizes `plan` chose instead of copying them by hand.

use super::sizing::CloudSizing;
use crate::grid::auth::GridSecrets;
use crate::model::scenario::fleet::HcloudFleetSpec;
use crate::model::scenario::Plan;

/// What the Terraform module cannot do that the plan asks for, said in the file and on stderr.
pub fn limits(plan: &Plan, fleet: &CloudSizing) -> Vec<String> {
    let mut out = Vec::new();
    if fleet.hubs.count > 1 {
        out.push(format!(
            "the plan splits the fleet over {} hubs; the Terraform module makes one: run `viewerfleet up` for this fleet, or one module per hub",
            fleet.hubs.count
        ));
    }
    if plan.emulates_internet() {
        out.push(
            "viewers.networks puts viewers behind NATs; the Terraform module's slots are public, shaped with one link (the first class's)".into(),
        );
    } else if plan.networks.len() > 1 {
        out.push(
            "the scenario mixes links; the Terraform module shapes every slot with one link (the first class's)".into(),
        );
    }
    out
}

/// The `terraform.tfvars` text: the module's variables from the scenario and its plan.
/// `ssh_key` is the public key's text (the module takes the key, not its path); `secrets`
/// the run's Grid secrets (sensitive variables of the module): the file must be written
/// readable by its owner only.
pub fn render(
    plan: &Plan,
    spec: &HcloudFleetSpec,
    fleet: &CloudSizing,
    ssh_key: &str,
    secrets: &GridSecrets,
) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "# Written by `viewerfleet plan --tfvars` for scenario {} ({} viewers).\n# Sizes from this plan: {} × {} nodes, {} viewers per node, hub {}. The token is not here: export HCLOUD_TOKEN.\n# This file holds the run's Grid secrets: it is readable by its owner only.\n",
        plan.name,
        fleet.viewers,
        fleet.chosen.nodes,
        fleet.chosen.offer.name,
        fleet.chosen.viewers_per_node,
        fleet.hub.name,
    ));
    for limit in limits(plan, fleet) {
        out.push_str(&format!("# NOTE: {limit}.\n"));
    }
    let line = |out: &mut String, key: &str, value: String| {
        out.push_str(&format!("{key:<16} = {value}\n"));
    };
    line(&mut out, "run_name", hcl_string(&plan.name));
    line(&mut out, "location", hcl_string(&fleet.location));
    line(&mut out, "image", hcl_string(&spec.image));
    line(&mut out, "hub_type", hcl_string(&fleet.hub.name));
    line(&mut out, "node_type", hcl_string(&fleet.chosen.offer.name));
    line(&mut out, "node_count", fleet.chosen.nodes.to_string());
    line(
        &mut out,
        "viewers_per_node",
        fleet.chosen.viewers_per_node.to_string(),
    );
    let ips: Vec<String> = spec
        .controller_ips
        .iter()
        .map(|ip| hcl_string(ip))
        .collect();
    line(&mut out, "controller_ips", format!("[{}]", ips.join(", ")));
    if spec.webdriver_open_to_the_internet {
        line(&mut out, "webdriver_open_to_the_internet", "true".into());
    }
    line(&mut out, "ssh_public_key", hcl_string(ssh_key));
    let link = plan
        .networks
        .first()
        .and_then(|class| class.profile)
        .map(|p| p.link)
        .unwrap_or_default();
    let value = |v: Option<u32>| v.map_or("null".to_string(), |v| v.to_string());
    line(&mut out, "slot_down_kbit", value(link.download_kbps));
    line(&mut out, "slot_up_kbit", value(link.upload_kbps));
    line(&mut out, "slot_delay_ms", value(link.latency_ms));
    out.push_str("# The Grid's secrets, new for this file (sensitive: keep it to yourself). Runs reach\n# the hub with VIEWERFLEET_GRID_USER and VIEWERFLEET_GRID_PASSWORD set from these two\n# (`terraform output -raw grid_password`).\n");
    line(
        &mut out,
        "registration_secret",
        hcl_string(secrets.registration_secret.expose()),
    );
    line(
        &mut out,
        "grid_username",
        hcl_string(&secrets.controller.username),
    );
    line(
        &mut out,
        "grid_password",
        hcl_string(secrets.controller.password.expose()),
    );
    out
}

/// A quoted HCL string (backslashes, quotes and interpolation starts escaped).
fn hcl_string(text: &str) -> String {
    let escaped = text
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace("${", "$${")
        .replace("%{", "%%{")
        .replace('\n', "\\n");
    format!("\"{escaped}\"")
}

#[cfg(test)]
mod tests {
    use super::hcl_string;

    #[test]
    fn hcl_strings_escape_quotes_and_interpolation() {
        assert_eq!(hcl_string("a\"b"), "\"a\\\"b\"");
        assert_eq!(hcl_string("x${y}"), "\"x$${y}\"");
        assert_eq!(hcl_string("c:\\d"), "\"c:\\\\d\"");
    }
}
