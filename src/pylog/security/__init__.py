"""Security: Kafka's ACL model (operations, resource types, what each resource type
supports) and the authorized-operation bit fields some responses carry."""
