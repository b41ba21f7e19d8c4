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
  validation {
    condition     = alltrue([for c in var.controller_ips : can(cidrsubnet(c, 0, 0))])
    error_message = "controller_ips: each entry must be an address range, e.g. 203.0.113.7/32 or 2001:db8::/64."
  }
  # As `viewerfleet up` refuses them: an IPv4 range wider than /8 or an IPv6 range wider
  # than /16 opens the hub to (a large part of) the internet.
  validation {
    condition = var.webdriver_open_to_the_internet || alltrue([
      for c in var.controller_ips : try(tonumber(split("/", c)[1]), 128) >= (strcontains(c, ":") ? 16 : 8)
    ])
    error_message = "controller_ips: a range this wide opens the hub's WebDriver port (4444) and SSH to a large part of the internet, and whoever reaches the port controls every browser of the run. List this machine's public address instead (e.g. 203.0.113.7/32; see `curl -4 ifconfig.co`), or, if you really mean it, set webdriver_open_to_the_internet = true."
  }
}

variable "webdriver_open_to_the_internet" {
  description = "Accept controller_ips wider than an IPv4 /8 or an IPv6 /16 (the hub's WebDriver port then faces the internet, behind its password only)."
  type        = bool
  default     = false
}

variable "registration_secret" {
  description = "The Grid's registration secret between the hub and its nodes (`viewerfleet plan --tfvars` generates one per run): 32 or more characters of letters and digits."
  type        = string
  sensitive   = true
  validation {
    condition     = can(regex("^[A-Za-z0-9]{32,}$", var.registration_secret))
    error_message = "registration_secret: 32 or more letters and digits; `viewerfleet plan --tfvars` writes a random one (or: openssl rand -hex 32)."
  }
}

variable "grid_username" {
  description = "The user name the hub's router asks of WebDriver clients (the controller: set VIEWERFLEET_GRID_USER to it)."
  type        = string
  default     = "viewerfleet"
  validation {
    condition     = can(regex("^[A-Za-z0-9._-]+$", var.grid_username))
    error_message = "grid_username: letters, digits, dots, dashes and underscores only."
  }
}

variable "grid_password" {
  description = "The password the hub's router asks of WebDriver clients (the controller: set VIEWERFLEET_GRID_PASSWORD to it); `viewerfleet plan --tfvars` generates one per run."
  type        = string
  sensitive   = true
  validation {
    condition     = can(regex("^[A-Za-z0-9]{32,}$", var.grid_password))
    error_message = "grid_password: 32 or more letters and digits; `viewerfleet plan --tfvars` writes a random one (or: openssl rand -hex 32)."
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
