//! The walk's graph for plans of the fixture experiment: creates after what they need, deletes
//! before what they need, a replacement's create after its delete.

use super::*;
use crate::plan::fixtures::{addr, dual, normal, set};
use crate::plan::{Mode, PlanOptions, plan};
use crate::state::{Backend, StateError, blocking};
use futures::future::BoxFuture;

fn apply(a: &str) -> Node {
    Node::new(&addr(a), Phase::Apply)
}

fn delete(a: &str) -> Node {
    Node::new(&addr(a), Phase::Delete)
}

fn waits(graph: &BTreeMap<Node, BTreeSet<Node>>, node: &Node) -> BTreeSet<Node> {
    graph
        .get(node)
        .cloned()
        .unwrap_or_else(|| panic!("{node:?} is not in the graph"))
}

#[test]
fn creates_wait_for_the_creates_they_depend_on() {
    let desired = dual();
    let state = State::new("exp");
    let planned = plan(&desired, &state, &normal()).expect("plans");
    let graph = schedule(&planned, &state);
    assert!(graph.keys().all(|n| n.phase == Phase::Apply));
    let nic = waits(&graph, &apply("vm.gpu.nic"));
    assert!(nic.contains(&apply("network.main.vnet")) && nic.contains(&apply("vm.gpu.pip")));
    assert!(waits(&graph, &apply("vm.gpu.vm")).contains(&apply("vm.gpu.nic")));
}

#[test]
fn a_replacement_deletes_dependents_first_and_creates_after_its_own_delete() {
    let desired = dual();
    let state = State::from_applied(&desired, "sub");
    let mut changed = desired.clone();
    // The NIC's subnet forces a new NIC, which forces a new VM (its `nic` cannot change in place).
    set(
        &mut changed,
        "vm.gpu.nic",
        "location",
        serde_json::json!("westus"),
    );
    let planned = plan(&changed, &state, &normal()).expect("plans");
    let graph = schedule(&planned, &state);
    assert!(waits(&graph, &apply("vm.gpu.nic")).contains(&delete("vm.gpu.nic")));
    assert!(
        waits(&graph, &delete("vm.gpu.nic")).contains(&delete("vm.gpu.vm")),
        "the VM using the NIC goes first: {graph:#?}"
    );
    let vm = waits(&graph, &apply("vm.gpu.vm"));
    assert!(vm.contains(&apply("vm.gpu.nic")) && vm.contains(&delete("vm.gpu.vm")));
    // Untouched resources are not in the walk.
    assert!(!graph.contains_key(&apply("network.main.vnet")));
}

#[test]
fn destroy_deletes_every_dependent_before_what_it_depends_on() {
    let desired = dual();
    let state = State::from_applied(&desired, "sub");
    let options = PlanOptions {
        mode: Mode::Destroy { keep_data: false },
        ..normal()
    };
    let planned = plan(&desired, &state, &options).expect("plans");
    let graph = schedule(&planned, &state);
    assert_eq!(graph.len(), state.resources.len());
    for r in &state.resources {
        for dep in &r.depends_on {
            assert!(
                waits(&graph, &Node::new(dep, Phase::Delete))
                    .contains(&Node::new(&r.address, Phase::Delete)),
                "{dep} must wait for {}",
                r.address
            );
        }
    }
}

/// A backend that counts saves and remembers the last saved state.
struct Counting {
    saves: Arc<Mutex<Vec<State>>>,
    holder: crate::state::LockHolder,
}

impl Backend for Counting {
    fn location(&self) -> String {
        "memory".to_owned()
    }

    fn load(&mut self) -> BoxFuture<'_, Result<Option<State>, StateError>> {
        Box::pin(async { Ok(None) })
    }

    fn save<'a>(&'a mut self, state: &'a mut State) -> BoxFuture<'a, Result<(), StateError>> {
        // Slow, like a local save with fsyncs (file I/O the local backend runs in
        // `block_in_place`), so that concurrent updates pile up behind it.
        let saved = blocking(|| {
            state.serial += 1;
            std::thread::sleep(Duration::from_millis(20));
            self.saves.lock().expect("not poisoned").push(state.clone());
            Ok(())
        });
        Box::pin(std::future::ready(saved))
    }

    fn lock_holder(&self) -> &crate::state::LockHolder {
        &self.holder
    }

    fn unlock(self: Box<Self>) -> BoxFuture<'static, Result<(), StateError>> {
        Box::pin(async { Ok(()) })
    }
}

/// A store of the fixture experiment, applied, saving through [`Counting`] into `saves`; and the
/// addresses it holds.
fn counting_store(saves: &Arc<Mutex<Vec<State>>>) -> (StateStore, Vec<Address>) {
    let store = StateStore::new(
        Box::new(Counting {
            saves: Arc::clone(saves),
            holder: crate::state::LockHolder::this_process(),
        }),
        State::from_applied(&dual(), "sub"),
    );
    let addresses = store
        .snapshot()
        .resources
        .iter()
        .map(|r| r.address.clone())
        .collect();
    (store, addresses)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_updates_share_saves_and_every_update_is_saved_before_it_returns() {
    let saves = Arc::new(Mutex::new(Vec::new()));
    let (store, addresses) = counting_store(&saves);
    let store = Arc::new(store);
    let mut tasks = tokio::task::JoinSet::new();
    for address in addresses.clone() {
        let store = Arc::clone(&store);
        let saves = Arc::clone(&saves);
        tasks.spawn(async move {
            store
                .update(|state| {
                    state.remove(&address);
                })
                .await
                .expect("saves");
            // Durable on return: the last save does not have it any more.
            let last = saves.lock().expect("not poisoned").last().cloned();
            assert!(last.expect("saved").resource(&address).is_none());
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined.expect("no panic");
    }
    let saves = saves.lock().expect("not poisoned");
    assert!(
        saves.len() < addresses.len(),
        "{} saves for {} updates: nothing was grouped",
        saves.len(),
        addresses.len()
    );
    assert!(saves.last().expect("saved").resources.is_empty());
    assert_eq!(store.snapshot().serial, saves.last().expect("saved").serial);
}

/// A backend whose save cannot finish until another task of the runtime says so.
struct Handshake {
    go: std::sync::mpsc::Receiver<()>,
    holder: crate::state::LockHolder,
    /// Told when a save starts.
    entered: Option<std::sync::mpsc::Sender<()>>,
}

impl Backend for Handshake {
    fn location(&self) -> String {
        "memory".to_owned()
    }

    fn load(&mut self) -> BoxFuture<'_, Result<Option<State>, StateError>> {
        Box::pin(async { Ok(None) })
    }

    fn save<'a>(&'a mut self, state: &'a mut State) -> BoxFuture<'a, Result<(), StateError>> {
        let saved = blocking(|| self.save_blocking(state));
        Box::pin(std::future::ready(saved))
    }

    fn unlock(self: Box<Self>) -> BoxFuture<'static, Result<(), StateError>> {
        Box::pin(async { Ok(()) })
    }

    fn lock_holder(&self) -> &crate::state::LockHolder {
        &self.holder
    }
}

impl Handshake {
    /// The save: it waits until the test lets it go, which only another task can do.
    fn save_blocking(&self, state: &mut State) -> Result<(), StateError> {
        if let Some(entered) = &self.entered {
            let _ = entered.send(());
        }
        self.go
            .recv_timeout(Duration::from_secs(10))
            .map_err(|_| StateError::Io {
                action: "save",
                path: "memory".into(),
                source: std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "no other task ran while the save was in progress",
                ),
            })?;
        state.serial += 1;
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_save_in_progress_does_not_stop_the_other_tasks() {
    // One worker thread: a save that blocked it would keep the task below from ever running,
    // and the save from ever finishing.
    let (tx, go) = std::sync::mpsc::channel();
    let store = Arc::new(StateStore::new(
        Box::new(Handshake {
            go,
            holder: crate::state::LockHolder::this_process(),
            entered: None,
        }),
        State::new("exp"),
    ));
    let saving = {
        let store = Arc::clone(&store);
        tokio::spawn(async move { store.update(|state| state.serial = 7).await })
    };
    let other = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        tx.send(()).expect("the save is waiting");
    });
    other.await.expect("ran while the save was in progress");
    saving
        .await
        .expect("no panic")
        .expect("the save finished once the other task ran");
    assert_eq!(store.snapshot().serial, 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_staged_change_is_saved_by_the_next_save_by_anyone_or_by_the_flush() {
    let saves = Arc::new(Mutex::new(Vec::new()));
    let (store, addresses) = counting_store(&saves);
    let last_saved = || saves.lock().expect("not poisoned").last().cloned();
    let gone = |state: &State, i: usize| state.resource(&addresses[i]).is_none();

    let staged = store.stage(|state| {
        state.remove(&addresses[0]);
    });
    assert!(!store.is_saved(staged));
    assert!(last_saved().is_none(), "staging does not save");
    // Someone else's update carries it.
    store
        .update(|state| {
            state.remove(&addresses[1]);
        })
        .await
        .expect("saves");
    assert!(store.is_saved(staged));
    let carried = last_saved().expect("saved");
    assert!(gone(&carried, 0) && gone(&carried, 1));
    // The flush saves what is left, and only when something is.
    let staged = store.stage(|state| {
        state.remove(&addresses[2]);
    });
    store.flush().await.expect("saves");
    assert!(store.is_saved(staged) && gone(&last_saved().expect("saved"), 2));
    store.flush().await.expect("nothing to save");
    assert_eq!(saves.lock().expect("not poisoned").len(), 2);
    // The second Ctrl-C's close saves what is staged, then hands the backend back.
    let staged = store.stage(|state| {
        state.remove(&addresses[3]);
    });
    let (backend, outcome) = store.close().await;
    outcome.expect("saves");
    assert!(
        backend.is_some(),
        "the backend (and its lock) is handed back"
    );
    assert!(store.is_saved(staged) && gone(&last_saved().expect("saved"), 3));
    assert_eq!(saves.lock().expect("not poisoned").len(), 3);
    // A task still running afterwards is detached: its save is refused and writes nothing.
    let late = store
        .update(|state| {
            state.remove(&addresses[4]);
        })
        .await;
    assert!(matches!(late, Err(StateError::Closed)), "{late:?}");
    assert_eq!(saves.lock().expect("not poisoned").len(), 3);
    let (again, outcome) = store.close().await;
    assert!(again.is_none() && outcome.is_ok(), "closed once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_waits_for_the_save_in_progress_and_keeps_what_it_wrote() {
    let (tx, go) = std::sync::mpsc::channel();
    let (entered, started) = std::sync::mpsc::channel();
    let store = Arc::new(StateStore::new(
        Box::new(Handshake {
            go,
            holder: crate::state::LockHolder::this_process(),
            entered: Some(entered),
        }),
        State::new("exp"),
    ));
    let saving = {
        let store = Arc::clone(&store);
        tokio::spawn(async move { store.update(|state| state.serial = 7).await })
    };
    // The save is in progress (it waits for `go`) when the close starts.
    tokio::task::spawn_blocking(move || started.recv().expect("the save starts"))
        .await
        .expect("no panic");
    let closing = {
        let store = Arc::clone(&store);
        tokio::spawn(async move { store.close().await })
    };
    tx.send(()).expect("the save is waiting");
    saving
        .await
        .expect("no panic")
        .expect("the save in progress finished");
    let (backend, outcome) = closing.await.expect("no panic");
    outcome.expect("nothing more to save");
    assert!(backend.is_some());
    assert_eq!(store.snapshot().serial, 8, "the save's serial is kept");
}

#[test]
fn a_moved_data_disk_is_attached_only_after_the_vm_it_leaves_is_updated() {
    // Azure refuses to attach a disk another VM still owns: the two updates cannot run at once.
    let mut desired = dual();
    let mut cpu = desired
        .resource(&addr("vm.gpu.vm"))
        .cloned()
        .expect("the fixture has a VM");
    cpu.address = addr("vm.cpu.vm");
    cpu.name = "exp-cpu".to_owned();
    desired.resources.push(cpu);
    desired.resources.sort_by(|a, b| a.address.cmp(&b.address));
    let disk = |lun: u32| serde_json::json!([{"lun": lun, "disk": "disk.data"}]);
    set(&mut desired, "vm.cpu.vm", "data_disks", disk(0));
    set(
        &mut desired,
        "vm.gpu.vm",
        "data_disks",
        serde_json::json!([]),
    );
    let state = State::from_applied(&desired, "sub");
    let mut moved = desired.clone();
    set(&mut moved, "vm.cpu.vm", "data_disks", serde_json::json!([]));
    set(&mut moved, "vm.gpu.vm", "data_disks", disk(2));
    let planned = plan(&moved, &state, &normal()).expect("plans");
    assert_eq!(
        planned.disk_detaches(),
        [crate::plan::DiskDetach {
            vm: addr("vm.cpu.vm"),
            disk: addr("disk.data"),
            lun: 0,
        }]
    );
    assert!(
        planned.notes.iter().any(|n| n
            == "disk.data is unmounted on vm.cpu (lun 0) before Azure detaches it; apply stops there if it is busy"),
        "{:?}",
        planned.notes
    );
    let graph = schedule(&planned, &state);
    assert!(waits(&graph, &apply("vm.gpu.vm")).contains(&apply("vm.cpu.vm")));
    assert!(!waits(&graph, &apply("vm.cpu.vm")).contains(&apply("vm.gpu.vm")));
}
