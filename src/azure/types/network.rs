//! Network bodies (Microsoft.Network 2024-07-01): virtual networks and subnets, network security
//! groups and rules, public IP addresses, network interfaces.
//!
//! In the network specs a resource's top-level `id` and `location` are writable but `name`,
//! `type` and `etag` are read-only; references to other resources (a NIC's subnet) may be sent
//! as `{id}` alone, which is all dsinfra sends.

use serde::{Deserialize, Serialize};

use super::common::{SubResource, Tags};

/// A virtual network with its subnets inline.
///
/// A VNet PUT replaces the subnet list: subnets missing from it are deleted (or refused with
/// InUseSubnetCannotBeDeleted), so callers always send every subnet.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualNetwork {
    /// Read-only in practice (the id comes from the URL).
    #[serde(default, skip_serializing)]
    pub id: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub name: Option<String>,
    /// Read-only.
    #[serde(default, rename = "type", skip_serializing)]
    pub kind: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub etag: Option<String>,
    /// Region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// Tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    /// Properties.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<VirtualNetworkProperties>,
}

/// `VirtualNetworkPropertiesFormat`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualNetworkProperties {
    /// The address prefixes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_space: Option<AddressSpace>,
    /// The subnets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnets: Option<Vec<Subnet>>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub provisioning_state: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub resource_guid: Option<String>,
}

/// `AddressSpace`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AddressSpace {
    /// CIDR prefixes, e.g. `10.0.0.0/16`.
    #[serde(default)]
    pub address_prefixes: Vec<String>,
}

/// A subnet, inline in a VNet or on its own at `.../subnets/{name}`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Subnet {
    /// The subnet id (returned by ARM; not needed to create).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The name, required when the subnet is inline in a VNet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub etag: Option<String>,
    /// Read-only in effect (`Microsoft.Network/virtualNetworks/subnets`).
    #[serde(default, rename = "type", skip_serializing)]
    pub kind: Option<String>,
    /// Properties.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<SubnetProperties>,
}

/// `SubnetPropertiesFormat`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubnetProperties {
    /// The CIDR prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_prefix: Option<String>,
    /// The NSG applied to the subnet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_security_group: Option<SubResource>,
    /// Whether VMs get default outbound access.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_outbound_access: Option<bool>,
    /// Service endpoints (`Microsoft.Storage`): traffic to those services leaves the subnet
    /// with its identity, which is what a storage account's VNet rule matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_endpoints: Option<Vec<ServiceEndpoint>>,
    /// Read-only: NIC IP configurations in the subnet (what blocks its deletion).
    #[serde(default, skip_serializing)]
    pub ip_configurations: Option<Vec<SubResource>>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub provisioning_state: Option<String>,
}

/// `ServiceEndpointPropertiesFormat`: one service endpoint of a subnet.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceEndpoint {
    /// The service, e.g. `Microsoft.Storage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// Regions it covers (Azure fills in the VNet's region and its pair when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locations: Option<Vec<String>>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub provisioning_state: Option<String>,
}

/// A network security group.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkSecurityGroup {
    /// Read-only in practice.
    #[serde(default, skip_serializing)]
    pub id: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub name: Option<String>,
    /// Read-only.
    #[serde(default, rename = "type", skip_serializing)]
    pub kind: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub etag: Option<String>,
    /// Region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// Tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    /// Properties.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<NetworkSecurityGroupProperties>,
}

/// `NetworkSecurityGroupPropertiesFormat`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkSecurityGroupProperties {
    /// The user's rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_rules: Option<Vec<SecurityRule>>,
    /// Read-only: Azure's built-in rules (priorities 65000+).
    #[serde(default, skip_serializing)]
    pub default_security_rules: Option<Vec<SecurityRule>>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub network_interfaces: Option<Vec<SubResource>>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub subnets: Option<Vec<SubResource>>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub provisioning_state: Option<String>,
}

/// A security rule, inline in an NSG.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecurityRule {
    /// The rule id (returned by ARM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The rule name, unique in the NSG.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub etag: Option<String>,
    /// Read-only in effect.
    #[serde(default, rename = "type", skip_serializing)]
    pub kind: Option<String>,
    /// Properties.
    pub properties: SecurityRuleProperties,
}

/// `SecurityRulePropertiesFormat`: protocol, access, priority and direction are required.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecurityRuleProperties {
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Required.
    pub protocol: SecurityRuleProtocol,
    /// Port or range, or `*`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_port_range: Option<String>,
    /// Port or range, or `*`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination_port_range: Option<String>,
    /// Several destination ports (instead of `destination_port_range`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination_port_ranges: Option<Vec<String>>,
    /// CIDR, IP, service tag or `*`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_address_prefix: Option<String>,
    /// Several sources (instead of `source_address_prefix`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_address_prefixes: Option<Vec<String>>,
    /// CIDR, IP, service tag or `*`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination_address_prefix: Option<String>,
    /// Required.
    pub access: SecurityRuleAccess,
    /// Required; 100-4096, lower wins.
    pub priority: i32,
    /// Required.
    pub direction: SecurityRuleDirection,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub provisioning_state: Option<String>,
}

/// `SecurityRuleProtocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SecurityRuleProtocol {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
    /// ICMP.
    Icmp,
    /// ESP.
    Esp,
    /// AH.
    Ah,
    /// Any protocol.
    #[serde(rename = "*")]
    Any,
}

/// `SecurityRuleAccess`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SecurityRuleAccess {
    /// Allow.
    Allow,
    /// Deny.
    Deny,
}

/// `SecurityRuleDirection`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SecurityRuleDirection {
    /// Inbound.
    Inbound,
    /// Outbound.
    Outbound,
}

impl SecurityRule {
    /// An inbound TCP allow rule from `source` to `port`, the shape dsinfra uses for SSH.
    pub fn allow_inbound_tcp(name: &str, priority: i32, port: &str, source: &str) -> Self {
        Self {
            id: None,
            name: Some(name.to_string()),
            etag: None,
            kind: None,
            properties: SecurityRuleProperties {
                description: None,
                protocol: SecurityRuleProtocol::Tcp,
                source_port_range: Some("*".into()),
                destination_port_range: Some(port.to_string()),
                destination_port_ranges: None,
                source_address_prefix: Some(source.to_string()),
                source_address_prefixes: None,
                destination_address_prefix: Some("*".into()),
                access: SecurityRuleAccess::Allow,
                priority,
                direction: SecurityRuleDirection::Inbound,
                provisioning_state: None,
            },
        }
    }
}

/// A public IP address. dsinfra creates Standard SKU with Static allocation: Basic is being
/// retired and Standard requires Static.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PublicIpAddress {
    /// Read-only in practice.
    #[serde(default, skip_serializing)]
    pub id: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub name: Option<String>,
    /// Read-only.
    #[serde(default, rename = "type", skip_serializing)]
    pub kind: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub etag: Option<String>,
    /// Region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// Tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    /// SKU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sku: Option<PublicIpSku>,
    /// Availability zones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zones: Option<Vec<String>>,
    /// Properties.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<PublicIpProperties>,
}

/// `PublicIPAddressSku`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PublicIpSku {
    /// Basic or Standard.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<PublicIpSkuName>,
    /// Regional or Global.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<PublicIpSkuTier>,
}

/// `PublicIPAddressSkuName`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PublicIpSkuName {
    /// Basic (being retired).
    Basic,
    /// Standard.
    Standard,
}

/// `PublicIPAddressSkuTier`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PublicIpSkuTier {
    /// Regional.
    Regional,
    /// Global.
    Global,
}

/// `IPAllocationMethod`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum IpAllocationMethod {
    /// Static.
    Static,
    /// Dynamic.
    Dynamic,
}

/// `IPVersion`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum IpVersion {
    /// IPv4.
    IPv4,
    /// IPv6.
    IPv6,
}

/// `PublicIPAddressPropertiesFormat`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PublicIpProperties {
    /// Static or Dynamic.
    #[serde(
        default,
        rename = "publicIPAllocationMethod",
        skip_serializing_if = "Option::is_none"
    )]
    pub public_ip_allocation_method: Option<IpAllocationMethod>,
    /// IPv4 or IPv6.
    #[serde(
        default,
        rename = "publicIPAddressVersion",
        skip_serializing_if = "Option::is_none"
    )]
    pub public_ip_address_version: Option<IpVersion>,
    /// Idle timeout in minutes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout_in_minutes: Option<i32>,
    /// The address ARM allocated. Writable in the spec but never set by dsinfra, so a read
    /// body sent back does not pin it.
    #[serde(default, skip_serializing)]
    pub ip_address: Option<String>,
    /// Read-only: the NIC IP configuration using this address.
    #[serde(default, skip_serializing)]
    pub ip_configuration: Option<SubResource>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub provisioning_state: Option<String>,
}

impl PublicIpAddress {
    /// A Standard, Static, IPv4 address in `location`.
    pub fn standard_static(location: impl Into<String>, tags: Option<Tags>) -> Self {
        Self {
            location: Some(location.into()),
            tags,
            sku: Some(PublicIpSku {
                name: Some(PublicIpSkuName::Standard),
                tier: Some(PublicIpSkuTier::Regional),
            }),
            properties: Some(PublicIpProperties {
                public_ip_allocation_method: Some(IpAllocationMethod::Static),
                public_ip_address_version: Some(IpVersion::IPv4),
                ..PublicIpProperties::default()
            }),
            ..Self::default()
        }
    }
}

/// A network interface.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkInterface {
    /// Read-only in practice.
    #[serde(default, skip_serializing)]
    pub id: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub name: Option<String>,
    /// Read-only.
    #[serde(default, rename = "type", skip_serializing)]
    pub kind: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub etag: Option<String>,
    /// Region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// Tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    /// Properties.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<NetworkInterfaceProperties>,
}

/// `NetworkInterfacePropertiesFormat`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkInterfaceProperties {
    /// IP configurations; the first is primary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_configurations: Option<Vec<NetworkInterfaceIpConfiguration>>,
    /// The NSG applied to the NIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_security_group: Option<SubResource>,
    /// Accelerated networking (SR-IOV); most GPU sizes support it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_accelerated_networking: Option<bool>,
    /// Disables connection tracking (spec example sets it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_tcp_state_tracking: Option<bool>,
    /// IP forwarding.
    #[serde(
        default,
        rename = "enableIPForwarding",
        skip_serializing_if = "Option::is_none"
    )]
    pub enable_ip_forwarding: Option<bool>,
    /// Read-only: the VM using this NIC (what blocks its deletion).
    #[serde(default, skip_serializing)]
    pub virtual_machine: Option<SubResource>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub mac_address: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub primary: Option<bool>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub provisioning_state: Option<String>,
}

/// A NIC's IP configuration.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkInterfaceIpConfiguration {
    /// The configuration id (returned by ARM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The name, e.g. `ipconfig1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub etag: Option<String>,
    /// Read-only in effect.
    #[serde(default, rename = "type", skip_serializing)]
    pub kind: Option<String>,
    /// Properties.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<NetworkInterfaceIpConfigurationProperties>,
}

/// `NetworkInterfaceIPConfigurationPropertiesFormat`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkInterfaceIpConfigurationProperties {
    /// The subnet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet: Option<SubResource>,
    /// The public IP address.
    #[serde(
        default,
        rename = "publicIPAddress",
        skip_serializing_if = "Option::is_none"
    )]
    pub public_ip_address: Option<SubResource>,
    /// The private address (returned; set only with Static allocation).
    #[serde(
        default,
        rename = "privateIPAddress",
        skip_serializing_if = "Option::is_none"
    )]
    pub private_ip_address: Option<String>,
    /// Prefix length for a private IP prefix.
    #[serde(
        default,
        rename = "privateIPAddressPrefixLength",
        skip_serializing_if = "Option::is_none"
    )]
    pub private_ip_address_prefix_length: Option<i32>,
    /// Static or Dynamic.
    #[serde(
        default,
        rename = "privateIPAllocationMethod",
        skip_serializing_if = "Option::is_none"
    )]
    pub private_ip_allocation_method: Option<IpAllocationMethod>,
    /// IPv4 or IPv6.
    #[serde(
        default,
        rename = "privateIPAddressVersion",
        skip_serializing_if = "Option::is_none"
    )]
    pub private_ip_address_version: Option<IpVersion>,
    /// Whether this is the NIC's primary configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary: Option<bool>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub provisioning_state: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::azure::types::spec_examples::{request_body, response_body};
    use serde_json::json;

    const DIR: &str = "network/resource-manager/Microsoft.Network/stable/2024-07-01/examples/";

    fn example(name: &str) -> String {
        format!("{DIR}{name}")
    }

    #[test]
    fn vnet_with_subnet_matches_the_spec_example() {
        let vnet = VirtualNetwork {
            location: Some("eastus".into()),
            properties: Some(VirtualNetworkProperties {
                address_space: Some(AddressSpace {
                    address_prefixes: vec!["10.0.0.0/16".into()],
                }),
                subnets: Some(vec![Subnet {
                    name: Some("test-1".into()),
                    properties: Some(SubnetProperties {
                        address_prefix: Some("10.0.0.0/24".into()),
                        ..SubnetProperties::default()
                    }),
                    ..Subnet::default()
                }]),
                ..VirtualNetworkProperties::default()
            }),
            ..VirtualNetwork::default()
        };
        assert_eq!(
            serde_json::to_value(&vnet).expect("serialises"),
            request_body(&example("VirtualNetworkCreateSubnet.json"), "parameters")
        );
        let back: VirtualNetwork = serde_json::from_value(response_body(
            &example("VirtualNetworkCreateSubnet.json"),
            "201",
        ))
        .expect("the example response reads");
        let subnets = back.properties.and_then(|p| p.subnets).unwrap_or_default();
        assert_eq!(subnets[0].name.as_deref(), Some("test-1"));
    }

    #[test]
    fn subnet_matches_the_spec_example() {
        let subnet = Subnet {
            properties: Some(SubnetProperties {
                address_prefix: Some("10.0.0.0/16".into()),
                ..SubnetProperties::default()
            }),
            ..Subnet::default()
        };
        assert_eq!(
            serde_json::to_value(&subnet).expect("serialises"),
            request_body(&example("SubnetCreate.json"), "subnetParameters")
        );
    }

    #[test]
    fn nsg_with_rule_matches_the_spec_example() {
        let mut rule = SecurityRule::allow_inbound_tcp("rule1", 130, "80", "*");
        rule.properties.protocol = SecurityRuleProtocol::Any;
        let nsg = NetworkSecurityGroup {
            location: Some("eastus".into()),
            properties: Some(NetworkSecurityGroupProperties {
                security_rules: Some(vec![rule]),
                ..NetworkSecurityGroupProperties::default()
            }),
            ..NetworkSecurityGroup::default()
        };
        assert_eq!(
            serde_json::to_value(&nsg).expect("serialises"),
            request_body(
                &example("NetworkSecurityGroupCreateWithRule.json"),
                "parameters"
            )
        );
        let back: NetworkSecurityGroup = serde_json::from_value(response_body(
            &example("NetworkSecurityGroupCreateWithRule.json"),
            "201",
        ))
        .expect("the example response reads");
        let props = back.properties.expect("the example has properties");
        assert_eq!(props.default_security_rules.map(|r| r.len()), Some(6));
    }

    #[test]
    fn public_ip_bodies_match_the_spec_examples() {
        let customised = PublicIpAddress {
            location: Some("eastus".into()),
            sku: Some(PublicIpSku {
                name: Some(PublicIpSkuName::Standard),
                tier: Some(PublicIpSkuTier::Global),
            }),
            properties: Some(PublicIpProperties {
                public_ip_allocation_method: Some(IpAllocationMethod::Static),
                public_ip_address_version: Some(IpVersion::IPv4),
                idle_timeout_in_minutes: Some(10),
                ..PublicIpProperties::default()
            }),
            ..PublicIpAddress::default()
        };
        assert_eq!(
            serde_json::to_value(&customised).expect("serialises"),
            request_body(
                &example("PublicIpAddressCreateCustomizedValues.json"),
                "parameters"
            )
        );
        let defaults = PublicIpAddress {
            location: Some("eastus".into()),
            ..PublicIpAddress::default()
        };
        assert_eq!(
            serde_json::to_value(&defaults).expect("serialises"),
            request_body(&example("PublicIpAddressCreateDefaults.json"), "parameters")
        );
        assert_eq!(
            serde_json::to_value(PublicIpAddress::standard_static("eastus", None))
                .expect("serialises"),
            json!({"location":"eastus","sku":{"name":"Standard","tier":"Regional"},
                   "properties":{"publicIPAllocationMethod":"Static","publicIPAddressVersion":"IPv4"}})
        );
    }

    #[test]
    fn nic_matches_the_spec_example() {
        let nic = NetworkInterface {
            location: Some("eastus".into()),
            properties: Some(NetworkInterfaceProperties {
                enable_accelerated_networking: Some(true),
                disable_tcp_state_tracking: Some(true),
                ip_configurations: Some(vec![
                    NetworkInterfaceIpConfiguration {
                        name: Some("ipconfig1".into()),
                        properties: Some(NetworkInterfaceIpConfigurationProperties {
                            public_ip_address: Some(SubResource::new(
                                "/subscriptions/subid/resourceGroups/rg1/providers/Microsoft.Network/publicIPAddresses/test-ip",
                            )),
                            subnet: Some(SubResource::new(
                                "/subscriptions/subid/resourceGroups/rg1/providers/Microsoft.Network/virtualNetworks/rg1-vnet/subnets/default",
                            )),
                            ..NetworkInterfaceIpConfigurationProperties::default()
                        }),
                        ..NetworkInterfaceIpConfiguration::default()
                    },
                    NetworkInterfaceIpConfiguration {
                        name: Some("ipconfig2".into()),
                        properties: Some(NetworkInterfaceIpConfigurationProperties {
                            private_ip_address_prefix_length: Some(28),
                            ..NetworkInterfaceIpConfigurationProperties::default()
                        }),
                        ..NetworkInterfaceIpConfiguration::default()
                    },
                ]),
                ..NetworkInterfaceProperties::default()
            }),
            ..NetworkInterface::default()
        };
        assert_eq!(
            serde_json::to_value(&nic).expect("serialises"),
            request_body(&example("NetworkInterfaceCreate.json"), "parameters")
        );
        let back: NetworkInterface = serde_json::from_value(response_body(
            &example("NetworkInterfaceCreate.json"),
            "200",
        ))
        .expect("the example response reads");
        let config = &back
            .properties
            .and_then(|p| p.ip_configurations)
            .unwrap_or_default()[0];
        assert_eq!(
            config
                .properties
                .as_ref()
                .and_then(|p| p.private_ip_allocation_method),
            Some(IpAllocationMethod::Dynamic)
        );
    }

    #[test]
    fn read_only_properties_are_never_sent() {
        let read: NetworkInterface = serde_json::from_value(json!({
            "id": "/x", "name": "nic", "type": "Microsoft.Network/networkInterfaces", "etag": "W/1",
            "location": "eastus",
            "properties": {"provisioningState": "Succeeded", "macAddress": "00-11", "primary": true,
                "virtualMachine": {"id": "/vm"}, "enableAcceleratedNetworking": true}
        }))
        .expect("reads");
        assert_eq!(
            serde_json::to_value(&read).expect("serialises"),
            json!({"location": "eastus", "properties": {"enableAcceleratedNetworking": true}})
        );
    }
}
