//! Tests of `engine::reach::openssh`: naming nodes, routes through the head, known_hosts, the
//! ssh_config text and the `ssh` command line (moved with the code from `cli/ssh_cmds.rs`).

use super::*;
use crate::addr::Address;

fn node(address: &str, index: usize, route: Route, key: Option<&str>) -> NodeReach {
    let vm: Address = format!("{address}.vm").parse().expect("valid address");
    let name = match vm.index {
        Some(i) => format!("exp-{}-{i}", vm.name),
        None => format!("exp-{}", vm.name),
    };
    NodeReach {
        block: vm.block_address(),
        vm,
        index,
        name,
        user: "azureuser".into(),
        public_ip: None,
        private_ip: None,
        host_key: key.map(str::to_owned),
        route,
    }
}

fn direct(port: u16) -> Route {
    Route::Direct {
        host: "127.0.0.1".into(),
        port,
    }
}

/// `cluster.train` of three nodes (head public, node 2 unreachable) and `vm.gpu`.
fn nodes() -> Vec<NodeReach> {
    vec![
        node(
            "cluster.train[0]",
            0,
            direct(2200),
            Some("ssh-ed25519 AAAAhead"),
        ),
        node(
            "cluster.train[1]",
            1,
            Route::ViaHead {
                host: "10.0.0.5".into(),
                port: 22,
            },
            Some("ssh-ed25519 AAAAone"),
        ),
        node(
            "cluster.train[2]",
            2,
            Route::Unreachable {
                why: "is parked (deallocated): `dsinfra unpark` starts it".into(),
            },
            None,
        ),
        node("vm.gpu", 0, direct(2209), None),
    ]
}

fn files() -> Files {
    Files {
        known_hosts: PathBuf::from("/work/x/.dsinfra/exp/known_hosts"),
        identity: None,
    }
}

fn found(name: &str) -> String {
    find_node(&nodes(), "exp", name).map_or_else(|e| e.to_string(), |n| n.node().to_string())
}

#[test]
fn nodes_are_found_by_address_short_form_vm_name_or_alias() {
    assert_eq!(found("cluster.train[1]"), "cluster.train[1]");
    assert_eq!(found("cluster.train[1].vm"), "cluster.train[1]");
    assert_eq!(found("train[1]"), "cluster.train[1]");
    assert_eq!(found("exp-train-1"), "cluster.train[1]");
    assert_eq!(found("train"), "cluster.train[0]");
    assert_eq!(found("cluster.train"), "cluster.train[0]");
    assert_eq!(found("gpu"), "vm.gpu");
    assert_eq!(found("vm.gpu"), "vm.gpu");
    assert_eq!(found("exp-gpu"), "vm.gpu");
}

#[test]
fn unknown_names_list_the_nodes_and_suggest_the_closest() {
    assert_eq!(
        found("trian[1]"),
        "no node `trian[1]` in the state (nodes: cluster.train[0], cluster.train[1], cluster.train[2], vm.gpu); did you mean `train[1]`?"
    );
    assert_eq!(
        found("zzz"),
        "no node `zzz` in the state (nodes: cluster.train[0], cluster.train[1], cluster.train[2], vm.gpu); a node is named by its address, its short form such as `train[1]`, or its VM name"
    );
    assert_eq!(
        find_node(&[], "exp", "gpu")
            .expect_err("no nodes")
            .to_string(),
        "no node `gpu`: the state has no VMs (nothing applied yet?)"
    );
    let mut two = nodes();
    two.push(node("cluster.gpu[0]", 0, direct(2210), None));
    assert_eq!(
        find_node(&two, "exp", "gpu")
            .expect_err("ambiguous")
            .to_string(),
        "`gpu` names more than one node (vm.gpu, cluster.gpu[0]): give its address"
    );
}

#[test]
fn private_nodes_go_through_their_head_and_unreachable_ones_say_why() {
    let all = nodes();
    let one = ssh_host("exp", &all, &all[1]).expect("reachable");
    assert_eq!(one.alias, "exp-train-1");
    assert_eq!(one.key_alias, "exp-train-1");
    assert_eq!((one.host.as_str(), one.port), ("10.0.0.5", 22));
    let head = one.jump.as_deref().expect("through the head");
    assert_eq!((head.alias.as_str(), head.port), ("exp-train-0", 2200));
    assert_eq!(
        ssh_host("exp", &all, &all[2]).expect_err("parked"),
        "is parked (deallocated): `dsinfra unpark` starts it"
    );
}

#[test]
fn config_blocks_pin_keys_and_jump_through_the_head_block() {
    let all = nodes();
    let one = ssh_host("exp", &all, &all[1]).expect("reachable");
    assert_eq!(
        config_block(&one, &files()),
        "Host exp-train-1\n\
         \x20 # cluster.train[1]: no public IP; reached through the head cluster.train[0]\n\
         \x20 HostName 10.0.0.5\n\
         \x20 Port 22\n\
         \x20 User azureuser\n\
         \x20 HostKeyAlias exp-train-1\n\
         \x20 UserKnownHostsFile /work/x/.dsinfra/exp/known_hosts\n\
         \x20 StrictHostKeyChecking yes\n\
         \x20 ProxyJump exp-train-0\n"
    );
    let gpu = ssh_host("exp", &all, &all[3]).expect("reachable");
    let with_key = Files {
        identity: Some(PathBuf::from("/home/a b/id_ed25519")),
        ..files()
    };
    assert_eq!(
        config_block(&gpu, &with_key),
        "Host exp-gpu\n\
         \x20 # vm.gpu\n\
         \x20 HostName 127.0.0.1\n\
         \x20 Port 2209\n\
         \x20 User azureuser\n\
         \x20 HostKeyAlias exp-gpu\n\
         \x20 UserKnownHostsFile /work/x/.dsinfra/exp/known_hosts\n\
         \x20 StrictHostKeyChecking accept-new\n\
         \x20 IdentityFile \"/home/a b/id_ed25519\"\n"
    );
}

#[test]
fn ssh_argv_carries_the_alias_the_known_hosts_and_the_jump() {
    let all = nodes();
    let one = ssh_host("exp", &all, &all[1]).expect("reachable");
    let spaced = Files {
        known_hosts: PathBuf::from("/a b/100%/known_hosts"),
        identity: Some(PathBuf::from("/k/id")),
    };
    assert_eq!(
        ssh_argv(&one, &spaced, &["echo".into(), "hi".into()]),
        [
            "-p",
            "22",
            "-l",
            "azureuser",
            "-o",
            "HostKeyAlias=exp-train-1",
            "-o",
            "UserKnownHostsFile=\"/a b/100%%/known_hosts\"",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "IdentityFile=/k/id",
            "-o",
            "ProxyCommand=ssh -p 2200 -l azureuser -o HostKeyAlias=exp-train-0 -o 'UserKnownHostsFile=\"/a b/100%%%%/known_hosts\"' -o StrictHostKeyChecking=yes -o IdentityFile=/k/id -W '[%h]:%p' 127.0.0.1",
            "10.0.0.5",
            "echo",
            "hi"
        ]
    );
}

#[test]
fn known_hosts_has_pinned_keys_and_keeps_what_openssh_accepted_for_unpinned_vms() {
    let previous = "exp-gpu ssh-ed25519 AAAAaccepted\nexp-old ssh-ed25519 AAAAgone\nexp-train-0 ssh-ed25519 AAAAstale\n";
    let text = known_hosts_text(&nodes(), previous);
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(
        lines,
        [
            "exp-train-0 ssh-ed25519 AAAAhead",
            "exp-train-1 ssh-ed25519 AAAAone",
            "exp-gpu ssh-ed25519 AAAAaccepted"
        ]
    );
    let unpinned_hosts: Vec<String> = {
        let all = nodes();
        let gpu = ssh_host("exp", &all, &all[3]).expect("reachable");
        unpinned(&gpu).iter().map(|h| h.alias.clone()).collect()
    };
    assert_eq!(unpinned_hosts, ["exp-gpu"]);
}

fn reached() -> Reached {
    Reached {
        experiment: "exp".into(),
        dir: PathBuf::from("/work/x/.dsinfra/exp"),
        nodes: nodes(),
    }
}

#[test]
fn a_node_that_cannot_be_reached_is_named_with_its_vm_and_why() {
    assert_eq!(
        reached().host("train[2]").expect_err("parked").to_string(),
        "node cluster.train[2] (exp-train-2) cannot be reached: it is parked (deallocated): `dsinfra unpark` starts it"
    );
    assert_eq!(
        reached()
            .host("gpu")
            .expect("reachable")
            .unpinned_warnings(),
        [
            "vm.gpu (exp-gpu) has no pinned host key in the state (an adopted VM): OpenSSH will trust the key it presents the first time (StrictHostKeyChecking accept-new) and refuse any other key after that"
        ]
    );
}

#[test]
fn the_config_has_a_block_per_reachable_node_and_says_what_it_left_out_in_node_order() {
    let reached = reached();
    let config = reached.config(&files());
    let all = nodes();
    let block = |i: usize| {
        config_block(
            &ssh_host("exp", &all, &all[i]).expect("reachable"),
            &files(),
        )
    };
    assert_eq!(
        config.text,
        format!(
            "# dsinfra ssh-config for experiment exp: host keys pinned in /work/x/.dsinfra/exp/known_hosts\n\
             \n{}\n{}\n# exp-train-2 (cluster.train[2]): not reachable: it is parked (deallocated): `dsinfra unpark` starts it\n\n{}",
            block(0),
            block(1),
            block(3)
        )
    );
    let gpu = ssh_host("exp", &all, &all[3]).expect("reachable");
    assert_eq!(
        config.notices,
        [
            Notice::LeftOut(
                "cluster.train[2] (exp-train-2) is left out: it is parked (deallocated): `dsinfra unpark` starts it"
                    .to_owned()
            ),
            Notice::Unpinned(unpinned_warning(&gpu)),
        ]
    );
}

/// Issue 17: an AML node is reached directly at the cluster's public IP and its own port, its
/// key filed under its node id; before dsinfra first reached it, OpenSSH trusts it on first use
/// and the warning says why there is no pin.
#[test]
fn aml_nodes_are_dialled_at_their_port_with_keys_filed_under_their_node_id() {
    let aml = |i: u8, port: u16, key: Option<&str>| NodeReach {
        vm: Address::new("aml_cluster", "scratch", Some(u32::from(i)), "node"),
        block: Address::block("aml_cluster", "scratch"),
        index: usize::from(i),
        name: format!("tvmps_{i}"),
        user: "azureuser".into(),
        public_ip: Some("20.1.2.3".into()),
        private_ip: Some(format!("10.0.0.{}", 4 + i)),
        host_key: key.map(str::to_owned),
        route: Route::Direct {
            host: "20.1.2.3".into(),
            port,
        },
    };
    let reached = Reached {
        experiment: "exp".into(),
        dir: PathBuf::from("/work/x/.dsinfra/exp"),
        nodes: vec![
            aml(0, 50000, Some("ssh-ed25519 AAAAzero")),
            aml(1, 50001, None),
        ],
    };
    let host = reached.host("scratch[1]").expect("reachable");
    assert_eq!((host.host.as_str(), host.port), ("20.1.2.3", 50001));
    assert_eq!(host.key_alias, "tvmps_1");
    assert_eq!(
        host.unpinned_warnings(),
        [
            "aml_cluster.scratch[1] (exp-scratch-1) has no pinned host key in the state (an AML node dsinfra has not reached yet): OpenSSH will trust the key it presents the first time (StrictHostKeyChecking accept-new) and refuse any other key after that"
        ]
    );
    assert_eq!(
        known_hosts_text(&reached.nodes, "")
            .lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>(),
        ["tvmps_0 ssh-ed25519 AAAAzero"]
    );
}
