//! Network bodies: the VNet with its subnets, the NSG with its rules, public IPs and NICs.

use serde_json::Value;

use crate::azure::ResourceId;
use crate::azure::types::SubResource;
use crate::azure::types::network::{
    AddressSpace, IpAllocationMethod, NetworkInterface, NetworkInterfaceIpConfiguration,
    NetworkInterfaceIpConfigurationProperties, NetworkInterfaceProperties, NetworkSecurityGroup,
    NetworkSecurityGroupProperties, PublicIpAddress, SecurityRule, SecurityRuleProperties,
    ServiceEndpoint, Subnet, SubnetProperties, VirtualNetwork, VirtualNetworkProperties,
};

use super::{BodyError, Builder};

impl Builder<'_> {
    pub(crate) fn virtual_network(&self) -> Result<VirtualNetwork, BodyError> {
        #[derive(serde::Deserialize)]
        struct SubnetAttr {
            name: String,
            address_prefix: String,
            #[serde(default)]
            nsg: Option<String>,
            #[serde(default)]
            service_endpoints: Vec<String>,
        }
        let raw = self
            .value("subnets")
            .cloned()
            .unwrap_or(Value::Array(Vec::new()));
        let subnets: Vec<SubnetAttr> =
            serde_json::from_value(raw).map_err(|e| self.invalid("subnets", e.to_string()))?;
        let mut bodies = Vec::new();
        for s in subnets {
            let nsg = match &s.nsg {
                Some(reference) => Some(SubResource::new(
                    self.target("subnets", reference)?.arm_id(self.subscription),
                )),
                None => None,
            };
            bodies.push(Subnet {
                name: Some(s.name),
                properties: Some(SubnetProperties {
                    address_prefix: Some(s.address_prefix),
                    network_security_group: nsg,
                    service_endpoints: (!s.service_endpoints.is_empty()).then(|| {
                        s.service_endpoints
                            .iter()
                            .map(|service| ServiceEndpoint {
                                service: Some(service.clone()),
                                ..ServiceEndpoint::default()
                            })
                            .collect()
                    }),
                    ..SubnetProperties::default()
                }),
                ..Subnet::default()
            });
        }
        Ok(VirtualNetwork {
            location: Some(self.location()?),
            tags: self.tags()?,
            properties: Some(VirtualNetworkProperties {
                address_space: Some(AddressSpace {
                    address_prefixes: self.texts("address_space")?,
                }),
                subnets: Some(bodies),
                ..VirtualNetworkProperties::default()
            }),
            ..VirtualNetwork::default()
        })
    }

    pub(crate) fn security_group(&self) -> Result<NetworkSecurityGroup, BodyError> {
        #[derive(serde::Deserialize)]
        struct RuleAttr {
            name: String,
            priority: i32,
            direction: String,
            access: String,
            protocol: String,
            #[serde(default)]
            source_address_prefixes: Vec<String>,
            #[serde(default)]
            destination_port_range: Option<String>,
        }
        let raw = self
            .value("rules")
            .cloned()
            .unwrap_or(Value::Array(Vec::new()));
        let rules: Vec<RuleAttr> =
            serde_json::from_value(raw).map_err(|e| self.invalid("rules", e.to_string()))?;
        let mut bodies = Vec::new();
        for r in rules {
            // ARM accepts a service tag such as `VirtualNetwork` only in the singular
            // `sourceAddressPrefix`, so one source goes there and only lists go in the plural.
            let (single, many) = match r.source_address_prefixes.as_slice() {
                [] => (Some("*".to_owned()), None),
                [one] => (Some(one.clone()), None),
                more => (None, Some(more.to_vec())),
            };
            bodies.push(SecurityRule {
                id: None,
                name: Some(r.name.clone()),
                etag: None,
                kind: None,
                properties: SecurityRuleProperties {
                    description: None,
                    protocol: self.rule_enum(&r.name, "protocol", &r.protocol)?,
                    source_port_range: Some("*".to_owned()),
                    destination_port_range: Some(
                        r.destination_port_range
                            .clone()
                            .unwrap_or_else(|| "*".to_owned()),
                    ),
                    destination_port_ranges: None,
                    source_address_prefix: single,
                    source_address_prefixes: many,
                    destination_address_prefix: Some("*".to_owned()),
                    access: self.rule_enum(&r.name, "access", &r.access)?,
                    priority: r.priority,
                    direction: self.rule_enum(&r.name, "direction", &r.direction)?,
                    provisioning_state: None,
                },
            });
        }
        Ok(NetworkSecurityGroup {
            location: Some(self.location()?),
            tags: self.tags()?,
            properties: Some(NetworkSecurityGroupProperties {
                security_rules: Some(bodies),
                ..NetworkSecurityGroupProperties::default()
            }),
            ..NetworkSecurityGroup::default()
        })
    }

    pub(crate) fn public_ip(&self) -> Result<PublicIpAddress, BodyError> {
        // The manifest layer always asks for Standard + Static (Basic is retired and Standard
        // requires Static); anything else in the state would be a hand edit.
        let sku = self
            .opt_text("sku")?
            .unwrap_or_else(|| "Standard".to_owned());
        if sku != "Standard" {
            return Err(self.invalid(
                "sku",
                format!("`{sku}`: dsinfra creates Standard public IPs only"),
            ));
        }
        let mut pip = PublicIpAddress::standard_static(self.location()?, self.tags()?);
        pip.zones = self.zones()?;
        Ok(pip)
    }

    pub(crate) fn network_interface(&self) -> Result<NetworkInterface, BodyError> {
        let vnet_ref = self.text("subnet")?;
        let vnet = self.target("subnet", &vnet_ref)?;
        let subnet_name = self.text("subnet_name")?;
        let subnet =
            ResourceId::from_raw(vnet.arm_id(self.subscription)).child("subnets", &subnet_name);
        Ok(NetworkInterface {
            location: Some(self.location()?),
            tags: self.tags()?,
            properties: Some(NetworkInterfaceProperties {
                ip_configurations: Some(vec![NetworkInterfaceIpConfiguration {
                    name: Some("ipconfig1".to_owned()),
                    properties: Some(NetworkInterfaceIpConfigurationProperties {
                        subnet: Some(SubResource::from(&subnet)),
                        public_ip_address: self.reference_id("public_ip")?.map(SubResource::new),
                        private_ip_allocation_method: Some(IpAllocationMethod::Dynamic),
                        primary: Some(true),
                        ..NetworkInterfaceIpConfigurationProperties::default()
                    }),
                    ..NetworkInterfaceIpConfiguration::default()
                }]),
                network_security_group: self.reference_id("nsg")?.map(SubResource::new),
                enable_accelerated_networking: self.opt_bool("accelerated_networking")?,
                ..NetworkInterfaceProperties::default()
            }),
            ..NetworkInterface::default()
        })
    }
}
