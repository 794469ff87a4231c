use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::json;

use super::*;

/// A block whose attribute `i` has its key at `10 * i` and its value at `10 * i + 4`, so every
/// span says which attribute it came from. A `None` value is an attribute whose evaluation failed.
fn block(attrs: &[(&str, Option<Json>)]) -> EvalBlock {
    let file: Arc<Path> = Arc::from(Path::new("t.hcl"));
    let span = |start: usize, len: usize| Span::new(Arc::clone(&file), start, start + len);
    EvalBlock {
        ident: "vm".into(),
        labels: vec![("gpu".into(), span(1000, 5))],
        header: span(1000, 10),
        attrs: attrs
            .iter()
            .enumerate()
            .map(|(i, (n, v))| EvalAttr {
                name: (*n).to_owned(),
                value: v.clone(),
                key_span: span(10 * i, 3),
                value_span: span(10 * i + 4, 5),
            })
            .collect(),
        blocks: Vec::new(),
    }
}

#[derive(Debug, Deserialize)]
struct Vm {
    image: Option<Located<String>>,
    size: Located<String>,
    count: Option<Located<i64>>,
    public_ip: Option<bool>,
    ssh_from: Option<Located<Vec<String>>>,
    tags: Option<BTreeMap<String, String>>,
    zone: Option<Zone>,
}

impl BlockAttrs for Vm {
    const REQUIRED: &'static [(&'static str, &'static str)] = &[
        ("size", "\"Standard_D4s_v5\""),
        ("image", "\"ubuntu-22.04\""),
    ];
}

#[derive(Debug, Deserialize, PartialEq)]
enum Zone {
    #[serde(rename = "1")]
    One,
    #[serde(rename = "2")]
    Two,
}

fn summaries(diags: &[Diagnostic]) -> Vec<&str> {
    diags.iter().map(|d| d.summary.as_str()).collect()
}

#[test]
fn decodes_typed_values_with_their_spans() {
    let b = block(&[
        ("zone", Some(json!(2))),
        ("size", Some(json!("Standard_D4s_v5"))),
        ("count", Some(json!("3"))),
        ("ssh_from", Some(json!("1.2.3.4/32"))),
        ("tags", Some(json!({"team": "ml", "n": 1, "on": true}))),
        ("public_ip", Some(json!(false))),
        ("image", Some(json!("ubuntu-22.04"))),
    ]);
    let mut diags = Vec::new();
    let vm: Vm = decode(&b, Unknown::Checked, &mut diags).expect("decodes");
    assert!(diags.is_empty(), "{diags:?}");
    assert_eq!(vm.size.value, "Standard_D4s_v5");
    assert_eq!((vm.size.span.start, vm.size.span.end), (14, 19));
    let count = vm.count.expect("count");
    assert_eq!((count.value, count.span.start), (3, 24));
    // A single string where a list is expected is a list of one (HCL's conversion).
    let ssh = vm.ssh_from.expect("ssh_from");
    assert_eq!(
        (ssh.value, ssh.span.start),
        (vec!["1.2.3.4/32".to_owned()], 34)
    );
    let tags = vm.tags.expect("tags");
    assert_eq!(tags["n"], "1");
    assert_eq!(tags["on"], "true");
    assert_eq!(vm.public_ip, Some(false));
    // A number where text is expected reads as its digits.
    assert_eq!(vm.zone, Some(Zone::Two));
}

#[test]
fn wrong_types_are_located_and_every_one_is_reported() {
    let b = block(&[
        ("size", Some(json!("x"))),
        ("count", Some(json!("four"))),
        ("ssh_from", Some(json!(["1.2.3.4", 5]))),
        ("tags", Some(json!({"a": ["b"]}))),
        ("public_ip", Some(json!("yes"))),
        ("image", Some(json!("ubuntu-22.04"))),
    ]);
    let mut diags = Vec::new();
    let vm: Vm = decode(&b, Unknown::Checked, &mut diags).expect("the rest decodes");
    assert_eq!(
        summaries(&diags),
        [
            "`count` in vm \"gpu\" must be a whole number",
            "`ssh_from` in vm \"gpu\" must be a list of text values",
            "`tags` in vm \"gpu\" must be a map of text values",
            "`public_ip` in vm \"gpu\" must be true or false",
        ]
    );
    let labels: Vec<_> = diags.iter().map(|d| d.label.as_deref()).collect();
    assert_eq!(
        labels,
        [
            Some("this is a string"),
            Some("this is a list"),
            Some("this is an object"),
            Some("this is a string")
        ]
    );
    let starts: Vec<_> = diags
        .iter()
        .map(|d| d.span.as_ref().map(|s| s.start))
        .collect();
    assert_eq!(starts, [Some(14), Some(24), Some(34), Some(44)]);
    assert_eq!(vm.size.value, "x");
    assert!(vm.count.is_none() && vm.ssh_from.is_none() && vm.public_ip.is_none());
}

#[test]
fn a_missing_required_attribute_is_reported_at_the_header_with_an_example() {
    let b = block(&[("count", Some(json!(true)))]);
    let mut diags = Vec::new();
    assert!(decode::<Vm>(&b, Unknown::Checked, &mut diags).is_none());
    // Every missing one is reported, in the order REQUIRED lists them.
    assert_eq!(
        summaries(&diags),
        [
            "`count` in vm \"gpu\" must be a whole number",
            "vm \"gpu\" is missing `size`",
            "vm \"gpu\" is missing `image`"
        ]
    );
    assert_eq!(diags[1].help, ["add `size = \"Standard_D4s_v5\"`"]);
    assert_eq!(diags[1].span.as_ref().map(|s| s.start), Some(1000));

    // A required `Option` field: reported, and the struct still decodes.
    let b = block(&[("size", Some(json!("x")))]);
    let mut diags = Vec::new();
    let vm: Vm = decode(&b, Unknown::Checked, &mut diags).expect("decodes");
    assert!(vm.image.is_none());
    assert_eq!(summaries(&diags), ["vm \"gpu\" is missing `image`"]);
}

#[test]
fn a_failed_evaluation_stays_silent() {
    // `size` failed to evaluate (already reported): no "missing", no type error.
    let b = block(&[
        ("size", None),
        ("count", None),
        ("public_ip", Some(Json::Null)),
        ("image", Some(Json::Null)),
    ]);
    let mut diags = Vec::new();
    assert!(decode::<Vm>(&b, Unknown::Checked, &mut diags).is_none());
    assert!(diags.is_empty(), "{diags:?}");
}

#[derive(Debug, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
enum Run {
    Once,
    PerBoot,
}

#[derive(Debug, Deserialize)]
struct Policy {
    run: Option<Run>,
    other: Option<Run>,
}

impl BlockAttrs for Policy {}

#[test]
fn a_value_not_in_an_enum_gets_a_suggestion() {
    let b = block(&[
        ("size", Some(json!("x"))),
        ("zone", Some(json!("3"))),
        ("image", Some(json!("ubuntu-22.04"))),
    ]);
    let mut diags = Vec::new();
    let vm: Vm = decode(&b, Unknown::Checked, &mut diags).expect("decodes");
    assert!(vm.zone.is_none());
    assert_eq!(
        summaries(&diags),
        ["`zone` in vm \"gpu\" must be one of: 1, 2"]
    );
    assert_eq!(diags[0].label.as_deref(), Some("`3` is not one of them"));
    assert!(diags[0].help.is_empty());

    let b = block(&[
        ("run", Some(json!("per_bot"))),
        ("other", Some(json!(true))),
    ]);
    let mut diags = Vec::new();
    let policy: Policy = decode(&b, Unknown::Checked, &mut diags).expect("decodes");
    assert_eq!((policy.run, policy.other), (None, None));
    assert_eq!(
        summaries(&diags),
        [
            "`run` in vm \"gpu\" must be one of: once, per_boot",
            "`other` in vm \"gpu\" must be text"
        ]
    );
    assert_eq!(diags[0].help, ["did you mean `per_boot`?"]);
}

#[derive(Debug, Deserialize)]
struct Step {
    name: Option<String>,
}

impl BlockAttrs for Step {}

#[test]
fn unknown_attributes_are_skipped_when_checked_and_reported_for_steps() {
    let b = block(&[("nmae", Some(json!("x"))), ("mount", Some(json!("/mnt")))]);
    let mut diags = Vec::new();
    let step: Step = decode(&b, Unknown::Checked, &mut diags).expect("decodes");
    assert!(step.name.is_none() && diags.is_empty());

    // `mount` is the kind's own parameter (read on its own); `nmae` is nothing it takes.
    let unknown = Unknown::Param {
        kind: "blobfuse2",
        allowed: &["name", "mount"],
    };
    // A failed evaluation does not hide a wrong name.
    let b = block(&[
        ("nmae", None),
        ("mount", Some(json!("/mnt"))),
        ("zzz", Some(json!(1))),
    ]);
    decode::<Step>(&b, unknown, &mut diags).expect("decodes");
    assert_eq!(
        summaries(&diags),
        [
            "unknown parameter `nmae` for step \"blobfuse2\"",
            "unknown parameter `zzz` for step \"blobfuse2\""
        ]
    );
    assert_eq!(diags[0].help, ["did you mean `name`?"]);
    assert_eq!(diags[0].span.as_ref().map(|s| s.start), Some(0));
    assert_eq!(
        diags[0].label.as_deref(),
        Some("`blobfuse2` does not take this")
    );
    assert_eq!(diags[1].help, ["`blobfuse2` takes: name, mount"]);
}

struct Network;

impl Target for Network {
    const WHAT_AND_EXAMPLE: &'static [&'static str] = &["a network", "network.main"];

    fn accepts(address: &str) -> bool {
        address.starts_with("network.")
    }
}

#[test]
fn references_are_checked_by_address() {
    let b = block(&[
        ("a", Some(json!({"address": "network.main", "id": "x"}))),
        ("b", Some(json!({"address": "vm.prep"}))),
        ("c", Some(json!("network.main"))),
    ]);
    let mut diags = Vec::new();
    let a: Option<Located<Ref<Network>>> = attr(&b, "a", &mut diags);
    let a = a.expect("a network");
    assert_eq!(
        (a.value.address.as_str(), a.span.start),
        ("network.main", 4)
    );
    assert!(attr::<Ref<Network>>(&b, "b", &mut diags).is_none());
    assert!(attr::<Ref<Network>>(&b, "c", &mut diags).is_none());
    assert!(attr::<Ref<Network>>(&b, "d", &mut diags).is_none());
    assert_eq!(
        summaries(&diags),
        [
            "`b` in vm \"gpu\" must refer to a network",
            "`c` in vm \"gpu\" must refer to a network"
        ]
    );
    assert_eq!(diags[0].label.as_deref(), Some("this refers to `vm.prep`"));
    assert_eq!(diags[1].label.as_deref(), Some("this is a string"));
    assert_eq!(
        diags[1].help,
        ["write a reference without quotes, e.g. `c = network.main`"]
    );
}

#[test]
fn nested_lists_and_maps_decode_item_by_item() {
    let b = block(&[
        ("env", Some(json!({"A": "1", "B": 2}))),
        ("paths", Some(json!(["/a", "/b"]))),
        ("bad", Some(json!({"A": null}))),
        ("numbers", Some(json!([1, "2"]))),
    ]);
    let mut diags = Vec::new();
    let env: Option<Located<BTreeMap<String, String>>> = attr(&b, "env", &mut diags);
    assert_eq!(env.expect("env").value["B"], "2");
    let paths: Option<Vec<Located<String>>> = attr(&b, "paths", &mut diags);
    let paths = paths.expect("paths");
    // Every item of a list is located at the list (evaluated values keep no inner spans).
    assert_eq!((paths[1].value.as_str(), paths[1].span.start), ("/b", 14));
    assert!(attr::<BTreeMap<String, String>>(&b, "bad", &mut diags).is_none());
    let numbers: Option<Vec<i64>> = attr(&b, "numbers", &mut diags);
    assert_eq!(numbers, Some(vec![1, 2]));
    assert_eq!(
        summaries(&diags),
        ["`bad` in vm \"gpu\" must be a map of text values"]
    );
}

struct Protocols;

impl Choices for Protocols {
    const ALLOWED: &'static [&'static str] = &["SMB", "NFS"];
}

#[test]
fn one_of_keeps_the_text_and_its_span() {
    let b = block(&[("a", Some(json!("NFS"))), ("b", Some(json!("nfs")))]);
    let mut diags = Vec::new();
    let a: Option<OneOf<Protocols>> = attr(&b, "a", &mut diags);
    let a = a.expect("NFS");
    assert_eq!((a.value.as_str(), a.span.start), ("NFS", 4));
    assert!(attr::<OneOf<Protocols>>(&b, "b", &mut diags).is_none());
    assert_eq!(
        summaries(&diags),
        ["`b` in vm \"gpu\" must be one of: SMB, NFS"]
    );
    assert_eq!(diags[0].label.as_deref(), Some("`nfs` is not one of them"));
    assert_eq!(diags[0].help, ["did you mean `NFS`?"]);
}

// The two tests below moved here from `fields.rs` (whose `integer`, `strings` and `reference`
// the decoder replaced), with their inputs and assertions unchanged.

#[derive(Debug, Deserialize)]
struct Typed {
    size: Option<Located<String>>,
    count: Option<Located<i64>>,
    zone: Option<Located<String>>,
    ssh_from: Option<Located<Vec<String>>>,
    image: Option<Located<String>>,
}

impl BlockAttrs for Typed {
    const REQUIRED: &'static [(&'static str, &'static str)] = &[("image", "\"ubuntu-22.04\"")];
}

#[test]
fn reads_typed_values_and_reports_type_errors() {
    let b = block(&[
        ("size", Some(Json::from("x"))),
        ("count", Some(Json::from("four"))),
        ("zone", Some(Json::from(1))),
        ("ssh_from", Some(Json::from("1.2.3.4"))),
    ]);
    let mut diags = Vec::new();
    let f: Typed = decode(&b, Unknown::Checked, &mut diags).expect("decodes");
    assert_eq!(f.size.map(|s| s.value), Some("x".into()));
    assert_eq!(f.zone.map(|s| s.value), Some("1".into()));
    assert!(f.count.is_none());
    assert_eq!(f.ssh_from.map(|s| s.value), Some(vec!["1.2.3.4".into()]));
    assert!(f.image.is_none());
    assert_eq!(diags.len(), 2);
    assert_eq!(
        diags[0].summary,
        "`count` in vm \"gpu\" must be a whole number"
    );
    assert_eq!(diags[0].label.as_deref(), Some("this is a string"));
    assert_eq!(diags[1].summary, "vm \"gpu\" is missing `image`");
}

struct VmTarget;

impl Target for VmTarget {
    const WHAT_AND_EXAMPLE: &'static [&'static str] = &["a vm", "vm.prep"];

    fn accepts(address: &str) -> bool {
        address.starts_with("vm.")
    }
}

struct ContainerTarget;

impl Target for ContainerTarget {
    const WHAT_AND_EXAMPLE: &'static [&'static str] = &["a container", "x"];

    fn accepts(address: &str) -> bool {
        address.contains(".container.")
    }
}

#[test]
fn references_are_checked_by_address_as_fields_did() {
    let b = block(&[
        ("attach_to", Some(json!({"address": "vm.prep"}))),
        ("container", Some(json!({"address": "vm.prep"}))),
    ]);
    let mut diags = Vec::new();
    assert_eq!(
        attr::<Ref<VmTarget>>(&b, "attach_to", &mut diags).map(|r| r.address),
        Some("vm.prep".into())
    );
    assert!(attr::<Ref<ContainerTarget>>(&b, "container", &mut diags).is_none());
    assert_eq!(diags[0].label.as_deref(), Some("this refers to `vm.prep`"));
}
