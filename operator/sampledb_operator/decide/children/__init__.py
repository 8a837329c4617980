"""The objects the operator wants to exist for a database (its children): the StatefulSets and their pod template,
Services, ConfigMaps, Secrets, the pooler, the exporters, TLS, volumes and their binding. Pure, as all of
decide/."""
