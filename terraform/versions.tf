# viewerfleet on Hetzner Cloud with Terraform/OpenTofu: the same hub + IPv6-only viewer nodes,
# firewalls and cloud-init (from ../grid) that `viewerfleet up` creates, for people who manage
# infrastructure with Terraform. Its `inventory` output feeds a `fleet: kind: grid` scenario.
terraform {
  required_version = ">= 1.3"
  required_providers {
    hcloud = {
      source = "hetznercloud/hcloud"
      # Minor releases of 1.x only; .terraform.lock.hcl pins the exact release and its
      # hashes (all 13 platform archives). Upgrade: `terraform init -upgrade`, then commit
      # the lock file.
      version = "~> 1.68"
    }
  }
}

# The token comes from HCLOUD_TOKEN and an alternative API address from HCLOUD_ENDPOINT,
# like the hcloud CLI and viewerfleet itself. Never put the token in a .tf or .tfvars file.
provider "hcloud" {}
