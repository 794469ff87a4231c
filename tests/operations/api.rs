//! `park`, `unpark`, `status`, `output` and `run` called as the engine's operations (`engine::op`),
//! with a listener that collects the events, approvers that answer as a test wants and a
//! canceller the test presses: what the binary cannot show (a "no" at the question, a Ctrl-C at
//! an exact moment, the events in order).

use std::num::NonZeroUsize;
use std::sync::Mutex;

use dsinfra::connect::{Choice, Connection, Options};
use dsinfra::engine::events::Event;
use dsinfra::engine::op::{
    self, Approver, AutoApprove, Cancel, Canceller, Events, Listener, OpEvent, Question,
};
use dsinfra::engine::power::PowerChange;
use dsinfra::manifest::Loaded;

use super::*;

/// Collects every event as a line; presses `press_on_start` (if any) when an action starts.
#[derive(Default)]
struct Collect {
    lines: Mutex<Vec<String>>,
    press_on_start: Option<Canceller>,
}

impl Collect {
    fn lines(&self) -> Vec<String> {
        self.lines.lock().expect("not poisoned").clone()
    }
}

impl Listener for Collect {
    fn event(&self, event: OpEvent<'_>) {
        let line = match &event {
            OpEvent::Note(text) => format!("note: {text}"),
            OpEvent::WorkStarted => "work started".to_owned(),
            OpEvent::WorkFinished => "work finished".to_owned(),
            OpEvent::Resource(Event::Started { address, operation }) => {
                if let Some(canceller) = &self.press_on_start {
                    canceller.press();
                }
                format!("{address}: {operation} started")
            }
            OpEvent::Resource(Event::Done {
                address, operation, ..
            }) => format!("{address}: {operation} done"),
            other => format!("{other:?}"),
        };
        self.lines.lock().expect("not poisoned").push(line);
    }
}

/// Answers `answer`, after pressing `press` (a Ctrl-C while the question is on screen), and
/// remembers the question.
struct Answer {
    says: bool,
    press: Option<Canceller>,
    asked: Mutex<Option<Question>>,
}

impl Answer {
    fn new(answer: bool, press: Option<Canceller>) -> Self {
        Self {
            says: answer,
            press,
            asked: Mutex::new(None),
        }
    }
}

impl Approver for Answer {
    fn approve(&self, question: &Question) -> Result<bool, op::Error> {
        if let Some(canceller) = &self.press {
            canceller.press();
        }
        *self.asked.lock().expect("not poisoned") = Some(question.clone());
        Ok(self.says)
    }
}

fn loaded(world: &World) -> Loaded {
    manifest::load(&world.manifest, &LoadOptions::default()).expect("the test manifest is valid")
}

async fn connect(world: &World, loaded: &Loaded) -> Connection {
    let options = Options {
        choice: Choice::Endpoint(world.emulator.endpoint()),
        parallelism: NonZeroUsize::new(4).expect("non-zero"),
    };
    dsinfra::connect::connect(&options, &world.manifest, &loaded.desired.azure)
        .await
        .expect("connects to the emulator")
}

/// The request to `change` every VM of `world`, its state opened (and locked) from disk.
fn request<'a>(
    world: &'a World,
    loaded: &'a Loaded,
    conn: &'a Connection,
    change: PowerChange,
) -> op::ParkRequest<'a> {
    let mut local = LocalBackend::open(&world.manifest).expect("state dir");
    let state = local.load_sync().expect("reads").expect("applied");
    let backend: Box<dyn dsinfra::state::Backend + Send> = Box::new(local);
    op::ParkRequest {
        change,
        desired: &loaded.desired,
        sources: &loaded.sources,
        manifest: &world.manifest,
        backend,
        state,
        arm: conn,
        only: &[],
        steps: op::steps::StepsOptions::default(),
    }
}

/// What ARM says the VM's power state is now (a status with a connection refreshes it).
async fn live_power(world: &World, conn: &Connection) -> Option<PowerState> {
    let found = op::status(
        op::StatusRequest {
            state: world.state(),
            arm: Some(conn),
        },
        &Cancel::never(),
    )
    .await
    .expect("status reads");
    assert!(found.refreshed.is_some());
    found.vms[0].power
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn park_and_unpark_report_progress_as_events_and_return_the_cost() {
    let world = World::applied(config()).await;
    let loaded = loaded(&world);
    let conn = connect(&world, &loaded).await;
    let collect = Arc::new(Collect::default());
    let events: Events = collect.clone();
    let parked = op::park(
        request(&world, &loaded, &conn, PowerChange::Park),
        &events,
        &AutoApprove,
        &Cancel::never(),
    )
    .await
    .expect("parks");
    assert_eq!(parked.sent, ["vm.gpu.vm".parse().expect("valid")]);
    assert!(parked.failures.is_empty() && parked.interrupted.is_none());
    assert!(parked.problem.is_none());
    // The VM's compute stops; the public IP is still billed.
    assert!(parked.after.now < parked.before.now, "{parked:?}");
    assert!(parked.after.now > 0.0, "{parked:?}");
    let lines = collect.lines();
    assert!(
        lines[0].starts_with("note: parking deallocates the VMs"),
        "{lines:?}"
    );
    assert_eq!(
        lines[1..],
        [
            "work started",
            "vm.gpu.vm: deallocate started",
            "vm.gpu.vm: deallocate done",
            "work finished"
        ],
        "{lines:?}"
    );
    assert_eq!(
        world.power_state("vm.gpu.vm"),
        Some(PowerState::Deallocated)
    );
    assert_eq!(
        live_power(&world, &conn).await,
        Some(PowerState::Deallocated)
    );

    let unparked = op::park(
        request(&world, &loaded, &conn, PowerChange::Unpark),
        &events,
        &AutoApprove,
        &Cancel::never(),
    )
    .await
    .expect("unparks");
    assert!((unparked.after.now - parked.before.now).abs() < 1e-9);
    assert_eq!(world.power_state("vm.gpu.vm"), Some(PowerState::Running));
    let boots = world
        .state()
        .resource(&"vm.gpu.vm".parse().expect("valid"))
        .map(|r| r.boots);
    assert_eq!(boots, Some(1), "a started VM boots afresh");

    // Nothing left to do: no question, no work, the cost as it is.
    let asked = Answer::new(true, None);
    let again = op::park(
        request(&world, &loaded, &conn, PowerChange::Unpark),
        &events,
        &asked,
        &Cancel::never(),
    )
    .await
    .expect("nothing to do");
    assert!(again.sent.is_empty());
    assert_eq!(again.before, again.after);
    assert!(asked.asked.lock().expect("not poisoned").is_none());
    assert_eq!(
        collect.lines().last().map(String::as_str),
        Some("note: nothing to do: 1 VM(s) selected, all already running")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_park_declined_at_the_question_changes_nothing() {
    let world = World::applied(config()).await;
    let loaded = loaded(&world);
    let conn = connect(&world, &loaded).await;
    let before = world.state();
    let collect = Arc::new(Collect::default());
    let events: Events = collect.clone();
    let no = Answer::new(false, None);
    let err = op::park(
        request(&world, &loaded, &conn, PowerChange::Park),
        &events,
        &no,
        &Cancel::never(),
    )
    .await
    .expect_err("declined");
    assert_eq!(err.to_string(), "cancelled: nothing was changed");
    let asked = no
        .asked
        .lock()
        .expect("not poisoned")
        .clone()
        .expect("asked");
    assert_eq!(asked.verb, "park");
    assert_eq!(
        asked.text,
        format!(
            "Deallocate 1 VM(s) on {}: vm.gpu.vm?",
            world.emulator.endpoint()
        )
    );
    assert!(!collect.lines().contains(&"work started".to_owned()));
    assert_eq!(
        world.state().serial,
        before.serial,
        "the state was not written"
    );
    assert_eq!(live_power(&world, &conn).await, Some(PowerState::Running));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_press_while_the_question_is_asked_interrupts_with_nothing_changed() {
    let world = World::applied(config()).await;
    let loaded = loaded(&world);
    let conn = connect(&world, &loaded).await;
    let before = world.state();
    let (canceller, cancel) = op::cancel::pair();
    // Yes, but a Ctrl-C came while the question was on screen: the press wins.
    let yes_but = Answer::new(true, Some(canceller));
    let err = op::park(
        request(&world, &loaded, &conn, PowerChange::Park),
        &(Arc::new(op::Quiet) as Events),
        &yes_but,
        &cancel,
    )
    .await
    .expect_err("interrupted");
    assert!(matches!(err, op::Error::Interrupted(_)), "{err:?}");
    assert_eq!(err.to_string(), "interrupted: nothing was changed");
    assert_eq!(
        world.state().serial,
        before.serial,
        "the state was not written"
    );
    assert_eq!(live_power(&world, &conn).await, Some(PowerState::Running));
    // The lock went with the operation: the next one opens the state at once.
    LocalBackend::open(&world.manifest).expect("not locked");

    // The same for an unpark, which has no BeeOND to stop between the question and the actions.
    op::park(
        request(&world, &loaded, &conn, PowerChange::Park),
        &(Arc::new(op::Quiet) as Events),
        &AutoApprove,
        &Cancel::never(),
    )
    .await
    .expect("parks");
    let (canceller, cancel) = op::cancel::pair();
    let err = op::park(
        request(&world, &loaded, &conn, PowerChange::Unpark),
        &(Arc::new(op::Quiet) as Events),
        &Answer::new(true, Some(canceller)),
        &cancel,
    )
    .await
    .expect_err("interrupted");
    assert!(matches!(err, op::Error::Interrupted(_)), "{err:?}");
    assert_eq!(
        live_power(&world, &conn).await,
        Some(PowerState::Deallocated)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_press_once_the_actions_are_sent_stops_the_waiting_and_says_what_goes_on() {
    let world = World::applied(config()).await;
    let loaded = loaded(&world);
    let conn = connect(&world, &loaded).await;
    world
        .emulator
        .add_fault(slowed("POST", Some("*/virtualMachines/*/deallocate")));
    let (canceller, cancel) = op::cancel::pair();
    let collect = Arc::new(Collect {
        press_on_start: Some(canceller),
        ..Collect::default()
    });
    let events: Events = collect.clone();
    let started = std::time::Instant::now();
    let outcome = op::park(
        request(&world, &loaded, &conn, PowerChange::Park),
        &events,
        &AutoApprove,
        &cancel,
    )
    .await
    .expect("an interrupted outcome, not an error");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(
        outcome.interrupted.as_deref(),
        Some(
            format!(
                "interrupted: the 1 power action(s) sent go on in Azure; what finished is saved, and `dsinfra status {}` shows the rest",
                world.manifest.display()
            )
            .as_str()
        )
    );
    assert!(outcome.problem.is_none());
    assert_eq!(outcome.before, outcome.after, "nothing finished");
    assert_eq!(
        collect.lines().last().map(String::as_str),
        Some("work finished")
    );
    assert_eq!(world.power_state("vm.gpu.vm"), Some(PowerState::Running));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_output_work_offline_from_the_state() {
    let world = World::applied(config()).await;
    let loaded = loaded(&world);
    let found = op::status(
        op::StatusRequest {
            state: world.state(),
            arm: None,
        },
        &Cancel::never(),
    )
    .await
    .expect("reads the state");
    assert!(found.refreshed.is_none());
    assert_eq!(found.vms.len(), 1);
    assert_eq!(found.vms[0].power, Some(PowerState::Running));
    assert_eq!(found.vms[0].public_ip, None, "only ARM knows it");

    let ask = |name: Option<&'static str>, show_secrets: bool| op::OutputRequest {
        desired: &loaded.desired,
        state: world.state(),
        arm: None,
        name,
        show_secrets,
    };
    assert!(op::output::needs_connection(&ask(None, false)));
    let shown = op::output(ask(None, false), &Cancel::never())
        .await
        .expect("outputs");
    let names: Vec<&str> = shown.values.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["ssh", "private"]);
    assert_eq!(shown.values[1].value, None, "sensitive");
    assert_eq!(shown.unknown(), 1, "the public IP is known after apply");
    let err = op::output(ask(Some("private"), false), &Cancel::never())
        .await
        .expect_err("hidden");
    assert_eq!(
        err.to_string(),
        "output `private` is sensitive: add --show-secrets to print it"
    );
    let err = op::output(ask(Some("sshh"), false), &Cancel::never())
        .await
        .expect_err("no such output");
    assert_eq!(
        err.to_string(),
        "no output named `sshh`: did you mean `ssh`?"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aml_park_warns_and_asks_in_its_own_words() {
    let (world, _) = super::aml::small_applied(config()).await;
    let loaded = loaded(&world);
    let conn = connect(&world, &loaded).await;
    let collect = Arc::new(Collect::default());
    let events: Events = collect.clone();
    let no = Answer::new(false, None);
    op::park(
        request(&world, &loaded, &conn, PowerChange::Park),
        &events,
        &no,
        &Cancel::never(),
    )
    .await
    .expect_err("declined");
    let asked = no
        .asked
        .lock()
        .expect("not poisoned")
        .clone()
        .expect("asked");
    assert_eq!(
        asked.text,
        format!(
            "Scale 1 AmlCompute cluster(s) to zero nodes (deleting the nodes and their local disks) on {}: aml_cluster.train.compute?",
            world.emulator.endpoint()
        )
    );
    let notes: Vec<String> = collect
        .lines()
        .into_iter()
        .filter(|l| l.starts_with("note: parking"))
        .collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].starts_with("note: parking scales the AmlCompute clusters to zero nodes: Azure DELETES the nodes and their local disks"),
        "{notes:?}"
    );
    assert_eq!(
        world.power_state("aml_cluster.train.compute"),
        Some(PowerState::Running)
    );
}

/// A run request for `command` on the head of `world`, logging in with `identity`.
fn run_request<'a>(
    world: &'a World,
    loaded: &'a Loaded,
    conn: &'a Connection,
    identity: Option<PathBuf>,
) -> op::RunRequest<'a> {
    op::RunRequest {
        at: op::Where {
            desired: &loaded.desired,
            manifest: &world.manifest,
            state: world.state(),
            arm: conn,
            identity,
        },
        target: op::RunTarget::default(),
        command: vec!["echo".to_owned(), "hello".to_owned()],
        detach: false,
        park_after: None,
        recover: None,
        on_preempt: None,
        checkpoint_dir: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_pressed_before_it_starts_or_refused_records_nothing() {
    let world = World::applied(config()).await;
    let loaded = loaded(&world);
    let conn = connect(&world, &loaded).await;
    let runs = world
        .manifest
        .parent()
        .expect("dir")
        .join(".dsinfra/exp/runs");
    let events: Events = Arc::new(Collect::default());

    let (canceller, cancel) = op::cancel::pair();
    canceller.press();
    let pressed = op::run(run_request(&world, &loaded, &conn, None), &events, &cancel).await;
    assert!(
        matches!(pressed, Err(op::Error::Interrupted(_))),
        "{pressed:?}"
    );

    let mut detached = run_request(&world, &loaded, &conn, None);
    detached.detach = true;
    detached.park_after = Some(op::run::ParkAfter {
        sources: &loaded.sources,
        steps: op::StepsOptions::default(),
        backend: None,
    });
    let refused = op::run(detached, &events, &Cancel::never()).await;
    assert!(
        matches!(&refused, Err(op::Error::Failed(why)) if why.contains("needs the idle watcher")),
        "{refused:?}"
    );
    assert!(!runs.exists(), "nothing recorded in {}", runs.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_an_unreachable_head_is_recorded_as_failed_with_why() {
    // The emulator maps no SSH endpoint for this VM: the head cannot be reached.
    let world = World::applied(config()).await;
    let loaded = loaded(&world);
    let conn = connect(&world, &loaded).await;
    let key = world.manifest.with_file_name("id_ed25519");
    let pair = dsinfra::ssh::HostKeyPair::generate().expect("a key");
    std::fs::write(&key, pair.private_openssh().expose()).expect("key written");
    let collect = Arc::new(Collect::default());
    let events: Events = collect.clone();

    let outcome = op::run(
        run_request(&world, &loaded, &conn, Some(key)),
        &events,
        &Cancel::never(),
    )
    .await
    .expect("the run is attempted");
    let record = &outcome.record;
    assert_eq!(
        (record.state(), record.exit()),
        (op::run::RunState::Failed, Some(255))
    );
    assert_eq!(record.target, "vm.gpu");
    let why = record.nodes[0].error.as_deref().unwrap_or_default();
    assert!(why.contains("vm.gpu"), "{why}");
    assert!(
        collect
            .lines()
            .iter()
            .any(|l| l.starts_with("note: vm.gpu: ")),
        "{:?}",
        collect.lines()
    );
    let listed = op::runs(
        op::Lookup {
            manifest: &world.manifest,
            at: None,
        },
        &events,
    )
    .await
    .expect("records read");
    assert_eq!(listed, [outcome.record]);
}
