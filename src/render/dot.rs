//! `dsinfra graph`: the manifest's resources and their dependencies as Graphviz DOT, one box per
//! resource (address, ARM type, Azure name) grouped by the block it comes from.

use crate::graph::{Dag, DotNode};
use crate::model::Desired;

/// The resource graph of `desired` in DOT. Edges point from a resource to what it depends on.
pub fn desired_dot(desired: &Desired) -> String {
    let mut dag = Dag::new();
    for r in &desired.resources {
        dag.add_node(r.address.clone());
        for dep in &r.depends_on {
            if desired.resource(dep).is_some() {
                dag.add_dependency(r.address.clone(), dep.clone());
            }
        }
    }
    dag.to_dot(&desired.experiment, |address| {
        let resource = desired.resource(address);
        let label = match resource {
            Some(r) => format!("{address}\n{}\n{}", r.kind.arm_type(), r.name),
            None => address.to_string(),
        };
        DotNode {
            label,
            cluster: Some(address.block_address().to_string()),
            attrs: Vec::new(),
        }
    })
}
