output "inventory" {
  description = "The fleet, in the shape `viewerfleet up --inventory` writes: hub URL for `fleet: kind: grid`, nodes, capacity."
  value = {
    run     = var.run_name
    hub_url = "http://${hcloud_server.hub.ipv4_address}:4444/"
    hub = {
      name = hcloud_server.hub.name
      ipv4 = hcloud_server.hub.ipv4_address
      ipv6 = hcloud_server.hub.ipv6_address
    }
    nodes            = [for n in hcloud_server.node : { name = n.name, ipv6_net = n.ipv6_network }]
    node_type        = var.node_type
    viewers_per_node = var.viewers_per_node
    capacity         = var.node_count * var.viewers_per_node
  }
}

output "hub_url" {
  description = "The Selenium Grid 4 hub's WebDriver URL (reachable from controller_ips only)."
  value       = "http://${hcloud_server.hub.ipv4_address}:4444/"
}

output "grid_username" {
  description = "The user name the hub's router asks for: export VIEWERFLEET_GRID_USER=$(terraform output -raw grid_username)."
  value       = var.grid_username
}

output "grid_password" {
  description = "The hub's router password: export VIEWERFLEET_GRID_PASSWORD=$(terraform output -raw grid_password)."
  value       = var.grid_password
  sensitive   = true
}
