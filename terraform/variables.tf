variable "run_name" {
  description = "Names and labels every resource (label viewerfleet-run); letters, digits and dashes."
  type        = string
  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9-]{0,40}$", var.run_name))
    error_message = "run_name: use up to 41 lowercase letters, digits and dashes, e.g. peertube-1000-live."
  }
}

variable "location" {
  description = "Hetzner location for all servers (fsn1, nbg1, hel1, ash, hil)."
  type        = string
  default     = "fsn1"
}

variable "image" {
  description = "OS image; grid/node-bootstrap.sh is written for Debian 12."
  type        = string
  default     = "debian-12"
}

variable "hub_type" {
  description = "Server type of the Selenium hub (one Hetzner sells in the location: `viewerfleet plan` names the cheapest)."
  type        = string
  default     = "cx33"
}

variable "node_type" {
  description = "Server type of the viewer nodes (see `viewerfleet plan` for the cheapest fit)."
  type        = string
  default     = "cx33"
}

variable "node_count" {
  description = "Number of viewer nodes (`viewerfleet plan` prints it)."
  type        = number
  validation {
    condition     = var.node_count >= 1
    error_message = "node_count must be at least 1."
  }
}

variable "viewers_per_node" {
  description = "Browsers per node (Selenium max-sessions and viewer slots); `viewerfleet plan` prints it."
  type        = number
  default     = 16
}

variable "controller_ips" {
  description = "CIDRs of the machine running viewerfleet: only they reach the hub (4444), the nodes' load endpoints (9465, over IPv6) and SSH."
  type        = list(string)
  validation {
    condition     = length(var.controller_ips) > 0
    error_message = "controller_ips: list this machine's public address, e.g. [\"203.0.113.7/32\"]."
  }
}

variable "ssh_public_key" {
  description = "OpenSSH public key text installed on every server."
  type        = string
}

variable "viewer_slots_script" {
  description = "Text of grid/viewer-slots.sh (each viewer its own IPv6 + tc shaping); null: read ../grid/viewer-slots.sh when present."
  type        = string
  default     = null
}

variable "slot_down_kbit" {
  description = "Per-viewer download limit in kbit/s (PeerTube 2023: 2000); null: unshaped."
  type        = number
  default     = null
}

variable "slot_up_kbit" {
  description = "Per-viewer upload limit in kbit/s (PeerTube 2023: 300); null: unshaped."
  type        = number
  default     = null
}

variable "slot_delay_ms" {
  description = "Per-viewer added latency in ms (PeerTube 2023: 500); null: none."
  type        = number
  default     = null
}
