//! Typed addresses of the resources dsinfra manages.
//!
//! A manifest block (`vm "gpu"`, `cluster "train"`) expands into several Azure resources. Each of
//! them gets an [`Address`]: the block kind, the block name, an optional node index (cluster nodes)
//! and a part naming the Azure resource inside the block, for example `vm.gpu.nic`,
//! `cluster.train[3].vm` or `storage_account.data.container.raw`. Addresses are what users type
//! after `-target`, what the plan prints, and the key of every resource in the state, so they must
//! be stable, ordered and round-trip through text.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The address of one managed resource, e.g. `cluster.train[3].nic`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Address {
    /// Block kind as written in the manifest (`vm`, `cluster`, `network`, ...).
    pub kind: String,
    /// Block label (`gpu`).
    pub name: String,
    /// Node index for cluster nodes.
    pub index: Option<u32>,
    /// Which Azure resource of the block this is (`vm`, `nic`, `container.raw`); empty for the
    /// block as a whole (used by `-target vm.gpu`).
    pub part: String,
}

impl Address {
    /// An address for a part of a block.
    pub fn new(kind: &str, name: &str, index: Option<u32>, part: &str) -> Self {
        Self {
            kind: kind.to_owned(),
            name: name.to_owned(),
            index,
            part: part.to_owned(),
        }
    }

    /// The address of a whole block, with no part and no index.
    pub fn block(kind: &str, name: &str) -> Self {
        Self::new(kind, name, None, "")
    }

    /// The block this address belongs to (`cluster.train[3].nic` -> `cluster.train`).
    #[must_use]
    pub fn block_address(&self) -> Self {
        Self::block(&self.kind, &self.name)
    }

    /// Whether `self`, used as a `-target`, selects `other`: a block address selects every
    /// resource of the block, an indexed one every part of that node, a full one only itself.
    pub fn selects(&self, other: &Address) -> bool {
        if self.kind != other.kind || self.name != other.name {
            return false;
        }
        if self.index.is_some() && self.index != other.index {
            return false;
        }
        if self.part.is_empty() {
            return true;
        }
        other.part == self.part || other.part.starts_with(&format!("{}.", self.part))
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.kind, self.name)?;
        if let Some(i) = self.index {
            write!(f, "[{i}]")?;
        }
        if !self.part.is_empty() {
            write!(f, ".{}", self.part)?;
        }
        Ok(())
    }
}

/// Why a string is not an address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{input}` is not a resource address: {reason} (expected e.g. `vm.gpu`, `cluster.train[2].nic`)"
)]
pub struct AddressError {
    input: String,
    reason: &'static str,
}

fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl FromStr for Address {
    type Err = AddressError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let err = |reason| AddressError {
            input: input.to_owned(),
            reason,
        };
        let mut segments = input.splitn(3, '.');
        let kind = segments.next().unwrap_or_default();
        let name_part = segments.next().ok_or_else(|| err("it has no block name"))?;
        let part = segments.next().unwrap_or_default();
        if !is_ident(kind) {
            return Err(err("the block kind is not a name"));
        }
        let (name, index) = match name_part.split_once('[') {
            Some((name, rest)) => {
                let digits = rest
                    .strip_suffix(']')
                    .ok_or_else(|| err("an index must be closed with `]`"))?;
                let index = digits
                    .parse::<u32>()
                    .map_err(|_| err("an index must be a whole number"))?;
                (name, Some(index))
            }
            None => (name_part, None),
        };
        if !is_ident(name) {
            return Err(err("the block name is not a name"));
        }
        if !part.is_empty() && !part.split('.').all(is_ident) {
            return Err(err("the part after the block name is not a dotted name"));
        }
        Ok(Self::new(kind, name, index, part))
    }
}

impl Serialize for Address {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Address {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_text() {
        for text in [
            "vm.gpu",
            "vm.gpu.nic",
            "cluster.train[3].vm",
            "storage_account.data.container.raw",
            "cluster.train[0]",
        ] {
            let addr: Address = text.parse().expect("valid address");
            assert_eq!(addr.to_string(), text);
        }
    }

    #[test]
    fn rejects_malformed_addresses_with_a_reason() {
        let err = "vm".parse::<Address>().expect_err("no name");
        assert_eq!(
            err.to_string(),
            "`vm` is not a resource address: it has no block name (expected e.g. `vm.gpu`, `cluster.train[2].nic`)"
        );
        assert!("cluster.train[x].vm".parse::<Address>().is_err());
        assert!("cluster.train[1.vm".parse::<Address>().is_err());
        assert!("vm.gpu..nic".parse::<Address>().is_err());
    }

    #[test]
    fn block_targets_select_all_their_parts() {
        let target: Address = "cluster.train".parse().expect("valid");
        let node: Address = "cluster.train[2]".parse().expect("valid");
        let nic: Address = "cluster.train[2].nic".parse().expect("valid");
        let other: Address = "cluster.train[1].nic".parse().expect("valid");
        assert!(target.selects(&nic));
        assert!(node.selects(&nic));
        assert!(!node.selects(&other));
        let account: Address = "storage_account.data".parse().expect("valid");
        let container: Address = "storage_account.data.container.raw".parse().expect("valid");
        assert!(account.selects(&container));
        let part: Address = "storage_account.data.container".parse().expect("valid");
        assert!(part.selects(&container));
        assert!(!"vm.cpu".parse::<Address>().expect("valid").selects(&nic));
    }

    #[test]
    fn orders_by_kind_name_index_part() {
        let mut addrs: Vec<Address> = ["vm.b", "cluster.x[10].vm", "cluster.x[2].vm", "vm.a.nic"]
            .iter()
            .map(|s| s.parse().expect("valid"))
            .collect();
        addrs.sort();
        let sorted: Vec<String> = addrs.iter().map(ToString::to_string).collect();
        assert_eq!(
            sorted,
            ["cluster.x[2].vm", "cluster.x[10].vm", "vm.a.nic", "vm.b"]
        );
    }
}
