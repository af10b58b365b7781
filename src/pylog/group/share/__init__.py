"""KIP-932 share groups: the group side (membership, assignment, records in
``__consumer_offsets``) and the partition side (share partitions, share sessions, their
durable state). See docs/share-groups.md."""
