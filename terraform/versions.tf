# viewerfleet on Hetzner Cloud with Terraform/OpenTofu: the same hub + IPv6-only viewer nodes,
# firewalls and cloud-init (from ../grid) that `viewerfleet up` creates, for people who manage
# infrastructure with Terraform. Its `inventory` output feeds a `fleet: kind: grid` scenario.
terraform {
  required_version = ">= 1.3"
  required_providers {
    hcloud = {
      source  = "hetznercloud/hcloud"
      version = ">= 1.45"
    }
  }
}

# The token comes from HCLOUD_TOKEN and an alternative API address from HCLOUD_ENDPOINT,
# like the hcloud CLI and viewerfleet itself. Never put the token in a .tf or .tfvars file.
provider "hcloud" {}
