"""docs/diagrams.md draws what the code does.

- The phase diagrams (stateDiagram-v2) name exactly the values of Phase, and the conditions table exactly the
  condition types the operator sets on a SampleDB (ConditionType, and Migrated).
- The flowchart of one database's objects (for the database `orders`) names every object with the name the
  code gives it (model/names.py and the few builders that name objects themselves): `{hash}`, `{n}` and
  `{yyyymmddhhmmss}` stand for the computed parts. Each object sits in the subgraph that says who deletes it,
  as its builder's ownerReferences and the deletion steps' lists say.
- The failover's sequence diagram names the instances, Services and slot as the code names them, and its
  timings are the code's.
- The page's links reach existing headings, and the README links the page.

The parsers read only the Mermaid the page uses and fail on any line they do not understand, so a diagram
cannot grow a part that escapes these checks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from tests.unit.docs.markdown import DOCS, README, REPO, CodeBlock, code_blocks, tables

from sampledb_operator.decide import jobs
from sampledb_operator.decide.backup import backups as bk
from sampledb_operator.decide.backup.schedule_plan import SCHEDULED
from sampledb_operator.decide.children import desired as d
from sampledb_operator.decide.lifecycle import lifecycle
from sampledb_operator.decide.replicas import replication as rep
from sampledb_operator.decide.upgrades import migrations, reload, upgrade_step
from sampledb_operator.decide.upgrades import upgrade as up
from sampledb_operator.decide.upgrades.migration_step import BACKUP_REASON as PRE_MIGRATION
from sampledb_operator.decide.upgrades.migration_step import MIGRATED
from sampledb_operator.model import names
from sampledb_operator.model.conditions import ConditionType
from sampledb_operator.model.sampledb import ReplicationSpec, SampleDB
from sampledb_operator.model.sampledb_status import Phase
from sampledb_operator.reconcilers import children as ch
from sampledb_operator.reconcilers.replication import FENCE_GRACE_SECONDS

DOC = DOCS / "diagrams.md"
DB = "orders"
UID = "7d0c8a52-0000-4000-8000-000000000001"
HASH = "{hash}"

# ------------------------------------------------------------------------------ reading the page


def _mermaid(kind: str) -> list[CodeBlock]:
    """The page's ```mermaid blocks of one diagram type, in order."""
    found = []
    for block in code_blocks(DOC):
        if block.info != "mermaid":
            continue
        body = _lines(block)
        if body and body[0].split()[0] == kind:
            found.append(block)
    return found


def _lines(block: CodeBlock) -> list[str]:
    """A block's statements: stripped, without blank lines, comments and %%{init}%% directives."""
    return [line.strip() for line in block.lines if line.strip() and not line.strip().startswith("%%")]


def _text(label: str) -> list[str]:
    """A label's lines (Mermaid's <br/>), each stripped."""
    return [part.strip() for part in re.split(r"<br\s*/?>", label)]


def test_the_page_has_its_four_diagrams() -> None:
    infos = [b.info for b in code_blocks(DOC)]
    assert infos == ["mermaid"] * 4, infos
    assert len(_mermaid("stateDiagram-v2")) == 2
    assert len(_mermaid("sequenceDiagram")) == 1
    assert len(_mermaid("flowchart")) == 1


# ------------------------------------------------------------------------------ phases

_TRANSITION = re.compile(r"^(?P<src>\S+)\s*-->\s*(?P<dst>[^\s:]+)\s*(?::\s*(?P<label>.+))?$")
_NOTE = re.compile(r"^note\s+(?:left|right)\s+of\s+(?P<state>\w+)\s*(?::\s*.+)?$")


@dataclass(frozen=True)
class StateDiagram:
    where: str
    states: frozenset[str]
    transitions: frozenset[tuple[str, str]]


def _state_diagram(block: CodeBlock) -> StateDiagram:
    states: set[str] = set()
    transitions: set[tuple[str, str]] = set()
    lines = _lines(block)
    in_note = False
    for line in lines[1:]:
        if in_note:
            in_note = line != "end note"
            continue
        if line.startswith("direction "):
            continue
        if (note := _NOTE.match(line)) is not None:
            states.add(note["state"])
            in_note = ":" not in line
            continue
        if (move := _TRANSITION.match(line)) is not None:
            assert move["label"], f"{block.where}: a transition without a label: {line!r}"
            states.update((move["src"], move["dst"]))
            transitions.add((move["src"], move["dst"]))
            continue
        raise AssertionError(f"{block.where}: a state diagram line this test does not read: {line!r}")
    assert not in_note, f"{block.where}: a note without `end note`"
    states.discard("[*]")
    return StateDiagram(block.where, frozenset(states), frozenset(transitions))


STATE_DIAGRAMS = [_state_diagram(b) for b in _mermaid("stateDiagram-v2")]


@pytest.mark.parametrize("diagram", STATE_DIAGRAMS, ids=lambda s: s.where)
def test_every_state_drawn_is_a_phase(diagram: StateDiagram) -> None:
    values = {p.value for p in Phase}
    assert diagram.states - values == set(), (
        f"{diagram.where}: states that are no value of Phase (model/sampledb_status.py): "
        f"{sorted(diagram.states - values)}")


def test_every_phase_is_drawn() -> None:
    drawn = set().union(*(s.states for s in STATE_DIAGRAMS))
    missing = {p.value for p in Phase} - drawn
    assert missing == set(), f"docs/diagrams.md draws no state for the phases {sorted(missing)}"


def test_the_diagrams_meet_at_running_and_every_phase_can_be_reached_and_left() -> None:
    """The first diagram ends in Running, the second starts there; every phase but Pending is entered and
    every phase but Deleting can be left to another (the phase is recomputed on every pass)."""
    first, second = STATE_DIAGRAMS
    assert "Running" in first.states & second.states
    transitions = first.transitions | second.transitions
    entered = {dst for src, dst in transitions if src != "[*]"}
    left = {src for src, dst in transitions if dst != "[*]"}
    phases = {p.value for p in Phase}
    assert phases - entered == {Phase.PENDING.value}
    assert phases - left == {Phase.DELETING.value}
    assert ("[*]", Phase.PENDING.value) in transitions
    assert (Phase.DELETING.value, "[*]") in transitions


# ------------------------------------------------------------------------------ conditions


def _condition_table() -> list[str]:
    (table,) = [t for t in tables(DOC) if t.header and t.header[0] == "Condition"]
    assert table.header == ("Condition", "True", "False (or Unknown)"), table.header
    types = []
    for row in table.rows:
        cell = row[0]
        assert re.fullmatch(r"`[A-Za-z]+`", cell), f"{table.where}: a condition type in backticks, not {cell!r}"
        types.append(cell.strip("`"))
    return types


def test_the_conditions_table_lists_each_condition_type_the_operator_sets_once() -> None:
    """ConditionType's values, and Migrated (decide/upgrades/migration_step.py sets it; it is no ConditionType)."""
    listed = _condition_table()
    assert len(listed) == len(set(listed)), f"listed twice: {sorted({t for t in listed if listed.count(t) > 1})}"
    expected = {c.value for c in ConditionType} | {MIGRATED}
    assert set(listed) - expected == set(), f"no such condition type: {sorted(set(listed) - expected)}"
    assert expected - set(listed) == set(), f"condition types missing from the table: {sorted(expected - set(listed))}"


# ------------------------------------------------------------------------------ the objects of one database

_NODE = re.compile(r'(?P<id>[A-Za-z_]\w*)\s*(?P<shape>\(\[|\[\(|\[\[|\{\{|\[|\(|\{)"(?P<label>[^"]*)"'
                   r'(?P<close>\]\)|\)\]|\]\]|\}\}|\]|\)|\})')
_CLOSE = {"([": "])", "[(": ")]", "[[": "]]", "{{": "}}", "[": "]", "(": ")", "{": "}"}
_SUBGRAPH = re.compile(r'^subgraph\s+(?P<id>\w+)\s*(?:\["(?P<title>[^"]*)"\])?$')
_EDGE = re.compile(r"^\w+(?:\s*(?:-->|---|-\.->|~~~|-\.\s[^.]+\s\.->)\s*\w+)+$")
_NAME = re.compile(r"[a-z0-9][a-z0-9.{}-]*")


@dataclass(frozen=True)
class Drawn:
    kind: str
    name: str
    node: str
    group: str | None  # the innermost subgraph


def _flowchart(block: CodeBlock) -> list[Drawn]:
    drawn: list[Drawn] = []
    stack: list[str] = []
    defined: set[str] = set()
    lines = _lines(block)
    assert re.fullmatch(r"flowchart (LR|TB|TD|RL|BT)", lines[0]), lines[0]
    for line in lines[1:]:
        if (sub := _SUBGRAPH.match(line)) is not None:
            stack.append(sub["id"])
            continue
        if line == "end":
            assert stack, f"{block.where}: `end` without a subgraph"
            stack.pop()
            continue
        if line.startswith("direction "):
            continue
        nodes = list(_NODE.finditer(line))
        bare = _NODE.sub(lambda m: m["id"], line)
        assert nodes or _EDGE.fullmatch(bare), f"{block.where}: a flowchart line this test does not read: {line!r}"
        assert _EDGE.fullmatch(bare) or (len(nodes) == 1 and bare == nodes[0]["id"]), (
            f"{block.where}: a flowchart line this test does not read: {line!r}")
        for node in nodes:
            assert _CLOSE[node["shape"]] == node["close"], f"{block.where}: {node['id']}: unmatched brackets"
            assert node["id"] not in defined, f"{block.where}: node {node['id']} defined twice"
            defined.add(node["id"])
            kind, *rest = _text(node["label"])
            assert re.fullmatch(r"[A-Z][A-Za-z]+", kind), f"{block.where}: {node['id']}: first line {kind!r} is no kind"
            object_names = [part for part in rest if _NAME.fullmatch(part)]
            assert object_names, f"{block.where}: {node['id']} names no object: {node['label']!r}"
            drawn.extend(Drawn(kind, name, node["id"], stack[-1] if stack else None) for name in object_names)
    assert not stack, f"{block.where}: a subgraph without `end`"
    return drawn


(FLOWCHART,) = _mermaid("flowchart")
DRAWN = _flowchart(FLOWCHART)


def _db(**spec: Any) -> SampleDB:
    body: dict[str, Any] = {"version": "16.4", "storage": {"size": "1Gi"}, **spec}
    return SampleDB.model_validate({
        "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
        "metadata": {"name": DB, "namespace": "shop", "uid": UID, "generation": 1}, "spec": body,
        "status": {"currentVersion": "15.8"}})


DATABASE = _db(replicas=2, init={"configMapKeyRef": {"name": "orders-init", "key": "init.sql"}})


def _pattern(name: str, **parts: str) -> str:
    """`name` with its computed parts shown as the page shows them: every 8-hex-digit hash as {hash}, and each
    `parts` value (a timestamp, an attempt number at the end) as {its key}."""
    for key, value in parts.items():
        assert value in name, (value, name)
        name = name.replace(value, "{" + key + "}")
    return re.sub(r"(?<=-)[0-9a-f]{8}(?=-|$)", HASH, name)


def _owner_kind(obj: dict[str, Any]) -> str | None:
    refs = obj["metadata"].get("ownerReferences") or []
    assert len(refs) <= 1, refs
    return refs[0]["kind"] if refs else None


# The subgraphs of the flowchart: who deletes what.
OWNED = "owned"                # ownerReference to the SampleDB: the garbage collector
BACKUP_OWNED = "backup_owned"  # ownerReference to a SampleDBBackup
UNOWNED = "unowned"            # no owner: reconcilers/deletion.py deletes them
KEPT = "kept"                  # no owner and never deleted with the database
SHARED = "shared"              # the namespace's: deleted with its last SampleDB


def _group_of_owner(owner: str | None) -> str:
    return {"SampleDB": OWNED, "SampleDBBackup": BACKUP_OWNED}[owner] if owner else UNOWNED


def _expected() -> dict[tuple[str, str], str | None]:
    """(kind, name pattern) -> the subgraph it belongs in (None: not checked), from the code."""
    db = DATABASE
    out: dict[tuple[str, str], str | None] = {("SampleDB", DB): None}

    # The long-lived children, as decide/children/desired.children makes them for two instances.
    deleted = {*ch.deletable_children(db),
               ("StatefulSet", names.instance_statefulset_name(DB, 1)),  # ch.instance_children, from the caches
               ("PersistentVolumeClaim", names.instance_data_pvc_name(DB, 1))}
    made = d.children(d.Inputs(db, {"lib.sh": ""}, instances=(d.Instance(0), d.Instance(1))))
    for obj in made:
        key = (obj["kind"], obj["metadata"]["name"])
        owner = _owner_kind(obj)
        if owner is not None:
            out[key] = _group_of_owner(owner)
        elif key == ("ConfigMap", d.scripts_configmap_name(db)):
            out[key] = SHARED
        elif key == ("PersistentVolumeClaim", names.backup_pvc_name(DB)):
            assert key not in ch.deletable_children(db)
            out[key] = KEPT
        else:
            assert key in deleted, f"{key} has no owner and no deletion step deletes it"
            out[key] = UNOWNED
    # The Secrets, made apart from children() (reconcilers/children.py, reconcilers/tls.py).
    legacy = ("ConfigMap", d.legacy_scripts_configmap_name(db))  # an earlier version's, deleted once unused
    for key in ch.unowned_children(db):
        if key != legacy and key not in out:
            assert key in ch.deletable_children(db)
            out[key] = UNOWNED
    for index in (0, 1):
        out[("Pod", names.instance_pod_name(DB, index))] = None  # the StatefulSets' pods

    # Jobs and what they mount, owned as their builders say (checked in test_the_job_owners_are_the_builders).
    for kind, name in JOB_NAMES.items():
        out[("Job", _pattern(name))] = BACKUP_OWNED if kind in BACKUP_JOB_KINDS else OWNED
    snapshot = migrations.snapshot_configmap(db, [], {})
    out[("ConfigMap", _pattern(snapshot["metadata"]["name"]))] = _group_of_owner(_owner_kind(snapshot))

    # SampleDBBackups the operator asks for: no owner, they outlive the database.
    at = datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)
    backup_names = [
        _pattern(names.backup_name(DB, SCHEDULED, at), yyyymmddhhmmss=at.strftime("%Y%m%d%H%M%S")),
        _pattern(bk.pre_work_backup_name(db, upgrade_step.BACKUP_REASON, "15.8->16.4")),
        _pattern(bk.pre_work_backup_name(db, PRE_MIGRATION, "digest")),
        _pattern(lifecycle.snapshot_backup_name(DB, UID, 7).removesuffix("-7")) + "-{n}",
    ]
    for name in backup_names:
        assert _owner_kind(bk.backup_request(db, name, "any")) is None
        out[("SampleDBBackup", name)] = KEPT
    return out


def _upgrade_attempt() -> upgrade_step.UpgradeAttempt:
    attempt = upgrade_step.attempt_of(DATABASE)
    assert attempt is not None
    return attempt


ATTEMPT = _upgrade_attempt()
JOB_NAMES: dict[str, str] = {
    names.JobKind.INIT.value: names.init_job_name(DB, UID),
    names.JobKind.RESTORE.value: names.restore_job_name(DB, f"{UID}/backup"),
    names.JobKind.UPGRADE.value: ATTEMPT.job,
    "upgrade-link": ATTEMPT.link,
    "upgrade-analyze": ATTEMPT.analyze,
    "upgrade-thaw": ATTEMPT.thaw,
    names.JobKind.MIGRATE.value: names.migration_job_name(DB, f"{UID}/digest"),
    names.JobKind.RELOAD.value: names.reload_job_name(DB, UID, "parameters"),
    names.JobKind.BASEBACKUP.value: names.job_name(DB, names.JobKind.BASEBACKUP, f"{UID}/request"),
    names.JobKind.RECOVERYVERIFY.value: names.job_name(DB, names.JobKind.RECOVERYVERIFY, f"{UID}/request"),
    names.JobKind.BACKUP.value: names.backup_job_name(DB, "orders-manual-20240506070809"),
    names.JobKind.VERIFY.value: names.verify_job_name(DB, "backup-uid", ""),
    names.JobKind.PRUNE.value: names.prune_job_name(DB, "orders-manual-20240506070809"),
}
BACKUP_JOB_KINDS = {names.JobKind.BACKUP.value, names.JobKind.VERIFY.value, names.JobKind.PRUNE.value}
# JobKind.SNAPSHOT names no Job the operator makes: a pre-delete snapshot is a SampleDBBackup, taken by its
# backup Job.
UNUSED_JOB_KINDS = {names.JobKind.SNAPSHOT.value}

EXPECTED = _expected()


def test_every_job_kind_is_drawn_but_the_unused_one() -> None:
    drawn_kinds = {k for k in JOB_NAMES if "-" not in k}
    assert drawn_kinds | UNUSED_JOB_KINDS == {k.value for k in names.JobKind}


def test_the_job_owners_are_the_builders() -> None:
    """The owner this test expects of each Job kind is the one its builder sets."""
    db = DATABASE
    built = {
        names.JobKind.INIT.value: jobs.init_job(db),
        names.JobKind.RELOAD.value: reload.reload_job(db, "parameters"),
        names.JobKind.MIGRATE.value: jobs.migration_job(db, name=JOB_NAMES["migrate"], snapshot_configmap="c",
                                                        digest="digest"),
        "upgrade-analyze": up.analyze_job(db, name=ATTEMPT.analyze),
        names.JobKind.BACKUP.value: jobs.backup_job(db, backup_name="orders-manual-20240506070809",
                                                    backup_uid="backup-uid", claim_name=names.backup_pvc_name(DB)),
    }
    for kind, job in built.items():
        assert job is not None
        assert job["metadata"]["name"] == JOB_NAMES[kind]
        expected = "SampleDBBackup" if kind in BACKUP_JOB_KINDS else "SampleDB"
        assert _owner_kind(job) == expected, (kind, _owner_kind(job))


def test_the_flowchart_draws_every_object_once() -> None:
    keys = [(x.kind, x.name) for x in DRAWN]
    assert len(keys) == len(set(keys)), f"drawn twice: {sorted({k for k in keys if keys.count(k) > 1})}"


def test_every_object_drawn_has_the_name_the_code_gives_it() -> None:
    drawn = {(x.kind, x.name) for x in DRAWN}
    unknown = sorted(drawn - set(EXPECTED))
    assert unknown == [], (
        f"{FLOWCHART.where}: objects whose kind and name (for the database {DB!r}) the code does not make:"
        f" {unknown}; expected among {sorted(EXPECTED)}")


def test_every_object_the_code_makes_is_drawn() -> None:
    drawn = {(x.kind, x.name) for x in DRAWN}
    missing = sorted(set(EXPECTED) - drawn)
    assert missing == [], f"{FLOWCHART.where}: objects of the database {DB!r} the flowchart does not draw: {missing}"


@pytest.mark.parametrize("drawn", [x for x in DRAWN if EXPECTED.get((x.kind, x.name))],
                         ids=lambda x: f"{x.kind}/{x.name}")
def test_each_object_is_drawn_with_who_deletes_it(drawn: Drawn) -> None:
    expected = EXPECTED[(drawn.kind, drawn.name)]
    assert drawn.group == expected, (
        f"{FLOWCHART.where}: {drawn.kind} {drawn.name} is drawn in subgraph {drawn.group!r}, but the code puts it"
        f" in {expected!r}")


def test_the_names_follow_the_database_name() -> None:
    """The same drawing for another database: only the database's name changes (no name is fixed by hand)."""
    for (kind, name), _group in EXPECTED.items():
        if kind == "ConfigMap" and name == d.SCRIPTS_CONFIGMAP:
            continue
        assert name == DB or name.startswith(f"{DB}-") or name.startswith(f"data-{DB}-"), (kind, name)


# ------------------------------------------------------------------------------ the failover

(SEQUENCE,) = _mermaid("sequenceDiagram")
SEQUENCE_TEXT = "\n".join(SEQUENCE.lines)


def _section_text(heading: str) -> str:
    """The raw Markdown of the section `heading` (code blocks included), up to the next heading of level 2."""
    text = DOC.read_text()
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else len(text)]


def test_the_failover_names_the_instances_services_and_slot_as_the_code_does() -> None:
    known = {names.instance_pod_name(DB, 0), names.instance_pod_name(DB, 1),
             names.instance_statefulset_name(DB, 0), names.instance_statefulset_name(DB, 1),
             names.client_service_name(DB), names.replica_service_name(DB)}
    used = set(re.findall(rf"(?<![\w-]){DB}(?:-[a-z0-9]+)*(?![\w-])", SEQUENCE_TEXT))
    assert used, "no object of the database in the sequence diagram"
    assert used - known == set(), f"names the code does not give: {sorted(used - known)}"
    assert {names.instance_pod_name(DB, 0), names.instance_pod_name(DB, 1)} <= used
    slots = set(re.findall(r"\bsdb_i\d+\b", SEQUENCE_TEXT))
    assert slots == {names.replication_slot_name(0)}, slots  # the old primary, instance 0, rejoins through it


def _number(pattern: str, text: str) -> float:
    found = re.findall(pattern, text)
    assert len(found) == 1, f"{pattern!r} found {len(found)} times"
    return float(found[0])


def test_the_failover_timings_are_the_codes() -> None:
    section = _section_text("A failover")
    default_delay = ReplicationSpec.model_fields["failover_delay_seconds"].default
    assert _number(r"failoverDelaySeconds \(default (\d+) s\)", SEQUENCE_TEXT) == default_delay
    assert _number(r"every (\d+) s until fenced", SEQUENCE_TEXT) == rep.FAILOVER_POLL
    assert _number(r"grace period (\d+) s", SEQUENCE_TEXT) == FENCE_GRACE_SECONDS
    probe = d.statefulset(DATABASE)["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]
    assert _number(r"readiness probe<br/>\(every (\d+) s\)", SEQUENCE_TEXT) == probe["periodSeconds"]
    assert _number(r"fails (\d+) times", SEQUENCE_TEXT) == probe["failureThreshold"]
    assert _number(r"every (\d+) s otherwise", section) == rep.STATUS_POLL
    field = ReplicationSpec.model_fields["failover_delay_seconds"]
    bounds = {type(m).__name__: m for m in field.metadata}
    assert _number(r"failoverDelaySeconds` \((\d+) to \d+", section) == bounds["Ge"].ge
    assert _number(r"failoverDelaySeconds` \(\d+ to (\d+)", section) == bounds["Le"].le


# ------------------------------------------------------------------------------ links


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_slug(m.group(1)) for m in re.finditer(r"^#+\s+(.+?)\s*$", path.read_text(), re.M)}


def test_every_link_of_the_page_reaches_a_heading() -> None:
    links = re.findall(r"\]\(([^)\s]+)\)", DOC.read_text())
    assert links, "no link found: the parser is broken"
    for link in links:
        target, _, anchor = link.partition("#")
        path = (DOC.parent / target) if target else DOC
        assert path.is_file(), f"{link}: no file {path.relative_to(REPO)}"
        if anchor:
            assert anchor in _anchors(path), f"{link}: {path.name} has no heading with the anchor #{anchor}"


def test_the_readme_links_the_page() -> None:
    bullets = [line for line in README.read_text().splitlines() if line.startswith("- [")]
    assert any("(docs/diagrams.md)" in line for line in bullets), "README.md's list of documents lacks the diagrams"
