//! Shapes shared by every provider: references to other resources and tags.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Resource tags. Ordered so that bodies serialise the same way every time.
pub type Tags = BTreeMap<String, String>;

/// A reference to another resource by id (`{"id": "/subscriptions/..."}`), ARM's SubResource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubResource {
    /// The referenced resource's id.
    pub id: String,
}

impl SubResource {
    /// A reference to `id`.
    pub fn new(id: impl Into<String>) -> Self {
        Self { id: id.into() }
    }
}

impl From<&super::super::ResourceId> for SubResource {
    fn from(id: &super::super::ResourceId) -> Self {
        Self::new(id.as_str())
    }
}
