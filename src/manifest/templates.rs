//! Starter manifests for `dsinfra init --template NAME`, compiled into the binary.

/// Every starter template: (name, one-line description, manifest text).
static TEMPLATES: [(&str, &str, &str); 3] = [
    (
        "single-gpu",
        "one GPU VM with the Data Science VM image, parked every evening",
        include_str!("../../templates/single-gpu.hcl"),
    ),
    (
        "dual-dsvm",
        "a CPU VM for data preparation and a GPU VM for training, sharing a blob container",
        include_str!("../../templates/dual-dsvm.hcl"),
    ),
    (
        "cluster",
        "an InfiniBand GPU cluster with BeeOND scratch and a dataset staged from Blob",
        include_str!("../../templates/cluster.hcl"),
    ),
];

/// The starter templates: (name, description, text).
pub fn starter_templates() -> &'static [(&'static str, &'static str, &'static str)] {
    &TEMPLATES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_texts_are_manifests() {
        let mut names: Vec<&str> = starter_templates().iter().map(|t| t.0).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), starter_templates().len());
        for (_, _, text) in starter_templates() {
            assert!(text.contains("azure {"));
        }
    }
}
