"""manifests/samples/sampledb-full.yaml, the sample the user guide presents as using every field, does.

The fields are the SampleDB CRD's spec schema as model/crd.py generates it from the pydantic models, walked
recursively (a map such as `parameters`, or an object kept as given such as `scheduling.affinity`, is one field;
a list's fields are `path[].field`). The file's first SampleDB, `orders`, sets every field but the exemptions
below; its other SampleDBs set the fields that cannot sit beside `orders`' own. Each SampleDB of the file is valid
(SampleDB.model_validate, validate_spec), uses no field the schema lacks, and sets at most one field of each
group the CRD's CEL rules make mutually exclusive. The user guide's copy of `orders` is the file's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from pydantic import BaseModel
from tests.unit.docs.markdown import DOCS, REPO, code_blocks

from sampledb_operator.model import crd
from sampledb_operator.model.archive import RecoverySpec
from sampledb_operator.model.sampledb import InitSpec, SampleDB, SampleDBSpec
from sampledb_operator.model.validation import validate_spec

SAMPLE = REPO / "manifests" / "samples" / "sampledb-full.yaml"
USER_GUIDE = DOCS / "user-guide.md"


@dataclass(frozen=True)
class Exclusive:
    """Fields of which the CRD lets a SampleDB set at most one (or exactly one): its CEL rule says so."""

    fields: tuple[str, ...]
    model: type[BaseModel]     # the model holding the rule
    rule: str                  # the rule's message, as in model.cel_rules


EXCLUSIVE = (
    # A database is created from a backup or recovered from an archive, not both: the file's second and third
    # SampleDBs show one each.
    Exclusive(("spec.restore", "spec.recovery"), SampleDBSpec,
              "a database is created from a backup (restore) or recovered from an object store (recovery), not both"),
    Exclusive(("spec.init.configMapKeyRef", "spec.init.secretKeyRef"), InitSpec,
              "init needs exactly one of configMapKeyRef or secretKeyRef"),
    Exclusive(("spec.recovery.targetTime", "spec.recovery.targetName", "spec.recovery.targetLSN"), RecoverySpec,
              "recovery takes at most one of targetTime, targetName and targetLSN"),
)

# Fields no SampleDB of the file sets, each an alternative of an EXCLUSIVE group whose other member the file shows
# (and names in a comment): one more SampleDB for each would repeat the whole database for one field.
EXEMPT = {
    # the same {name, key} reference as configMapKeyRef, to a Secret; init takes exactly one of the two
    "spec.init.secretKeyRef": "spec.init.configMapKeyRef",
    # recovery targets: at most one; the sample recovers to a targetTime
    "spec.recovery.targetName": "spec.recovery.targetTime",
    "spec.recovery.targetLSN": "spec.recovery.targetTime",
}

# Fields the main SampleDB (`orders`, the file's first) leaves to the file's other SampleDBs: spec.restore and
# spec.recovery make a new database from another one's data (only at creation), here from `orders`' own backups
# and archive, and exclude each other.
ELSEWHERE = ("spec.restore", "spec.recovery")


def _spec_schema() -> dict[str, Any]:
    schema: dict[str, Any] = crd.openapi_schema(crd.SAMPLEDB)["properties"]["spec"]
    return schema


def _fields(schema: dict[str, Any], path: str = "spec") -> set[str]:
    """Every field under `schema`: objects' properties, recursively, and the fields of a list's items."""
    out: set[str] = set()
    for name, prop in schema.get("properties", {}).items():
        out.add(f"{path}.{name}")
        out |= _fields(prop, f"{path}.{name}")
        if isinstance(prop.get("items"), dict):
            out |= _fields(prop["items"], f"{path}.{name}[]")
    return out


def _set_fields(value: Any, schema: dict[str, Any], path: str, unknown: list[str]) -> set[str]:
    """The fields `value` sets, guided by `schema`; keys the schema does not know go to `unknown`."""
    out: set[str] = set()
    props = schema.get("properties")
    if isinstance(value, dict) and props is not None:
        for key, item in value.items():
            if key not in props:
                unknown.append(f"{path}.{key}")
                continue
            out.add(f"{path}.{key}")
            out |= _set_fields(item, props[key], f"{path}.{key}", unknown)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            out |= _set_fields(item, schema["items"], f"{path}[]", unknown)
    return out


def _under(field: str, roots: tuple[str, ...] | set[str]) -> bool:
    return any(field == r or field.startswith((f"{r}.", f"{r}[]")) for r in roots)


def _docs() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(SAMPLE.read_text()) if d]


def _sampledbs() -> list[dict[str, Any]]:
    return [d for d in _docs() if d.get("kind") == "SampleDB"]


def _set_by(doc: dict[str, Any]) -> set[str]:
    unknown: list[str] = []
    found = _set_fields(doc["spec"], _spec_schema(), "spec", unknown)
    assert not unknown, f"SampleDB {doc['metadata']['name']} sets fields the CRD does not have: {unknown}"
    return found


ALL_FIELDS = _fields(_spec_schema())


def test_the_user_guide_points_at_the_sample_as_the_one_with_every_field() -> None:
    text = USER_GUIDE.read_text()
    assert "every field" in text and "manifests/samples/sampledb-full.yaml" in text


def test_the_schema_walk_finds_the_fields() -> None:
    # a few fields at each depth, so that an empty walk cannot pass
    assert {"spec.version", "spec.backup.objectStore.credentials.secretName", "spec.recovery.targetLSN",
            "spec.restore.objectStore.bucket", "spec.replication.failoverDelaySeconds"} <= ALL_FIELDS


def test_the_exemptions_are_fields_of_exclusive_groups_whose_alternative_the_sample_shows() -> None:
    assert set(EXEMPT) <= ALL_FIELDS and set(ELSEWHERE) <= ALL_FIELDS
    for field, shown_instead in EXEMPT.items():
        (group,) = [g for g in EXCLUSIVE if field in g.fields]
        assert shown_instead in group.fields and shown_instead not in EXEMPT


@pytest.mark.parametrize("group", EXCLUSIVE, ids=lambda g: "|".join(g.fields))
def test_each_exclusive_group_is_a_rule_of_the_crd(group: Exclusive) -> None:
    """An exemption stands only as long as the CRD really refuses the fields together."""
    assert group.rule in {r.message for r in group.model.cel_rules}, (
        f"{group.model.__name__} has no CEL rule {group.rule!r} any more: drop the group, and set the fields"
    )
    assert set(group.fields) <= ALL_FIELDS


def test_the_main_sampledb_sets_every_field_but_the_exemptions() -> None:
    main = _sampledbs()[0]
    expected = {f for f in ALL_FIELDS if not _under(f, set(EXEMPT)) and not _under(f, ELSEWHERE)}
    missing = sorted(expected - _set_by(main))
    assert not missing, (
        f"SampleDB {main['metadata']['name']} in {SAMPLE.relative_to(REPO)} does not set {missing}: add them"
        " (or, for a field that cannot be set beside the others, explain why in EXEMPT or ELSEWHERE)"
    )


def test_the_file_sets_every_field_but_the_exemptions() -> None:
    found = set().union(*(_set_by(d) for d in _sampledbs()))
    missing = sorted(f for f in ALL_FIELDS - found if not _under(f, set(EXEMPT)))
    assert not missing, f"no SampleDB of {SAMPLE.relative_to(REPO)} sets {missing}"
    stale = sorted(f for f in EXEMPT if f in found)
    assert not stale, f"exempt fields the sample sets after all (drop them from EXEMPT): {stale}"


@pytest.mark.parametrize("doc", _sampledbs(), ids=lambda d: d["metadata"]["name"])
def test_each_sampledb_is_valid_and_sets_one_field_of_each_exclusive_group(doc: dict[str, Any]) -> None:
    db = SampleDB.model_validate(doc)
    assert validate_spec(db.spec) == []
    fields = _set_by(doc)
    for group in EXCLUSIVE:
        assert len(fields & set(group.fields)) <= 1, f"{doc['metadata']['name']} sets {group.rule!r}'s fields together"


def test_the_sample_has_the_configmaps_the_main_sampledb_names() -> None:
    main = _sampledbs()[0]["spec"]
    configmaps = {d["metadata"]["name"] for d in _docs() if d.get("kind") == "ConfigMap"}
    assert {main["init"]["configMapKeyRef"]["name"], main["migrations"]["configMapName"]} <= configmaps


def test_the_user_guides_copy_is_the_main_sampledb() -> None:
    """The user guide shows the main SampleDB right after naming the file: the same object, comments aside."""
    lines = USER_GUIDE.read_text().splitlines()
    (mention,) = [i for i, line in enumerate(lines) if "manifests/samples/sampledb-full.yaml" in line
                  and any("every field" in x for x in lines[max(0, i - 2):i + 1])]
    block = next(b for b in code_blocks(USER_GUIDE) if b.line > mention + 1 and b.info == "yaml")
    shown = yaml.safe_load("\n".join(block.lines))
    assert shown == _sampledbs()[0], (
        f"{block.where}: the user guide's copy of the full sample differs from {SAMPLE.relative_to(REPO)}'s first"
        " SampleDB"
    )
