"""plan.first_difference against a plain recursive reference that tracks the whole path everywhere."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from sampledb_operator.decide.plan import _scalar_equal, first_difference


def reference(want: Any, have: Any, path: tuple[str, ...] = (), *,
              skip: tuple[tuple[str, ...], ...] = ()) -> str | None:
    if path in skip:
        return None
    where = ".".join(path) or "<root>"
    if isinstance(want, Mapping):
        if not isinstance(have, Mapping):
            return where
        for k, v in want.items():
            if k not in have:
                return ".".join((*path, str(k)))
            diff = reference(v, have[k], (*path, str(k)), skip=skip)
            if diff is not None:
                return diff
        return None
    if isinstance(want, list):
        if not isinstance(have, list) or len(want) != len(have):
            return where
        for i, (w, h) in enumerate(zip(want, have, strict=True)):
            diff = reference(w, h, (*path, str(i)), skip=skip)
            if diff is not None:
                return diff
        return None
    return None if _scalar_equal(want, have) else where


KEYS = st.sampled_from(["a", "b", "c", "spec", "0"])
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["1", "1Gi", "1024Mi", "x"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=12,
)
PATHS = st.lists(st.lists(KEYS, min_size=1, max_size=3).map(tuple), max_size=3).map(tuple)


@given(want=VALUES, have=VALUES, skip=PATHS, prefix=st.lists(KEYS, max_size=1).map(tuple))
def test_the_same_answer_as_the_reference(want: Any, have: Any, skip: tuple[tuple[str, ...], ...],
                                          prefix: tuple[str, ...]) -> None:
    skip = tuple((*prefix, *p) for p in skip)
    assert first_difference(want, have, prefix, skip=skip) == reference(want, have, prefix, skip=skip)


@given(want=VALUES, skip=PATHS)
def test_a_value_matches_itself_and_any_superset(want: Any, skip: tuple[tuple[str, ...], ...]) -> None:
    assert first_difference(want, want, skip=skip) is None
    if isinstance(want, dict):
        assert first_difference(want, {**want, "extra": 1}, skip=skip) is None


def test_a_deep_difference_names_its_whole_path() -> None:
    want = {"spec": {"template": {"spec": {"containers": [{"image": "pg:17"}]}}}}
    have = {"spec": {"selector": {}, "template": {"spec": {"containers": [{"image": "pg:16", "name": "db"}]}}}}
    assert first_difference(want, have, skip=(("spec", "selector"),)) == "spec.template.spec.containers.0.image"
    assert first_difference(want, have, skip=(("spec", "template"),)) is None
