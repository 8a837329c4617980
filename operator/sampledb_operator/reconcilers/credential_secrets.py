"""The Secret step: the database's superuser Secret and credentials Secret made when they are missing, never
overwritten, and never made anew over existing data (the data holds the passwords).

A new database gets both, the superuser's first; its credentials Secret names the superuser Secret (the annotation
that tells a database made with the split from one made before it: decide/children/desired_config.py's docstring).
A database made before the split gets a superuser Secret that copies its credentials, since its application role is
the superuser. Passwords are generated here (the only
randomness) and never logged.
"""

from __future__ import annotations

import secrets as pysecrets
from collections.abc import Mapping
from dataclasses import dataclass

from sampledb_operator.decide import plan
from sampledb_operator.decide.children import desired as d
from sampledb_operator.kube.errors import Conflict
from sampledb_operator.model import names
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import Problem, SampleDB
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.superuser import decoded

PASSWORD_BYTES = 24


@dataclass(frozen=True, slots=True)
class SecretOutcome:
    """What the Secret step did: the Secrets it created ("Secret <name>", announced with the other children
    created in the pass), or why it cannot create one."""

    created: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()


async def _create(ctx: Context, body: Obj) -> str | None:
    """Create a Secret; "Secret <name>" when this call made it, None when an earlier pass did (its watch event has
    not arrived yet)."""
    try:
        await ctx.apis["Secret"].create(body)
    except Conflict:
        return None
    return f"Secret {body['metadata']['name']}"


async def ensure_secret(ctx: Context, db: SampleDB, observed: Mapping[plan.Key, Obj]) -> SecretOutcome:
    """Create the superuser Secret, then the credentials Secret, when they are missing:

    | credentials | superuser | data volume | what is done                                                 |
    |-------------|-----------|-------------|--------------------------------------------------------------|
    | absent      | absent    | absent      | a new database: both, the superuser's first (`postgres`)     |
    | present, names the superuser Secret   | absent | any | SuperuserCredentialsMissing (its password is in the data) |
    | present, names none (earlier layout)  | absent | any | the superuser Secret, a copy of the credentials |
    | absent      | any       | present     | CredentialsMissing (the data holds the old password)         |
    | absent      | present   | absent      | the credentials                                              |
    """
    name = db.metadata.name
    key, su_key = ("Secret", names.secret_name(name)), ("Secret", names.superuser_secret_name(name))
    credentials, superuser = observed.get(key), observed.get(su_key)
    data_exists = ("PersistentVolumeClaim", names.data_pvc_name(name)) in observed
    created: list[str] = []
    problems: list[Problem] = []
    if superuser is None and credentials is None and not data_exists:
        made = await _create(ctx, d.superuser_secret(db, pysecrets.token_urlsafe(PASSWORD_BYTES)))
        created.extend([made] if made else [])
    elif superuser is None and credentials is not None and d.separate_superuser(credentials):
        problems.append(Problem(
            "SuperuserCredentialsMissing",
            f"Secret {su_key[1]} was deleted after the database was created; restore it (the data holds the"
            " superuser's password): the operator, the standbys and the Jobs connect with it",
            "status.secretName"))
    elif superuser is None and credentials is not None:
        user, password = decoded(credentials, d.SECRET_USERNAME_KEY), decoded(credentials, d.SECRET_PASSWORD_KEY)
        if user and password:
            made = await _create(ctx, d.superuser_secret(db, password, user=user, application=True))
            created.extend([made] if made else [])
    if credentials is None and data_exists:
        # The data was initialised with the old password; a new one would lock clients out.
        problems.append(Problem(
            "CredentialsMissing",
            f"Secret {key[1]} was deleted after the database was created; restore it (the data"
            " volume holds the old password), or delete the SampleDB",
            "status.secretName",
        ))
    elif credentials is None:
        made = await _create(ctx, d.secret(db, pysecrets.token_urlsafe(PASSWORD_BYTES)))
        created.extend([made] if made else [])
    return SecretOutcome(created=tuple(created), problems=tuple(problems))
