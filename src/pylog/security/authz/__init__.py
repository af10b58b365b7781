"""Authorization: ACLs as Kafka's ``AclAuthorizer`` has them (``authorizer.class.name``).

``bindings``: patterns, entries, filters and their names; ``authorizer``: decisions over an
indexed snapshot, cached; ``store``: the data-directory file and Kafka's ZooKeeper layout;
``service``: the broker's ACLs kept, changed and reloaded (``broker.acls``).
"""
