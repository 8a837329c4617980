"""Decisions of a database's life: its phase, the init SQL, deletion and its final snapshot, work before the
instances, why a database does not progress (stuck pods, claims, full volumes) and storage auto-grow. Pure, as all
of decide/."""
